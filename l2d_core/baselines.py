"""SPEC §8 baseline routers, with the rejector's interface so the benchmark treats them alike.

Estimators follow scikit-learn's contract: ``__init__`` stores arguments, ``fit(X, data)``
returns ``self``, learned state ends in ``_``; ``score`` is the one scoring method and
``predict`` turns scores into the chosen agent per query, (N,) int. ``X`` are the same frozen
encoder features the fast-mode rejector uses (``bench.X_train`` / ``bench.X_test``).

- :class:`HybridRouter` (Hybrid LLM, Ding et al. 2024): a classifier of "the weak agent S is
  good enough" — ``kind="det"``: label 1{q(S) ≥ q(L)} with the SPEC's quality q = −c_j(x, y)
  summed over both endpoints (α = 1, β = 0 unless ``costs`` is given); ``kind="prob"``: the
  soft label P[q(S) ≥ q(L)] where each answer is judged right with probability equal to its
  F1 (graded quality; with 0/1 F1 it is the ``det`` label), i.e. 1 − (1 − F1_S)·F1_L;
  ``kind="trans"``: 1{F1_S ≥ F1_L − t}, the relaxation t picked so the labels are as
  balanced as they can be (Hybrid LLM's criterion; with deterministic extractive agents many
  queries tie — both right — so exact balance is often out of reach: ``t_`` and
  ``label_mean_`` record what was reached). S is the main agent (0); L is the expert of best
  training EM (``strong_``) — with J + 1 > 2 agents the router only ever chooses between those
  two. S answers when the score ≥ a threshold; :func:`calibrate_threshold` sets the threshold
  for a target share of expert calls (RouteLLM).
- :class:`KNNRouter`, :class:`MLPRouter` (RouterBench): predicted quality (EM or F1) of every
  agent, (N, A); the query goes to argmax_j λ·quality_j − cost_j (:func:`utility_choice`);
  sweeping the willingness to pay λ (:func:`lambda_grid`) traces the cost curve.
- :class:`EnsembleRouter`: every agent answers, the most frequent normalized answer wins,
  ties go to the strongest agent (training EM); score it with :func:`rescore` against the
  gold answers. Its cost is the sum of every agent's.

The heads are small MLPs on standardized features trained by :func:`l2d_core.training.train_loop`
with binary cross-entropy (soft targets allowed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from .costs import CostConfig, cost_matrix, query_costs
from .policies import plugin_policy
from .rejector import _standardize
from .routing_data import RoutingData
from .runtime import set_seed
from .squad_eval import exact_match, f1, normalize_answer
from .training import FAST_CONFIG, TrainConfig, train_loop

__all__ = [
    "HYBRID_KINDS",
    "QUALITY_TARGETS",
    "hybrid_labels",
    "calibrate_threshold",
    "utility_choice",
    "lambda_grid",
    "cost_aware_choice",
    "majority_vote",
    "rescore",
    "HybridRouter",
    "KNNRouter",
    "MLPRouter",
    "EnsembleRouter",
]

HYBRID_KINDS = ("det", "prob", "trans")
QUALITY_TARGETS = ("em", "f1")


# --- pure helpers -----------------------------------------------------------------------------


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

    >>> from l2d_core.routing_data import RoutingData
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


def majority_vote(answers: np.ndarray, preference: Sequence[int]) -> np.ndarray:
    """Index of the agent whose answer wins the vote, (N,): the most frequent normalized
    answer (``None`` = no prediction, abstains); among tied answers, and among the agents
    giving the winning one, the agent first in ``preference`` (strongest first).

    >>> a = np.array([["Paris", "paris.", "Rome"], ["A", "B", "C"], [None, "x", "the X"]], dtype=object)
    >>> majority_vote(a, [2, 1, 0]).tolist()
    [1, 2, 2]
    """
    answers = np.asarray(answers, dtype=object)
    rank = {int(j): r for r, j in enumerate(preference)}
    if sorted(rank) != list(range(answers.shape[1])):
        raise ValueError("preference must list every agent once")
    out = np.empty(len(answers), dtype=int)
    for n, row in enumerate(answers):
        norm = [normalize_answer(a) if isinstance(a, str) else None for a in row]
        votes: dict[str, int] = {}
        for a in norm:
            if a is not None:
                votes[a] = votes.get(a, 0) + 1
        top = max(votes.values(), default=0)
        voters = [j for j, a in enumerate(norm) if a is not None and votes[a] == top]
        out[n] = min(voters or range(len(row)), key=rank.__getitem__)
    return out


def rescore(texts: Sequence[str | None], golds: Sequence[Sequence[str]], v2: bool = False):
    """EM and F1 (0/1 and [0, 1]) of answer texts against the gold answers; ``None`` → 0.

    >>> em, f = rescore(["Paris", "the big cat", None], [["paris"], ["big dog"], ["x"]])
    >>> em.tolist(), f.round(2).tolist()
    ([1.0, 0.0, 0.0], [1.0, 0.5, 0.0])
    """
    em = np.array([exact_match(t, g, v2) if isinstance(t, str) else 0.0 for t, g in zip(texts, golds)])
    fs = np.array([f1(t, g, v2) if isinstance(t, str) else 0.0 for t, g in zip(texts, golds)])
    return em, fs


# --- estimators ----------------------------------------------------------------------------


def _mlp(in_dim: int, out_dim: int, hidden: int, dropout: float) -> nn.Module:
    """(B, d) → (B, out_dim) logits; the rejector head's shape with one output per target."""
    return nn.Sequential(
        nn.Dropout(dropout),
        nn.Linear(in_dim, hidden),
        nn.GELU(),
        nn.Dropout(dropout),
        nn.Linear(hidden, out_dim),
    )


def _quality(data: RoutingData, target: str) -> np.ndarray:
    if target not in QUALITY_TARGETS:
        raise ValueError(f"unknown quality target {target!r}; known: {QUALITY_TARGETS}")
    return np.asarray(data.em if target == "em" else data.f1, dtype=np.float32)  # (N, A)


def _check_xy(X: np.ndarray, data: RoutingData) -> None:
    if len(X) != len(data):
        raise ValueError(f"{len(X)} feature rows for {len(data)} queries")
    if len(data) == 0:
        raise ValueError("cannot fit a router on an empty training split")


@dataclass
class _HeadRouter:
    """A small MLP on standardized features, trained with BCE on targets in [0, 1]."""

    config: TrainConfig = FAST_CONFIG
    head_: nn.Module | None = field(default=None, init=False, repr=False)
    mu_: np.ndarray | None = field(default=None, init=False, repr=False)
    sd_: np.ndarray | None = field(default=None, init=False, repr=False)
    history_: dict = field(default_factory=dict, init=False, repr=False)

    def _x(self, X: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(((np.asarray(X, np.float32) - self.mu_) / self.sd_).astype(np.float32))

    def _fit_head(self, X: np.ndarray, Y: np.ndarray) -> None:
        self.mu_, self.sd_ = _standardize(np.asarray(X, np.float32))
        x, y = self._x(X), torch.from_numpy(np.asarray(Y, np.float32))  # (N, d), (N, K)
        cfg = self.config
        set_seed(cfg.seed)
        self.head_ = _mlp(x.shape[1], y.shape[1], cfg.hidden, cfg.dropout)
        bce = nn.functional.binary_cross_entropy_with_logits
        self.history_ = train_loop(self.head_, len(x), lambda idx: bce(self.head_(x[idx]), y[idx]), cfg)

    def _proba(self, X: np.ndarray) -> np.ndarray:
        if self.head_ is None:
            raise RuntimeError("call fit() first")
        with torch.no_grad():
            return torch.sigmoid(self.head_.eval()(self._x(X))).numpy().astype(np.float64)  # (N, K)


@dataclass
class HybridRouter(_HeadRouter):
    """Hybrid LLM router r_det / r_prob / r_trans between the main agent and ``strong_``."""

    kind: str = "det"
    costs: CostConfig | None = None  # quality −c_j of ``det``; None: α = 1, β = 0
    strong_: int = field(default=1, init=False)
    t_: float = field(default=0.0, init=False)
    label_mean_: float = field(default=float("nan"), init=False)

    def fit(self, X: np.ndarray, data: RoutingData) -> HybridRouter:
        _check_xy(X, data)
        self.strong_ = 1 + int(np.argmax(data.em[:, 1:].mean(axis=0)))
        y, self.t_ = hybrid_labels(data, self.kind, self.strong_, self.costs)
        self.label_mean_ = float(y.mean())
        self._fit_head(X, y[:, None])
        return self

    def score(self, X: np.ndarray) -> np.ndarray:
        """P[S is good enough] per query, (N,)."""
        return self._proba(X)[:, 0]

    def predict(self, X: np.ndarray, threshold: float = 0.5) -> np.ndarray:
        """S (agent 0) where score ≥ threshold, else the strong expert."""
        return np.where(self.score(X) >= threshold, 0, self.strong_)


@dataclass
class MLPRouter(_HeadRouter):
    """RouterBench MLP router: one head predicting every agent's EM (or F1) from the features."""

    target: str = "em"
    cost_: np.ndarray | None = field(default=None, init=False, repr=False)

    def fit(self, X: np.ndarray, data: RoutingData) -> MLPRouter:
        _check_xy(X, data)
        self.cost_ = data.agent_gflops
        self._fit_head(X, _quality(data, self.target))
        return self

    def score(self, X: np.ndarray) -> np.ndarray:
        """Predicted quality of every agent, (N, A) in [0, 1]."""
        return self._proba(X)

    def predict(self, X: np.ndarray, lam: float = np.inf, cost: np.ndarray | None = None) -> np.ndarray:
        return utility_choice(self.score(X), lam, self.cost_ if cost is None else cost)


@dataclass
class KNNRouter:
    """RouterBench kNN router: an agent's predicted quality is its mean EM (or F1) over the
    ``k`` training queries nearest in cosine similarity of the centred features."""

    k: int = 20
    target: str = "em"
    batch: int = 512  # test rows per similarity block
    X_: np.ndarray | None = field(default=None, init=False, repr=False)
    Y_: np.ndarray | None = field(default=None, init=False, repr=False)
    mu_: np.ndarray | None = field(default=None, init=False, repr=False)
    cost_: np.ndarray | None = field(default=None, init=False, repr=False)

    def _unit(self, X: np.ndarray) -> np.ndarray:
        z = np.asarray(X, np.float32) - self.mu_
        return z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)

    def fit(self, X: np.ndarray, data: RoutingData) -> KNNRouter:
        _check_xy(X, data)
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        self.mu_ = np.asarray(X, np.float32).mean(axis=0)
        self.X_, self.Y_ = self._unit(X), _quality(data, self.target)
        self.cost_ = data.agent_gflops
        return self

    def score(self, X: np.ndarray) -> np.ndarray:
        """Mean quality of each agent over the k nearest training queries, (N, A)."""
        if self.X_ is None:
            raise RuntimeError("call fit() first")
        k = min(self.k, len(self.X_))
        Z, out = self._unit(X), []
        for i in range(0, len(Z), self.batch):
            sim = Z[i : i + self.batch] @ self.X_.T  # (b, N_train)
            nn_idx = np.argpartition(-sim, k - 1, axis=1)[:, :k]  # (b, k)
            out.append(self.Y_[nn_idx].mean(axis=1))
        return np.concatenate(out).astype(np.float64) if out else np.zeros((0, self.Y_.shape[1]))

    def predict(self, X: np.ndarray, lam: float = np.inf, cost: np.ndarray | None = None) -> np.ndarray:
        return utility_choice(self.score(X), lam, self.cost_ if cost is None else cost)


@dataclass
class EnsembleRouter:
    """Majority vote of every agent (SPEC §8); ``fit`` learns the tie order (training EM)."""

    order_: tuple[int, ...] = field(default=(), init=False)
    agent_ids_: tuple[str, ...] = field(default=(), init=False)

    def fit(self, X: np.ndarray | None, data: RoutingData) -> EnsembleRouter:
        """``X`` is unused (the vote needs no features); kept for the common interface."""
        if len(data) == 0:
            raise ValueError("cannot fit a router on an empty training split")
        em = data.em.mean(axis=0)
        self.order_ = tuple(int(j) for j in sorted(range(data.n_agents), key=lambda j: (-em[j], j)))
        self.agent_ids_ = data.agent_ids
        return self

    def score(self, answers: np.ndarray) -> np.ndarray:
        """Votes for each agent's answer (agents giving the same normalized answer), (N, A)."""
        norm = np.vectorize(lambda a: normalize_answer(a) if isinstance(a, str) else None, otypes=[object])(
            np.asarray(answers, dtype=object)
        )
        same = (norm[:, :, None] == norm[:, None, :]) & (norm != None)[:, :, None]  # noqa: E711
        return same.sum(axis=2)

    def predict(self, answers: np.ndarray) -> np.ndarray:
        """The agent whose answer wins, (N,); its answer text is the ensemble's."""
        if not self.order_:
            raise RuntimeError("call fit() first")
        if np.shape(answers)[1:] != (len(self.order_),):
            raise ValueError(f"answers must be (N, {len(self.order_)})")
        return majority_vote(answers, self.order_)

    def vote(self, answers: np.ndarray) -> np.ndarray:
        """The ensemble's answer text per query, (N,) object."""
        answers = np.asarray(answers, dtype=object)
        return answers[np.arange(len(answers)), self.predict(answers)]
