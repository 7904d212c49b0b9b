"""A budget followed on the test articles (:func:`budget_decision`): the router's decision under
it and what it realised, beside the target, with bootstrap intervals (:class:`BudgetResult`).
How a budget is followed — a price moved query by query — is :mod:`l2d_core.routers.budget`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from ..method.costs import CostConfig
from ..routers.base import Router, supports_budget
from ..routers.budget import BudgetError, check_budget
from ..routers.decision import Decision
from . import metrics as M
from .gain import resampling

__all__ = ["BUDGET_POINTS", "BUDGET_PRICE", "BudgetResult", "budget_decision", "budget_rows"]

BUDGET_POINTS: tuple[tuple[str, float], ...] = (("share", 0.2),)  # the comparison's budgets
BUDGET_PRICE = 0.1  # λ (errors per TFLOP, α = 1) of the cost setting a budget is followed at


@dataclass(frozen=True)
class BudgetResult:
    """A budget followed on the test articles: where the threshold (``share``) or the price λ
    (``gflops``) started — calibrated on the training articles — and where it ended; what that
    start spends on the training articles; what was realised on test, with 95% bootstrap
    intervals; the range the router can reach and, when the target is outside it, why."""

    kind: str
    target: float
    start: float
    end: float
    training_share: float
    training_gflops: float
    test_share: float
    test_share_ci: tuple[float, float]
    test_gflops: float
    test_gflops_ci: tuple[float, float]
    reachable: tuple[float, float]
    note: str = ""
    follower: dict = field(
        default_factory=dict
    )  # the follower's starting state (what a deployment starts from)

    @property
    def realised(self) -> float:
        return self.test_share if self.kind == "share" else self.test_gflops

    @property
    def interval(self) -> tuple[float, float]:
        return self.test_share_ci if self.kind == "share" else self.test_gflops_ci


def budget_decision(
    router: Router, costs: CostConfig, kind: str, target: float, n_boot: int = 1000
) -> tuple[Decision, BudgetResult]:
    """The router's decision on the test articles under a budget (its ``calibrate_budget``:
    the decision and its :class:`~l2d_core.routers.decision.BudgetStart`), with what it spends on
    test and the 95% bootstrap intervals."""
    target = check_budget(kind, target)
    if not supports_budget(router):
        raise BudgetError(f"router {router.id} has no error estimates to follow a budget with")
    d, info = router.calibrate_budget(costs, kind, target)
    test = d.on(router.bench_.test)
    choice = np.asarray(d.choice, dtype=int)
    pq = d.per_query or {}
    shares = pq.get("share", (choice != 0).astype(float))
    gflops = pq.get("gflops", d.overhead_gflops + test.gflops[np.arange(len(choice)), choice])
    weights = resampling(len(choice), n_boot, 0)
    result = BudgetResult(
        kind=kind,
        target=float(target),
        test_share=float(shares.mean()),
        test_share_ci=M.percentile_interval(M.resample_means(shares, weights)),
        test_gflops=float(gflops.mean()),
        test_gflops_ci=M.percentile_interval(M.resample_means(gflops, weights)),
        **asdict(info),
    )
    return d, result


def budget_rows(router: Router, bench, budgets, n_boot: int = 1000) -> list[dict]:
    """One row per (kind, target) of ``budgets``: the fitted ``router`` under that budget on the
    test articles, at the per-TFLOP price :data:`BUDGET_PRICE` (what ``scripts/bench_budgets.py``
    follows): target, realised figure and its 95% interval, the training articles' figure, the
    note when the router says it cannot reach the target."""
    rows = []
    for kind, target in budgets:
        _, b = budget_decision(router, bench.price_costs(BUDGET_PRICE), kind, target, n_boot)
        rows.append(
            {
                "kind": kind,
                "target": float(target),
                "realised": b.realised,
                "ci": list(b.interval),
                "training": b.training_share if kind == "share" else b.training_gflops,
                "note": b.note,
                "price": BUDGET_PRICE,
                "seed": int(getattr(router, "seed_", 0)),
            }
        )
    return rows
