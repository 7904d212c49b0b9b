"""What users get by default on a pool — the router, and the price λ where it is the furthest above
random mixing of agents on validation articles (:func:`default_router`) — and the validation
ranking behind it, as the pages show it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from ..agents.read_in import import_agents
from ..evaluation.benchmark import Benchmark
from ..evaluation.validation import Ranked, candidates, rank_by_validation, single_agent_score, waiting
from ..routers.base import Router
from ..routers.registry import router_label, routers, validated

__all__ = [
    "PAYS",
    "DefaultChoice",
    "default_candidates",
    "default_router",
    "ranking_frame",
    "needs_embeddings",
]


@dataclass(frozen=True)
class DefaultChoice:
    """What users get by default on a pool: the router, and the price λ (errors per TFLOP) where
    it is the furthest above random mixing on validation articles, by ``gain`` EM points, and the
    ``ranking`` of every candidate (:func:`default_candidates`). Where that router does not pay
    for itself, the default is the most accurate single agent (``agent:<id>``, which random
    mixing cannot beat) and ``instead_of`` is the router that did not pay."""

    router_id: str
    price: float
    gain: float
    ranking: list[Ranked]
    instead_of: Ranked | None = None

    @property
    def pays(self) -> bool:
        """Whether the default is above random mixing on validation articles."""
        return self.gain > PAYS


PAYS = 0.05  # EM points above random mixing on validation below which a router does not pay


def default_candidates(bench: Benchmark) -> list[str]:
    """The routers the default is chosen among: those ranked on validation articles that read no
    question/context embeddings. So the default is a pure function of the pool's data and the
    code — it never waits for the encoder, and never changes once the embeddings are computed
    (the routers that read them are ranked apart: :func:`needs_embeddings`)."""
    return [rid for rid in candidates(bench) if not routers()[rid].reads_embeddings]


def default_router(
    bench: Benchmark,
    fitted: Callable[[str], Router] | None = None,
    rank: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
) -> DefaultChoice | None:
    """The router and cost setting users get by default: the candidate (:func:`default_candidates`)
    furthest above random mixing on validation articles (training articles, out of fold), at the
    price λ where it is (:func:`~l2d_core.evaluation.validation.rank_by_validation`, memoized on
    disk), with the whole ranking. Agents the candidates read that are not read in yet
    (:func:`~l2d_core.evaluation.validation.waiting`) are read in first — a default chosen among
    fewer routers would change once they are (a page reads them in first, with its progress bar);
    with ``rank=False`` nothing is read in or fitted, and the answer is None when the ranking is
    not on disk yet. ``fitted``: see ``rank_by_validation``. Where the best router is not above random
    mixing on validation articles (by more than :data:`PAYS`), every question goes to the most
    accurate single agent instead (:func:`~l2d_core.evaluation.validation.single_agent_score`),
    at the router's price. ``progress(k, n, router id)`` as each router is scored."""
    if rank and (pending := waiting(bench)):
        import_agents(bench.dataset, sorted({a for todo in pending.values() for a in todo}))
    ids = default_candidates(bench)
    if not ids:
        raise ValueError(f"no router of the registry can run on pool {bench.pool.name}")
    ranking = rank_by_validation(bench, ids, fitted=fitted, compute=rank, progress=progress)
    if ranking is None:
        return None
    best = ranking[0]
    if best.gain > PAYS:
        return DefaultChoice(best.router_id, best.price, best.gain, ranking)
    agent = single_agent_score(bench)  # a default that loses to random mixing would be a bug
    return DefaultChoice(agent.router_id, best.price, agent.gain, ranking, instead_of=best)


def ranking_frame(ranking: list[Ranked]) -> pd.DataFrame:
    """The validation ranking as a table: router, EM above random mixing, at which λ, AIQ."""
    return pd.DataFrame(
        [(router_label(r.router_id), r.gain, r.price, r.aiq) for r in ranking],
        columns=["router", "EM above random mixing", "at λ (errors per TFLOP)", "AIQ (EM %)"],
    )


def needs_embeddings() -> list[str]:
    """The routers ranked on validation that read the question and context embeddings: ranked
    apart, once those are computed, and never the default (:func:`default_candidates`)."""
    return [r for r, c in routers().items() if validated(c) and c.reads_embeddings]
