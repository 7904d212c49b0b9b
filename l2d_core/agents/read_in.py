"""Reading agents' answers into the agent cache: prediction files are imported on first use (so
the benchmark works from a clean checkout), here or in child processes; live agents must be
precomputed (scripts/precompute_cache.py).

A child process is a background job (:mod:`l2d_core.background`, target :func:`read_in_job`): it
reads the agents in one after the other (each one cache transaction), its progress counting the
agents done (read in the order given); the caller reads that, never the child's output. A fresh
process is started rather than a ``multiprocessing`` one: the 'spawn' start method runs the
parent's main script again in the child (under ``streamlit run``, importing Streamlit), which
would delay the dashboard's early read-in by as much.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from .. import background
from ..data.records import QADataset
from ..paths import cache_dir
from ..qa.scoring import SCORING_VERSION
from .cache import AgentCache
from .catalog import AgentSpec, get_agent, get_pool
from .outcome_log import LOG_KINDS, import_log, log_needs_import
from .prediction_file import answers_match_source, import_predictions

__all__ = [
    "AgentNotCachedError",
    "needs_import",
    "answers_a_subset",
    "ensure_cached",
    "read_agents_in",
    "import_agents",
    "read_in_early",
    "read_in_job",
]

# (cache folder, dataset) → the read-in started by :func:`read_in_early`, in a child process (None:
# nothing was to read in)
_EARLY: dict[tuple[str, str], Future | None] = {}
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


def read_in_job(report: background.Reporter, dataset: str, agents: list[str]) -> None:
    """The background job: read ``agents`` of ``dataset`` in, in order, one count per agent."""
    from ..data import load_dataset

    report.stage("Reading answers in", "agents", len(agents))
    read_agents_in(load_dataset(dataset), agents, lambda k, n, a: report(k, n, a))


def _job_key(dataset_name: str, agent_ids: list[str]) -> str:
    digest = hashlib.sha1("\n".join(agent_ids).encode()).hexdigest()[:12]
    return background.job_key("read-in", dataset_name, digest)


def _newly_done(key: str, ids: list[str], seen: int) -> list[str]:
    """The agents of job ``key`` read in past the first ``seen``; raises the job's error
    (ValueError, with its message), or RuntimeError when its process ended before the last."""
    s = background.status(key)
    if s.state == "failed" and s.error != "stopped":
        raise ValueError(f"reading in the answers of {', '.join(ids)} failed: {s.error}")
    if s.state == "failed" or (s.state == "done" and s.done < len(ids)):
        raise RuntimeError(
            f"the process reading in {', '.join(ids)} ended after {s.done} of {len(ids)} agents"
        )
    done = len(ids) if s.state == "done" else min(s.done, len(ids))
    return ids[seen:done]


def _in_children(dataset_name: str, shares: list[list[str]], on_agent) -> None:
    """Each share of agents read in by a background job of its own, all at once; ``on_agent(id)``
    in this thread as each is done. Returns when all are; a child's failure is raised here once
    the other children have ended (each agent is one transaction, so what they did is kept)."""
    keys: list[str] = []
    try:
        for share in shares:
            keys.append(_job_key(dataset_name, share))
            background.start(keys[-1], f"{__name__}:read_in_job", {"dataset": dataset_name, "agents": share})
        seen = [0] * len(shares)
        while sum(seen) < sum(map(len, shares)):
            for k, (key, share) in enumerate(zip(keys, shares)):
                for a in _newly_done(key, share, seen[k]):
                    seen[k] += 1
                    on_agent(a)
            if sum(seen) < sum(map(len, shares)):
                time.sleep(_POLL_S)
    finally:
        for key in keys:
            while background.status(key).running:
                time.sleep(_POLL_S)


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


def read_in_early(dataset_name: str, pool_name: str, also: Sequence[str] = ()) -> bool:
    """Start reading a pool's prediction-file agents (and ``also``: the default router's helper
    agents) in, in a child process (so on the other core), while this process goes on: a fresh
    dashboard imports the pages meanwhile, and its first view waits for both.
    :func:`ensure_cached` waits for it. Once per process, cache folder and dataset; the child
    skips what is cached already. Where every agent has answers on disk already (a few
    milliseconds to say; whether they are complete and current is what :func:`ensure_cached`
    checks), nothing is started and the dataset is not read, so a warm cache's first view gets
    no work beside it. Returns whether that was so (nothing to read in). Unknown
    pools or agents raise KeyError here; a child that cannot start or fails leaves the work to
    :func:`ensure_cached`."""
    key = (str(cache_dir()), dataset_name)
    wanted = dict.fromkeys([*get_pool(pool_name).agent_ids, *also])
    ids = [a for a in wanted if get_agent(a).kind in ("prediction_file", *LOG_KINDS)]
    if key in _EARLY or not ids:
        return _EARLY.get(key) is None
    cache = AgentCache()
    if all(cache.has(dataset_name, a) for a in ids):  # here, not in a thread: one beside the
        _EARLY[key] = None  # page's imports waits for the GIL at every SQLite call (seconds)
        return True
    # one child with every agent, not two: each child builds the dataset's gold index again, and
    # this process imports on the other core meanwhile
    runner = ThreadPoolExecutor(1)
    _EARLY[key] = runner.submit(_in_children, dataset_name, [ids], lambda _: None)
    runner.shutdown(wait=False)  # its one thread ends with the child
    return False
