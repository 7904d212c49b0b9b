"""SPEC §5: allocation policies. Each returns the chosen agent per query, shape (N,) int.

>>> scores = np.array([[[2., 0., 1.], [0., 0., 2.]]])     # (N=1, 2, A=3)
>>> learned_policy(scores)
array([2])
>>> p_err = np.array([[[0.9, 0.2, 0.1], [0.8, 0.1, 0.1]]])
>>> plugin_policy(p_err, CostConfig(alpha=[1, 1], beta=[0.1, 0.5])).tolist()
[1]
>>> plugin_policy(p_err, CostConfig(alpha=[1, 1], beta=[2.0, 2.0])).tolist()
[0]
"""

from __future__ import annotations

import numpy as np

from .costs import CostConfig, cost_matrix, query_costs

__all__ = [
    "learned_policy",
    "bayes_policy",
    "plugin_policy",
    "expected_costs",
    "oracle_policy",
    "random_policy",
]


def learned_policy(scores: np.ndarray) -> np.ndarray:
    """Algorithm 2: π̂(x) = argmax_j Σ_i r̂^i(x, j)."""
    return np.asarray(scores).sum(axis=1).argmax(axis=1)


def expected_costs(p_err: np.ndarray, costs: CostConfig) -> np.ndarray:
    """Σ_i η_j^i(x) with η_0 = P[main wrong], η_j = α_j P[m_j wrong] + β_j: (N, A)."""
    return query_costs(cost_matrix(p_err, costs))


def bayes_policy(eta_err: np.ndarray, costs: CostConfig) -> np.ndarray:
    """π*(x) = argmin_j Σ_i η_j^i(x) from true error probabilities (N, 2, A)."""
    return expected_costs(eta_err, costs).argmin(axis=1)


def plugin_policy(p_err_hat: np.ndarray, costs: CostConfig) -> np.ndarray:
    """The reweight policy: the Bayes rule with estimated error probabilities p̂ (N, 2, A).

    The estimates are learned once, cost-free; any α, β applies instantly.
    """
    return bayes_policy(p_err_hat, costs)


def oracle_policy(cost: np.ndarray, gflops: np.ndarray) -> np.ndarray:
    """Per query the agent of least TDL; ties go to the cheapest agent in GFLOPs.

    ``cost`` is (N, 2, A); ``gflops`` (A,) or (N, A).
    """
    qc = query_costs(cost)
    g = np.broadcast_to(np.asarray(gflops, dtype=float), qc.shape)
    best = qc.min(axis=1, keepdims=True)
    g_masked = np.where(np.isclose(qc, best), g, np.inf)
    return g_masked.argmin(axis=1)


def random_policy(n: int, n_agents: int, seed: int, probs: np.ndarray | None = None) -> np.ndarray:
    """Random allocation: uniform, or with the given allocation probabilities (A,)."""
    if n < 0 or n_agents < 1:
        raise ValueError("random_policy needs n >= 0 and at least one agent")
    rng = np.random.default_rng(seed)
    if probs is not None:
        probs = np.asarray(probs, dtype=float)
        probs = probs / probs.sum()
    return rng.choice(n_agents, size=n, p=probs)
