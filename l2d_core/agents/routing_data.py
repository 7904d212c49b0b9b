"""The arrays a router sees for one dataset split and one pool, read from the agent cache.

Agents missing from the cache are read in first (:mod:`.read_in`: prediction files are imported
on first use, so the benchmark works from a clean checkout; live agents must be precomputed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..data.records import QADataset
from .cache import AgentCache
from .catalog import PoolSpec, get_agent
from .confidence import confidence_score, file_confidences
from .measured import agent_gflops, per_query_gflops
from .prices import answer_prices
from .read_in import answers_a_subset, ensure_cached

__all__ = ["RoutingData", "load_routing_data", "textless_agents"]

READ_FIELDS = ("answer", "start_ok", "end_ok", "em", "f1", "gflops", "latency_ms", "confidence", "usd")


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
        has, rec = cache.rows(dataset.name, s.id, qids, READ_FIELDS)
        em = numbers(rec["em"])
        missing = np.isnan(em)
        if per_query_gflops(s):  # a model that ran: what each query cost; gaps filled with its mean
            gf = numbers(rec["gflops"])
            gf = np.where(np.isnan(gf), np.nanmean(gf) if np.isfinite(gf).any() else s.gflops, gf)
        else:  # declared, or measured from its architecture
            gf = np.full(len(qids), agent_gflops(s))
        cols["start_ok"].append(flags(rec["start_ok"]) & ~missing)
        cols["end_ok"].append(flags(rec["end_ok"]) & ~missing)
        cols["em"].append(np.nan_to_num(em, nan=0.0))
        cols["f1"].append(np.nan_to_num(numbers(rec["f1"]), nan=0.0))
        cols["gflops"].append(gf)
        answers = answer_texts(rec["answer"], has)
        cols["answer"].append(answers)
        conf = [c if isinstance(c, dict) else None for c in rec["confidence"]]
        if isinstance(s.options, dict) and s.options.get("confidence_file"):  # kept beside the predictions
            conf = file_confidences(s, qids, answers.tolist())
        cols["confidence"].append(np.array(conf, dtype=object))
        cols["latency"].append(numbers(rec["latency_ms"]) / 1000.0)
        cols["usd"].append(answer_prices(numbers(rec["usd"]), s.options, f"agent {s.id}"))
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


def numbers(values: Sequence) -> np.ndarray:
    """Recorded values as floats: NaN for None and for what is not a number.

    >>> numbers([1, None, "2.5", "x", True]).tolist()
    [1.0, nan, 2.5, nan, 1.0]
    """
    try:
        return np.array(values, dtype=float).reshape(len(values))
    except (TypeError, ValueError):
        return np.array([_number(v) for v in values], dtype=float)


def _number(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def flags(values: Sequence) -> np.ndarray:
    """Recorded true/false values as bools: False for None and NaN.

    >>> flags([True, None, float("nan"), 0, 1]).tolist()
    [True, False, False, False, True]
    """
    return np.array([v is not None and v == v and bool(v) for v in values], dtype=bool)


def answer_texts(values: Sequence, has: Sequence[bool]) -> np.ndarray:
    """An agent's answers to the asked questions, as the routing data has always held them: NaN
    for a question it has no record of; where it has any text, NaN also for a record without
    one (a text column's missing value); None for a record without text in a log of none.

    >>> answer_texts(["a", None, None], [True, True, False]).tolist()
    ['a', nan, nan]
    >>> answer_texts([None, None], [True, False]).tolist()
    [None, nan]
    """
    texts = any(isinstance(v, str) for v in values)
    nan = float("nan")
    out = [v if h and (v is not None or not texts) else nan for v, h in zip(values, has)]
    return np.array(out + [None], dtype=object)[:-1]  # the None: never a 2-d array of characters


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
