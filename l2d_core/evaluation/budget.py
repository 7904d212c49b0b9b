"""Budgets instead of α/β (SPEC §5): a target share of expert calls, or a GFLOPs-per-query budget.

A plug-in router defers a query when the main agent's expected cost exceeds the best expert's by
more than a threshold τ: ``margin = Σ_i ĉ_0^i − min_{j≥1} Σ_i ĉ_j^i > τ`` (τ = 0 is the plain
rule). τ is calibrated on the training articles' out-of-fold estimates — articles the heads
never saw — so that the target holds there; the realised share and GFLOPs on the test articles
are reported beside the target with a bootstrap interval, since calibrated shares drift.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..method.costs import CostConfig
from ..method.policies import expected_costs
from . import metrics as M
from .points import Decision
from .router import Calibrated, Router

__all__ = [
    "BUDGET_KINDS",
    "BudgetResult",
    "defer_margin",
    "calibrate_threshold",
    "budget_decision",
    "plugin_budget",
]

BUDGET_KINDS = ("share", "gflops")  # share of queries sent to an expert; mean GFLOPs per query


def defer_margin(p_err: np.ndarray, costs: CostConfig) -> tuple[np.ndarray, np.ndarray]:
    """(margin (N,), best expert (N,)): how much cheaper in expected cost the best expert is than
    the main agent (positive: the plain rule defers), and which expert that is.

    >>> p = np.array([[[0.9, 0.1], [0.9, 0.1]], [[0.1, 0.1], [0.1, 0.1]]])     # (N=2, 2, A=2)
    >>> m, j = defer_margin(p, CostConfig((1.0,), (0.2,)))
    >>> m.round(2).tolist(), j.tolist()
    ([1.2, -0.4], [1, 1])
    """
    ec = expected_costs(p_err, costs)  # (N, A)
    best = 1 + ec[:, 1:].argmin(axis=1)
    return ec[:, 0] - ec[np.arange(len(ec)), best], best


def _choice(margin: np.ndarray, best: np.ndarray, tau: float) -> np.ndarray:
    return np.where(margin > tau, best, 0)


def calibrate_threshold(
    margin: np.ndarray, kind: str, target: float, extra_gflops: np.ndarray | None = None, base: float = 0.0
) -> float:
    """τ such that deferring where ``margin > τ`` meets the target on these queries.

    ``kind="share"``: at most ``target`` of the queries go to an expert (the largest share that
    does not exceed it, ties kept together). ``kind="gflops"``: the mean GFLOPs per query — ``base``
    (paid on every query) plus ``extra_gflops`` (N,) of each deferred query — stays within
    ``target``; the queries of largest margin are deferred first.

    >>> m = np.array([0.5, -0.2, 0.1, 0.9])
    >>> calibrate_threshold(m, "share", 0.5)                    # the two largest margins defer
    0.3
    >>> calibrate_threshold(m, "gflops", 60.0, np.full(4, 100.0), base=10.0)   # 10 + 100·k/4 ≤ 60
    0.3
    """
    if kind not in BUDGET_KINDS:
        raise ValueError(f"budget kind must be one of {BUDGET_KINDS}, got {kind!r}")
    if not np.isfinite(target) or target < 0:
        raise ValueError(f"a budget must be a finite number >= 0, got {target}")
    order = np.argsort(-margin, kind="stable")
    m = margin[order]
    n = len(m)
    if kind == "share":
        k = int(np.floor(min(target, 1.0) * n + 1e-9))
    else:
        spend = base + np.concatenate([[0.0], np.cumsum(np.asarray(extra_gflops, float)[order])]) / n
        k = int(np.flatnonzero(spend <= target + 1e-9).max()) if (spend <= target + 1e-9).any() else 0
    while 0 < k < n and m[k - 1] == m[k]:  # ties go together: never exceed the target
        k -= 1
    if k == 0:
        return float(np.inf)
    if k == n:
        return float(-np.inf)
    return float((m[k - 1] + m[k]) / 2)


@dataclass(frozen=True)
class BudgetResult:
    """A calibrated budget: the threshold, what it gives on validation, and on test (with 95%
    bootstrap intervals over the test questions)."""

    kind: str
    target: float
    threshold: float
    validation_share: float
    validation_gflops: float
    test_share: float
    test_share_ci: tuple[float, float]
    test_gflops: float
    test_gflops_ci: tuple[float, float]


def budget_decision(
    router: Router, costs: CostConfig, kind: str, target: float, n_boot: int = 1000
) -> tuple[Decision, BudgetResult]:
    """The router's decision on the test articles under a budget, calibrated on its out-of-fold
    estimates of the training articles at ``costs`` (α weighs the experts' errors; β orders them;
    see the router's ``calibrate_budget``), with what it spends on validation and on test."""
    if not getattr(router, "supports_budget", False):
        raise ValueError(f"router {router.id} has no error estimates to calibrate a budget on")
    d, tau, val_share, val_gflops = router.calibrate_budget(costs, kind, target)
    test = d.on(router.bench_.test)
    choice = np.asarray(d.choice, dtype=int)
    pq = d.per_query or {}
    shares = pq.get("share", (choice != 0).astype(float))
    gflops = pq.get("gflops", d.overhead_gflops + test.gflops[np.arange(len(choice)), choice])
    weights = M.bootstrap_weights(len(choice), n_boot, seed=0)
    result = BudgetResult(
        kind=kind,
        target=float(target),
        threshold=tau,
        validation_share=val_share,
        validation_gflops=val_gflops,
        test_share=float(shares.mean()),
        test_share_ci=M.percentile_interval(M.resample_means(shares, weights)),
        test_gflops=float(gflops.mean()),
        test_gflops_ci=M.percentile_interval(M.resample_means(gflops, weights)),
    )
    return d, result


def plugin_budget(router, costs: CostConfig, kind: str, target: float) -> Calibrated:
    """A plug-in router under a budget: ``(decision, τ, validation share, validation GFLOPs)``,
    deferring where the expected-cost margin exceeds τ, calibrated on the router's out-of-fold
    estimates of the training articles."""
    bench = router.bench_
    val, val_overhead = router.accounting(bench.train)
    m_val, best_val = defer_margin(router.oof_error_proba(), costs)
    ar_val = np.arange(len(m_val))
    extra = val.gflops[ar_val, best_val] - val.gflops[:, 0]
    base = val_overhead + float(val.gflops[:, 0].mean())
    tau = calibrate_threshold(m_val, kind, target, extra, base)
    choice_val = _choice(m_val, best_val, tau)
    m_test, best_test = defer_margin(router.p_err_, costs)
    d = router.decision(router.p_err_, costs)
    d = Decision(
        _choice(m_test, best_test, tau),
        d.overhead_gflops,
        d.data,
        d.expected,
        d.scores,
        d.score_label,
        extra={"budget": target},
    )
    val_gflops = float(val_overhead + val.gflops[ar_val, choice_val].mean())
    return d, tau, float((choice_val != 0).mean()), val_gflops
