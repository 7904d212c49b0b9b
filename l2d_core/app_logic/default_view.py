"""What users get by default on a pool — the router, and the price λ where it is the furthest above
random mixing of agents on validation articles (:func:`default_router`) — and the validation
ranking behind it, as the pages show it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from ..evaluation.benchmark import Benchmark
from ..evaluation.validation import Ranked, candidates, rank_by_validation, single_agent_score
from ..routers.base import Router
from ..routers.registry import router_label, routers, validated

__all__ = ["PAYS", "DefaultChoice", "default_router", "ranking_frame", "needs_embeddings"]


@dataclass(frozen=True)
class DefaultChoice:
    """What users get by default on a pool: the router, and the price λ (errors per TFLOP) where
    it is the furthest above random mixing on validation articles, by ``gain`` EM points (None:
    no router ready). ``ranking``: every router compared (None: not yet — the router stands in,
    scored alone). Where that router does not pay for itself, the default is the most accurate
    single agent (``agent:<id>``, which random mixing cannot beat) and ``instead_of`` is the
    router that did not pay."""

    router_id: str
    price: float
    gain: float
    ranking: list[Ranked] | None
    instead_of: Ranked | None = None

    @property
    def pays(self) -> bool:
        """Whether the default is above random mixing on validation articles."""
        return self.gain > PAYS


PAYS = 0.05  # EM points above random mixing on validation below which a router does not pay


def default_router(
    bench: Benchmark,
    ready_only: bool = False,
    fitted: Callable[[str], Router] | None = None,
    rank: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
) -> DefaultChoice:
    """The router and cost setting users get by default: the router of the registry that is the
    furthest above random mixing on validation articles (training articles, out of fold), at the
    price λ where it is (:func:`~l2d_core.evaluation.validation.rank_by_validation`), and the
    whole ranking; ``ready_only``: among the routers whose inputs are read in already (a first
    view need not wait for every helper agent: :func:`~l2d_core.evaluation.validation.waiting`
    names the others). ``fitted``: see ``rank_by_validation``. ``rank=False``: a first view
    need not wait for the ranking either — when it is not on disk yet, the first router ready
    (registry order) stands in, scored alone (seconds), and the ranking is None (rank later,
    then ask again). Where the best router is not above random mixing on validation articles
    (by more than :data:`PAYS`), every question goes to the most accurate single agent instead
    (:func:`~l2d_core.evaluation.validation.single_agent_score`), at the router's price.
    ``progress(k, n, router id)`` as each router is scored for the ranking."""
    ids = candidates(bench, ready_only)  # (checking what is read in costs a pass over each store)
    if not ids:
        raise ValueError(f"no router of the registry can run on pool {bench.pool.name}")
    ranking = rank_by_validation(bench, ids, fitted=fitted, compute=rank, progress=progress)
    best = (ranking or rank_by_validation(bench, ids[:1], fitted=fitted))[0]
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
    """The routers ranked on validation that read the question and context embeddings (ranked
    only once those are computed)."""
    return [r for r, c in routers().items() if validated(c) and c.reads_embeddings]
