"""RouterBench routers (Hu et al., 2024; SPEC §8 family): predict every agent's quality (EM or
F1) per query, then send the query to argmax_j λ·quality_j − cost_j (:func:`utility_choice`);
sweeping the willingness to pay λ (:func:`lambda_grid`) traces the cost curve. At a cost setting
of SPEC §3 they use the plug-in rule with 1 − quality as the error probability
(:func:`cost_aware_choice`).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator
from sklearn.neighbors import KNeighborsRegressor
from sklearn.utils.validation import check_is_fitted
from torch import nn

from ..agents.routing_data import RoutingData
from ..method.costs import CostConfig
from ..method.policies import plugin_policy
from ..method.training import FAST_CONFIG, TrainConfig
from .head import HeadEstimator

__all__ = [
    "QUALITY_TARGETS",
    "quality_targets",
    "check_fit_input",
    "utility_choice",
    "lambda_grid",
    "cost_aware_choice",
    "KNNRouter",
    "MLPRouter",
]

QUALITY_TARGETS = ("em", "f1")


def quality_targets(data: RoutingData, target: str) -> np.ndarray:
    """Each agent's EM or F1 per query, (N, A) float32: what the quality routers predict."""
    if target not in QUALITY_TARGETS:
        raise ValueError(f"unknown quality target {target!r}; known: {QUALITY_TARGETS}")
    return np.asarray(data.em if target == "em" else data.f1, dtype=np.float32)  # (N, A)


def check_fit_input(X: np.ndarray, data: RoutingData) -> None:
    """One feature row per query, and at least one query."""
    if len(X) != len(data):
        raise ValueError(f"{len(X)} feature rows for {len(data)} queries")
    if len(data) == 0:
        raise ValueError("cannot fit a router on an empty training split")


def utility_choice(quality: np.ndarray, lam: float, cost: np.ndarray) -> np.ndarray:
    """RouterBench: argmax_j λ·quality_j − cost_j per query; λ = inf picks the best predicted
    quality (ties → cheapest), λ = 0 the cheapest agent (ties → best quality).

    >>> q = np.array([[0.6, 0.9], [0.8, 0.81]])
    >>> [utility_choice(q, lam, np.array([5.0, 100.0])).tolist() for lam in (0, 500, np.inf)]
    [[0, 0], [1, 0], [1, 1]]
    """
    q = np.asarray(quality, float)
    c = np.broadcast_to(np.asarray(cost, float), q.shape)
    if lam < 0:
        raise ValueError(f"λ must be >= 0, got {lam}")
    if np.isinf(lam):
        return np.where(np.isclose(q, q.max(1, keepdims=True)), c, np.inf).argmin(1)
    if lam == 0:
        return np.where(np.isclose(c, c.min(1, keepdims=True)), -q, np.inf).argmin(1)
    return (lam * q - c).argmax(1)


def lambda_grid(cost: np.ndarray, n: int = 40) -> np.ndarray:
    """λ values that sweep a pool from its cheapest to its best agent: 0, ``n`` geometric steps
    from half the smallest cost gap (below it quality differences ≤ 1 never pay) to 1000× the
    largest (quality differences of 0.001 pay), and inf.

    >>> lambda_grid(np.array([5.0, 1730.0]), n=3).round(1).tolist()
    [0.0, 862.5, 38572.2, 1725000.0, inf]
    """
    c = np.unique(np.asarray(cost, float))
    gaps = np.diff(c)
    if len(gaps) == 0:
        return np.array([0.0, np.inf])
    lam = np.geomspace(0.5 * gaps.min(), 1000 * (c[-1] - c[0]), n)
    return np.concatenate([[0.0], lam, [np.inf]])


def cost_aware_choice(quality: np.ndarray, costs: CostConfig) -> np.ndarray:
    """The plug-in rule of SPEC §5 with 1 − quality as every endpoint's error probability:
    argmin_j α_j(1 − quality_j) + β_j (α_0 = 1, β_0 = 0) — a RouterBench router at a β₁ point.

    >>> cost_aware_choice(np.array([[0.6, 0.9], [0.8, 0.85]]), CostConfig((1.0,), (0.1,))).tolist()
    [1, 0]
    """
    p_err = 1.0 - np.asarray(quality, float)  # (N, A)
    return plugin_policy(np.stack([p_err, p_err], axis=1), costs)


class MLPRouter(HeadEstimator):
    """RouterBench MLP router: one head predicting every agent's EM (or F1) from the features."""

    def __init__(self, config: TrainConfig = FAST_CONFIG, target: str = "em", progress: bool = False):
        super().__init__(config, progress)
        self.target = target

    def _loss(self, out, target):
        return nn.functional.binary_cross_entropy_with_logits(out, target)

    def fit(self, X: np.ndarray, data: RoutingData) -> MLPRouter:
        check_fit_input(X, data)
        self.cost_ = data.agent_gflops
        self._fit_head(X, quality_targets(data, self.target))
        return self

    def score(self, X: np.ndarray) -> np.ndarray:
        """Predicted quality of every agent, (N, A) in [0, 1]."""
        return expit(self.raw_scores(X).astype(np.float64))

    def predict(self, X: np.ndarray, lam: float = np.inf, cost: np.ndarray | None = None) -> np.ndarray:
        return utility_choice(self.score(X), lam, self.cost_ if cost is None else cost)

    def checkpoint_config(self) -> dict:
        return {**super().checkpoint_config(), "target": self.target, "cost": [float(c) for c in self.cost_]}

    @classmethod
    def _params_from(cls, config: dict) -> dict:
        return {"target": config["target"]}

    def _restore(self, config: dict) -> None:
        self.cost_ = np.asarray(config["cost"], dtype=float)


class KNNRouter(BaseEstimator):
    """RouterBench kNN router: an agent's predicted quality is its mean EM (or F1) over the
    ``k`` training queries nearest in cosine similarity of the centred features
    (scikit-learn's ``KNeighborsRegressor``, brute force)."""

    def __init__(self, k: int = 20, target: str = "em"):
        self.k = k
        self.target = target

    def fit(self, X: np.ndarray, data: RoutingData) -> KNNRouter:
        check_fit_input(X, data)
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        X = np.asarray(X, np.float32)
        self.mu_ = X.mean(axis=0)
        self.knn_ = KNeighborsRegressor(n_neighbors=min(self.k, len(X)), metric="cosine", algorithm="brute")
        self.knn_.fit(X - self.mu_, quality_targets(data, self.target))
        self.cost_ = data.agent_gflops
        return self

    def score(self, X: np.ndarray) -> np.ndarray:
        """Mean quality of each agent over the k nearest training queries, (N, A)."""
        check_is_fitted(self, "knn_")
        return self.knn_.predict(np.asarray(X, np.float32) - self.mu_).astype(np.float64)

    def predict(self, X: np.ndarray, lam: float = np.inf, cost: np.ndarray | None = None) -> np.ndarray:
        return utility_choice(self.score(X), lam, self.cost_ if cost is None else cost)
