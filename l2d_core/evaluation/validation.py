"""Routers compared on validation articles only — the training articles, each scored out of fold
— so that the router and the cost setting users get by default are chosen without looking at
the test articles.

Each ranked router (the plug-in routers, the two-stage cascade) is traced on the training
articles from its out-of-fold error estimates at every price λ of :func:`price_grid` (errors per
TFLOP, the per-TFLOP price rule): at each, its EM above random mixing of the single agents at
the same mean compute (:mod:`~l2d_core.evaluation.gain`). A router's score is its best such gain
and the price where it is reached; its validation AIQ (area under that curve's hull over the
pool's GFLOPs range, the curve closed at its cheap end by the router at a price where no expert
call is worth it) is kept beside it, and so is the low end of that best gain's 95% bootstrap
interval over the training questions: a router pays for itself as the default only where it is
above 0 (:meth:`Ranked.pays`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import NamedTuple

import numpy as np

from ..routers import trained
from ..routers.base import Router
from ..routers.posthoc_inputs import FEATURE_FORMAT
from ..routers.registry import AGENT_PREFIX, make_router, routers, validated
from . import metrics as M
from .benchmark import Benchmark
from .gain import gain_over_mixing, gain_vector

__all__ = [
    "PRICE_GRID",
    "LATENCY_GRID",
    "default_rule",
    "NO_DEFERRAL_PRICE",
    "price_grid",
    "Ranked",
    "validation_curve",
    "validation_score",
    "single_agent_score",
    "rank_by_validation",
    "ranking_key",
    "ranking_params",
    "ranking_scores",
    "candidates",
    "waiting",
]

RANKING_KIND = "validation-ranking-6"  # 6: out-of-fold from cross-fitted heads; each best gain's interval
# λ (errors per TFLOP) at which routers are compared and defaults are chosen (a pool whose experts
# need a log price scale, a remote LLM's, is compared at the prices of that scale: price_grid)
PRICE_GRID: tuple[float, ...] = (0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0)
# λ at which no expert is worth calling: the router's cheapest point, where its AIQ curve starts (the
# grid's dearest price still calls experts on doubtful questions: P3-albert's two-stage cascade
# spends 37 GFLOPs there, and counting 0 EM below that put its AIQ 1.3 EM low)
NO_DEFERRAL_PRICE = 1e6


# λ_s (errors per second of an expert's extra mean latency) at which routers are compared on pools
# that log every agent's latency (the dashboard's latency slider offers the same values)
LATENCY_GRID = (0.0, 0.01, 0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0)


def default_rule(bench: Benchmark) -> str:
    """The cost rule users start from on ``bench``'s pool: the money price where every answer has
    its price in dollars and an expert costs more than the main agent (what such a pool's costs
    are), else the latency price where every agent's latency is logged, else the per-TFLOP price."""
    if bench.has_money and bench.money_prices:
        return "money"
    return "latency" if bench.has_latency else "price"


def rule_grid(bench: Benchmark, rule: str) -> tuple[float, ...]:
    """The values of ``rule`` (``price``, ``latency`` or ``money``) at which routers are compared
    on ``bench``: the money prices are the pool's own (the cost explorer's money slider)."""
    if rule == "money":
        return bench.money_prices
    return LATENCY_GRID if rule == "latency" else price_grid(bench)


def price_grid(bench: Benchmark) -> tuple[float, ...]:
    """The prices λ at which routers are compared on ``bench``: :data:`PRICE_GRID`, or the
    benchmark's log price scale where its experts need one (the dashboard's slider offers the
    same prices, so the default price is one of them)."""
    return bench.log_prices or PRICE_GRID


class Ranked(NamedTuple):
    """A router's validation score: ``gain`` (EM points above random mixing, out of fold, at its
    best price), that ``price`` (λ, errors per TFLOP) and its validation ``aiq``; on a pool that
    logs latency, the same at its best latency price (``latency_gain`` at ``latency_price`` λ_s,
    errors per second; None elsewhere), and on a pool whose answers have prices, at its best
    money price (``money_gain`` at ``money_price`` λ$, errors per dollar). ``gain_low``
    (``latency_gain_low``, ``money_gain_low``): the low end of that gain's 95% bootstrap interval
    over the training questions."""

    router_id: str
    gain: float
    price: float
    aiq: float
    latency_gain: float | None = None
    latency_price: float | None = None
    gain_low: float = np.nan
    latency_gain_low: float | None = None
    money_gain: float | None = None
    money_price: float | None = None
    money_gain_low: float | None = None

    def best(self, rule: str) -> tuple[float, float]:
        """``(gain, price)`` under ``rule`` (``price``, ``latency`` or ``money``)."""
        if rule == "money":
            return self.money_gain, self.money_price
        return (self.latency_gain, self.latency_price) if rule == "latency" else (self.gain, self.price)

    def low(self, rule: str) -> float:
        """The low end of the best gain's 95% interval under ``rule``."""
        if rule == "money":
            return self.money_gain_low
        return self.latency_gain_low if rule == "latency" else self.gain_low

    def pays(self, rule: str) -> bool:
        """Above random mixing on validation under ``rule``: its whole 95% interval above 0."""
        return bool(self.low(rule) > 0)


def validation_curve(router: Router, rule: str = "price") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean GFLOPs per query, EM %, EM above random mixing %) of a fitted router (``validated``)
    on the training articles, one point per value of ``rule``'s grid (:func:`price_grid`, or
    :data:`LATENCY_GRID`), out of fold."""
    return _curve(router, rule)[:3]


def _curve(router: Router, rule: str):
    """:func:`validation_curve`, the EM (0/1) per training question at each point, and what each
    point spent per question in the unit random mixing is matched on (GFLOPs, or dollars on a
    pool whose answers have prices: :meth:`~l2d_core.evaluation.benchmark.Benchmark.mixing_cost`)."""
    bench = router.bench_
    train, priced = bench.train, bench.has_money
    agent_cost = bench.mixing_cost("train")
    cost, em, gain, outcomes, spent = [], [], [], [], []
    for lam in rule_grid(bench, rule):
        costs = bench.rule_costs(rule, lam)
        g, ok = router.oof_outcome(costs)
        cost.append(float(g.mean()))
        spent.append(float(router.oof_outcome(costs, paid="usd")[0].mean()) if priced else cost[-1])
        em.append(100 * float(ok.mean()))
        gain.append(100 * float(gain_vector(ok, train.em, agent_cost, spent[-1]).mean()))
        outcomes.append(ok)
    return np.array(cost), np.array(em), np.array(gain), outcomes, spent


def _low(router: Router, ok: np.ndarray, spent: float) -> float:
    """The low end of the 95% bootstrap interval (over the training questions) of the EM above
    random mixing of out-of-fold outcomes ``ok`` that spent ``spent`` per question (in the unit
    mixing is matched on)."""
    bench = router.bench_
    return gain_over_mixing(ok, bench.train.em, bench.mixing_cost("train"), spent)[1][0]


def validation_score(router: Router) -> tuple[float, float, float, float]:
    """``(best gain over mixing, its λ, AIQ, the gain's 95% low end)`` of :func:`validation_curve`;
    the AIQ's curve also holds the router's point at :data:`NO_DEFERRAL_PRICE` (what it pays and
    gets when no expert is worth calling: the main agent and whatever the router itself runs on
    every question)."""
    bench = router.bench_
    g = bench.train.agent_gflops
    cost, em, gain, outcomes, spent = _curve(router, "price")
    k = int(np.argmax(gain))
    low = _low(router, outcomes[k], spent[k])
    least, ok = router.oof_outcome(bench.price_costs(NO_DEFERRAL_PRICE))
    cost, em = np.append(cost, least.mean()), np.append(em, 100 * float(ok.mean()))
    aiq = M.aiq(cost, em, float(g.min()), float(g.max()))
    return float(gain[k]), float(price_grid(bench)[k]), aiq, low


def rule_score(router: Router, rule: str) -> tuple[float, float, float]:
    """``(best gain over mixing, its price, the gain's 95% low end)`` on ``rule``'s grid
    (:func:`rule_grid`): the latency rule where the pool logs latency, the money rule where its
    answers have prices."""
    _, _, gain, outcomes, spent = _curve(router, rule)
    k = int(np.argmax(gain))
    return float(gain[k]), float(rule_grid(router.bench_, rule)[k]), _low(router, outcomes[k], spent[k])


def candidates(bench: Benchmark, ready_only: bool = False) -> list[str]:
    """The registry's routers ranked on validation (those with ``oof_outcome``: the plug-in routers and the
    two-stage cascade) that can run on ``bench``'s pool (ex-ante ones need embeddings);
    ``ready_only``: only those whose inputs are read in already (see :func:`waiting`)."""
    return [
        rid
        for rid, cls in routers().items()
        if validated(cls)
        and (bench.has_embeddings or not cls.reads_embeddings)
        and cls.unavailable(bench) is None
        and not (ready_only and make_router(rid).agents_to_import(bench))
    ]


def waiting(bench: Benchmark) -> dict[str, tuple[str, ...]]:
    """The candidates that read agents whose answers are not read in yet: router id → agents."""
    todo = {rid: make_router(rid).agents_to_import(bench) for rid in candidates(bench)}
    return {rid: agents for rid, agents in todo.items() if agents}


def single_agent_score(bench: Benchmark) -> Ranked:
    """The most accurate single agent on the training articles (ties: the cheaper), as
    ``agent:<id>``, scored as the routers are: its EM above random mixing of the single agents at
    its own mean compute — 0, since the most accurate agent tops their hull, so mixing cannot beat
    it — and its AIQ over the pool's GFLOPs range (its price: any; 0 here)."""
    train = bench.train
    g, em, mix = train.gflops.mean(axis=0), train.em.mean(axis=0), bench.mixing_cost("train")
    j = min(range(len(em)), key=lambda k: (-em[k], mix[k]))
    gain = 100 * float(gain_vector(train.em[:, j].astype(float), train.em, mix, float(mix[j])).mean())
    lo, hi = float(train.agent_gflops.min()), float(train.agent_gflops.max())
    aiq = M.aiq(g[j : j + 1], 100 * em[j : j + 1], lo, hi)
    return Ranked(AGENT_PREFIX + train.agent_ids[j], gain, 0.0, aiq)


def ranking_params(bench: Benchmark, ids: Sequence[str]) -> dict:
    """What a ranking of routers ``ids`` depends on besides the benchmark: each router's class and
    settings, what routers read, and the price grids (part of its memo's key)."""
    params: dict = {}
    for rid in ids:
        router = make_router(rid)
        params[rid] = [type(router).__name__, repr(sorted(router.params.items()))]
    latency, money = bench.has_latency, rule_grid(bench, "money") if bench.has_money else None
    # what routers read, or the prices, changed
    params["formats"] = [FEATURE_FORMAT, price_grid(bench), LATENCY_GRID if latency else None]
    params["formats"] += [money] if money else []
    return params


def ranking_key(bench: Benchmark, ids: Sequence[str]) -> str:
    """The memo key of the ranking of routers ``ids`` on ``bench`` (:func:`rank_by_validation`)."""
    return trained.artifact_key(RANKING_KIND, bench, ranking_params(bench, ids), bench.has_embeddings)


def ranking_scores(
    bench: Benchmark,
    ids: Sequence[str],
    fit: Callable[[str], Router] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, np.ndarray]:
    """What :func:`rank_by_validation` memoizes, computed: the router ``ids`` and, per router, its
    scores (price rule: gain, λ, AIQ; latency rule: gain, λ_s; the price gain's low end; the
    latency gain's low end; money rule: gain, λ$, low end; NaN where the pool has no such rule)."""
    fit = fit or (lambda rid: make_router(rid).fit(bench))
    latency, money = bench.has_latency, bench.has_money
    scores = []
    for k, rid in enumerate(ids, start=1):
        router = fit(rid)
        gain, lam, aiq, low = validation_score(router)
        lat = rule_score(router, "latency") if latency else (np.nan,) * 3
        usd = rule_score(router, "money") if money else (np.nan,) * 3
        scores.append([gain, lam, aiq, *lat[:2], low, lat[2], *usd])
        if progress:
            progress(k, len(ids), rid)
    return {"ids": np.array(list(ids), dtype=str), "scores": np.array(scores, dtype=float).reshape(-1, 10)}


def rank_by_validation(
    bench: Benchmark,
    router_ids: Sequence[str] | None = None,
    ready_only: bool = False,
    fitted: Callable[[str], Router] | None = None,
    compute: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[Ranked] | None:
    """:class:`Ranked` scores, best gain first, for the plug-in routers of the registry (with
    ``ready_only``: those whose inputs are read in already); memoized on disk (keyed by the
    benchmark and every router's settings), so only the first ranking of a pool on a machine
    fits the out-of-fold heads (the built-in pools' default rankings ship with the package:
    :data:`~l2d_core.routers.trained.SHIPPED`). ``fitted(router id)``: where the fitted routers come from (a
    caller that keeps them, such as the dashboard, fits each once for the ranking and its use).
    ``compute=False``: the ranking only when it is on disk already, else None (nothing is fitted).
    ``progress(k, n, router id)``: called as each router is scored, when the ranking is computed."""
    ids = candidates(bench, ready_only) if router_ids is None else list(router_ids)
    compute_scores = partial(ranking_scores, bench, ids, fitted, progress) if compute else None
    memo = trained.memo_arrays(
        RANKING_KIND, bench, ranking_params(bench, ids), compute_scores, bench.has_embeddings
    )
    if memo is None:
        return None
    ranked = [  # a pool without latency (prices) stores NaN for the latency (money) scores
        Ranked(
            str(r),
            *map(float, s[:3]),
            *(None if np.isnan(x) else float(x) for x in s[3:5]),
            float(s[5]),
            *(None if np.isnan(x) else float(x) for x in s[6:]),
        )  # fmt: skip
        for r, s in zip(memo["ids"], memo["scores"])
    ]
    return sorted(ranked, key=lambda r: -r.gain)
