"""The quick live agent, trained from the dashboard: ``python -m l2d_core.agents.train_cli
--profile quick`` in a background process (it outlives a page's rerun and a closed tab), its
progress read back from the JSON file the run writes, and this machine's expected time for it.

The expected time is measured in a background process too, when a user asks for it (opening a
page starts nothing; a page never waits for it): the run's own windows are counted and batched as
the run batches them, the base model's training
steps (at each profile's own batch size and mean padded window length) and forward passes (at
the answering's batch size) are timed here
(:func:`~l2d_core.agents.qa_training.time_training_step`: the median of five after a warm-up),
and a run's time is the per-token cost times its tokens plus the per-step optimizer time. The
measurement is kept on disk for a day (re-taken sooner when torch's thread count changed) with the
machine's load average while it was taken; ``runtime.at_load_now`` scales it to the load now.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from ..agents.base import load_tokenizer
from ..agents.profiles import PROFILES, TrainingProfile, train_command
from ..agents.qa_training import QATrainConfig, time_training_step, training_batches
from ..agents.train_cli import parse_args, plan_jobs, progress_path, read_progress
from ..data import benchmark_split, load_dataset
from ..paths import PROJECT_ROOT, cache_dir
from ..runtime import pick_device
from ..stores import open_disk_cache
from .live import live_pools

__all__ = [
    "PROFILES",
    "QUICK",
    "quick_pool",
    "train_command",
    "Measurement",
    "TrainingStatus",
    "workload",
    "measure",
    "stored_measurement",
    "estimate",
    "expected_seconds",
    "measurement",
    "start_training",
    "training_status",
]

QUICK = PROFILES["quick"]
_CLI = parse_args([])  # the command line's defaults: what the page's button runs
STALE_AFTER_S = 24 * 3600  # a measurement older than this is taken again
SILENT_S = 15 * 60  # a running progress file unchanged this long: its pid is no longer the run's
_PROCS: dict[str, subprocess.Popen] = {}  # runs this process started (reaped when they end)
_MEASURING: dict[str, subprocess.Popen] = {}  # measurements this process started, by dataset


def quick_pool(dataset: str) -> tuple[str, tuple[str, ...]] | None:
    """(name, experts) of the pool the quick model makes on ``dataset`` (P3-quick on squad11), or
    None where its profile sets up no pool there."""
    return QUICK.first_pool(dataset)


def _log(profile: TrainingProfile, dataset: str) -> Path:
    return cache_dir() / "models" / f"{profile.agent_for(dataset)}.log"


def _jobs(dataset: str, profile: TrainingProfile, ds=None):
    train, test = benchmark_split(ds or load_dataset(dataset))
    return plan_jobs(train, test, _CLI.folds, _CLI.seed, profile.limit, profile.crossfit)


def workload(dataset: str, profile: TrainingProfile = QUICK) -> dict[str, int]:
    """The models a run of ``profile`` trains, and the questions they fine-tune on and answer
    (summed over its models): the run's own plan (:func:`~l2d_core.agents.train_cli.plan_jobs`)."""
    jobs = _jobs(dataset, profile)
    return {
        "models": len(jobs),
        "trained": sum(len(fit) for _, fit, _ in jobs),
        "answered": sum(len(ans) for _, _, ans in jobs),
    }


# --- the expected time ------------------------------------------------------------------------
def _default(fn, name: str) -> int:
    return inspect.signature(fn).parameters[name].default


def _work(ds, profile: TrainingProfile, windows: dict[str, list[int]]) -> dict:
    """What a run of ``profile`` computes: its training steps and their padded tokens (the run's
    own length-grouped batches), and the answering's forward batches and their tokens (questions
    in the chunks ``run_into_cache`` hands over, windows sorted and batched as the agent does)."""
    from ..agents.runners import ExtractiveAgent, run_into_cache

    chunk, per_batch = _default(run_into_cache, "batch_size"), _default(ExtractiveAgent, "batch_size")
    jobs = _jobs(ds.name, profile, ds)
    steps = [
        s
        for _, fit, _ in jobs
        for s in training_batches(
            [n for r in fit for n in windows[r.qid]], profile.batch_size, profile.epochs, _CLI.seed
        )
    ]
    forwards = []
    for _, _, ans in jobs:
        for i in range(0, len(ans), chunk):
            lengths = sorted(n for r in ans[i : i + chunk] for n in windows[r.qid])
            forwards += [
                (len(b), b[-1])
                for b in (lengths[k : k + per_batch] for k in range(0, len(lengths), per_batch))
            ]
    return {
        "models": len(jobs),
        "trained": sum(len(fit) for _, fit, _ in jobs),
        "answered": sum(len(ans) for _, _, ans in jobs),
        "job_windows": [sum(len(windows[r.qid]) for r in fit) for _, fit, _ in jobs],
        "windows": sum(len(windows[r.qid]) for _, fit, _ in jobs for r in fit),
        "steps": len(steps),
        "step_tokens": sum(n * t for n, t in steps),
        "step_windows": sum(n for n, _ in steps),
        "forward_tokens": sum(n * t for n, t in forwards),
        "forward_windows": sum(n for n, _ in forwards),
        "loads": 2 * len(jobs) + 1,  # a model loaded to train, one to answer, the live one to register
    }


def _key(dataset: str, device: str | None) -> str:
    dev = pick_device(device).type
    profiles = hashlib.sha1(repr(sorted(PROFILES.items())).encode()).hexdigest()[:12]
    return f"qa_run_time|{dataset}|{QATrainConfig().base_path()}|{dev}|{torch.__version__}|{profiles}"


def _meta():
    return open_disk_cache(cache_dir() / "meta", "the measurement cache", "measurements are taken again")


def _windows(ds, cfg: QATrainConfig) -> dict[str, list[int]]:
    """The token length of every window of every question, cut as training and answering cut them."""
    enc = load_tokenizer(cfg.base_path())(
        [r.question.lstrip() for r in ds],
        [r.context for r in ds],
        truncation="only_second",
        max_length=cfg.max_length,
        stride=cfg.stride,
        return_overflowing_tokens=True,
    )
    qids = [r.qid for r in ds]
    windows: dict[str, list[int]] = {q: [] for q in qids}
    for ids, owner in zip(enc["input_ids"], enc["overflow_to_sample_mapping"]):
        windows[qids[owner]].append(len(ids))
    return windows


def measure(dataset: str, device: str | None = None) -> dict:
    """Count the windows and batches of every profile's run, then time the base model here: the
    quick profile's training steps and the answering's forward passes, at the quick run's mean
    padded window lengths (the record is kept on disk at once: the quick figure need not wait),
    then every other batch size of a profile at its run's mean length (a step's cost per token
    grows with the batch on a CPU: measured, not scaled). Returns the record (a minute or two on
    2 idle cores; longer on a busy machine)."""
    from ..agents.runners import ExtractiveAgent

    cfg, ds = QATrainConfig(), load_dataset(dataset)
    windows = _windows(ds, cfg)
    work = {name: _work(ds, p, windows) for name, p in PROFILES.items()}
    q = work["quick"]
    record = {
        "measured_at": time.time(),
        "threads": torch.get_num_threads(),
        "load": os.getloadavg()[0],
        "work": work,
        "train": {},
    }
    by_batch = {QUICK.batch_size: "quick"} | {p.batch_size: n for n, p in PROFILES.items() if p != QUICK}
    for batch, name in by_batch.items():
        w = work[name]
        tokens = max(32, round(w["step_tokens"] / w["step_windows"] / 32) * 32)
        t = time_training_step(
            cfg,
            device,
            batch=batch,
            tokens=tokens,
            forward_batch=0 if record["train"] else _default(ExtractiveAgent, "batch_size"),
            forward_tokens=max(1, round(q["forward_tokens"] / q["forward_windows"])),
        )
        record.setdefault("forward", t)  # the first timing's forward passes and model load
        record["train"][batch] = t
        with _meta() as m:
            m[_key(dataset, device)] = record
    return record


def _fresh(record: dict | None) -> bool:
    return (
        record is not None
        and time.time() - record["measured_at"] < STALE_AFTER_S
        and record["threads"] == torch.get_num_threads()
    )


def stored_measurement(dataset: str, device: str | None = None) -> dict | None:
    """The measurement kept on disk, when it is fresh (else None); it may lack the timing of a
    profile's batch size while that is still being measured."""
    with _meta() as m:
        record = m.get(_key(dataset, device))
    return record if _fresh(record) else None


def _complete(record: dict | None) -> bool:
    return record is not None and all(p.batch_size in record["train"] for p in PROFILES.values())


def estimate(record: dict, profile: TrainingProfile = QUICK) -> dict | None:
    """A run of ``profile``'s expected seconds from a :func:`measure` record (None while its batch
    size is not timed yet): ``train_s`` (per step, the median clipping-and-AdamW part; per padded
    token, the median of the rest of a step over its tokens, at the profile's own batch size),
    ``answer_s`` (the median forward pass per token), ``load_s`` (model loads) and ``total_s``,
    with the run's work (``trained``, ``answered``, ``windows``, ``steps``, ``models``)."""
    t, f = record["train"].get(profile.batch_size), record["forward"]
    if t is None:
        return None
    work = record["work"][next(k for k, v in PROFILES.items() if v == profile)]
    step_s = statistics.median(t["optimizer_s"])
    token_s = statistics.median(s - o for s, o in zip(t["train_step_s"], t["optimizer_s"]))
    token_s /= t["batch"] * t["tokens"]
    forward_s = statistics.median(f["forward_s"]) / (f["forward_batch"] * f["forward_tokens"])
    train_s = work["steps"] * step_s + work["step_tokens"] * token_s
    answer_s = work["forward_tokens"] * forward_s
    load_s = work["loads"] * f["load_s"]
    out = {k: work[k] for k in ("models", "trained", "answered", "windows", "steps")}
    return out | {
        "train_s": train_s,
        "answer_s": answer_s,
        "load_s": load_s,
        "total_s": train_s + answer_s + load_s,
        "timed_steps": len(t["train_step_s"]),
        "timed_forwards": len(f["forward_s"]),
        "measured_at": record["measured_at"],
    }


def expected_seconds(dataset: str, profile: TrainingProfile = QUICK, device: str | None = None) -> dict:
    """:func:`estimate` of ``profile`` from the kept measurement, measuring now (blocking) when
    there is none, it lacks the profile, or it is stale."""
    record = stored_measurement(dataset, device)
    return (record and estimate(record, profile)) or estimate(measure(dataset, device), profile)


@dataclass(frozen=True)
class Measurement:
    state: str  # "ready" (every profile timed), "measuring", "failed" or "none" (not asked for)
    record: dict | None = None  # a :func:`measure` record, perhaps partial while measuring
    message: str = ""  # why it failed

    def expected(self, profile: TrainingProfile = QUICK) -> dict | None:
        return estimate(self.record, profile) if self.record else None


def _last_error(path: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    lines = [x.strip() for x in re.split(r"[\r\n]+", text) if x.strip()]
    errors = [x for x in lines if x.startswith("error:") or "Error" in x.split(":", 1)[0]]
    return (errors[-1] if errors else lines[-1] if lines else "")[:300]


def measurement(dataset: str, start: bool = False) -> Measurement:
    """The kept measurement when fresh; otherwise "measuring" while one is under way, else
    "none" — one is taken in a background process only with ``start`` (a user's request: opening
    a page starts nothing), and a page never waits for it."""
    record = stored_measurement(dataset)
    if _complete(record):
        return Measurement("ready", record)
    proc = _MEASURING.get(dataset)
    if proc is not None and proc.poll() is None:
        return Measurement("measuring", record)
    log = cache_dir() / "models" / f"timing-{dataset}.log"
    if proc is not None and proc.returncode != 0 and not start:  # asked again: it is tried again
        return Measurement("failed", record, _last_error(log) or f"exit status {proc.returncode}")
    if not start:
        return Measurement("none", record)
    log.parent.mkdir(parents=True, exist_ok=True)
    _MEASURING[dataset] = _spawn(["-m", __name__, dataset], log)
    return Measurement("measuring", record)


def _spawn(args: list[str], log: Path, **kwargs) -> subprocess.Popen:
    """``python ARGS`` from the project root in the background, writing into ``log``."""
    env = {**os.environ, "L2D_CACHE_DIR": str(cache_dir()), "PYTHONUNBUFFERED": "1"}
    with open(log, "w", encoding="utf-8") as out:
        return subprocess.Popen(
            [sys.executable, *args], cwd=PROJECT_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, **kwargs
        )


# --- the run ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainingStatus:
    state: str  # "idle" (never started), "running", "failed", "done"
    stage: str = ""  # "starting", "fine-tuning", "calibrating", "answering", "registering" while running
    done: int = 0  # steps or questions of the stage
    total: int = 0
    left_s: float | None = None  # the stage's time left (from its rate so far)
    message: str = ""  # why it stopped, when failed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _running(agent_id: str, progress: dict | None) -> bool:
    proc = _PROCS.get(agent_id)
    if proc is not None:
        if proc.poll() is None:
            return True
        del _PROCS[agent_id]  # reaped: its pid is free again
        return False
    if not progress or progress.get("state") != "running":
        return False
    quiet = time.time() - float(progress.get("updated_at", 0)) > SILENT_S
    return not quiet and _alive(int(progress.get("pid", 0)))


def training_status(dataset: str, profile: TrainingProfile = QUICK) -> TrainingStatus:
    """Where the background run of ``profile`` stands, from the progress file it writes and
    whether its process lives (the one this process started, else the file's pid)."""
    agent_id = profile.agent_for(dataset)
    p = read_progress(agent_id)
    if _running(agent_id, p):
        if p is None or p.get("state") != "running":  # started here, has not written yet
            return TrainingStatus("running", "starting")
        left = p.get("left_s")
        return TrainingStatus(
            "running", p["stage"], int(p["done"]), int(p["total"]), None if left is None else float(left)
        )
    if {name for name, _ in profile.pool_specs(dataset)} & set(live_pools(dataset)):
        return TrainingStatus("done")
    if p is None or p.get("state") == "done":
        return TrainingStatus("idle")
    if p.get("state") == "failed" and p.get("message"):
        return TrainingStatus("failed", message=str(p["message"])[:300])
    why = _last_error(_log(profile, dataset)) or f"the process {p.get('pid')} ended during {p.get('stage')}"
    return TrainingStatus("failed", message=why)


def start_training(dataset: str, profile: TrainingProfile = QUICK) -> None:
    """Start ``python -m l2d_core.agents.train_cli --profile …`` in the background (its own
    process session: it finishes even if the dashboard stops); does nothing while a run is going.
    A measurement of this process still under way is stopped: it would slow the run and be
    slowed by it."""
    agent_id = profile.agent_for(dataset)
    if _running(agent_id, read_progress(agent_id)):
        return
    for proc in _MEASURING.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _MEASURING.clear()
    name = next(k for k, v in PROFILES.items() if v == profile)
    log = _log(profile, dataset)
    log.parent.mkdir(parents=True, exist_ok=True)
    progress_path(agent_id).unlink(missing_ok=True)  # the last run's: not this one's
    args = ["-m", "l2d_core.agents.train_cli", "--dataset", dataset, "--profile", name]
    _PROCS[agent_id] = _spawn(args, log, start_new_session=True)


def _main(dataset: str) -> None:
    """The background measurement (``python -m l2d_core.app_logic.quick_agent DATASET``); it stops
    when the process that started it is gone (nobody waits for it then)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
    measure(dataset)


if __name__ == "__main__":
    _main(sys.argv[1])
