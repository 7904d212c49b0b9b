"""The arrays a router sees for one dataset split and one pool, read from the agent cache.

Agents missing from the cache are read in first (:mod:`.read_in`: prediction files are imported
on first use, so the benchmark works from a clean checkout; live agents must be precomputed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..data.records import QADataset
from .cache import AgentCache
from .catalog import PoolSpec, get_agent
from .confidence import confidence_score, file_confidences
from .measured import agent_gflops, per_query_gflops
from .prices import answer_prices
from .read_in import answers_a_subset, ensure_cached

__all__ = ["RoutingData", "load_routing_data", "textless_agents"]


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
    score: np.ndarray | None = None  # (N, A) float: each agent's confidence in its answer (NaN = none)
    latency: np.ndarray | None = None  # (N, A) float: each answer's latency in seconds (NaN = none)
    usd: np.ndarray | None = None  # (N, A) float: each answer's price in dollars (NaN = none)

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

    def has_score(self, j: int = 0) -> bool:
        """Whether agent ``j`` (default: the main agent) gave its confidence on every question."""
        return self.score is not None and len(self) > 0 and bool(np.isfinite(self.score[:, j]).all())

    @property
    def has_latency(self) -> bool:
        """Whether every agent's latency is known on every question (a latency price needs it)."""
        return self.latency is not None and len(self) > 0 and bool(np.isfinite(self.latency).all())

    @property
    def has_money(self) -> bool:
        """Whether every agent's price in dollars is known on every question (the money rule needs it)."""
        return self.usd is not None and len(self) > 0 and bool(np.isfinite(self.usd).all())

    @property
    def agent_gflops(self) -> np.ndarray:
        """(A,) mean GFLOPs per query of each agent."""
        return self.gflops.mean(axis=0)

    def take(self, index: np.ndarray) -> RoutingData:
        """Rows selected by a boolean mask or integer index."""
        arr = np.asarray(index)
        idx = np.flatnonzero(arr) if arr.dtype == bool else arr.astype(np.intp, copy=False)
        fields = (
            "titles",
            "start_ok",
            "end_ok",
            "em",
            "f1",
            "gflops",
            "answers",
            "confidence",
            "score",
            "latency",
            "usd",
        )
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


def load_routing_data(
    dataset: QADataset, pool: PoolSpec | tuple[str, ...], cache: AgentCache | None = None
) -> RoutingData:
    """Arrays for every question of ``dataset`` and every agent of ``pool`` (main first).

    A question an agent has no record for counts as wrong for that agent (and is reported
    by the import), except for an agent that answered a subset on purpose
    (:func:`~.read_in.answers_a_subset`): then only the questions it answered are kept. Unknown agent ids
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
        k: [] for k in ("start_ok", "end_ok", "em", "f1", "gflops", "answer", "confidence", "latency", "usd")
    }
    for s in specs:
        t = cache.table(dataset.name, s.id).reindex(qids)
        missing = t["em"].isna().to_numpy()
        if per_query_gflops(s):  # a model that ran: what each query cost; gaps filled with its mean
            gf = t["gflops"].astype(float).to_numpy()
            gf = np.where(np.isnan(gf), np.nanmean(gf) if np.isfinite(gf).any() else s.gflops, gf)
        else:  # declared, or measured from its architecture
            gf = np.full(len(qids), agent_gflops(s))
        cols["start_ok"].append(t["start_ok"].fillna(False).astype(bool).to_numpy() & ~missing)
        cols["end_ok"].append(t["end_ok"].fillna(False).astype(bool).to_numpy() & ~missing)
        cols["em"].append(t["em"].fillna(0.0).astype(float).to_numpy())
        cols["f1"].append(t["f1"].fillna(0.0).astype(float).to_numpy())
        cols["gflops"].append(gf)
        cols["answer"].append(t["answer"].to_numpy(dtype=object))
        conf = t["confidence"] if "confidence" in t else pd.Series(None, index=t.index, dtype=object)
        conf = [c if isinstance(c, dict) else None for c in conf]
        if isinstance(s.options, dict) and s.options.get("confidence_file"):  # kept beside the predictions
            conf = file_confidences(s, qids, t["answer"].tolist())
        cols["confidence"].append(np.array(conf, dtype=object))
        cols["latency"].append(pd.to_numeric(t["latency_ms"], errors="coerce").to_numpy(float) / 1000.0)
        usd = pd.to_numeric(t["usd"] if "usd" in t else pd.Series(np.nan, index=t.index), errors="coerce")
        cols["usd"].append(answer_prices(usd, s.options, f"agent {s.id}").to_numpy(float))
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
        score=np.vectorize(confidence_score, otypes=[float])(stack["confidence"]),
        latency=stack["latency"],
        usd=stack["usd"],
    )
    keep = np.ones(len(qids), bool)
    for s in specs:
        if answers_a_subset(dataset, s, cache):
            keep &= np.isin(qids, list(cache.ids_with(dataset.name, s.id, "confidence")))
    return data if keep.all() else data.take(keep)


def textless_agents(agent_ids: Sequence[str], answers: np.ndarray) -> list[str]:
    """The agents (columns of ``answers``, (N, A)) with no answer text on any question: known by
    their outcome log only.

    >>> textless_agents(("g", "m"), np.array([[None, "a"], [None, ""]], dtype=object))
    ['g']
    """
    a = np.asarray(answers, dtype=object)
    if a.ndim != 2 or len(a) == 0:
        return []
    return [agent for j, agent in enumerate(agent_ids) if all(x is None for x in a[:, j])]
