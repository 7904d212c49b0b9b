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
from ..evaluation.gain import gain_over_mixing
from ..evaluation.points import Decision, decision_metrics
from ..evaluation.registry import ROUTERS, router_label
from ..evaluation.router import Router
from ..evaluation.validation import Ranked, candidates, rank_by_validation
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
    "DefaultChoice",
    "default_router",
    "budget_words",
    "ranking_frame",
    "needs_embeddings",
]

# Metric tiles: label, metric key, value format, delta format, which way is better (None: neither),
# help text.
_TILES = (
    ("EM", "em", "{:.2f}", "{:+.2f}", "higher", "exact match of the answer kept, % of test questions"),
    (
        "EM vs random mixing",
        "gain",
        "{:+.2f}",
        "{:+.2f}",
        "higher",
        "EM minus what sending each question to a single agent at random, in the proportions that "
        "spend the same mean compute, reaches (points; above 0: the router pays for itself)",
    ),
    (
        "F1",
        "f1",
        "{:.2f}",
        "{:+.2f}",
        "higher",
        "word overlap (F1) of the answer kept with the gold answers, %",
    ),
    ("GFLOPs/query", "gflops_per_query", "{:.1f}", "{:+.1f}", "lower", "compute paid per question, mean"),
    ("GFLOPs/EM", "gflops_per_em", "{:.2f}", "{:+.2f}", "lower", "mean GFLOPs per question ÷ EM (%)"),
    (
        "Answered by an expert",
        "answered_by_expert",
        "{:.1%}",
        "{:+.1%}",
        None,
        "share of questions whose kept answer is an expert's (not the main model's)",
    ),
    (
        "Expert consulted",
        "consulted",
        "{:.1%}",
        "{:+.1%}",
        None,
        "share of questions on which at least one expert ran and was paid, whichever answer was kept",
    ),
    (
        "TPR",
        "tpr",
        "{:.3f}",
        "{:+.3f}",
        "higher",
        "of the questions the main model gets wrong: share sent to an expert that gets them right",
    ),
    (
        "FPR",
        "fpr",
        "{:.3f}",
        "{:+.3f}",
        "lower",
        "of the questions the main model gets right: share sent to an expert that gets them wrong",
    ),
    (
        "TDL",
        "tdl",
        "{:.4f}",
        "{:+.4f}",
        "lower",
        "true deferral loss: mistakes (per answer end) plus the "
        "price β of each expert call, mean per question",
    ),
    (
        "TDL random",
        "tdl_random",
        "{:.4f}",
        "{:+.4f}",
        None,
        "the same loss when each question goes to an agent drawn uniformly at random (mean of 5 draws)",
    ),
    (
        "TDL random (matched)",
        "tdl_random_matched",
        "{:.4f}",
        "{:+.4f}",
        None,
        "the same loss when questions go to agents at random in this router's proportions (mean of 5 draws)",
    ),
)
# what the tiles mean, in a line under them (the tiles' help holds the same, one each)
TILE_WORDS = (
    "**EM vs random mixing**: EM points above sending each question to a single agent at random in "
    "proportions that cost the same compute. **Answered by an expert**: the kept answer is an expert's; "
    "**expert consulted**: an expert ran and was paid. **TPR**: of the main model's wrong answers, the "
    "share an expert fixed; **FPR**: of its right answers, the share sent to an expert that got them "
    "wrong. **TDL**: mistakes per answer end plus each expert call's price β, per question — lower "
    "is better; *random* rows: the same for random routing."
)


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
    m, q = decision_metrics(bench, d, costs)
    test = bench.test
    m["gain"], m["gain_ci"] = gain_over_mixing(
        q["em"], test.em, test.gflops.mean(axis=0), m["gflops_per_query"]
    )
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
    below = tuple(v.router_id for v in views if v.metrics["gain"] < -1e-9)
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
    previous setting (None without one), which way is better, and help. A tile whose metric the
    view lacks is left out.

    >>> m = {"em": 80.0, "gain": 1.5, "f1": 88.0, "gflops_per_query": 900.0, "gflops_per_em": 11.25,
    ...      "answered_by_expert": 0.5, "consulted": 1.0, "tpr": 0.4, "fpr": float("nan"), "tdl": 0.4,
    ...      "tdl_random": 0.43, "tdl_random_matched": 0.41}
    >>> tiles = metric_tiles(m, dict(m, em=79.5, answered_by_expert=0.25))
    >>> shown = ("EM", "FPR", "Answered by an expert")
    >>> [(t["label"], t["value"], t["delta"]) for t in tiles if t["label"] in shown]
    [('EM', '80.00', '+0.50'), ('Answered by an expert', '50.0%', '+25.0%'), ('FPR', 'n/a', None)]
    >>> metric_tiles(m, None)[0]["delta"] is None
    True
    """
    tiles = []
    for label, key, vfmt, dfmt, better, help_ in _TILES:
        if key not in current:
            continue
        delta = None if previous is None or key not in previous else current[key] - previous[key]
        if delta is not None and not np.isfinite(delta):
            delta = None
        tiles.append(
            {
                "label": label,
                "value": _fmt(vfmt, current[key]),
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


@dataclass(frozen=True)
class DefaultChoice:
    """What users get by default on a pool: the router, and the price λ (errors per TFLOP) where
    it is the furthest above random mixing on validation articles, by ``gain`` EM points (None:
    no router ready). ``ranking``: every router compared (None: not yet — the router stands in,
    scored alone)."""

    router_id: str
    price: float
    gain: float
    ranking: list[Ranked] | None

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
    then ask again). ``progress(k, n, router id)`` as each router is scored for the ranking."""
    ids = candidates(bench, ready_only)  # (checking what is read in costs a pass over each store)
    if not ids:
        raise ValueError(f"no router of the registry can run on pool {bench.pool.name}")
    ranking = rank_by_validation(bench, ids, fitted=fitted, compute=rank, progress=progress)
    if ranking is None:
        alone = rank_by_validation(bench, ids[:1], fitted=fitted)
        return DefaultChoice(alone[0].router_id, alone[0].price, alone[0].gain, None)
    best = ranking[0]
    return DefaultChoice(best.router_id, best.price, best.gain, ranking)


def budget_words(b: BudgetResult) -> str:
    """One sentence of what a followed budget did: the target, what was realised on the test
    articles with its interval, where it started and why it could not be met, when it could not.

    >>> from l2d_core.evaluation.budget import BudgetResult
    >>> b = BudgetResult("share", 0.3, 0.41, 0.37, 0.3, 120.0, 0.302, (0.284, 0.32), 150.0, (140.0, 160.0),
    ...                  (0.0, 1.0))
    >>> budget_words(b)[:81]
    'Budget 30.0% of questions to an expert: 30.2% on the test articles (95% interval '
    """
    if b.kind == "share":
        unit, what = "{:.1%}", "of questions to an expert"
        train = b.training_share
    else:
        unit, what = "{:.1f} GFLOPs", "per question"
        train = b.training_gflops
    lo, hi = b.interval
    start = "a surcharge" if b.kind == "share" else f"a price of λ = {b.start:.3g} errors per TFLOP"
    text = (
        f"Budget {unit.format(b.target)} {what}: {unit.format(b.realised)} on the test articles (95% "
        f"interval {unit.format(lo)} – {unit.format(hi)}), followed query by query from {start} "
        f"calibrated on the training articles ({unit.format(train)} there)."
    )
    return text + (f" This router {b.note}." if b.note else "")


def ranking_frame(ranking: list[Ranked]) -> pd.DataFrame:
    """The validation ranking as a table: router, EM above random mixing, at which λ, AIQ."""
    return pd.DataFrame(
        [(router_label(r.router_id), r.gain, r.price, r.aiq) for r in ranking],
        columns=["router", "EM above random mixing", "at λ (errors per TFLOP)", "AIQ (EM %)"],
    )


def needs_embeddings() -> list[str]:
    """The routers ranked on validation that read the question and context embeddings (ranked
    only once those are computed)."""
    return [r for r, c in ROUTERS.items() if c.validated and c.reads_embeddings]
