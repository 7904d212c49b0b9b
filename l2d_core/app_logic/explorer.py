"""The cost explorer without UI: a cost setting goes in, one :class:`ExplorerView` comes out —
each chosen router's decision and metrics, the metric tiles with their changes, the allocation
and the points of the cost–EM plane. β₁ sweeps are computed here too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..evaluation import metrics as M
from ..evaluation.benchmark import BETA_POINTS, PRICE_POINTS, Benchmark
from ..evaluation.budget import BudgetResult, budget_decision
from ..evaluation.points import Decision, decision_metrics
from ..evaluation.registry import router_label
from ..evaluation.router import Router
from ..evaluation.validation import candidates, rank_by_validation
from ..method.costs import CostConfig, cost_matrix
from ..method.policies import oracle_policy, random_policy

__all__ = [
    "RouterView",
    "ExplorerView",
    "router_view",
    "explore",
    "metric_tiles",
    "cost_em_points",
    "allocation_frame",
    "sweep_frame",
    "untrained_settings",
    "SWEEPS",
    "default_router",
]

# Metric tiles: label, metric key, value format, delta format, which way is better (None: neither),
# help text.
_TILES = (
    ("EM", "em", "{:.2f}", "{:+.2f}", "higher", "exact match of the chosen agent, % of test questions"),
    ("F1", "f1", "{:.2f}", "{:+.2f}", "higher", "token overlap (F1) of the chosen agent's answer, %"),
    ("GFLOPs/query", "gflops_per_query", "{:.1f}", "{:+.1f}", "lower", "compute per question, mean"),
    ("GFLOPs/EM", "gflops_per_em", "{:.2f}", "{:+.2f}", "lower", "mean GFLOPs per query ÷ EM (%)"),
    ("TPR", "tpr", "{:.3f}", "{:+.3f}", "higher", "main wrong → sent to an expert that is right"),
    ("FPR", "fpr", "{:.3f}", "{:+.3f}", "lower", "main right → sent to an expert that is wrong"),
    ("TDL", "tdl", "{:.4f}", "{:+.4f}", "lower", "true deferral loss, mean per query"),
    ("TDL random", "tdl_random", "{:.4f}", "{:+.4f}", None, "uniform random allocation, mean of 5 seeds"),
    (
        "TDL random (matched)",
        "tdl_random_matched",
        "{:.4f}",
        "{:+.4f}",
        None,
        "random allocation with this router's allocation ratios, mean of 5 seeds",
    ),
    ("Deferred", "deferred", "{:.1%}", "{:+.1%}", None, "share of queries sent to an expert"),
)


@dataclass(frozen=True, eq=False)
class RouterView:
    """One router at one cost setting (or budget) on the test articles."""

    router_id: str
    label: str
    costs: CostConfig
    decision: Decision
    metrics: dict
    budget: BudgetResult | None = None  # the calibrated budget, when the view is under one


@dataclass(frozen=True, eq=False)
class ExplorerView:
    """What the cost explorer shows for one cost setting."""

    costs: CostConfig
    views: tuple[RouterView, ...]
    tiles: dict[str, list[dict]]  # router id → metric tiles
    allocation: pd.DataFrame  # router, agent, share
    plane: pd.DataFrame  # name, kind, gflops, em
    below_zero: tuple[str, ...] = ()  # ids of the routers below the zero router's line


def router_view(
    bench: Benchmark, router: Router, costs: CostConfig, budget: tuple[str, float] | None = None
) -> RouterView:
    """A fitted router's decision at ``costs`` — or under ``budget`` = (kind, target) when the
    router can calibrate one (:mod:`~l2d_core.evaluation.budget`) — and every SPEC §7 metric."""
    result = None
    if budget is not None and getattr(router, "supports_budget", False):
        d, result = budget_decision(router, costs, *budget)
    else:
        d = router.decide(costs)
    m, _ = decision_metrics(bench, d, costs)
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
    plane = cost_em_points(bench, costs, views)
    hull = plane[plane["kind"] == "hull"]
    below = tuple(
        v.router_id
        for v in views
        if v.metrics["em"]
        < M.hull_value(hull["gflops"].to_numpy(), hull["em"].to_numpy(), v.metrics["gflops_per_query"]) - 1e-9
    )
    return ExplorerView(
        costs,
        views,
        {v.router_id: metric_tiles(v.metrics, prev.get(v.router_id)) for v in views},
        allocation_frame(views),
        plane,
        below,
    )


def _fmt(fmt: str, x: float | None) -> str | None:
    if x is None:
        return None
    if not np.isfinite(x):
        return "∞" if x > 0 else ("−∞" if x < 0 else "n/a")
    return fmt.format(x)


def metric_tiles(current: dict, previous: dict | None) -> list[dict]:
    """The metric tiles of one router: label, formatted value, formatted change since the
    previous setting (None without one), which way is better, and help.

    >>> m = {"em": 80.0, "f1": 88.0, "gflops_per_query": 900.0, "gflops_per_em": 11.25, "tpr": 0.4,
    ...      "fpr": float("nan"), "tdl": 0.4, "tdl_random": 0.43, "tdl_random_matched": 0.41,
    ...      "allocation": {"g": 0.25, "m1": 0.25, "m2": 0.5}}
    >>> tiles = metric_tiles(m, dict(m, em=79.5, allocation={"g": 0.5, "m1": 0.25, "m2": 0.25}))
    >>> [(t["label"], t["value"], t["delta"]) for t in tiles if t["label"] in ("EM", "FPR", "Deferred")]
    [('EM', '80.00', '+0.50'), ('FPR', 'n/a', None), ('Deferred', '75.0%', '+25.0%')]
    >>> metric_tiles(m, None)[0]["delta"] is None
    True
    """

    def extended(m: dict) -> dict:  # the decision's own share of expert calls, else its allocation's
        return {"deferred": sum(list(m["allocation"].values())[1:]), **m}

    cur = extended(current)
    prev = None if previous is None else extended(previous)
    tiles = []
    for label, key, vfmt, dfmt, better, help_ in _TILES:
        delta = None if prev is None else cur[key] - prev[key]
        if delta is not None and not np.isfinite(delta):
            delta = None
        tiles.append(
            {
                "label": label,
                "value": _fmt(vfmt, cur[key]),
                "delta": _fmt(dfmt, delta),
                "better": better,
                "help": help_,
            }
        )
    return tiles


def cost_em_points(bench: Benchmark, costs: CostConfig, views=()) -> pd.DataFrame:
    """Points of the cost–EM plane: single agents, the zero-router hull, oracle, random, views."""
    test = bench.test
    rows = [
        {
            "name": a,
            "kind": "agent",
            "gflops": float(test.gflops[:, j].mean()),
            "em": 100 * float(test.em[:, j].mean()),
        }
        for j, a in enumerate(test.agent_ids)
    ]
    hc, hq = M.upper_hull(np.array([r["gflops"] for r in rows]), np.array([r["em"] for r in rows]))
    rows += [{"name": "zero router", "kind": "hull", "gflops": c, "em": q} for c, q in zip(hc, hq)]
    oracle = oracle_policy(cost_matrix(test.errors, costs), test.gflops)
    rand = random_policy(len(test), test.n_agents, seed=0)
    for name, choice in (("oracle", oracle), ("random", rand)):
        rows.append(
            {
                "name": name,
                "kind": "baseline",
                "gflops": M.mean_gflops(choice, test.gflops),
                "em": 100 * M.chosen_mean(test.em, choice),
            }
        )
    for v in views:
        rows.append(
            {
                "name": v.label,
                "kind": "router",
                "gflops": v.metrics["gflops_per_query"],
                "em": v.metrics["em"],
            }
        )
    return pd.DataFrame(rows)


def allocation_frame(views) -> pd.DataFrame:
    """Allocation ratios of each view, long format: router, agent, share."""
    return pd.DataFrame(
        [
            {"router": v.label, "agent": a, "share": s}
            for v in views
            for a, s in v.metrics["allocation"].items()
        ]
    )


SWEEPS = {"gflops": ("beta1", BETA_POINTS), "price": ("price", PRICE_POINTS)}  # column, points


def sweep_frame(bench: Benchmark, router: Router, rule: str = "gflops", alpha=1.0) -> pd.DataFrame:
    """One row per BENCHMARK.md point of a cost rule (β₁ of the GFLOPs rule, or the per-TFLOP
    price λ; at fixed α): EM, GFLOPs/EM, TDL, random TDL and allocation shares of a fitted
    router; the setting is in column ``beta1`` or ``price``."""
    column, points = SWEEPS[rule]
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


def untrained_settings(bench: Benchmark, router: Router, rule: str = "gflops", alpha=1.0) -> list[float]:
    """The points of a cost rule's sweep at which ``router`` would first have to train."""
    return [b for b in SWEEPS[rule][1] if router.needs_training(bench.rule_costs(rule, b, alpha))]


def default_router(
    bench: Benchmark,
    ready_only: bool = False,
    fitted: Callable[[str], Router] | None = None,
    rank: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
) -> tuple[str, list[tuple[str, float]] | None]:
    """The router users get by default: the best plug-in router of the registry by validation
    AIQ (training articles, out of fold), and the whole ranking; ``ready_only``: among the
    routers whose inputs are read in already (a first view need not wait for every helper
    agent: :func:`~l2d_core.evaluation.validation.waiting` names the others; a single router
    ready is the default without a ranking, its score NaN). ``fitted``: see
    :func:`~l2d_core.evaluation.validation.rank_by_validation`. ``rank=False``: a first view
    need not wait for the ranking either — when it is not on disk yet, the first router ready
    (registry order) stands in for now and the ranking is None (rank later, then ask again).
    ``progress(k, n, router id)`` as each router is scored for the ranking."""
    ids = candidates(bench, ready_only)  # (checking what is read in costs a pass over each store)
    if not ids:
        raise ValueError(f"no router of the registry can run on pool {bench.pool.name}")
    if ready_only and len(ids) == 1:
        return ids[0], [(ids[0], float("nan"))]  # one router ready: nothing to compare yet
    ranking = rank_by_validation(bench, ids, fitted=fitted, compute=rank, progress=progress)
    if ranking is None:
        return ids[0], None
    return ranking[0][0], ranking
