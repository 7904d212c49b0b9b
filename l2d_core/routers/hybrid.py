"""Hybrid LLM routers (Ding et al., 2024; SPEC §8): a classifier of "the weak agent S is good
enough", between the main agent S (agent 0) and the expert L of best training EM.

- ``kind="det"``: label 1{q(S) ≥ q(L)} with the SPEC's quality q = −c_j(x, y) summed over both
  endpoints (α = 1, β = 0 unless ``costs`` is given);
- ``kind="prob"``: the soft label P[q(S) ≥ q(L)] where each answer is judged right with
  probability equal to its F1 (graded quality; with 0/1 F1 it is the ``det`` label), i.e.
  1 − (1 − F1_S)·F1_L;
- ``kind="trans"``: 1{F1_S ≥ F1_L − t}, the relaxation t picked so the labels are as balanced as
  they can be (with deterministic extractive agents many queries tie — both right — so exact
  balance is often out of reach: ``t_`` and ``label_mean_`` record what was reached).

S answers when the score ≥ a threshold; :func:`share_thresholds` sets the threshold for a target
share of expert calls (RouteLLM). With J + 1 > 2 agents the router only ever chooses between S
and L. The estimator (:class:`HybridClassifier`) is a binary classifier of the labels; the routers
``r-det``, ``r-prob`` and ``r-trans`` put it on a benchmark.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..agents.routing_data import RoutingData
from ..method.costs import CostConfig, cost_matrix, query_costs
from ..method.training import FAST_CONFIG
from . import trained
from .base import TARGET_SHARES, OperatingPoint, Router
from .calibration import sigmoid
from .decision import Decision
from .head import HeadEstimator
from .registry import register

__all__ = ["HYBRID_KINDS", "hybrid_labels", "share_thresholds", "HybridClassifier", "HybridRouter"]

HYBRID_KINDS = ("det", "prob", "trans")


def _balanced_relaxation(d: np.ndarray) -> float:
    """The t of ``1{d ≥ −t}`` whose label mean is nearest 0.5 (ties: the smallest |t|)."""
    cands = np.unique(np.concatenate([[0.0], -np.asarray(d, float)]))
    ds = np.sort(np.asarray(d, float))
    means = 1.0 - np.searchsorted(ds, -cands, side="left") / len(ds)  # mean of d >= -t
    gap = np.abs(means - 0.5)
    best = np.flatnonzero(np.isclose(gap, gap.min()))
    return float(cands[best[np.argmin(np.abs(cands[best]))]])


def hybrid_labels(
    data: RoutingData, kind: str, strong: int, costs: CostConfig | None = None
) -> tuple[np.ndarray, float]:
    """Training labels of the Hybrid LLM routers (weak S = agent 0, strong L = ``strong``),
    (N,) in [0, 1], and the relaxation t (0 unless ``kind="trans"``).

    >>> from l2d_core.agents.routing_data import RoutingData
    >>> ok = np.array([[1, 1], [0, 1], [0, 0], [1, 0]], dtype=bool)
    >>> f = np.array([[1.0, 1.0], [0.5, 1.0], [0.2, 0.0], [1.0, 0.0]])
    >>> d = RoutingData("toy", ("s", "l"), tuple("abcd"), np.zeros(4), ok, ok, ok * 1.0, f,
    ...                 np.ones((4, 2)), np.full((4, 2), None))
    >>> hybrid_labels(d, "det", 1)[0].tolist()
    [1.0, 0.0, 1.0, 1.0]
    >>> hybrid_labels(d, "prob", 1)[0].tolist()
    [1.0, 0.5, 1.0, 1.0]
    >>> hybrid_labels(d, "trans", 1)    # t = -0.2: S must beat L by 0.2 F1 (half the labels 1)
    (array([0., 0., 1., 1.]), -0.2)
    """
    if kind not in HYBRID_KINDS:
        raise ValueError(f"unknown Hybrid router kind {kind!r}; known: {HYBRID_KINDS}")
    if not 1 <= strong < data.n_agents:
        raise ValueError(f"strong agent index {strong} is not an expert of a {data.n_agents}-agent pool")
    if kind == "det":
        j = data.n_agents - 1
        costs = costs or CostConfig((1.0,) * j, (0.0,) * j)
        qc = query_costs(cost_matrix(data.errors, costs))  # (N, A): −quality
        return (qc[:, 0] <= qc[:, strong]).astype(float), 0.0
    fs, fl = data.f1[:, 0], data.f1[:, strong]
    if kind == "prob":
        return 1.0 - (1.0 - fs) * fl, 0.0
    t = _balanced_relaxation(fs - fl)
    return (fs - fl >= -t - 1e-12).astype(float), t


def share_thresholds(scores: np.ndarray, target_share: float | np.ndarray) -> float | np.ndarray:
    """RouteLLM calibration: the threshold τ on ``scores`` (P[weak agent good enough]) that sends
    ``target_share`` of these queries to the expert (score < τ); the weak agent answers when
    score ≥ τ. Share 0 → −inf, share 1 → +inf; with tied scores the share reached is at most
    the target.

    >>> s = np.array([0.1, 0.4, 0.35, 0.9, 0.7])
    >>> float(share_thresholds(s, 0.4))            # the two lowest go to the expert
    0.375
    >>> share_thresholds(s, np.array([0.0, 1.0])).tolist()
    [-inf, inf]
    """
    s = np.sort(np.asarray(scores, float))
    if len(s) == 0:
        raise ValueError("share_thresholds needs at least one score")
    shares = np.asarray(target_share, float)
    if np.any((shares < 0) | (shares > 1)):
        raise ValueError("target shares of expert calls must lie in [0, 1]")
    k = np.rint(shares * len(s)).astype(int)
    lo, hi = s[np.clip(k - 1, 0, len(s) - 1)], s[np.clip(k, 0, len(s) - 1)]
    out = np.where(lo < hi, (lo + hi) / 2, hi)
    out = np.where(k <= 0, -np.inf, np.where(k >= len(s), np.inf, out))
    return float(out) if out.ndim == 0 else out


class HybridClassifier(HeadEstimator):
    """A binary classifier of "the weak agent is good enough": ``fit(X, y)`` with labels ``y``
    (N,) in [0, 1] (:func:`hybrid_labels`), ``predict_proba(X)`` the probability per query."""

    def _loss(self, out, target):
        from torch.nn.functional import binary_cross_entropy_with_logits

        return binary_cross_entropy_with_logits(out, target)

    def fit(self, X: np.ndarray, y: np.ndarray) -> HybridClassifier:
        y = np.asarray(y, np.float32)
        if len(X) != len(y):
            raise ValueError(f"{len(X)} feature rows for {len(y)} queries")
        if len(y) == 0:
            raise ValueError("cannot fit a router on an empty training split")
        self._fit_head(X, y[:, None])
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """P[S is good enough] per query, (N,)."""
        return sigmoid(self.raw_scores(X)[:, 0].astype(np.float64))


class HybridRouter(Router):
    """Hybrid LLM routers between the main agent and the expert of best training EM: at each β₁
    the threshold 1 − β_L (defer when the estimated P[S worse than L] exceeds the expert's
    per-endpoint consultation cost); swept at thresholds calibrated on the training scores for
    target shares of expert calls (RouteLLM)."""

    kind = ""
    reads_embeddings = True
    role = "paper-baseline"  # the paper's r_* columns
    paper_column: ClassVar[int] = 0  # their order in the paper's tables

    def _fit(self) -> None:
        bench = self.bench_
        train = bench.train
        strong = 1 + int(np.argmax(train.em[:, 1:].mean(axis=0)))
        y, t = hybrid_labels(train, self.kind, strong)
        est = HybridClassifier(config=FAST_CONFIG.but(seed=self.seed_))

        def compute():
            est.fit(bench.X_train, y)
            return {"train": est.predict_proba(bench.X_train), "test": est.predict_proba(bench.X_test)}

        s = trained.memo_arrays(f"hybrid-{self.kind}", bench, est, compute)
        self.train_scores_, self.test_scores_ = s["train"], s["test"]
        self.strong_, self.t_ = strong, t

    def _at(self, threshold: float, **extra) -> Decision:
        choice = np.where(self.test_scores_ >= threshold, 0, self.strong_)
        return Decision(choice, self.bench_.rejector_gflops, extra=dict(threshold=threshold, **extra))

    def decide(self, costs: CostConfig) -> Decision:
        return self._at(1.0 - costs.beta[self.strong_ - 1], t=self.t_)

    def sweep(self):
        thresholds = share_thresholds(self.train_scores_, np.array(TARGET_SHARES))
        return [
            OperatingPoint(None, self._at(float(t), target_share=s))
            for s, t in zip(TARGET_SHARES, thresholds)
        ]


@register
class HybridDet(HybridRouter):
    id, kind = "r-det", "det"
    paper_column = 1
    label = "Hybrid-LLM r-det"
    description = "Hybrid-LLM router: a classifier of 'the main agent is at least as good as the expert'."


@register
class HybridProb(HybridRouter):
    id, kind = "r-prob", "prob"
    paper_column = 0
    label = "Hybrid-LLM r-prob"
    description = "Hybrid-LLM router trained on soft labels (graded answer quality, F1)."


@register
class HybridTrans(HybridRouter):
    id, kind = "r-trans", "trans"
    paper_column = 2
    label = "Hybrid-LLM r-trans"
    description = "Hybrid-LLM router with relaxed labels, balanced between the two agents."
