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
from ..evaluation.benchmark import BETA_POINTS, Benchmark
from ..evaluation.points import Decision, evaluate_choice
from ..evaluation.registry import router_label
from ..evaluation.router import Router
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
    "untrained_betas",
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
    """One router at one cost setting on the test articles."""

    router_id: str
    label: str
    costs: CostConfig
    decision: Decision
    metrics: dict


@dataclass(frozen=True, eq=False)
class ExplorerView:
    """What the cost explorer shows for one cost setting."""

    costs: CostConfig
    views: tuple[RouterView, ...]
    tiles: dict[str, list[dict]]  # router id → metric tiles
    allocation: pd.DataFrame  # router, agent, share
    plane: pd.DataFrame  # name, kind, gflops, em


def router_view(bench: Benchmark, router: Router, costs: CostConfig) -> RouterView:
    """A fitted router's decision at ``costs`` and every SPEC §7 metric of it."""
    d = router.decide(costs)
    m = evaluate_choice(d.choice, d.on(bench.test), costs, d.overhead_gflops)
    return RouterView(router.id, router_label(router.id), costs, d, m)


def explore(
    bench: Benchmark,
    routers: Mapping[str, Router],
    costs: CostConfig,
    previous: Mapping[str, dict] | None = None,
) -> ExplorerView:
    """Every fitted router of ``routers`` at ``costs``; ``previous`` holds each router's metrics
    at the setting shown before (for the tiles' changes)."""
    views = tuple(router_view(bench, r, costs) for r in routers.values())
    prev = previous or {}
    return ExplorerView(
        costs,
        views,
        {v.router_id: metric_tiles(v.metrics, prev.get(v.router_id)) for v in views},
        allocation_frame(views),
        cost_em_points(bench, costs, views),
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

    def extended(m: dict) -> dict:
        return dict(m, deferred=sum(list(m["allocation"].values())[1:]))

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


def sweep_frame(
    bench: Benchmark,
    router: Router,
    betas=BETA_POINTS,
    alpha=1.0,
    progress: Callable[[int, int, float], None] | None = None,
) -> pd.DataFrame:
    """One row per β₁ (BENCHMARK.md cost setting at fixed α): EM, GFLOPs/EM, TDL, random TDL and
    allocation shares of a fitted router. ``progress(k, n, β₁)`` is called before each point."""
    rows = []
    for k, b in enumerate(betas):
        if progress is not None:
            progress(k, len(betas), b)
        m = router_view(bench, router, bench.costs(b, alpha)).metrics
        rows.append(
            {
                "beta1": b,
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


def untrained_betas(bench: Benchmark, router: Router, alpha=1.0, betas=BETA_POINTS) -> list[float]:
    """The β₁ of a sweep at which ``router`` would first have to train (seconds each)."""
    return [b for b in betas if router.needs_training(bench.costs(b, alpha))]
