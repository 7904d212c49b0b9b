"""Cost settings as the dashboard handles them: slider ranges, recognising the GFLOPs rule, and
reading a cost file a user uploads (every problem is a message for the user)."""

from __future__ import annotations

import math

import numpy as np

from ..agents.prices import dollars
from ..data.safe_json import JSONNestingError, check_nesting
from ..method.costs import CostConfig, InvalidCostError, mean_usd

__all__ = [
    "beta_limits",
    "rule_beta1",
    "on_price_scale",
    "money_words",
    "cost_from_upload",
    "MAX_COST_FILE_BYTES",
]

MAX_COST_FILE_BYTES = 1 << 20  # a cost setting is a few dozen bytes; one number per expert twice
COST_SHAPE = 'a cost setting is a JSON object {"alpha": [numbers], "beta": [numbers]}'


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


def on_price_scale(price: float, log_prices, end: float) -> float:
    """A λ (errors per TFLOP) brought onto a pool's price slider — one left over from another pool:
    clamped to ``end`` on a linear slider (``log_prices`` None), else the nearest price in log of
    the slider's ``log_prices`` (0 stays 0).

    >>> on_price_scale(0.5, None, 2.0), on_price_scale(3.0, None, 2.0)
    (0.5, 2.0)
    >>> scale = (0.0, 0.001, 0.002, 0.005, 0.01)
    >>> [on_price_scale(lam, scale, 0.01) for lam in (0.5, 0.0012, 0.0)]
    [0.01, 0.001, 0.0]
    """
    if not log_prices:
        return min(float(price), float(end))
    if price <= 0:
        return 0.0
    return min((p for p in log_prices if p > 0), key=lambda p: abs(math.log(p / price)))


def money_words(bench) -> str:
    """Each agent of ``bench``'s pool at its mean price on the training articles, in words.

    >>> from types import SimpleNamespace as NS
    >>> data = NS(agent_ids=("small", "gpt-4"), usd=np.array([[0.0, 0.003], [0.0001, 0.0042]]))
    >>> money_words(NS(train=data))
    'small $0.05, gpt-4 $3.6 per 1,000 questions'
    """
    usd = mean_usd(bench.train.usd)
    return (
        ", ".join(f"{a} {dollars(1000 * u)}" for a, u in zip(bench.train.agent_ids, usd))
        + " per 1,000 questions"
    )


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
    if len(data) > MAX_COST_FILE_BYTES:
        raise InvalidCostError(
            f"the cost file is {len(data):,} bytes; a cost setting is a small JSON object "
            f"(at most {MAX_COST_FILE_BYTES:,} bytes)"
        )
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidCostError("the cost file is not UTF-8 text") from None
    try:
        check_nesting(data)
    except JSONNestingError as exc:
        raise InvalidCostError(f"{COST_SHAPE}; this file holds {exc}") from None
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
