"""The arrays a router sees for one dataset split and one pool, read from the agent cache.

Prediction-file agents missing from the cache are imported on first use, so the benchmark
works from a clean checkout; live agents must be precomputed (scripts/precompute_cache.py).
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..data.records import QADataset
from ..paths import PROJECT_ROOT, cache_dir
from ..qa.scoring import SCORING_VERSION
from .cache import AgentCache
from .prediction_file import import_predictions
from .registry import AgentSpec, PoolSpec, get_agent, get_pool

__all__ = [
    "RoutingData",
    "needs_import",
    "ensure_cached",
    "import_agent",
    "import_agents",
    "read_in_early",
    "load_routing_data",
    "AgentNotCachedError",
]

# (cache folder, dataset) → the read-in started by :func:`read_in_early`, in a child process
_EARLY: dict[tuple[str, str], Future] = {}


class AgentNotCachedError(LookupError):
    """A live agent whose answers have not been precomputed for this dataset."""


@dataclass(frozen=True, eq=False)
class RoutingData:
    """Per-query, per-agent outcomes. Agent 0 is the pool's main model."""

    dataset: str
    agent_ids: tuple[str, ...]
    qids: tuple[str, ...]
    titles: np.ndarray  # (N,) article of each query
    start_ok: np.ndarray  # (N, A) bool
    end_ok: np.ndarray  # (N, A) bool
    em: np.ndarray  # (N, A) 0/1
    f1: np.ndarray  # (N, A) in [0, 1]
    gflops: np.ndarray  # (N, A) per-query GFLOPs of each agent
    answers: np.ndarray  # (N, A) object: each agent's answer text (None = no prediction)
    confidence: np.ndarray | None = None  # (N, A) object: each answer's confidence dict (None = none)

    @property
    def n_agents(self) -> int:
        return len(self.agent_ids)

    def __len__(self) -> int:
        return len(self.qids)

    @property
    def errors(self) -> np.ndarray:
        """(N, 2, A) bool: agent wrong on start (i=0) / end (i=1)."""
        return ~np.stack([self.start_ok, self.end_ok], axis=1)

    @property
    def correct(self) -> np.ndarray:
        """(N, A) bool: both endpoints right."""
        return self.start_ok & self.end_ok

    @property
    def agent_gflops(self) -> np.ndarray:
        """(A,) mean GFLOPs per query of each agent."""
        return self.gflops.mean(axis=0)

    def take(self, index: np.ndarray) -> RoutingData:
        """Rows selected by a boolean mask or integer index."""
        arr = np.asarray(index)
        idx = np.flatnonzero(arr) if arr.dtype == bool else arr.astype(np.intp, copy=False)
        fields = ("titles", "start_ok", "end_ok", "em", "f1", "gflops", "answers", "confidence")
        return replace(
            self,
            qids=tuple(self.qids[i] for i in idx),
            **{f: getattr(self, f)[idx] for f in fields if getattr(self, f) is not None},
        )

    def split(self, test_titles) -> tuple[RoutingData, RoutingData]:
        mask = np.isin(self.titles, list(test_titles))
        return self.take(~mask), self.take(mask)

    def with_gflops(self, agent_gflops: dict[str, float]) -> RoutingData:
        """Replace declared GFLOPs (e.g. edited by the user) for some agents."""
        g = self.gflops.copy()
        for a, v in agent_gflops.items():
            if a not in self.agent_ids:
                raise KeyError(f"agent {a!r} is not in this pool {self.agent_ids}")
            g[:, self.agent_ids.index(a)] = float(v)
        return replace(self, gflops=g)


def needs_import(dataset: QADataset, spec: AgentSpec, cache: AgentCache) -> bool:
    """Whether a prediction-file agent's answers must be (re-)imported before use: some are
    missing, or they were scored by another scoring version."""
    if spec.kind != "prediction_file":
        return False
    missing = set(dataset.qids) - cache.done_ids(dataset.name, spec.id)
    return bool(missing) or cache.meta(dataset.name, spec.id).get("scoring_version") != SCORING_VERSION


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
        if spec.kind == "prediction_file":
            if needs_import(dataset, spec, cache):  # (re-)score the file: cheap, and always current
                import_predictions(spec, dataset, cache)
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


def answers_a_subset(dataset: QADataset, spec: AgentSpec, cache: AgentCache) -> bool:
    """Whether a model agent answered only part of the dataset on purpose (``train_agent.py
    --profile quick``: its meta says ``partial``); a pool with it is routed on those questions."""
    return spec.kind != "prediction_file" and bool(cache.meta(dataset.name, spec.id).get("partial"))


def import_agent(dataset_name: str, *agent_ids: str) -> None:
    """Read prediction-file agents of a dataset in, one after the other, printing each id when
    it is done (what each child process of :func:`import_agents` runs)."""
    from ..data import load_dataset

    ds, cache = load_dataset(dataset_name), AgentCache()
    for a in agent_ids:
        ensure_cached(ds, [get_agent(a)], cache)
        print(a, flush=True)


def _import_in_child(dataset_name: str, agent_ids: Sequence[str], on_agent) -> None:
    """:func:`import_agent` in a new Python process on this process's cache directory;
    ``on_agent(agent_id)`` as each is done."""
    args = ", ".join(map(repr, (dataset_name, *agent_ids)))
    code = f"from {__name__} import import_agent; import_agent({args})"
    path = os.pathsep.join(p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "L2D_CACHE_DIR": str(cache_dir()), "PYTHONPATH": path}
    with subprocess.Popen(
        [sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as proc:  # fmt: skip
        for line in proc.stdout:
            if line.strip() in agent_ids:
                on_agent(line.strip())
        err = proc.stderr.read()
    if proc.returncode != 0:
        last = (err.strip().splitlines() or ["no message"])[-1]
        raise ValueError(
            f"reading in the answers of {', '.join(agent_ids)} failed: {last.split(': ', 1)[-1]}"
        )


def read_in_early(dataset_name: str, pool_name: str, also: Sequence[str] = ()) -> None:
    """Start reading a pool's prediction-file agents (and ``also``: the default router's helper
    agents) in, in a child process (so on another core), while this process goes on: a fresh
    dashboard imports torch and scikit-learn meanwhile, and its first view waits for both.
    :func:`ensure_cached` waits for it. Once per process, cache folder and dataset; the child
    skips what is cached already."""
    key = (str(cache_dir()), dataset_name)
    wanted = dict.fromkeys([*get_pool(pool_name).agent_ids, *also])
    ids = [a for a in wanted if get_agent(a).kind == "prediction_file"]
    if key in _EARLY or not ids:
        return
    runner = ThreadPoolExecutor(1)
    _EARLY[key] = runner.submit(_import_in_child, dataset_name, ids, lambda _: None)
    runner.shutdown(wait=False)  # its one thread ends with the child


def import_agents(dataset: QADataset, agent_ids: Sequence[str], processes: int = 0, on_done=None) -> None:
    """Read prediction-file agents in (each agent one transaction: an interrupted run keeps the
    agents done); ``on_done(k, n, agent_id)`` after each. ``processes`` > 0: in that many new
    Python processes at once (the agents shared out among them), so that the calling process
    stays responsive (a dashboard keeps serving the page it has drawn); those read the dataset
    by its name."""
    ids = list(agent_ids)
    if not processes:
        cache = AgentCache()
        for k, a in enumerate(ids, start=1):
            ensure_cached(dataset, [get_agent(a)], cache)
            if on_done is not None:
                on_done(k, len(ids), a)
        return
    finished: queue.Queue[str] = queue.Queue()  # the children report here; ``on_done`` runs in this thread
    shares = [ids[k::processes] for k in range(processes) if ids[k::processes]]
    with ThreadPoolExecutor(max(1, len(shares))) as pool:  # each thread waits on its child process
        futures = [pool.submit(_import_in_child, dataset.name, share, finished.put) for share in shares]
        for k in range(1, len(ids) + 1):
            while True:
                try:
                    a = finished.get(timeout=0.2)
                    break
                except queue.Empty:
                    if all(f.done() for f in futures) and finished.empty():
                        for f in futures:
                            f.result()  # an import's error is raised here, in the caller
                        raise RuntimeError("an import process ended without reading every agent in") from None
            if on_done is not None:
                on_done(k, len(ids), a)
        for f in futures:
            f.result()


def load_routing_data(
    dataset: QADataset, pool: PoolSpec | tuple[str, ...], cache: AgentCache | None = None
) -> RoutingData:
    """Arrays for every question of ``dataset`` and every agent of ``pool`` (main first).

    A question an agent has no record for counts as wrong for that agent (and is reported
    by the import), except for an agent that answered a subset on purpose
    (:func:`answers_a_subset`): then only the questions it answered are kept. Unknown agent ids
    raise KeyError.
    """
    cache = cache or AgentCache()
    agent_ids = pool.agent_ids if isinstance(pool, PoolSpec) else tuple(pool)
    if len(agent_ids) < 2:
        raise ValueError("a pool needs a main agent and at least one expert")
    specs = [get_agent(a) for a in agent_ids]
    for s in specs:
        if s.dataset != dataset.name:
            raise ValueError(f"agent {s.id} answers {s.dataset}, not {dataset.name}")
    ensure_cached(dataset, specs, cache)
    qids = list(dataset.qids)
    cols: dict[str, list[np.ndarray]] = {
        k: [] for k in ("start_ok", "end_ok", "em", "f1", "gflops", "answer", "confidence")
    }
    for s in specs:
        t = cache.table(dataset.name, s.id).reindex(qids)
        missing = t["em"].isna().to_numpy()
        declared = s.gflops if s.gflops_source == "declared" else np.nan
        gf = t["gflops"].astype(float).to_numpy()
        gf = np.where(np.isnan(gf) | (s.gflops_source == "declared"), declared, gf)
        if np.isnan(gf).any():  # measured agent with gaps: fill with its mean
            gf = np.where(np.isnan(gf), np.nanmean(gf) if np.isfinite(gf).any() else s.gflops, gf)
        cols["start_ok"].append(t["start_ok"].fillna(False).astype(bool).to_numpy() & ~missing)
        cols["end_ok"].append(t["end_ok"].fillna(False).astype(bool).to_numpy() & ~missing)
        cols["em"].append(t["em"].fillna(0.0).astype(float).to_numpy())
        cols["f1"].append(t["f1"].fillna(0.0).astype(float).to_numpy())
        cols["gflops"].append(gf)
        cols["answer"].append(t["answer"].to_numpy(dtype=object))
        conf = t["confidence"] if "confidence" in t else pd.Series(None, index=t.index, dtype=object)
        cols["confidence"].append(np.array([c if isinstance(c, dict) else None for c in conf], dtype=object))
    stack = {k: np.stack(v, axis=1) for k, v in cols.items()}
    data = RoutingData(
        dataset=dataset.name,
        agent_ids=agent_ids,
        qids=tuple(qids),
        titles=np.array([r.title for r in dataset.records], dtype=object),
        start_ok=stack["start_ok"],
        end_ok=stack["end_ok"],
        em=stack["em"],
        f1=stack["f1"],
        gflops=stack["gflops"],
        answers=stack["answer"],
        confidence=stack["confidence"],
    )
    keep = np.ones(len(qids), bool)
    for s in specs:
        if answers_a_subset(dataset, s, cache):
            keep &= np.isin(qids, list(cache.ids_with(dataset.name, s.id, "confidence")))
    return data if keep.all() else data.take(keep)
