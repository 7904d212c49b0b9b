"""SPEC §4: the comp-sum surrogate Φ^ν and the surrogate deferral loss (SDL), in log-space.

Shapes: scores ``r`` are (B, 2, A) — one head per endpoint, one score per agent; costs
``c`` are (B, 2, A) from :func:`l2d_core.method.costs.cost_matrix`.

>>> r = torch.tensor([[0.0, 0.0]])
>>> comp_sum(r, nu=1.0)                 # log Ψ = log 2 for equal scores
tensor([[0.6931, 0.6931]])
>>> comp_sum(r, nu=2.0)                 # 1 - softmax
tensor([[0.5000, 0.5000]])
>>> comp_sum(r, nu=0.0)                 # Ψ - 1
tensor([[1., 1.]])
"""

from __future__ import annotations

import math

import torch

__all__ = ["comp_sum", "tau", "sdl", "EXP_LINEARIZE_AT"]

# For ν < 1, Φ^ν = expm1((1-ν)·log Ψ)/(1-ν) grows like Ψ^{1-ν}: exact up to this exponent,
# continued linearly (value and slope match) beyond it, so ±1e4 scores stay finite in float32.
EXP_LINEARIZE_AT = 30.0


def comp_sum(scores: torch.Tensor, nu: float = 1.0) -> torch.Tensor:
    """Φ^ν(r, x, j) for every agent j along the last axis (same shape as ``scores``)."""
    if not (math.isfinite(nu) and nu >= 0):
        raise ValueError(f"nu must be a finite number >= 0, got {nu}")
    log_psi = torch.logsumexp(scores, dim=-1, keepdim=True) - scores  # log Ψ_j >= 0
    log_psi = log_psi.clamp_min(0.0)
    if nu == 1.0:
        return log_psi
    z = (1.0 - nu) * log_psi
    if nu > 1.0:  # z <= 0: expm1 is bounded in (-1, 0]
        return torch.expm1(z) / (1.0 - nu)
    z0 = EXP_LINEARIZE_AT
    safe = torch.clamp(z, max=z0)
    value = torch.where(z <= z0, torch.expm1(safe), math.exp(z0) * (1.0 + z - z0) - 1.0)
    return value / (1.0 - nu)


def tau(cost: torch.Tensor) -> torch.Tensor:
    """τ_j(x, y^i) = Σ_{q≠j} c_q(x, y^i), shape (B, 2, A)."""
    return cost.sum(dim=-1, keepdim=True) - cost


def sdl(scores: torch.Tensor, cost: torch.Tensor, nu: float = 1.0, reduction: str = "mean") -> torch.Tensor:
    """Φ_def^ν(r, x, y) = Σ_i Σ_j τ_j(x, y^i) Φ^ν(r^i, x, j); batch mean by default."""
    if scores.shape != cost.shape:
        raise ValueError(f"scores {tuple(scores.shape)} and costs {tuple(cost.shape)} differ in shape")
    per_query = (tau(cost) * comp_sum(scores, nu)).sum(dim=(-2, -1))  # (B,)
    if reduction == "none":
        return per_query
    if reduction == "mean":
        return per_query.mean()
    if reduction == "sum":
        return per_query.sum()
    raise ValueError(f"unknown reduction {reduction!r}")
