"""Seeds, devices and the learning-rate schedule: one place for each. torch is imported where it is
used, so that a command's ``--help`` or a module that only reads the registry never loads it."""

from __future__ import annotations

import math
import os
import random
import re
import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from functools import lru_cache, wraps
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = [
    "set_seed",
    "seeded",
    "pick_device",
    "linear_schedule",
    "cpu_has_fast_bf16",
    "half_precision",
    "one_thread",
    "model_executor",
    "on_model_thread",
    "transformers_names",
    "cpu_share",
    "at_load_now",
]

_THREADS_LOCK = threading.Lock()
_IMPORT_LOCK = threading.Lock()


def transformers_names(*names: str) -> tuple:
    """Objects of ``transformers`` by name, imported under one process-wide lock: its lazy module
    is not safe for two threads' first imports at once ("cannot import name 'AutoConfig' from
    'transformers'" — seen on the dashboard, whose pages run in threads, and reproduced with two
    plain threads).

    >>> transformers_names("AutoConfig")[0].__name__
    'AutoConfig'
    """
    with _IMPORT_LOCK:
        import transformers

        return tuple(getattr(transformers, name) for name in names)


_THREADS_HELD: list = [0, 0, None]  # [contexts open, torch's thread count before the first, BLAS limit]


@contextmanager
def one_thread():
    """Run torch and NumPy/SciPy's BLAS on one CPU thread inside the block (restored after the last
    of overlapping blocks in other threads). For small models, whose operations are too short to
    split: the router heads' L-BFGS steps call BLAS on vectors of a few thousand numbers, where a
    second BLAS thread only spins (``scripts/bench_fit.py`` measures the fits)."""
    import torch
    from threadpoolctl import threadpool_limits

    with _THREADS_LOCK:
        if _THREADS_HELD[0] == 0:
            _THREADS_HELD[1] = torch.get_num_threads()
            torch.set_num_threads(1)
            _THREADS_HELD[2] = threadpool_limits(limits=1, user_api="blas")
        _THREADS_HELD[0] += 1
    try:
        yield
    finally:
        with _THREADS_LOCK:
            _THREADS_HELD[0] -= 1
            if _THREADS_HELD[0] == 0:
                torch.set_num_threads(_THREADS_HELD[1])
                _THREADS_HELD[2].restore_original_limits()
                _THREADS_HELD[2] = None


def limit_threads(n: int) -> bool:
    """torch's threads in this process — in the calling thread and the model thread — where torch
    is imported (a router that never runs a model never imports it: nothing to limit); whether it
    was. Call it once the models are loaded: torch started with ``OMP_NUM_THREADS`` set answered its
    first requests slower (``bench_serve.py``)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(int(n))
        on_model_thread(torch.set_num_threads, int(n))  # OpenMP's thread count is per calling thread
    return torch is not None


MODEL_THREAD = "l2d-model"
_MODEL_EXECUTOR: list = [None, None]  # [the executor, the process it belongs to]


def on_model_thread(fn, /, *args, **kwargs):
    """``fn(*args, **kwargs)`` run on this process's one model thread (from it: called at once),
    its result returned and its exception raised here. Every model forward goes through it: torch
    runs CPU work on an OpenMP team of threads per calling thread, and a second team (the API's
    request threads beside its start-up thread, the dashboard's session threads) puts more threads
    than cores in the process, where libgomp puts its threads to sleep between parallel regions
    instead of letting them wait awake: a served model's forward then took 25% longer than alone
    (``scripts/bench_serve.py``). Context managers such as ``torch.inference_mode`` hold per
    thread: ``fn`` sets its own."""
    if threading.current_thread().name.startswith(MODEL_THREAD):
        return fn(*args, **kwargs)
    return model_executor().submit(fn, *args, **kwargs).result()


def model_executor():
    """This process's one model thread, as a ``concurrent.futures`` executor (made on first use;
    a forked child makes its own): what :func:`on_model_thread` runs on, for a caller that awaits
    its futures instead of blocking a thread on them."""
    with _THREADS_LOCK:
        if _MODEL_EXECUTOR[1] != os.getpid():  # none yet, or a forked child's copy of none
            from concurrent.futures import ThreadPoolExecutor

            _MODEL_EXECUTOR[:] = [ThreadPoolExecutor(1, thread_name_prefix=MODEL_THREAD), os.getpid()]
        return _MODEL_EXECUTOR[0]


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA)."""
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


_SEEDED = threading.RLock()  # held by a fit from its set_seed to its last draw: see seeded


def seeded(fit):
    """``fit`` holding one process-wide lock throughout: it seeds the global generators and draws from
    them, so fits in threads of one process (a dashboard's background fits) run one at a time
    and each draws what it would alone."""

    @wraps(fit)
    def run(*args, **kwargs):
        with _SEEDED:
            return fit(*args, **kwargs)

    return run


@lru_cache(maxsize=1)
def cpu_has_fast_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX); without it, bf16 autocast is
    emulated and slower than fp32."""
    try:
        flags = Path("/proc/cpuinfo").read_text(errors="ignore")
    except OSError:
        return False
    return bool(re.search(r"\b(avx512_bf16|amx_bf16)\b", flags))


def half_precision(device: torch.device) -> torch.dtype | None:
    """The reduced precision worth autocasting to on ``device``: fp16 on CUDA (bf16 on cards that
    have it is used for training elsewhere), bf16 on a CPU that has it natively, else None (fp32)."""
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision_name(str(device)))


def device_name(device: str | None = None) -> str:
    """``device`` if given, else ``L2D_DEVICE``, else ``cuda`` when a CUDA device is present,
    else ``cpu``. On Linux without the NVIDIA driver (no ``/proc/driver/nvidia``) there is none,
    and torch is not imported to find that out."""
    name = device or os.environ.get("L2D_DEVICE")
    if name:
        return name
    if sys.platform == "linux" and not Path("/proc/driver/nvidia").exists():
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def precision_name(device: str) -> str:
    """The precision worth autocasting to on a device of this name, as a word (torch not
    imported; :func:`half_precision` gives its torch dtype): ``fp16`` on CUDA, ``bf16`` on a CPU
    that computes it natively, else ``fp32``."""
    if device.split(":", 1)[0] == "cuda":
        return "fp16"
    return "bf16" if cpu_has_fast_bf16() else "fp32"


def pick_device(device: str | None = None) -> torch.device:
    """The torch device of :func:`device_name`."""
    import torch

    dev = torch.device(device_name(device))
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("CUDA was requested but no CUDA device is available")
    return dev


def linear_schedule(optimizer: torch.optim.Optimizer, total_steps: int, warmup_ratio: float):
    """Linear warm-up over ``warmup_ratio`` of the steps, then linear decay to 0 (transformers'
    schedule, the paper's)."""
    (get_linear_schedule_with_warmup,) = transformers_names("get_linear_schedule_with_warmup")

    warm = max(1, math.ceil(total_steps * warmup_ratio))
    return get_linear_schedule_with_warmup(optimizer, warm, total_steps)


def cpu_share(load: float, cores: int | None = None) -> float:
    """The share of the CPUs a new CPU-bound run gets at a load average of ``load`` (1 when there
    are cores to spare; ``cores / (load + 1)`` when the run has to share them).

    >>> cpu_share(0.5, 2), cpu_share(3.0, 2)
    (1.0, 0.5)
    """
    cores = cores or os.cpu_count() or 1
    return min(1.0, cores / (load + 1.0))


def at_load_now(seconds: float, record: dict, load_now: float | None = None) -> float:
    """``seconds`` measured under the record's load, at the load average now: a measurement taken
    on a busy machine is scaled down on an idle one, and up on a busier one. A record without
    its load (an older one) is taken as it is."""
    then = record.get("load")
    if then is None:
        return seconds
    now = os.getloadavg()[0] if load_now is None else load_now
    return seconds * cpu_share(then) / cpu_share(now)


def in_threads(calls: Sequence[Callable[[], object]], workers: int | None = None) -> list:
    """Each of ``calls`` run, in threads (at most ``workers``, default one per CPU this process may
    use), each thread running torch on one CPU thread; their results in order, the first
    exception raised. For small torch work that a second core cannot speed up from within
    (a router head's full-batch steps) but several such runs side by side can."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = min(len(calls), workers or usable or 1)
    if workers <= 1:
        return [call() for call in calls]
    from concurrent.futures import ThreadPoolExecutor

    import torch

    def run(call):
        torch.set_num_threads(1)  # this thread's OpenMP team: one thread
        return call()

    with ThreadPoolExecutor(workers, thread_name_prefix="l2d-fit") as pool:
        return list(pool.map(run, calls))
