"""Command-line helpers shared by the scripts (evaluate.py, export_router.py, serve.py): the cost
flags (α, β₁ / λ / every β_j, a budget) on an argparse parser, checked and turned into a cost
setting."""

from __future__ import annotations

import numpy as np

from .method.costs import CostConfig, InvalidCostError
from .routers.budget import check_budget

__all__ = ["add_cost_arguments", "checked_budget", "costs_from_arguments"]


def add_cost_arguments(p, beta1_default: float | None = 0.05) -> None:
    """``--beta1``/``--price``/``--beta``/``--alpha`` and the budget flags on an argparse parser."""
    p.add_argument("--beta1", type=float, default=beta1_default, help="β₁; β_j for j ≥ 2 by the GFLOPs rule")
    p.add_argument(
        "--price",
        type=float,
        help="β by the per-TFLOP price rule: λ errors per TFLOP of extra compute",
    )
    p.add_argument("--beta", type=float, nargs="+", help="every β_j by hand (overrides --beta1)")
    p.add_argument("--alpha", type=float, nargs="+", default=[1.0], help="α (one, or one per expert)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--budget-share", type=float, help="at most this share of questions to an expert")
    budget.add_argument("--budget-gflops", type=float, help="at most this mean GFLOPs per question")


def checked_budget(args) -> tuple[str, float] | None:
    """The flags' budget ``(kind, target)``; every α, β, λ checked finite and >= 0."""
    numbers = [
        *([args.beta1] if args.beta1 is not None else []),
        *(args.beta or []),
        *args.alpha,
        *([args.price] if args.price is not None else []),
    ]
    if any(not np.isfinite(b) or b < 0 for b in numbers):
        raise InvalidCostError("α, β and λ must be finite numbers >= 0")
    if args.beta and args.price is not None:
        raise ValueError("give β by hand (--beta) or by the price rule (--price), not both")
    if args.budget_share is not None:
        return ("share", check_budget("share", args.budget_share))
    return ("gflops", check_budget("gflops", args.budget_gflops)) if args.budget_gflops is not None else None


def costs_from_arguments(args, bench, setting: float | None = None, by_hand: bool = True) -> CostConfig:
    """The cost setting of the flags on ``bench``'s pool: β by hand, else the price rule at λ
    (``--price``), else the GFLOPs rule at β₁; ``setting`` replaces λ or β₁ (a sweep's point)."""
    n = len(bench.pool.experts)
    alpha = tuple(args.alpha * n if len(args.alpha) == 1 else args.alpha)
    if args.beta and by_hand:
        return CostConfig(alpha, tuple(args.beta))
    rule = "price" if args.price is not None else "gflops"
    value = setting if setting is not None else (args.price if rule == "price" else args.beta1)
    return bench.rule_costs(rule, value, alpha)
