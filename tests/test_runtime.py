"""The runtime helpers that pages, jobs and scripts share across threads."""

from __future__ import annotations

import subprocess
import sys


def test_transformers_is_imported_safely_from_threads_at_once():
    """The dashboard's pages run in threads: two of them importing from transformers for the first
    time at once failed ("cannot import name 'AutoConfig' from 'transformers'", seen on the
    cost explorer of PLLM; two plain threads fail so in about one fresh process of two). Under
    the project's import lock, six threads in a fresh process all get what they asked for."""
    code = """
import threading
from l2d_core.runtime import transformers_names
asked = [("AutoConfig", "AutoModelForQuestionAnswering"), ("AutoModel", "AutoTokenizer"),
         ("get_linear_schedule_with_warmup",)] * 2
got, errors = [], []
def run(names):
    try:
        got.append(all(callable(x) or hasattr(x, "__name__") for x in transformers_names(*names)))
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=run, args=(n,)) for n in asked]
[t.start() for t in threads]
[t.join() for t in threads]
assert not errors and got == [True] * 6, (errors, got)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_limit_threads_sets_torchs_threads_only_where_torch_is_imported():
    """A served router that never runs a model never imports torch: nothing to limit, and torch is
    not imported for it; where torch is imported its thread count is set."""
    code = (
        "import sys\n"
        "from l2d_core.runtime import limit_threads\n"
        "first = limit_threads(1)\n"
        "imported = 'torch' in sys.modules\n"
        "import torch\n"
        "second = limit_threads(1)\n"
        "print(first, imported, second, torch.get_num_threads())\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["False", "False", "True", "1"]


def test_the_device_and_its_precision_are_known_without_torch_where_there_is_no_driver(monkeypatch):
    """An encoder's cache key reads its device's precision: on a machine without the NVIDIA driver
    that takes no torch import (a warm dashboard asks whether the embeddings are on disk), and the
    word is what torch's precision gives."""
    from pathlib import Path

    import torch

    from l2d_core.runtime import cpu_has_fast_bf16, device_name, half_precision, pick_device, precision_name

    monkeypatch.delenv("L2D_DEVICE", raising=False)
    assert device_name("cuda:1") == "cuda:1"
    monkeypatch.setenv("L2D_DEVICE", "cpu")
    assert device_name() == "cpu" and str(pick_device()) == "cpu"
    monkeypatch.delenv("L2D_DEVICE")
    assert device_name() == ("cuda" if torch.cuda.is_available() else "cpu")
    if sys.platform == "linux" and not Path("/proc/driver/nvidia").exists():
        probe = "import sys; from l2d_core.runtime import device_name as d; "
        probe += "print(d(), 'torch' in sys.modules)"
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        assert out.stdout.split() == ["cpu", "False"]
    cpu = (torch.bfloat16, "bf16") if cpu_has_fast_bf16() else (None, "fp32")
    for name, (dtype, word) in {
        "cpu": cpu,
        "cuda": (torch.float16, "fp16"),
        "cuda:0": (torch.float16, "fp16"),
    }.items():
        assert half_precision(torch.device(name)) == dtype and precision_name(name) == word
