"""SPEC §3: agent costs per endpoint and the true deferral loss (TDL).

Arrays: ``errors`` is (N, 2, A) boolean — agent a wrong on endpoint i (0 = start, 1 = end)
of query n; agent 0 is the main model, 1..J the experts.

>>> errs = np.array([[[1, 0, 0], [0, 0, 1]]], dtype=bool)   # (1, 2, 3)
>>> costs = CostConfig(alpha=[1.0, 1.0], beta=[0.1, 0.3])
>>> cost_matrix(errs, costs)[0]
array([[1. , 0.1, 0.3],
       [0. , 0.1, 1.3]])
>>> tdl(cost_matrix(errs, costs), np.array([1]))
array([0.2])
>>> beta_from_gflops(0.05, [100.0, 1730.0]).round(5)
array([0.05   , 0.04325])
>>> beta_from_price(0.1, 5.0, [100.0, 1730.0]).round(4)      # λ = 0.1 errors per TFLOP
array([0.0095, 0.1725])
>>> beta_from_latency(0.5, 0.02, [0.72, 0.0]).round(4)      # λ_s = 0.5 errors per second
array([0.35, 0.  ])
>>> beta_from_money(50.0, 0.0001, [0.0036, 0.0]).round(4)   # λ_$ = 50 errors per dollar
array([0.175, 0.   ])
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..data import safe_json

__all__ = [
    "CostConfig",
    "InvalidCostError",
    "COST_RULES",
    "RULE_FIELDS",
    "BETA_POINTS",
    "PRICE_POINTS",
    "beta_from_gflops",
    "beta_from_price",
    "LATENCY_POINTS",
    "beta_from_latency",
    "beta_from_money",
    "money_scale",
    "mean_latency",
    "mean_usd",
    "realised_latency",
    "realised_usd",
    "paid_per_agent",
    "cost_matrix",
    "log_price_scale",
    "PRICE_TOP",
    "PRICE_STEP",
    "tdl",
    "query_costs",
]

# How β follows from one number: the paper's GFLOPs rule (β₁, later experts relative to the
# first) or the per-TFLOP price (λ errors per TFLOP of extra compute over the main agent).
# A third, where the agents' logs carry latency: λ_s errors per second of extra mean latency; a
# fourth, where every answer's price in dollars is known: λ_$ errors per dollar of extra mean price.
COST_RULES = ("gflops", "price", "latency", "money")
# each rule's setting as results files, operating points and sweeps name it
RULE_FIELDS = {"gflops": "beta1", "price": "price", "latency": "latency_price", "money": "money_price"}
# BENCHMARK.md sweep points for β₁ (β_j from the GFLOPs rule, α_j = 1) and for the per-TFLOP
# price λ (errors per TFLOP, α_j = 1).
BETA_POINTS: tuple[float, ...] = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
PRICE_POINTS: tuple[float, ...] = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
# sweep points of the latency price λ_s (errors per second of extra mean latency), α_j = 1
LATENCY_POINTS: tuple[float, ...] = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
# a price scale in errors per TFLOP: linear from 0 to PRICE_TOP in PRICE_STEP steps, unless one
# step moves the dearest expert's β by more than 0.05 (a remote LLM's hundreds of TFLOPs)
PRICE_TOP, PRICE_STEP = 2.0, 0.01
_LOG_STEPS = (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)  # prices per decade on a log scale


def log_price_scale(extra_tflops: Sequence[float]) -> tuple[float, ...] | None:
    """The prices λ (errors per TFLOP) that change decisions among experts whose extra compute
    over the main agent is ``extra_tflops`` each, or None where the linear scale (0 to
    :data:`PRICE_TOP` by :data:`PRICE_STEP`) serves. Where one linear step would move the dearest
    expert's β by more than 0.05, the scale is 0 and, spaced evenly in log (1, 1.5, 2, 3, 5, 7 per
    decade), the prices from the end / 10⁴ to the end: the first price at which the cheapest
    expert's β reaches 2 (its every answer dearer than two mistakes: none is worth asking beyond).

    >>> log_price_scale([1.725]) is None
    True
    >>> s = log_price_scale([149.9995]); s[:4], s[-3:], len(s)
    ((0.0, 1.5e-06, 2e-06, 3e-06), (0.007, 0.01, 0.015), 26)
    """
    extra = [float(t) for t in extra_tflops if t > 0]
    if not extra or max(extra) * PRICE_STEP <= 0.05:
        return None
    return _log_scale(extra)


def money_scale(extra_usd: Sequence[float]) -> tuple[float, ...] | None:
    """The prices λ_$ (errors per dollar) that change decisions among experts whose mean price per
    question over the main agent's is ``extra_usd`` dollars each: 0, then evenly in log from the
    end / 10⁴ to the end, the first price at which the cheapest such expert's β reaches 2. None
    where no expert costs more than the main agent (every price decides alike).

    >>> s = money_scale([0.0036, 0.0002]); s[:3], s[-2:], len(s)
    ((0.0, 1.0, 1.5), (7000.0, 10000.0), 26)
    >>> money_scale([0.0, -0.001]) is None
    True
    """
    extra = [float(t) for t in extra_usd if t > 0]
    return _log_scale(extra) if extra else None


def _log_scale(extra: list[float]) -> tuple[float, ...]:
    """0, then the prices spaced evenly in log (:data:`_LOG_STEPS` per decade) from the end / 10⁴
    to the end: the first at which the cheapest of ``extra`` (> 0) reaches a β of 2."""
    need = 2.0 / min(extra)  # the price at which the cheapest expert's β reaches 2
    decade = 10.0 ** math.floor(math.log10(need))
    end = next(m * decade for m in (*_LOG_STEPS, 10.0) if m * decade >= need * (1 - 1e-9))
    first = end / 1e4
    scale = [
        float(f"{m * 10.0**k:.6g}")
        for k in range(math.floor(math.log10(first)) - 1, math.ceil(math.log10(end)) + 1)
        for m in _LOG_STEPS
    ]
    return (0.0, *(p for p in scale if first * (1 - 1e-9) <= p <= end * (1 + 1e-9)))


class InvalidCostError(ValueError):
    """α or β is NaN, infinite, negative, or of the wrong length."""


def _check(name: str, values: Sequence[float]) -> tuple[float, ...]:
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise InvalidCostError(f"{name} must be a sequence of numbers, one per expert, got {values!r}")
    out = []
    for j, v in enumerate(values, start=1):
        if isinstance(v, str | bytes | bool):
            raise InvalidCostError(f"{name}_{j} must be a number, got {v!r}")
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise InvalidCostError(f"{name}_{j} must be a number, got {v!r}") from None
        if not math.isfinite(f):
            raise InvalidCostError(f"{name}_{j} must be finite, got {f}")
        if f < 0:
            raise InvalidCostError(f"{name}_{j} must be >= 0, got {f}")
        out.append(f)
    return tuple(out)


@dataclass(frozen=True)
class CostConfig:
    """Per-expert α_j (weight of the expert's error) and β_j (consultation cost), j = 1..J."""

    alpha: tuple[float, ...]
    beta: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", _check("alpha", self.alpha))
        object.__setattr__(self, "beta", _check("beta", self.beta))
        if len(self.alpha) != len(self.beta) or not self.alpha:
            raise InvalidCostError(
                f"need one alpha and one beta per expert (J >= 1); got {len(self.alpha)} alphas "
                f"and {len(self.beta)} betas"
            )

    @property
    def n_experts(self) -> int:
        return len(self.alpha)

    @classmethod
    def with_alpha(cls, alpha: float | Sequence[float], beta: Sequence[float]) -> CostConfig:
        """β as given, with one α for every expert (or one each)."""
        alphas = [alpha] * len(beta) if isinstance(alpha, int | float) else list(alpha)
        return cls(tuple(alphas), tuple(beta))

    @classmethod
    def from_beta1(
        cls, beta1: float, expert_gflops: Sequence[float], alpha: float | Sequence[float] = 1.0
    ) -> CostConfig:
        """β from the GFLOPs rule of SPEC §3 and one α for every expert (or one each)."""
        return cls.with_alpha(alpha, beta_from_gflops(beta1, expert_gflops))

    @classmethod
    def from_price(
        cls,
        lam: float,
        main_gflops: float,
        expert_gflops: Sequence[float],
        alpha: float | Sequence[float] = 1.0,
    ) -> CostConfig:
        """β from the per-TFLOP price rule of SPEC §3 and one α for every expert (or one each)."""
        return cls.with_alpha(alpha, beta_from_price(lam, main_gflops, expert_gflops))

    @classmethod
    def from_latency(
        cls,
        lam_s: float,
        main_latency: float,
        expert_latency: Sequence[float],
        alpha: float | Sequence[float] = 1.0,
    ) -> CostConfig:
        """β from the latency price rule (BENCHMARK.md) and one α for every expert (or one each)."""
        return cls.with_alpha(alpha, beta_from_latency(lam_s, main_latency, expert_latency))

    @classmethod
    def from_money(
        cls, lam: float, main_usd: float, expert_usd: Sequence[float], alpha: float | Sequence[float] = 1.0
    ) -> CostConfig:
        """β from the money rule (λ_$ errors per dollar) and one α for every expert (or one each)."""
        return cls.with_alpha(alpha, beta_from_money(lam, main_usd, expert_usd))

    def to_json(self) -> str:
        return json.dumps({"alpha": list(self.alpha), "beta": list(self.beta)})

    @classmethod
    def from_json(cls, text: str) -> CostConfig:
        shape = 'a cost setting is a JSON object {"alpha": [numbers], "beta": [numbers]}'
        try:
            doc = safe_json.loads(text)
        except safe_json.JSONNestingError as exc:
            raise InvalidCostError(f"{shape}; this file has {exc}") from None
        except json.JSONDecodeError as exc:
            raise InvalidCostError(f"{shape}; this is not JSON ({exc.msg}, line {exc.lineno})") from None
        if not isinstance(doc, dict):
            kind = {"list": "list", "str": "string"}.get(type(doc).__name__, "number")
            raise InvalidCostError(f"{shape}; this file holds a JSON {kind}") from None
        lists = {k: doc.get(k) for k in ("alpha", "beta")}
        if bad := [k for k, v in lists.items() if not isinstance(v, list)]:
            raise InvalidCostError(f"{shape}; no list under {' and '.join(bad)}") from None
        return cls(tuple(lists["alpha"]), tuple(lists["beta"]))


def beta_from_gflops(beta1: float, expert_gflops: Sequence[float]) -> np.ndarray:
    """β_j = β_1 · GFLOPs(M_j) / (20 · GFLOPs(M_1)) for j ≥ 2 (SPEC §3); β_1 as given. A later
    expert that costs nothing (the abstaining agent) gets β_j = 0; the first must cost something."""
    (b1,) = _check("beta", [beta1])
    g = np.asarray(expert_gflops, dtype=float)
    if g.size == 0 or not np.all(np.isfinite(g)) or np.any(g < 0) or g[0] <= 0:
        raise InvalidCostError(
            f"the GFLOPs rule needs a first expert of positive GFLOPs and none negative, got {list(g)}"
        )
    beta = b1 * g / (20.0 * g[0])
    beta[0] = b1
    return beta


def beta_from_price(lam: float, main_gflops: float, expert_gflops: Sequence[float]) -> np.ndarray:
    """β_j = λ · (GFLOPs(M_j) − GFLOPs(g)) / 1000 (SPEC §3, per-TFLOP price; λ in errors per
    TFLOP): every expert's penalty grows with its compute. An expert cheaper than the main
    agent costs nothing extra (β_j = 0)."""
    (lam,) = _check("lambda", [lam])
    g = np.asarray(expert_gflops, dtype=float)
    if g.size == 0 or not np.all(np.isfinite(g)) or not math.isfinite(main_gflops) or main_gflops < 0:
        raise InvalidCostError(f"the price rule needs finite GFLOPs, got {main_gflops} and {list(g)}")
    return lam * np.maximum(g - float(main_gflops), 0.0) / 1000.0


def beta_from_latency(lam_s: float, main_latency: float, expert_latency: Sequence[float]) -> np.ndarray:
    """β_j = λ_s · (mean latency of M_j − mean latency of g) (BENCHMARK.md latency price; λ_s in
    errors per second, latencies in seconds, means over the training articles). An expert faster
    than the main agent costs nothing extra (β_j = 0)."""
    return _beta_over_main("lambda_s", "latency", lam_s, main_latency, expert_latency)


def beta_from_money(lam: float, main_usd: float, expert_usd: Sequence[float]) -> np.ndarray:
    """β_j = λ_$ · (mean price of M_j − mean price of g) per question (the money rule; λ_$ in
    errors per dollar, prices in dollars per question, means over the training articles). An
    expert cheaper than the main agent costs nothing extra (β_j = 0)."""
    return _beta_over_main("lambda_usd", "money", lam, main_usd, expert_usd)


def _beta_over_main(name: str, rule: str, lam: float, main: float, experts: Sequence[float]) -> np.ndarray:
    """λ · (each expert's mean − the main agent's mean), 0 where the expert's is lower."""
    (lam,) = _check(name, [lam])
    t = np.asarray(experts, dtype=float)
    if t.size == 0 or not np.all(np.isfinite(t)) or not math.isfinite(main) or main < 0:
        raise InvalidCostError(
            f"the {rule} rule needs every agent's mean {_MEASURE[rule]}, got {main} and {list(t)}"
        )
    return lam * np.maximum(t - float(main), 0.0)


_MEASURE = {"latency": "latency", "money": "price per question"}


def mean_latency(latency: np.ndarray) -> np.ndarray:
    """(A,) mean latency per agent from (N, A) seconds; InvalidCostError when an agent's is unknown.

    >>> mean_latency(np.array([[0.1, 1.0], [0.3, 0.5]])).tolist()
    [0.2, 0.75]
    """
    return _means(latency, "the latency rule needs every agent's logged latency on every question")


def mean_usd(usd: np.ndarray) -> np.ndarray:
    """(A,) mean price per question per agent from (N, A) dollars; InvalidCostError when one is unknown."""
    return _means(usd, "the money rule needs every agent's price on every question")


def _means(values: np.ndarray, missing: str) -> np.ndarray:
    t = np.asarray(values, dtype=float)
    if t.ndim != 2 or len(t) == 0 or not np.isfinite(t).all():
        raise InvalidCostError(missing)
    return t.mean(axis=0)


def realised_latency(latency: np.ndarray, choice: np.ndarray, main_always: bool = True) -> np.ndarray:
    """Per query the latency paid (seconds, (N,)): the main agent's always (it answers first),
    plus the chosen expert's logged latency where one was called (``main_always=False``: only
    the chosen agent's). The same for any per-answer measure: dollars paid under the money rule.

    >>> t = np.array([[0.02, 0.7, 0.0], [0.03, 0.9, 0.0]])
    >>> realised_latency(t, np.array([1, 0])).tolist(), realised_latency(t, np.array([2, 1]), False).tolist()
    ([0.72, 0.03], [0.0, 0.9])
    """
    t = np.asarray(latency, dtype=float)
    c = np.asarray(choice, dtype=int)
    picked = t[np.arange(len(c)), c]
    if not main_always:
        return picked
    return t[:, 0] + np.where(c != 0, picked, 0.0)


def paid_per_agent(per_answer: np.ndarray) -> np.ndarray:
    """Per agent (A,), the mean paid per question when every question goes to that agent, as
    :func:`realised_latency` counts it (the main agent's always, that agent's on top): seconds of
    latency, or dollars.

    >>> paid_per_agent(np.array([[0.02, 0.7], [0.04, 0.9]])).round(2).tolist()
    [0.03, 0.83]
    """
    m = np.asarray(per_answer, dtype=float).mean(axis=0)
    return np.concatenate([m[:1], m[0] + m[1:]])


def realised_usd(usd: np.ndarray, choice: np.ndarray) -> np.ndarray:
    """Per query the dollars paid (N,), as the money rule counts them: the main agent's price on
    every question (it answers first), the chosen expert's on top (:func:`realised_latency`)."""
    return realised_latency(usd, choice)


def cost_matrix(errors: np.ndarray, costs: CostConfig) -> np.ndarray:
    """c_j(x, y^i): (N, 2, A) float from (N, 2, A) errors; c_0 = error, c_j = α_j·error + β_j."""
    errors = np.asarray(errors, dtype=float)
    if errors.ndim != 3 or errors.shape[1] != 2 or errors.shape[2] != costs.n_experts + 1:
        raise InvalidCostError(
            f"errors must be (N, 2, {costs.n_experts + 1}) for {costs.n_experts} experts, got {errors.shape}"
        )
    alpha = np.concatenate([[1.0], costs.alpha])  # (A,)
    beta = np.concatenate([[0.0], costs.beta])  # (A,)
    return errors * alpha + beta


def query_costs(cost: np.ndarray) -> np.ndarray:
    """Σ_i c_j(x, y^i): (N, A) — the TDL each agent would incur if it took the whole query."""
    return np.asarray(cost).sum(axis=1)


def tdl(cost: np.ndarray, choice: np.ndarray) -> np.ndarray:
    """Per-query TDL of a single-agent policy: Σ_i c_{π(x)}(x, y^i), shape (N,)."""
    qc = query_costs(cost)
    return qc[np.arange(len(qc)), np.asarray(choice)]
