"""Background jobs, the one mechanism for work in a process of its own (agents read in, the
quick model's timing, router comparisons, embeddings): :func:`start`, :func:`status` (progress,
one schema), :func:`cancel`, :func:`result`. A job outlives the page that started it and says how
far it is in a progress file that any page, tab, server or parent process reads back.

A job is a module-level function ``fn(report, **kwargs)`` named ``"package.module:function"``;
:func:`start` runs it as ``python -m l2d_core.background`` in a process session of its own,
so that a closed browser tab, a page's rerun or a stopped server leave it running, and what it
returns (a path, or any text) is kept. It calls ``report(done, total, current)`` as its work goes
(and ``report.stage(...)`` between stages); :func:`status` reads where it is.

The progress file ``<cache>/jobs/<key>.json`` is written whole and renamed into place (never
half-written): ``state`` (running / done / failed), ``stage``, ``done``, ``total``, ``unit``,
``current`` item, ``elapsed_s``, ``left_s`` (the stage's time left: elapsed time over the share
of the stage's work done), ``result`` path or ``error`` (one line), ``pid`` and ``updated_at``.
A job whose process is gone while its file says running is reported as failed, "stopped".
Nothing here reads a job's text output (which goes to ``<key>.log`` for people to read).
"""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from filelock import FileLock

from .paths import PROJECT_ROOT, cache_dir, data_dir
from .stores import atomic_write_text

__all__ = [
    "JobStatus",
    "Reporter",
    "job_key",
    "job_file",
    "start",
    "status",
    "record_duration",
    "expected_duration",
    "JobFailedError",
    "cancel",
    "result",
]

WRITE_EVERY_S = 0.5  # the most often a job rewrites its progress file (and always at a stage's end)
_PROCS: dict[str, subprocess.Popen] = {}  # jobs this process started (reaped when they end)


@dataclass(frozen=True)
class JobStatus:
    """Where a job stands (``state`` ``idle``: never started here)."""

    key: str
    state: str = "idle"
    title: str = ""
    stage: str = ""
    done: int = 0
    total: int = 0
    unit: str = ""
    current: str = ""
    elapsed_s: float = 0.0
    left_s: float | None = None
    result: str | None = None
    error: str = ""
    pid: int | None = None
    pid_start: int | None = None  # the process's start time (clock ticks): a reused pid is not it
    started_at: float | None = None
    updated_at: float | None = None

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def fraction(self) -> float:
        """Share of the stage's items done (0 before the stage's total is known)."""
        return min(1.0, self.done / self.total) if self.total > 0 else 0.0


def job_key(*parts: str) -> str:
    """A job's key from its parts, safe as a file name (pure).

    >>> job_key("comparison", "squad11", "P3 live/x")
    'comparison-squad11-P3_live_x'
    """
    return "-".join(re.sub(r"[^A-Za-z0-9._]+", "_", str(p)) for p in parts)


def job_file(key: str) -> Path:
    """The progress file of a job."""
    if not re.fullmatch(r"[A-Za-z0-9._-]+", key):
        raise ValueError(f"bad job key {key!r}: letters, digits, '.', '_' and '-' only")
    return cache_dir() / "jobs" / f"{key}.json"


def _lock(key: str) -> FileLock:
    return FileLock(f"{job_file(key)}.lock", timeout=60)


def _write(path: Path, doc: dict) -> None:
    """The whole file through a temporary file and a rename: a reader never sees half of it."""
    atomic_write_text(path, json.dumps(doc))


def _read(key: str) -> dict | None:
    path = job_file(key)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"state": "failed", "error": "its progress file could not be read"}
    return doc if isinstance(doc, dict) else {"state": "failed", "error": "its progress file is not a record"}


def _start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot; None without /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _alive(pid: int | None, started: int | None) -> bool:
    """Whether the job's process still runs: it exists, is no zombie, and is the same process."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or someone else's (a job is ours)
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True  # no /proc: the signal test is all there is
    return state not in ("Z", "X") and (started is None or _start_ticks(pid) == started)


def _reap() -> None:
    """Collect the exit status of jobs this process started (no zombies left behind)."""
    for key, proc in list(_PROCS.items()):
        if proc.poll() is not None:
            del _PROCS[key]


def status(key: str) -> JobStatus:
    """Where job ``key`` stands, from its progress file; a running job's elapsed time and time
    left are brought up to now, and one whose process is gone is failed, "stopped"."""
    _reap()
    doc = _read(key)
    if doc is None:
        return JobStatus(key)
    known = {f.name for f in fields(JobStatus)} - {"key"}
    s = JobStatus(key, **{k: v for k, v in doc.items() if k in known})
    if not s.running:
        return s
    if not _alive(s.pid, s.pid_start):
        return replace(s, state="failed", error="stopped", left_s=None)
    lag = max(0.0, time.time() - (s.updated_at or time.time()))
    left = None if s.left_s is None else max(0.0, s.left_s - lag)
    return replace(s, elapsed_s=s.elapsed_s + lag, left_s=left)


def start(key: str, target: str, kwargs: dict | None = None, title: str = "") -> JobStatus:
    """Start ``target`` (``"module:function"``, called as ``function(report, **kwargs)``; the
    arguments are JSON) as job ``key`` in a process of its own — unless a job ``key`` is running
    already: then that one's status is returned and nothing is started (two pages, two tabs or
    two server processes asking at once start one job)."""
    path = job_file(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock(key):
        now = status(key)
        if now.running:
            return now
        env = {
            **os.environ,
            "L2D_CACHE_DIR": str(cache_dir()),
            "L2D_DATA_DIR": str(data_dir()),
            "PYTHONPATH": os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH")) if p),
            "PYTHONUNBUFFERED": "1",
        }
        cmd = [sys.executable, "-m", "l2d_core.background", key, target, json.dumps(kwargs or {})]
        with open(path.with_suffix(".log"), "w", encoding="utf-8") as log:
            proc = subprocess.Popen(
                cmd,
                cwd=PROJECT_ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own session: a Ctrl-C of the server leaves it running
            )
        _PROCS[key] = proc
        t = time.time()
        first = JobStatus(
            key, "running", title, "Starting", pid=proc.pid, pid_start=_start_ticks(proc.pid), started_at=t
        )
        _write(path, {**asdict(replace(first, updated_at=t)), "target": target, "kwargs": kwargs or {}})
    return status(key)


class JobFailedError(RuntimeError):
    """A job that failed, was cancelled or whose process stopped: ``error`` says why, in one line."""

    def __init__(self, key: str, error: str):
        super().__init__(f"job {key} failed: {error}")
        self.key, self.error = key, error


def cancel(key: str, grace_s: float = 5.0) -> JobStatus:
    """Stop job ``key`` (its whole process group: SIGTERM, then SIGKILL after ``grace_s``) and
    record it as failed, "cancelled"; a job that is not running is left as it is."""
    with _lock(key):
        now = status(key)
        if not now.running:
            return now
        try:  # start()'s jobs lead their own process group; a command line's run is one process
            kill = os.killpg if os.getpgid(now.pid) == now.pid else os.kill
            kill(now.pid, signal.SIGTERM)
            end = time.monotonic() + grace_s
            while _alive(now.pid, now.pid_start) and time.monotonic() < end:
                _reap()
                time.sleep(0.05)
            if _alive(now.pid, now.pid_start):
                kill(now.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # ended meanwhile
        proc = _PROCS.pop(key, None)
        if proc is not None:
            proc.wait()
        doc = {**(_read(key) or {}), "state": "failed", "error": "cancelled", "left_s": None}
        _write(job_file(key), {**doc, "updated_at": time.time()})
    return status(key)


def result(key: str, timeout: float | None = None, poll_s: float = 0.1) -> str | None:
    """What job ``key`` returned, once it is done (waiting while it runs, at most ``timeout``
    seconds: then TimeoutError); a failed, cancelled or stopped job raises
    :class:`JobFailedError`, one never started LookupError."""
    end = None if timeout is None else time.monotonic() + timeout
    while (s := status(key)).running:
        if end is not None and time.monotonic() > end:
            raise TimeoutError(f"job {key} still runs after {timeout} s")
        time.sleep(poll_s)
    if s.state == "done":
        return s.result
    if s.state == "idle":
        raise LookupError(f"no job {key} was started")
    raise JobFailedError(key, s.error or "failed")


class Reporter:
    """What a job's function is given: ``report(done, total, current, work=None)`` as its work
    goes (``work``: the share of the stage's work done, when items differ in cost — the time
    left follows it instead of the count), ``report.stage(name, unit, total)`` between stages."""

    def __init__(self, key: str, first_stage: str = "Starting"):
        self.key, self.path = key, job_file(key)
        self.path.parent.mkdir(parents=True, exist_ok=True)  # a job not begun by start(): a command line's
        with _lock(key):  # held by start() until it has written the job's first record
            self.doc = _read(key) or {}
        now = time.time()
        self.started = float(self.doc.get("started_at") or now)
        self.doc.update(state="running", pid=os.getpid(), pid_start=_start_ticks(os.getpid()))
        self.doc.update(started_at=self.started, result=None, error="")
        self._clock, self._written = now, 0.0
        self.stage(first_stage)

    def _save(self, force: bool) -> None:
        now = time.time()
        if not force and now - self._written < WRITE_EVERY_S:
            return
        self.doc.update(elapsed_s=now - self.started, updated_at=now)
        with _lock(self.key):
            _write(self.path, self.doc)
        self._written = now

    def stage(self, name: str, unit: str = "", total: int = 0, current: str = "") -> None:
        """A new stage (``current``: what it works on, if one thing): its count starts at 0 and
        its clock now."""
        self.doc.update(stage=name, unit=unit, total=int(total), done=0, current=current, left_s=None)
        self._clock = time.time()
        self._save(force=True)

    def __call__(self, done: int, total: int, current: str = "", work: float | None = None) -> None:
        first = int(total) != self.doc.get("total")
        if first:  # the stage's count is known from now on: its clock starts
            self.doc["total"], self._clock = int(total), time.time()
        share = work if work is not None else (done / total if total else 0.0)
        took = time.time() - self._clock
        left = took * (1.0 - share) / share if share > 0 else None
        self.doc.update(done=int(done), current=str(current), left_s=left)
        self._save(force=first or done >= total)

    def finish(self, state: str, result: str | None = None, error: str = "") -> None:
        self.doc.update(state=state, result=result, error=error, left_s=None if state != "done" else 0.0)
        self._save(force=True)


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    text = " ".join(text.split()) or type(exc).__name__
    return text if len(text) <= limit else f"{text[:limit]}…"


def run(key: str, target: str, kwargs: dict) -> int:
    """The job process: call ``target`` with a :class:`Reporter`, record its result or error."""
    report = Reporter(key)
    try:
        module, name = target.split(":")
        result = getattr(importlib.import_module(module), name)(report, **kwargs)
    except BaseException as exc:  # any end of the job is recorded; its log has the traceback
        traceback.print_exc()
        report.finish("failed", error=_one_line(exc))
        return 1
    report.finish("done", result=None if result is None else str(result))
    return 0


# --- how long work that counts nothing took here: the time left of the next such work ---------


def _durations() -> Path:
    return cache_dir() / "jobs" / "durations.json"


def record_duration(kind: str, seconds: float, size: int) -> None:
    """Keep how long one piece of work of ``kind`` (e.g. fitting one router) took on this
    machine for ``size`` items (e.g. training questions); the latest measurement is kept."""
    path = _durations()
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{path}.lock", timeout=60):
        try:
            doc = dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            doc = {}
        doc[kind] = {"seconds": float(seconds), "size": int(size), "at": time.time()}
        _write(path, doc)


def expected_duration(kind: str, size: int) -> float | None:
    """The time ``kind`` should take for ``size`` items, scaled from its last measurement here
    (None: never measured on this machine)."""
    try:
        last = json.loads(_durations().read_text(encoding="utf-8"))[kind]
        return float(last["seconds"]) * size / max(int(last["size"]), 1)
    except (OSError, ValueError, KeyError, TypeError):
        return None


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2], json.loads(sys.argv[3])))
