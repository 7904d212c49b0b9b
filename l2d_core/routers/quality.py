"""RouterBench routers (Hu et al., 2024; SPEC §8 family): predict every agent's quality (EM or
F1) per query, then send the query to argmax_j λ·quality_j − cost_j (:func:`utility_choice`);
sweeping the willingness to pay λ (:func:`lambda_grid`) traces the cost curve. At a cost setting
of SPEC §3 they use the plug-in rule with 1 − quality as the error probability
(:func:`cost_aware_choice`). Estimators: :class:`KNNAccuracy`, :class:`MLPAccuracy` (``fit(X, y)``
with ``y`` every agent's quality, ``predict(X)``); routers: ``knn``, ``mlp``.
"""

from __future__ import annotations

import numpy as np

from ..agents.routing_data import RoutingData
from ..method.costs import CostConfig
from ..method.policies import plugin_policy
from ..method.training import FAST_CONFIG
from . import trained
from .base import OperatingPoint, Router
from .calibration import sigmoid
from .decision import Decision
from .estimator import Estimator, check_fitted
from .head import HeadEstimator
from .registry import register

__all__ = [
    "QUALITY_TARGETS",
    "quality_targets",
    "utility_choice",
    "lambda_grid",
    "cost_aware_choice",
    "MLPAccuracy",
    "KNNAccuracy",
    "QualityRouter",
    "KNNRouter",
    "MLPRouter",
]

QUALITY_TARGETS = ("em", "f1")


def quality_targets(data: RoutingData, target: str) -> np.ndarray:
    """Each agent's EM or F1 per query, (N, A) float32: what the quality routers predict."""
    if target not in QUALITY_TARGETS:
        raise ValueError(f"unknown quality target {target!r}; known: {QUALITY_TARGETS}")
    return np.asarray(data.em if target == "em" else data.f1, dtype=np.float32)  # (N, A)


def _check_fit(X: np.ndarray, y: np.ndarray) -> None:
    if len(X) != len(y):
        raise ValueError(f"{len(X)} feature rows for {len(y)} queries")
    if len(y) == 0:
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


class MLPAccuracy(HeadEstimator):
    """RouterBench's MLP: one head predicting every agent's quality (EM or F1 per query, ``y``
    (N, A) in [0, 1]) from the features; ``predict(X)`` (N, A)."""

    def _loss(self, out, target):
        from torch.nn.functional import binary_cross_entropy_with_logits

        return binary_cross_entropy_with_logits(out, target)

    def fit(self, X: np.ndarray, y: np.ndarray) -> MLPAccuracy:
        _check_fit(X, y)
        self._fit_head(X, np.asarray(y, np.float32))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predicted quality of every agent, (N, A) in [0, 1]."""
        return sigmoid(self.raw_scores(X).astype(np.float64))


class KNNAccuracy(Estimator):
    """RouterBench's kNN: an agent's predicted quality is its mean quality over the ``k``
    training queries nearest in cosine similarity of the centred features (scikit-learn's
    ``KNeighborsRegressor``, brute force); ``predict(X)`` (N, A)."""

    def __init__(self, k: int = 20):
        self.k = k

    def fit(self, X: np.ndarray, y: np.ndarray) -> KNNAccuracy:
        _check_fit(X, y)
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        X = np.asarray(X, np.float32)
        self.mu_ = X.mean(axis=0)
        from sklearn.neighbors import KNeighborsRegressor

        self.knn_ = KNeighborsRegressor(n_neighbors=min(self.k, len(X)), metric="cosine", algorithm="brute")
        self.knn_.fit(X - self.mu_, np.asarray(y, np.float32))
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Mean quality of each agent over the k nearest training queries, (N, A)."""
        check_fitted(self, "knn_")
        return self.knn_.predict(np.asarray(X, np.float32) - self.mu_).astype(np.float64)


class QualityRouter(Router):
    """RouterBench routers: predicted EM of every agent; at each β₁ the plug-in rule of SPEC §5
    with 1 − EM̂ as the error probability; swept over the willingness to pay λ."""

    reads_embeddings = True
    target = "em"

    def _estimator(self):
        raise NotImplementedError

    def _fit(self) -> None:
        bench, est = self.bench_, self._estimator()
        y = quality_targets(bench.train, self.target)
        compute = lambda: {"test": est.fit(bench.X_train, y).predict(bench.X_test)}  # noqa: E731
        self.quality_ = trained.memo_arrays(self.id, bench, est, compute)["test"]

    def decide(self, costs: CostConfig) -> Decision:
        return Decision(cost_aware_choice(self.quality_, costs), self.bench_.rejector_gflops)

    def sweep(self):
        cost, rg = self.bench_.train.agent_gflops, self.bench_.rejector_gflops
        return [
            OperatingPoint(
                None, Decision(utility_choice(self.quality_, lam, cost), rg), None, {"lam": float(lam)}
            )
            for lam in lambda_grid(cost)
        ]


@register
class KNNRouter(QualityRouter):
    id = "knn"
    label = "RouterBench kNN"
    description = (
        "Predicts each agent's accuracy from the 20 most similar training questions (deterministic)."
    )

    def _estimator(self):
        return KNNAccuracy()


@register
class MLPRouter(QualityRouter):
    id = "mlp"
    label = "RouterBench MLP"
    description = "Predicts each agent's accuracy with a small network on the question and context."

    def _estimator(self):
        return MLPAccuracy(config=FAST_CONFIG.but(seed=self.seed_))
