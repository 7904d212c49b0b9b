"""The quick live agent, trained from the dashboard: ``scripts/train_agent.py --profile quick`` in
a background process (it outlives a page's rerun and a closed tab), its progress read back
from its log, and this machine's expected time for it, measured.

The expected time comes from timed training steps and forward passes of the base model on this
machine (:func:`~l2d_core.agents.qa_training.time_training_step`, a few seconds,
kept on disk), times the steps and windows of the run.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from ..agents.qa_training import PROFILES, QATrainConfig, TrainingProfile, time_training_step
from ..data import benchmark_split, load_dataset
from ..paths import PROJECT_ROOT, cache_dir
from ..stores import open_disk_cache
from .live import live_pools

__all__ = [
    "PROFILES",
    "QUICK",
    "QUICK_POOL",
    "TrainingStatus",
    "workload",
    "expected_seconds",
    "start_training",
    "training_status",
]

QUICK = PROFILES["quick"]
QUICK_POOL = QUICK.pool_names[0]  # the pool it registers (P3-quick)
_PROCS: dict[str, subprocess.Popen] = {}  # runs this process started (reaped when they end)
# a tqdm line of train_agent.py: "train fold0:  40%|████  | 30/75 [01:02<01:33, 2.07s/step]"
_BAR = re.compile(r"(train|answer) (\w+):\s+\d+%\|[^|]*\|\s*(\d+)/(\d+) \[([\d:]+)<([\d:?]+)")


def _log(profile: TrainingProfile) -> Path:
    return cache_dir() / "models" / f"{profile.agent_id}.log"


def _pid(profile: TrainingProfile) -> Path:
    return cache_dir() / "models" / f"{profile.agent_id}.pid"


def workload(dataset: str, profile: TrainingProfile = QUICK, folds: int = 2) -> dict[str, int]:
    """Questions a run of ``profile`` fine-tunes on (per model, summed over its models) and answers."""
    train, test = benchmark_split(load_dataset(dataset))
    n_fold = math.ceil(len(train) / folds)  # a fold's share of the training questions (about)
    lim = (lambda n: n) if profile.limit is None else (lambda n: min(n, profile.limit))
    if profile.crossfit:  # k fold models, then the full model
        return {
            "trained": folds * lim(len(train) - n_fold) + lim(len(train)),
            "answered": len(train) + len(test),
        }
    return {"trained": lim(len(train) - n_fold), "answered": lim(n_fold) + len(test)}


def _step_times(device: str | None, batch: int) -> dict[str, float]:
    """One training step and one forward pass of the base model on ``batch`` windows here
    (measured once, kept on disk)."""
    dev = "cuda" if (device or ("cuda" if torch.cuda.is_available() else "cpu")).startswith("cuda") else "cpu"
    base = QATrainConfig().base_path()
    key = f"qa_step|{base}|{dev}|{batch}|{torch.get_num_threads()}|{torch.__version__}"
    with open_disk_cache(cache_dir() / "meta", "the measurement cache", "measurements are taken again") as m:
        if key not in m:
            m[key] = time_training_step(device=dev, batch=batch)
        return dict(m[key])


def expected_seconds(dataset: str, profile: TrainingProfile = QUICK, device: str | None = None) -> dict:
    """This machine's expected time for a run of ``profile``: ``train_s``, ``answer_s``,
    ``total_s``, and the ``trained`` / ``answered`` question counts it is made of. The step is
    timed at the quick profile's batch size; another profile's is scaled by its windows."""
    t, work = _step_times(device, QUICK.batch_size), workload(dataset, profile)
    train_s = math.ceil(work["trained"] / profile.batch_size) * profile.epochs * t["train_step_s"]
    train_s *= profile.batch_size / QUICK.batch_size
    answer_s = work["answered"] / QUICK.batch_size * t["forward_s"]
    return {**work, "train_s": train_s, "answer_s": answer_s, "total_s": train_s + answer_s}


@dataclass(frozen=True)
class TrainingStatus:
    state: str  # "idle" (never started), "running", "failed", "done"
    stage: str = ""  # "fine-tuning" or "answering" while running
    done: int = 0  # steps or questions of the stage
    total: int = 0
    left_s: float | None = None  # the stage's time left (the progress bar's own estimate)
    message: str = ""  # the last line of the log (the error when failed)


def _seconds(text: str) -> float | None:
    if "?" in text:
        return None
    parts = [int(p) for p in text.split(":")]
    return float(sum(p * 60**k for k, p in enumerate(reversed(parts))))


def _running(profile: TrainingProfile) -> bool:
    proc = _PROCS.get(profile.agent_id)
    if proc is not None and proc.poll() is not None:
        del _PROCS[profile.agent_id]
        return False
    try:
        pid = int(_pid(profile).read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    cmdline = Path(f"/proc/{pid}/cmdline")  # a recycled pid is not ours
    return not cmdline.exists() or b"train_agent.py" in cmdline.read_bytes()


def training_status(dataset: str, profile: TrainingProfile = QUICK) -> TrainingStatus:
    """Where the background run of ``profile`` stands, from its process and its log."""
    log = _log(profile)
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    lines = [x.strip() for x in re.split(r"[\r\n]+", text) if x.strip()]
    last = lines[-1][:300] if lines else ""
    if _running(profile):
        for line in reversed(lines):
            m = _BAR.search(line)
            if m:
                what, _, done, total, _, left = m.groups()
                stage = "fine-tuning" if what == "train" else "answering"
                return TrainingStatus("running", stage, int(done), int(total), _seconds(left), last)
        return TrainingStatus("running", "starting", message=last)
    if set(profile.pool_names) & set(live_pools(dataset)):
        return TrainingStatus("done", message=last)
    if not text:
        return TrainingStatus("idle")
    errors = [x for x in lines if x.startswith("error:") or "Error" in x.split(":", 1)[0]]
    return TrainingStatus("failed", message=(errors[-1] if errors else last)[:300])


def start_training(dataset: str, profile: TrainingProfile = QUICK) -> None:
    """Start ``scripts/train_agent.py --profile …`` in the background (its own process session:
    it finishes even if the dashboard stops); does nothing while a run is going."""
    if _running(profile):
        return
    name = next(k for k, v in PROFILES.items() if v == profile)
    log = _log(profile)
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(PROJECT_ROOT / "scripts" / "train_agent.py"), "--dataset", dataset]
    env = {**os.environ, "L2D_CACHE_DIR": str(cache_dir()), "PYTHONUNBUFFERED": "1"}
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            [*cmd, "--profile", name],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _PROCS[profile.agent_id] = proc
    _pid(profile).write_text(str(proc.pid))
