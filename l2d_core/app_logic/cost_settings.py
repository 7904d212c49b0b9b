"""Cost settings as the dashboard handles them: slider ranges, recognising the GFLOPs rule, and
reading a cost file a user uploads (every problem is a message for the user)."""

from __future__ import annotations

import numpy as np

from ..evaluation.budget import check_budget
from ..method.costs import CostConfig, InvalidCostError

__all__ = [
    "beta_limits",
    "rule_beta1",
    "cost_from_upload",
    "add_cost_arguments",
    "checked_budget",
    "costs_from_arguments",
]


def beta_limits(expert_gflops) -> tuple[float, ...]:
    """Upper end of each hand-set β_j slider: 1, or β_j of the GFLOPs rule at β₁ = 1 when larger
    (an expert over 20× the GFLOPs of expert 1 costs more than β₁).

    >>> beta_limits([100.0, 1730.0])
    (1.0, 1.0)
    >>> beta_limits([2.0, 1730.0])
    (1.0, 43.25)
    """
    rule = CostConfig.from_beta1(1.0, expert_gflops).beta
    return tuple(max(1.0, float(b)) for b in rule)


def rule_beta1(costs: CostConfig, expert_gflops) -> float | None:
    """β₁ when ``costs.beta`` follows the GFLOPs rule of SPEC §3, else None.

    >>> rule_beta1(CostConfig.from_beta1(0.05, [100.0, 1730.0]), [100.0, 1730.0])
    0.05
    >>> rule_beta1(CostConfig((1.0, 1.0), (0.05, 0.05)), [100.0, 1730.0]) is None
    True
    """
    b1 = costs.beta[0]
    rule = CostConfig.from_beta1(b1, expert_gflops).beta
    return b1 if np.allclose(rule, costs.beta, rtol=1e-9, atol=1e-12) else None


def cost_from_upload(
    data: bytes | str, n_experts: int, alpha_max: float = 2.0, beta_max=(1.0,)
) -> CostConfig:
    """A cost setting read from an uploaded JSON file (:meth:`CostConfig.to_json` format), checked
    against the pool (one α and one β per expert) and the dashboard's slider ranges.

    Every problem raises :class:`~l2d_core.method.costs.InvalidCostError` with a message for the user.

    >>> cost_from_upload(b'{"alpha": [1.5], "beta": [0.1]}', 1)
    CostConfig(alpha=(1.5,), beta=(0.1,))
    >>> cost_from_upload(b'{"alpha": [1.0], "beta": [0.1]}', 2)
    Traceback (most recent call last):
    ...
    l2d_core.method.costs.InvalidCostError: the file has costs for 1 expert(s) but this pool has 2
    >>> cost_from_upload('{"alpha": [3.0], "beta": [0.1]}', 1)
    Traceback (most recent call last):
    ...
    l2d_core.method.costs.InvalidCostError: alpha_1 = 3.0 is outside the dashboard's range [0, 2.0]
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidCostError("the cost file is not UTF-8 text") from None
    costs = CostConfig.from_json(data)
    if costs.n_experts != n_experts:
        raise InvalidCostError(
            f"the file has costs for {costs.n_experts} expert(s) but this pool has {n_experts}"
        )
    beta_max = tuple(beta_max) if len(tuple(beta_max)) == n_experts else (tuple(beta_max)[0],) * n_experts
    for j, (a, b, bmax) in enumerate(zip(costs.alpha, costs.beta, beta_max), start=1):
        if a > alpha_max:
            raise InvalidCostError(f"alpha_{j} = {a} is outside the dashboard's range [0, {alpha_max}]")
        if b > bmax:
            raise InvalidCostError(f"beta_{j} = {b} is outside the dashboard's range [0, {bmax}]")
    return costs


# --- the command line's cost flags (evaluate.py, export_router.py, serve.py) ------------------


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
