"""The cost explorer without UI: a cost setting goes in, one :class:`ExplorerView` comes out —
each chosen router's decision and metrics, the metric tiles with their changes, the allocation
and the points of the cost–EM plane. β₁ sweeps are computed here too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from ..evaluation import metrics as M
from ..evaluation.benchmark import BETA_POINTS, PRICE_POINTS, Benchmark
from ..evaluation.budget_results import BudgetResult, budget_decision
from ..evaluation.curve_summary import aiq_cost
from ..evaluation.gain import gain_over_mixing
from ..evaluation.points import decision_metrics
from ..method.costs import LATENCY_POINTS, RULE_FIELDS, CostConfig, cost_matrix, realised_usd
from ..method.policies import oracle_policy, random_policy
from ..routers.base import Router, supports_budget
from ..routers.decision import Decision
from ..routers.registry import router_label
from .tiles import metric_tiles

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "RouterView",
    "ExplorerView",
    "router_view",
    "explore",
    "metric_tiles",
    "cost_em_points",
    "allocation_frame",
    "sweep_frame",
    "sweep_points",
    "untrained_settings",
    "SWEEPS",
    "budget_words",
]


@dataclass(frozen=True, eq=False)
class RouterView:
    """One router at one cost setting (or budget) on the test articles."""

    router_id: str
    label: str
    costs: CostConfig
    decision: Decision
    metrics: dict  # SPEC §7 metrics, with ``gain`` (EM above random mixing) and ``gain_ci``
    budget: BudgetResult | None = None  # the followed budget, when the view is under one


@dataclass(frozen=True, eq=False)
class ExplorerView:
    """What the cost explorer shows for one cost setting."""

    costs: CostConfig
    views: tuple[RouterView, ...]
    tiles: dict[str, list[dict]]  # router id → metric tiles
    below_zero: tuple[str, ...] = ()  # ids of the routers below the zero router's line
    bench: Benchmark | None = field(default=None, repr=False)  # where the plane's other points come from

    # the charts' tables, built when a chart draws them (after the tiles, which import no pandas)
    @cached_property
    def allocation(self) -> pd.DataFrame:
        """Router, agent, share."""
        return allocation_frame(self.views)

    @cached_property
    def plane(self) -> pd.DataFrame:
        """Name, kind, cost (GFLOPs or dollars per 1,000 questions), EM."""
        return cost_em_points(self.bench, self.costs, self.views)


def router_view(
    bench: Benchmark, router: Router, costs: CostConfig, budget: tuple[str, float] | None = None
) -> RouterView:
    """A fitted router's decision at ``costs`` — or under ``budget`` = (kind, target) when the
    router can calibrate one (:mod:`~l2d_core.evaluation.budget_results`) — and every SPEC §7 metric."""
    result = None
    if budget is not None and supports_budget(router):
        d, result = budget_decision(router, costs, *budget)
    else:
        d = router.decide(costs)
    m, q = decision_metrics(bench, d, costs)
    test = bench.test
    spent = m["usd_per_1k"] / 1000.0 if bench.has_money else m["gflops_per_query"]  # mixing's unit
    m["gain"], m["gain_ci"] = gain_over_mixing(q["em"], test.em, bench.mixing_cost("test"), spent)
    return RouterView(router.id, router_label(router.id), costs, d, m, result)


def explore(
    bench: Benchmark,
    routers: Mapping[str, Router],
    costs: CostConfig,
    previous: Mapping[str, dict] | None = None,
    budget: tuple[str, float] | None = None,
) -> ExplorerView:
    """Every fitted router of ``routers`` at ``costs`` (under ``budget`` where a router can meet
    one); ``previous`` holds each router's metrics at the setting shown before (the tiles'
    changes)."""
    views = tuple(router_view(bench, r, costs, budget) for r in routers.values())
    prev = previous or {}
    below = tuple(v.router_id for v in views if v.metrics["gain"] < -1e-9)
    tiles = {v.router_id: metric_tiles(v.metrics, prev.get(v.router_id)) for v in views}
    return ExplorerView(costs, views, tiles, below, bench)


def cost_em_points(bench: Benchmark, costs: CostConfig, views=()) -> pd.DataFrame:
    """Points of the cost–EM plane: single agents, the zero-router hull, oracle, random, views —
    the cost in GFLOPs per query (``gflops``), or on a pool whose answers have prices in dollars
    per 1,000 questions as the money rule counts them (``usd_per_1k``)."""
    import pandas as pd  # here, not at the top: the first view's tiles import no pandas

    test, priced, axis = bench.test, bench.has_money, aiq_cost(bench)
    col, alone = axis.point, axis.scale * bench.mixing_cost("test")
    rows = [
        {"name": a, "kind": "agent", col: float(alone[j]), "em": 100 * float(test.em[:, j].mean())}
        for j, a in enumerate(test.agent_ids)
    ]
    hc, hq = M.upper_hull(np.array([r[col] for r in rows]), np.array([r["em"] for r in rows]))
    rows += [{"name": "zero router", "kind": "hull", col: c, "em": q} for c, q in zip(hc, hq)]
    oracle = oracle_policy(cost_matrix(test.errors, costs), test.gflops)
    rand = random_policy(len(test), test.n_agents, seed=0)
    for name, choice in (("oracle", oracle), ("random", rand)):
        paid = (
            1000.0 * realised_usd(test.usd, choice).mean() if priced else M.mean_gflops(choice, test.gflops)
        )
        rows.append({"name": name, "kind": "baseline", col: paid, "em": 100 * M.chosen_mean(test.em, choice)})
    for v in views:
        rows.append({"name": v.label, "kind": "router", col: v.metrics[col if priced else "gflops_per_query"],
                     "em": v.metrics["em"]})  # fmt: skip
    return pd.DataFrame(rows)


def allocation_frame(views) -> pd.DataFrame:
    """Allocation ratios of each view, long format: router, agent, share."""
    import pandas as pd

    return pd.DataFrame(
        [
            {"router": v.label, "agent": a, "share": s}
            for v in views
            for a, s in v.metrics["allocation"].items()
        ]
    )


SWEEPS = {  # rule → column, points (money: on the pool's own log scale, Benchmark.money_prices)
    rule: (RULE_FIELDS[rule], points)
    for rule, points in (
        ("gflops", BETA_POINTS),
        ("price", PRICE_POINTS),
        ("latency", LATENCY_POINTS),
        ("money", ()),
    )
}


def sweep_points(rule: str, log_prices: tuple[float, ...] | None = None, end: float | None = None):
    """The settings a sweep shows: the rule's BENCHMARK.md points, or on a log price slider
    (``log_prices``: a remote LLM's per-TFLOP prices, or the money rule's prices) 0, its stops at
    1, 2 and 5 per decade and its end, for a symlog axis; ``end``: the slider's top, added where
    the points stop short of it.

    >>> sweep_points("price") == SWEEPS["price"][1]
    True
    >>> sweep_points("price", end=2.0)[-3:]
    (0.5, 1.0, 2.0)
    >>> sweep_points("price", (0.0, 0.0015, 0.002, 0.003, 0.005, 0.007, 0.01, 0.015))
    (0.0, 0.002, 0.005, 0.01, 0.015)
    """
    if rule not in ("price", "money") or not log_prices:
        points = SWEEPS[rule][1]
    else:
        keep = [p for p in log_prices[1:] if f"{p:.1e}"[:3] in ("1.0", "2.0", "5.0")]
        points = (0.0, *keep, *([log_prices[-1]] if not keep or keep[-1] != log_prices[-1] else []))
    return points + ((float(end),) if end is not None and end > points[-1] * (1 + 1e-9) else ())


def sweep_frame(
    bench: Benchmark, router: Router, rule: str = "gflops", alpha=1.0, points: tuple[float, ...] | None = None
) -> pd.DataFrame:
    """One row per setting of a cost rule (β₁ of the GFLOPs rule, the per-TFLOP price λ, the
    latency price λ_s or the money price λ_$; at fixed α; ``points``, by default BENCHMARK.md's or
    the pool's money prices): EM, GFLOPs/EM, TDL, random TDL and allocation shares of a fitted
    router; the setting is in column ``beta1``, ``price``, ``latency_price`` or ``money_price``."""
    import pandas as pd

    column = SWEEPS[rule][0]
    if points is None:
        points = sweep_points(rule, bench.money_prices if rule == "money" else None)
    rows = []
    for b in points:
        m = router_view(bench, router, bench.rule_costs(rule, b, alpha)).metrics
        rows.append(
            {
                column: b,
                "router": router_label(router.id),
                "em": m["em"],
                "gflops_per_em": m["gflops_per_em"],
                "tdl": m["tdl"],
                "tdl_random": m["tdl_random"],
                "tdl_random_matched": m["tdl_random_matched"],
                **{f"share {a}": s for a, s in m["allocation"].items()},
            }
        )
    return pd.DataFrame(rows)


def untrained_settings(
    bench: Benchmark, router: Router, rule: str = "gflops", alpha=1.0, points: tuple[float, ...] | None = None
) -> list[float]:
    """The points of a cost rule's sweep at which ``router`` would first have to train."""
    points = sweep_points(rule) if points is None else points
    return [b for b in points if router.needs_training(bench.rule_costs(rule, b, alpha))]


def budget_words(b: BudgetResult) -> str:
    """One sentence of what a followed budget did: the target, what was realised on the test
    articles with its interval, where it started and why it could not be met, when it could not.

    >>> from l2d_core.evaluation.budget_results import BudgetResult
    >>> b = BudgetResult("share", 0.3, 0.41, 0.37, 0.3, 120.0, 0.302, (0.284, 0.32), 150.0, (140.0, 160.0),
    ...                  (0.0, 1.0))
    >>> budget_words(b)[:81]
    'Budget 30.0% of questions to an expert: 30.2% on the test articles (95% interval '
    >>> b = BudgetResult("gflops", 900.0, 0.41, 0.37, 0.3, 120.0, 0.302, (0.284, 0.32), 150.0,
    ...                  (140.0, 160.0), (5.0, 150.0), "it spends at most 150.0 GFLOPs per query")
    >>> budget_words(b)[-42:]
    ' It spends at most 150.0 GFLOPs per query.'
    >>> "from a threshold calibrated" in budget_words(b)   # a threshold follower's start
    True
    """
    if b.kind == "share":
        unit, what = "{:.1%}", "of questions to an expert"
        train = b.training_share
    else:
        unit, what = "{:.1f} GFLOPs", "per question"
        train = b.training_gflops
    lo, hi = b.interval
    # a price follower's start is a price; a threshold follower's (a surcharge on calling an expert, a
    # doubt or a confidence, by router) is a threshold
    start = (
        (f"a price of λ = {b.start:,.0f}" if b.start >= 1000 else f"a price of λ = {b.start:.3g}")
        + " errors per TFLOP"
        if "log_price" in (b.follower or {})
        else "a threshold"
    )
    text = (
        f"Budget {unit.format(b.target)} {what}: {unit.format(b.realised)} on the test articles (95% "
        f"interval {unit.format(lo)} – {unit.format(hi)}), followed query by query from {start} "
        f"calibrated on the training articles ({unit.format(train)} there)."
    )
    return text + (f" {b.note[:1].upper()}{b.note[1:]}." if b.note else "")
