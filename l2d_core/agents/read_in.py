"""Reading agents' answers into the agent cache: prediction files are imported on first use (so
the benchmark works from a clean checkout), here or in child processes; live agents must be
precomputed (scripts/precompute_cache.py).

A child process is ``python -m l2d_core.agents.read_in DATASET AGENT… --progress FILE``: it reads
the agents in one after the other (each one cache transaction) and rewrites ``FILE`` atomically
after each, as JSON ``{"done": [agent ids], "error": null or the message it failed with}``. The
caller reads that file, never the child's output. A fresh process is started rather than a
``multiprocessing`` one: the 'spawn' start method runs the parent's main script again in the child
(under ``streamlit run``, importing Streamlit: 1.5 s here), which delays the dashboard's early
read-in by as much.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ..data.records import QADataset
from ..paths import PROJECT_ROOT, cache_dir
from ..qa.scoring import SCORING_VERSION
from .cache import AgentCache
from .outcome_log import LOG_KINDS, import_log, log_needs_import
from .prediction_file import answers_match_source, import_predictions
from .registry import AgentSpec, get_agent, get_pool

__all__ = [
    "AgentNotCachedError",
    "needs_import",
    "answers_a_subset",
    "ensure_cached",
    "read_agents_in",
    "import_agents",
    "read_in_early",
    "main",
]

# (cache folder, dataset) → the read-in started by :func:`read_in_early`, in a child process
_EARLY: dict[tuple[str, str], Future] = {}
_POLL_S = 0.1  # how often the caller looks at its children's progress files


class AgentNotCachedError(LookupError):
    """A live agent whose answers have not been precomputed for this dataset."""


def needs_import(dataset: QADataset, spec: AgentSpec, cache: AgentCache) -> bool:
    """Whether a prediction-file agent's answers must be (re-)imported before use: some are
    missing, or they were scored by another scoring version (an outcome log, or the abstaining
    agent: :func:`~.outcome_log.log_needs_import`)."""
    if spec.kind in LOG_KINDS:
        return log_needs_import(dataset, spec, cache)
    if spec.kind != "prediction_file":
        return False
    missing = set(dataset.qids) - cache.done_ids(dataset.name, spec.id)
    return (
        bool(missing)
        or cache.meta(dataset.name, spec.id).get("scoring_version") != SCORING_VERSION
        or not answers_match_source(spec, dataset.name, cache)  # another file's answers: never used
    )


def answers_a_subset(dataset: QADataset, spec: AgentSpec, cache: AgentCache) -> bool:
    """Whether a model agent answered only part of the dataset on purpose (``train_agent.py
    --profile quick``: its meta says ``partial``); a pool with it is routed on those questions."""
    return spec.kind != "prediction_file" and bool(cache.meta(dataset.name, spec.id).get("partial"))


def ensure_cached(dataset: QADataset, agents: list[AgentSpec], cache: AgentCache) -> None:
    """Import prediction-file agents that are not cached yet; fail clearly for model agents whose
    answers are missing or were recorded without their confidence (scoring version < 3).
    Waits first for the dataset's agents being read in by :func:`read_in_early`."""
    early = _EARLY.get((str(cache_dir()), dataset.name))
    if early is not None:
        try:
            early.result()
        except Exception:  # noqa: BLE001 - what it could not read in is read in below, which raises in full
            pass
    for spec in agents:
        if spec.kind in ("prediction_file", *LOG_KINDS):
            if needs_import(dataset, spec, cache):  # (re-)score the file: cheap, and always current
                (import_predictions if spec.kind == "prediction_file" else import_log)(spec, dataset, cache)
            continue
        done = cache.ids_with(dataset.name, spec.id, "confidence")
        missing = set(dataset.qids) - done
        if missing and not (answers_a_subset(dataset, spec, cache) and done & set(dataset.qids)):
            how = cache.meta(dataset.name, spec.id).get("answered_by") or (
                f"python scripts/precompute_cache.py --dataset {dataset.name} --agents {spec.id}"
            )
            raise AgentNotCachedError(
                f"agent {spec.id!r} ({spec.kind}) has no answers recorded with their confidence for "
                f"{len(missing)} of {len(dataset)} questions of {dataset.name}; run `{how}` "
                "(finished answers are kept; only the missing ones are computed)"
            )


def read_agents_in(dataset: QADataset, agent_ids: Sequence[str], on_done=None) -> None:
    """Read agents in here, one after the other (each agent one transaction: an interrupted run
    keeps the agents done); ``on_done(k, n, agent_id)`` after each."""
    ids, cache = list(agent_ids), AgentCache()
    for k, a in enumerate(ids, start=1):
        ensure_cached(dataset, [get_agent(a)], cache)
        if on_done is not None:
            on_done(k, len(ids), a)


def _write_progress(path: Path, done: list[str], error: str | None) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"done": done, "error": error}), encoding="utf-8")
    os.replace(tmp, path)


def _message(exc: BaseException) -> str:
    """An exception's own message (a KeyError's without the quotes ``str`` adds)."""
    return str(exc.args[0]) if len(exc.args) == 1 else str(exc) or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """What a child process runs: read ``AGENT…`` of ``DATASET`` in, reporting to ``--progress``."""
    p = argparse.ArgumentParser(prog="python -m l2d_core.agents.read_in", description=main.__doc__)
    p.add_argument("dataset")
    p.add_argument("agents", nargs="+")
    p.add_argument("--progress", type=Path, required=True, help="JSON file rewritten after each agent")
    args = p.parse_args(argv)
    done: list[str] = []

    def reported(k: int, n: int, agent_id: str) -> None:
        done.append(agent_id)
        _write_progress(args.progress, done, None)

    try:
        from ..data import load_dataset

        read_agents_in(load_dataset(args.dataset), args.agents, reported)
    except Exception as exc:  # noqa: BLE001 - the caller raises it, with this message
        _write_progress(args.progress, done, _message(exc))
        return 1
    return 0


class _Child:
    """One child process reading ``agent_ids`` in on this process's cache folder."""

    def __init__(self, dataset_name: str, agent_ids: Sequence[str], progress: Path):
        self.ids, self.progress, self.seen = list(agent_ids), progress, 0
        path = os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "L2D_CACHE_DIR": str(cache_dir()), "PYTHONPATH": path}
        cmd = [sys.executable, "-m", __name__, dataset_name, *self.ids, "--progress", str(progress)]
        self.proc = subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL)

    def newly_done(self) -> list[str]:
        """The agents read in since the last call; raises the child's error (ValueError, with its
        message), or RuntimeError when it ended without reading every agent in."""
        ended = self.proc.poll() is not None  # looked at before the file: an ended child's file is final
        state = json.loads(self.progress.read_text(encoding="utf-8")) if self.progress.exists() else {}
        done, error = state.get("done", []), state.get("error")
        if error is not None:
            raise ValueError(f"reading in the answers of {', '.join(self.ids)} failed: {error}")
        if ended and len(done) < len(self.ids):
            raise RuntimeError(
                f"the process reading in {', '.join(self.ids)} ended (exit status {self.proc.returncode}) "
                f"after {len(done)} of {len(self.ids)} agents"
            )
        new, self.seen = done[self.seen :], len(done)
        return new


def _in_children(dataset_name: str, shares: list[list[str]], on_agent) -> None:
    """Each share of agents read in by a child process of its own, all at once; ``on_agent(id)``
    in this thread as each is done. Returns when all are; a child's failure is raised here once
    the other children have ended (each agent is one transaction, so what they did is kept)."""
    with tempfile.TemporaryDirectory(prefix="l2d-read-in-") as tmp:
        children: list[_Child] = []
        try:
            for k, share in enumerate(shares):
                children.append(_Child(dataset_name, share, Path(tmp) / f"{k}.json"))
            left = sum(map(len, shares))
            while left:
                for child in children:
                    for a in child.newly_done():
                        left -= 1
                        on_agent(a)
                if left:
                    time.sleep(_POLL_S)
        finally:
            for child in children:
                child.proc.wait()


def import_agents(dataset: QADataset, agent_ids: Sequence[str], processes: int = 0, on_done=None) -> None:
    """Read prediction-file agents in (each agent one transaction: an interrupted run keeps the
    agents done); ``on_done(k, n, agent_id)`` after each, in the calling thread. ``processes`` > 0:
    in that many child processes at once (the agents shared out among them), so that the calling
    process stays responsive (a dashboard keeps serving the page it has drawn); those read the
    dataset by its name, and a child's failure is raised here with its message."""
    ids = list(agent_ids)
    if not processes:
        read_agents_in(dataset, ids, on_done)
        return
    count = iter(range(1, len(ids) + 1))

    def on_agent(a: str) -> None:
        k = next(count)
        if on_done is not None:
            on_done(k, len(ids), a)

    _in_children(dataset.name, [ids[k::processes] for k in range(processes) if ids[k::processes]], on_agent)


def read_in_early(dataset_name: str, pool_name: str, also: Sequence[str] = ()) -> None:
    """Start reading a pool's prediction-file agents (and ``also``: the default router's helper
    agents) in, in a child process (so on another core), while this process goes on: a fresh
    dashboard imports torch and scikit-learn meanwhile, and its first view waits for both.
    :func:`ensure_cached` waits for it. Once per process, cache folder and dataset; the child
    skips what is cached already. Unknown pools or agents raise KeyError here; a child that
    cannot start or fails leaves the work to :func:`ensure_cached`."""
    key = (str(cache_dir()), dataset_name)
    wanted = dict.fromkeys([*get_pool(pool_name).agent_ids, *also])
    ids = [a for a in wanted if get_agent(a).kind in ("prediction_file", *LOG_KINDS)]
    if key in _EARLY or not ids:
        return
    runner = ThreadPoolExecutor(1)
    _EARLY[key] = runner.submit(_in_children, dataset_name, [ids], lambda _: None)
    runner.shutdown(wait=False)  # its one thread ends with the child


if __name__ == "__main__":
    sys.exit(main())
