"""What users get by default on a pool — the router, and the price where it is the furthest above
random mixing of agents on validation articles (:func:`default_router`: λ per TFLOP, λ_s per
second of latency on a pool that logs every agent's latency, or λ$ per dollar on a pool whose
answers have prices) — and the validation ranking behind it, as the pages show it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..agents.read_in import import_agents
from ..evaluation.benchmark import Benchmark
from ..evaluation.validation import (
    Ranked,
    candidates,
    default_rule,
    rank_by_validation,
    ranking_key,
    ranking_scores,
    single_agent_score,
    waiting,
)
from ..routers.base import Router
from ..routers.registry import router_label, routers, validated

if TYPE_CHECKING:
    import pandas as pd


__all__ = [
    "PRICE_UNITS",
    "price_column",
    "DefaultChoice",
    "default_candidates",
    "default_router",
    "default_ranking_memo",
    "ranking_frame",
    "needs_embeddings",
]


@dataclass(frozen=True)
class DefaultChoice:
    """What users get by default on a pool: the router, and the price where it is the furthest
    above random mixing on validation articles, by ``gain`` EM points, and the ``ranking`` of
    every candidate (:func:`default_candidates`). The price is of the pool's cost ``rule``
    (:func:`~l2d_core.evaluation.validation.default_rule`): λ in errors per TFLOP (``price``),
    λ_s in errors per second of latency (``latency``, where every agent's latency is logged), or
    λ$ in errors per dollar (``money``, where every answer has its price).
    Where that router does not pay for itself (the low end of its gain's 95% interval is not
    above 0: :meth:`~l2d_core.evaluation.validation.Ranked.pays`), the default is the most
    accurate single agent (``agent:<id>``, which random mixing cannot beat) and ``instead_of``
    is the router that did not pay."""

    router_id: str
    price: float
    gain: float
    ranking: list[Ranked]
    instead_of: Ranked | None = None
    rule: str = "price"

    @property
    def unpaid_gain(self) -> float | None:
        """EM points above random mixing of the router that did not pay (``instead_of``), under
        the default's rule (None where the default is a router)."""
        return None if self.instead_of is None else self.instead_of.best(self.rule)[0]

    @property
    def unpaid_low(self) -> float | None:
        """The low end of that gain's 95% interval (None where the default is a router)."""
        return None if self.instead_of is None else self.instead_of.low(self.rule)

    @property
    def setting_words(self) -> str:
        """The default price in words: ``λ = 0.07 errors per TFLOP``."""
        symbol, unit = PRICE_UNITS[self.rule]
        return f"{symbol} = {self.price:g} {unit}"

    def costs(self, bench: Benchmark):
        """The default cost setting on ``bench`` (its rule at its price)."""
        return bench.rule_costs(self.rule, self.price)

    @property
    def pays(self) -> bool:
        """Whether the default is a router above random mixing on validation articles."""
        return self.instead_of is None


def default_candidates(bench: Benchmark) -> list[str]:
    """The routers the default is chosen among: those ranked on validation articles that read no
    question/context embeddings. So the default is a pure function of the pool's data and the
    code — it never waits for the encoder, and never changes once the embeddings are computed
    (the routers that read them are ranked apart: :func:`needs_embeddings`)."""
    return [rid for rid in candidates(bench) if not routers()[rid].reads_embeddings]


def read_in_waiting(bench: Benchmark) -> None:
    """The answers the default's candidates read (:func:`~l2d_core.evaluation.validation.waiting`),
    read in where they are not yet."""
    if pending := waiting(bench):
        import_agents(bench.dataset, sorted({a for todo in pending.values() for a in todo}))


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
    mixing on validation articles (its whole 95% interval above 0), every question goes to the most
    accurate single agent instead (:func:`~l2d_core.evaluation.validation.single_agent_score`),
    at the router's price. ``progress(k, n, router id)`` as each router is scored."""
    if rank:
        read_in_waiting(bench)
    ids = default_candidates(bench)
    if not ids:
        raise ValueError(f"no router of the registry can run on pool {bench.pool.name}")
    ranking = rank_by_validation(bench, ids, fitted=fitted, compute=rank, progress=progress)
    if ranking is None:
        return None
    rule = default_rule(bench)
    ranking = sorted(ranking, key=lambda r: -r.best(rule)[0])
    best = ranking[0]
    gain, price = best.best(rule)
    if best.pays(rule):
        return DefaultChoice(best.router_id, price, gain, ranking, rule=rule)
    agent = single_agent_score(bench)  # a default that loses to random mixing would be a bug
    return DefaultChoice(agent.router_id, price, agent.gain, ranking, instead_of=best, rule=rule)


def default_ranking_memo(bench: Benchmark) -> tuple[str, dict]:
    """The memo key of ``bench``'s default ranking (:func:`default_router`) and its arrays, computed
    now (never read from a memo): what ``scripts/rank_pools.py --ship`` ships with the package, so
    that a fresh clone's first view of a built-in pool ranks nothing."""
    read_in_waiting(bench)
    ids = default_candidates(bench)
    return ranking_key(bench, ids), ranking_scores(bench, ids)


# each default rule's price: its symbol and unit, as every page writes it
PRICE_UNITS = {
    "price": ("λ", "errors per TFLOP"),
    "latency": ("λₛ", "errors per second"),
    "money": ("λ$", "errors per dollar"),
}


def price_column(rule: str) -> str:
    """The ranking table's price column under ``rule``: ``at λ (errors per TFLOP)``."""
    symbol, unit = PRICE_UNITS[rule]
    return f"at {symbol} ({unit})"


def ranking_frame(ranking: list[Ranked], rule: str = "price") -> pd.DataFrame:
    """The validation ranking as a table, best first under ``rule``: router, EM above random
    mixing, at which price of ``rule`` (λ per TFLOP, or λ_s per second of latency), the low end
    of that gain's 95% interval, AIQ."""
    import pandas as pd  # here, not at the top: the first view's tiles import no pandas

    ranking = sorted(ranking, key=lambda r: -r.best(rule)[0])
    return pd.DataFrame(
        [(router_label(r.router_id), *r.best(rule), r.low(rule), r.aiq) for r in ranking],
        columns=["router", "EM above random mixing", price_column(rule), "95% interval from", "AIQ (EM %)"],
    )


def needs_embeddings() -> list[str]:
    """The routers ranked on validation that read the question and context embeddings: ranked
    apart, once those are computed, and never the default (:func:`default_candidates`)."""
    return [r for r, c in routers().items() if validated(c) and c.reads_embeddings]
