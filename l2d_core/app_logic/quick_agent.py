"""The quick live agent, trained from the dashboard: the command line ``--profile quick`` as a
background job (:mod:`l2d_core.background`: it outlives a page's rerun and a closed tab), its
progress read back from the job's progress file, and this machine's expected time for it.

The expected time is measured in a background job too, when a user asks for it (opening a page
starts nothing; a page never waits for it): the run's own windows are counted and batched as the
run batches them, the base model's training
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
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from .. import background
from ..agents.base import load_tokenizer
from ..agents.profiles import PROFILES, TrainingProfile, train_command
from ..agents.qa_training import QATrainConfig, time_training_step, training_batches
from ..agents.train_cli import parse_args, plan_jobs, read_progress, train_key
from ..data import benchmark_split, load_dataset
from ..paths import cache_dir
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
    "measure_job",
    "timing_key",
    "start_training",
    "training_status",
]

QUICK = PROFILES["quick"]
_CLI = parse_args([])  # the command line's defaults: what the page's button runs
STALE_AFTER_S = 24 * 3600  # a measurement older than this is taken again
_MEASURING: set[str] = set()  # the datasets whose measurement this process started


def quick_pool(dataset: str) -> tuple[str, tuple[str, ...]] | None:
    """(name, experts) of the pool the quick model makes on ``dataset`` (P3-quick on squad11), or
    None where its profile sets up no pool there."""
    return QUICK.first_pool(dataset)


def _log(key: str) -> Path:
    """What a background job printed (its traceback, a command line's ``error: …``)."""
    return background.job_file(key).with_suffix(".log")


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


def _windows(ds, cfg: QATrainConfig) -> dict[str, tuple[int, ...]]:
    """The token length of every window of every question, cut as training and answering cut them
    (tokenized once per process and dataset: a measurement taken again reuses them)."""
    return _windows_of(ds.name, cfg.base_path(), cfg.max_length, cfg.stride)


@lru_cache(maxsize=4)
def _windows_of(dataset: str, base: str, max_length: int, stride: int) -> dict[str, tuple[int, ...]]:
    ds = load_dataset(dataset)
    enc = load_tokenizer(base)(
        [r.question.lstrip() for r in ds],
        [r.context for r in ds],
        truncation="only_second",
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
    )
    qids = [r.qid for r in ds]
    windows: dict[str, list[int]] = {q: [] for q in qids}
    for ids, owner in zip(enc["input_ids"], enc["overflow_to_sample_mapping"]):
        windows[qids[owner]].append(len(ids))
    return {q: tuple(n) for q, n in windows.items()}


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


def timing_key(dataset: str) -> str:
    return background.job_key("timing", dataset)


def measurement(dataset: str, start: bool = False) -> Measurement:
    """The kept measurement when fresh; otherwise "measuring" while one is under way, else
    "none" — one is taken in a background job only with ``start`` (a user's request: opening a
    page starts nothing), and a page never waits for it."""
    record = stored_measurement(dataset)
    if _complete(record):
        return Measurement("ready", record)
    s = background.status(timing_key(dataset))
    if s.running:
        return Measurement("measuring", record)
    if s.state == "failed" and not start:  # asked again: it is tried again
        return Measurement("failed", record, _last_error(_log(s.key)) or s.error)
    if not start:
        return Measurement("none", record)
    background.start(
        s.key, f"{__name__}:measure_job", {"dataset": dataset}, f"Timing the quick model on {dataset}"
    )
    _MEASURING.add(dataset)
    return Measurement("measuring", record)


def measure_job(report: background.Reporter, dataset: str) -> None:
    """The background measurement; it stops when the process that started it is gone (nobody
    waits for it then)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
    report.stage("Timing the base model's training steps and forward passes")
    measure(dataset)


# --- the run ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainingStatus:
    state: str  # "idle" (never started), "running", "failed", "done"
    stage: str = ""  # "starting", "fine-tuning", "calibrating", "answering", "registering" while running
    done: int = 0  # steps or questions of the stage
    total: int = 0
    left_s: float | None = None  # the stage's time left (from its rate so far)
    message: str = ""  # why it stopped, when failed


def training_status(dataset: str, profile: TrainingProfile = QUICK) -> TrainingStatus:
    """Where the background run of ``profile`` stands, from its job's progress file (whoever
    started it: the button or the command line) and whether its process lives."""
    s = read_progress(profile.agent_for(dataset))
    if s.running:
        if s.stage.lower() == "starting":
            return TrainingStatus("running", "starting")
        return TrainingStatus("running", s.stage, s.done, s.total, s.left_s)
    if {name for name, _ in profile.pool_specs(dataset)} & set(live_pools(dataset)):
        return TrainingStatus("done")
    if s.state in ("idle", "done"):
        return TrainingStatus("idle")
    if s.error and s.error != "stopped":
        return TrainingStatus("failed", message=s.error[:300])
    why = _last_error(_log(s.key)) or f"the process {s.pid} ended during {s.stage.lower()}"
    return TrainingStatus("failed", message=why)


def start_training(dataset: str, profile: TrainingProfile = QUICK) -> None:
    """Start the command line's run of ``profile`` as a background job (its own process session:
    it finishes even if the dashboard stops); does nothing while a run is going. A measurement of
    this process still under way is cancelled: it would slow the run and be slowed by it."""
    agent_id = profile.agent_for(dataset)
    if read_progress(agent_id).running:
        return
    for measured in _MEASURING:
        background.cancel(timing_key(measured))
    name = next(k for k, v in PROFILES.items() if v == profile)
    argv = ["--dataset", dataset, "--profile", name]
    title = f"Training {agent_id}"
    background.start(train_key(agent_id), "l2d_core.agents.train_cli:train_job", {"argv": argv}, title)
