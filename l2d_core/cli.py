"""Command-line helpers shared by the scripts (evaluate.py, export_router.py, serve.py): the cost
flags (α, β₁ / λ / every β_j, a budget) on an argparse parser, checked and turned into a cost
setting."""

from __future__ import annotations

import argparse

import numpy as np

from .method.costs import CostConfig, InvalidCostError
from .routers.budget import BudgetError, check_budget

__all__ = [
    "add_cost_arguments",
    "checked_budget",
    "costs_from_arguments",
    "cost_rule",
    "rule_value",
    "budget_share",
    "budget_gflops",
]


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def budget_share(text: str) -> float:
    """argparse type of a share of expert calls: a number in [0, 1].

    >>> budget_share("0.2")
    0.2
    >>> budget_share("7")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: a share of expert calls is between 0 and 1, got 7
    """
    try:
        return check_budget("share", _number(text))
    except BudgetError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def budget_gflops(text: str) -> float:
    """argparse type of a GFLOPs budget: a finite number > 0 (mean GFLOPs per question).

    >>> budget_gflops("nan")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: a budget is a finite number, got nan
    """
    try:
        return check_budget("gflops", _number(text))
    except BudgetError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_cost_arguments(p, beta1_default: float | None = 0.05) -> None:
    """``--beta1``/``--price``/``--beta``/``--alpha`` and the budget flags on an argparse parser;
    a budget is checked as it is parsed (a share in [0, 1], a GFLOPs budget > 0)."""
    p.add_argument("--beta1", type=float, default=beta1_default, help="β₁; β_j for j ≥ 2 by the GFLOPs rule")
    p.add_argument(
        "--price",
        type=float,
        help="β by the per-TFLOP price rule: λ errors per TFLOP of extra compute",
    )
    p.add_argument(
        "--latency-price",
        type=float,
        help="β by the latency price rule: λs errors per second of an expert's extra mean latency "
        "(pools whose agents log latency: PLLM, PLLM-abstain)",
    )
    p.add_argument(
        "--money-price",
        type=float,
        help="β by the money rule: λ$ errors per dollar of an expert's extra mean price per question "
        "(pools whose every answer has a price: a log's cost column, or token counts and prices)",
    )
    p.add_argument("--beta", type=float, nargs="+", help="every β_j by hand (overrides --beta1)")
    p.add_argument("--alpha", type=float, nargs="+", default=[1.0], help="α (one, or one per expert)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument(
        "--budget-share", type=budget_share, help="at most this share of questions to an expert (0 to 1)"
    )
    budget.add_argument(
        "--budget-gflops", type=budget_gflops, help="at most this mean GFLOPs per question (> 0)"
    )


def checked_budget(args) -> tuple[str, float] | None:
    """The flags' budget ``(kind, target)``; every α, β, λ checked finite and >= 0."""
    numbers = [
        *([args.beta1] if args.beta1 is not None else []),
        *(args.beta or []),
        *args.alpha,
        *([args.price] if args.price is not None else []),
        *([args.latency_price] if args.latency_price is not None else []),
        *([args.money_price] if args.money_price is not None else []),
    ]
    if any(not np.isfinite(b) or b < 0 for b in numbers):
        raise InvalidCostError("α, β, λ, λs and λ$ must be finite numbers >= 0")
    ways = (
        ("--beta", args.beta),
        ("--price", args.price),
        ("--latency-price", args.latency_price),
        ("--money-price", args.money_price),
    )
    given = [flag for flag, value in ways if value is not None]
    if len(given) > 1:
        raise ValueError(f"give β one way: {' or '.join(given)}, not both")
    if args.budget_share is not None:
        return ("share", check_budget("share", args.budget_share))
    return ("gflops", check_budget("gflops", args.budget_gflops)) if args.budget_gflops is not None else None


def costs_from_arguments(args, bench, setting: float | None = None, by_hand: bool = True) -> CostConfig:
    """The cost setting of the flags on ``bench``'s pool: β by hand, else the price rule at λ
    (``--price``), else the latency price rule at λs (``--latency-price``), else the money rule at
    λ$ (``--money-price``), else the GFLOPs rule at β₁; ``setting`` replaces λ, λs, λ$ or β₁ (a
    sweep's point)."""
    n = len(bench.pool.experts)
    alpha = tuple(args.alpha * n if len(args.alpha) == 1 else args.alpha)
    if args.beta and by_hand:
        return CostConfig(alpha, tuple(args.beta))
    rule = cost_rule(args)
    value = rule_value(args, rule)
    return bench.rule_costs(rule, value if setting is None else setting, alpha)


def cost_rule(args) -> str:
    """The rule the flags set β by: ``price`` (``--price``), ``latency`` (``--latency-price``),
    ``money`` (``--money-price``), else ``gflops`` (``--beta1``)."""
    if args.price is not None:
        return "price"
    if args.latency_price is not None:
        return "latency"
    return "money" if args.money_price is not None else "gflops"


def rule_value(args, rule: str) -> float | None:
    """The flags' value of ``rule``: λ, λs, λ$ or β₁."""
    return {
        "price": args.price,
        "latency": args.latency_price,
        "money": args.money_price,
        "gflops": args.beta1,
    }[rule]
