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

S answers when the score ≥ a threshold; :func:`calibrate_threshold` sets the threshold for a
target share of expert calls (RouteLLM). With J + 1 > 2 agents the router only ever chooses
between S and L.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit
from torch import nn

from ..agents.routing_data import RoutingData
from ..method.costs import CostConfig, cost_matrix, query_costs
from ..method.training import FAST_CONFIG, TrainConfig
from .head import HeadEstimator

__all__ = ["HYBRID_KINDS", "hybrid_labels", "calibrate_threshold", "HybridRouter"]

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


def calibrate_threshold(scores: np.ndarray, target_share: float | np.ndarray) -> float | np.ndarray:
    """RouteLLM calibration: the threshold τ on ``scores`` (P[weak agent good enough]) that sends
    ``target_share`` of these queries to the expert (score < τ); the weak agent answers when
    score ≥ τ. Share 0 → −inf, share 1 → +inf; with tied scores the share reached is at most
    the target.

    >>> s = np.array([0.1, 0.4, 0.35, 0.9, 0.7])
    >>> float(calibrate_threshold(s, 0.4))            # the two lowest go to the expert
    0.375
    >>> calibrate_threshold(s, np.array([0.0, 1.0])).tolist()
    [-inf, inf]
    """
    s = np.sort(np.asarray(scores, float))
    if len(s) == 0:
        raise ValueError("calibrate_threshold needs at least one score")
    shares = np.asarray(target_share, float)
    if np.any((shares < 0) | (shares > 1)):
        raise ValueError("target shares of expert calls must lie in [0, 1]")
    k = np.rint(shares * len(s)).astype(int)
    lo, hi = s[np.clip(k - 1, 0, len(s) - 1)], s[np.clip(k, 0, len(s) - 1)]
    out = np.where(lo < hi, (lo + hi) / 2, hi)
    out = np.where(k <= 0, -np.inf, np.where(k >= len(s), np.inf, out))
    return float(out) if out.ndim == 0 else out


class HybridRouter(HeadEstimator):
    """Hybrid LLM router r_det / r_prob / r_trans between the main agent and ``strong_``."""

    def __init__(
        self,
        config: TrainConfig = FAST_CONFIG,
        kind: str = "det",
        costs: CostConfig | None = None,  # quality −c_j of ``det``; None: α = 1, β = 0
        progress: bool = False,
    ):
        super().__init__(config, progress)
        self.kind = kind
        self.costs = costs

    def _loss(self, out, target):
        return nn.functional.binary_cross_entropy_with_logits(out, target)

    def fit(self, X: np.ndarray, data: RoutingData) -> HybridRouter:
        if len(X) != len(data):
            raise ValueError(f"{len(X)} feature rows for {len(data)} queries")
        if len(data) == 0:
            raise ValueError("cannot fit a router on an empty training split")
        self.strong_ = 1 + int(np.argmax(data.em[:, 1:].mean(axis=0)))
        y, self.t_ = hybrid_labels(data, self.kind, self.strong_, self.costs)
        self.label_mean_ = float(y.mean())
        self._fit_head(X, y[:, None])
        return self

    def score(self, X: np.ndarray) -> np.ndarray:
        """P[S is good enough] per query, (N,)."""
        return expit(self.raw_scores(X)[:, 0].astype(np.float64))

    def predict(self, X: np.ndarray, threshold: float = 0.5) -> np.ndarray:
        """S (agent 0) where score ≥ threshold, else the strong expert."""
        return np.where(self.score(X) >= threshold, 0, self.strong_)

    def checkpoint_config(self) -> dict:
        learned = {"strong": self.strong_, "t": self.t_, "label_mean": self.label_mean_}
        return {**super().checkpoint_config(), "kind": self.kind, "costs": _costs_doc(self.costs), **learned}

    @classmethod
    def _params_from(cls, config: dict) -> dict:
        costs = config.get("costs")
        return {"kind": config["kind"], "costs": CostConfig(**costs) if costs else None}

    def _restore(self, config: dict) -> None:
        self.strong_, self.t_, self.label_mean_ = int(config["strong"]), config["t"], config["label_mean"]


def _costs_doc(costs: CostConfig | None) -> dict | None:
    return None if costs is None else {"alpha": list(costs.alpha), "beta": list(costs.beta)}
