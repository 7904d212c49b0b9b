"""The post-hoc (cascade) router of SPEC §5: it decides after the main agent has answered.

The paper's rejector sees only ``(question, context)``. A post-hoc router also sees the main
agent's answer and cheap signals about it (:func:`~l2d_core.routers.features.answer_features`,
:func:`~l2d_core.routers.features.extra_features`): whether cheap helper agents agree with
it, its length, where it occurs in the context, the question type. Its cost always includes
running the main agent and the helpers (:func:`posthoc_gflops`); a deferred query then pays
the expert on top. Its calibrated error estimates plug into the reweight policy (SPEC §5).

Defaults (features, helpers, calibration) were chosen by cross-validation grouped by article
over the training articles; what they reach on the test articles is in the benchmark reports.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from scipy.special import expit
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ..agents.registry import cheap_builtin_agents, get_agent, list_agents
from ..agents.routing_data import RoutingData
from ..method.costs import CostConfig
from ..method.policies import plugin_policy
from ..method.training import FAST_CONFIG, TrainConfig
from ..stores import atomic_save_file
from .features import POSTHOC_FEATURE_SETS
from .rejector import PluginRejector

__all__ = [
    "FEATURE_SETS",
    "DEFAULT_FEATURES",
    "FEATURE_FORMAT",
    "GFLOPS_SWEEP",
    "DEFAULT_MAX_HELPER_GFLOPS",
    "DEFAULT_CALIBRATION",
    "default_helpers",
    "posthoc_helpers",
    "posthoc_gflops",
    "gflops_costs",
    "PosthocRejector",
]

FEATURE_SETS = POSTHOC_FEATURE_SETS
DEFAULT_FEATURES = "answer+extra"
DEFAULT_MAX_HELPER_GFLOPS = 5.0
DEFAULT_CALIBRATION = "platt"
# Part of the trained-head cache key: bump when the features change.
FEATURE_FORMAT = 3
# Second dense sweep of posthoc_points: β of the dearest expert, every other expert's β in
# proportion to its *marginal* GFLOPs (0 for an agent that already ran), so the policy trades
# error against compute itself; the GFLOPs rule of SPEC §3 (β_j ∝ GFLOPs_j / 20 for j ≥ 2)
# makes a dear expert cheaper than a mid-priced one and never reaches P3's rnet-plus.
GFLOPS_SWEEP: tuple[float, ...] = (0.0, *(float(b) for b in np.geomspace(1e-3, 50.0, 48)))


def default_helpers(dataset: str, main: str, exclude: Sequence[str], max_gflops: float) -> tuple[str, ...]:
    """Cheap agents of the dataset (≤ ``max_gflops`` each), other than the pool's agents."""
    return tuple(
        a.id for a in list_agents(dataset) if a.id != main and a.id not in exclude and a.gflops <= max_gflops
    )


def posthoc_helpers(
    dataset: str, main: str, max_gflops: float = DEFAULT_MAX_HELPER_GFLOPS
) -> tuple[str, ...]:
    """The default helpers of a post-hoc router: the BENCHMARK.md agents of ``dataset``
    (``builtin.json``, so user imports never change the benchmark figures) other than the main
    agent, at most ``max_gflops`` each. Cheap experts of the pool count (P10's dcr … match-lstm)."""
    return cheap_builtin_agents(dataset, main, max_gflops)


def posthoc_gflops(data: RoutingData, helpers: Sequence[str]) -> tuple[RoutingData, float]:
    """Cost accounting of a post-hoc policy: the main agent and the helpers always run, so their
    GFLOPs move into the per-query overhead and their own columns become 0 (a helper may also
    be an expert of the pool, as in P10: routing to it then costs nothing more)."""
    own = dict(zip(data.agent_ids, data.agent_gflops.tolist()))
    overhead = float(data.agent_gflops[0]) + sum(own[h] if h in own else get_agent(h).gflops for h in helpers)
    zero = {data.agent_ids[0]: 0.0, **{h: 0.0 for h in helpers if h in own}}
    return data.with_gflops(zero), overhead


def gflops_costs(data: RoutingData, beta_max: float) -> CostConfig:
    """α = 1 and β_j = ``beta_max`` · G_j / max_k G_k, with G the experts' mean GFLOPs in
    ``data`` (after :func:`posthoc_gflops`: their marginal cost; all 0 → every β is 0).

    >>> from l2d_core.agents.routing_data import RoutingData
    >>> z = np.zeros((1, 3), bool)
    >>> d = RoutingData("d", ("a", "b", "c"), ("q",), np.array(["t"]), z, z, z * 1.0, z * 1.0,
    ...                 np.array([[0.0, 100.0, 1000.0]]), np.empty((1, 3), object))
    >>> gflops_costs(d, 0.5).beta
    (0.05, 0.5)
    """
    g = data.agent_gflops[1:]
    top = float(g.max()) if len(g) else 0.0
    beta = g / top * beta_max if top > 0 else np.zeros_like(g)
    return CostConfig(tuple([1.0] * len(g)), tuple(float(b) for b in beta))


class PosthocRejector(BaseEstimator):
    """Post-hoc error estimator: the plug-in head (``rejector.PluginRejector``, one network
    with a p̂_j^i output per endpoint i and agent j, trained with BCE) over post-hoc features.

    ``calibration="platt"`` holds out ``calibration_fraction`` of the training *articles* and
    fits a per-output logistic map of the head's logits on them (the head is then trained on
    the rest). Follows scikit-learn's contract: ``fit`` returns ``self``, learned state ends in
    ``_``.
    """

    def __init__(
        self,
        config: TrainConfig = FAST_CONFIG,
        calibration: str = DEFAULT_CALIBRATION,
        calibration_fraction: float = 0.25,
        progress: bool = False,
    ):
        self.config = config
        self.calibration = calibration
        self.calibration_fraction = calibration_fraction
        self.progress = progress

    def fit(
        self,
        F: np.ndarray,
        data: RoutingData,
        F_val: np.ndarray | None = None,
        data_val: RoutingData | None = None,
    ) -> PosthocRejector:
        if self.calibration not in ("none", "platt"):
            raise ValueError(f"calibration must be 'none' or 'platt', got {self.calibration!r}")
        F = np.asarray(F, dtype=np.float32)
        if len(F) != len(data):
            raise ValueError(f"{len(F)} feature rows for {len(data)} queries")
        self.agent_ids_ = data.agent_ids
        fit_mask = np.ones(len(data), bool)
        if self.calibration == "platt":
            titles = np.array(sorted(set(data.titles)))
            np.random.default_rng(self.config.seed).shuffle(titles)
            held = titles[: max(1, round(self.calibration_fraction * len(titles)))]
            fit_mask = ~np.isin(data.titles, held)
            if fit_mask.all() or not fit_mask.any():
                raise ValueError("platt calibration needs at least two articles in the training data")
        # a column constant on the rows the head sees (a question type absent from a few
        # articles) gets scale 1 from the head's StandardScaler: it cannot blow up elsewhere
        self.head_ = PluginRejector(config=self.config, progress=self.progress)
        self.head_.fit(F[fit_mask], data.take(fit_mask), F_val, data_val)
        self.platt_ = None
        if self.calibration == "platt":
            z = self.head_.raw_scores(F[~fit_mask])
            self.platt_ = _fit_platt(z, data.errors[~fit_mask])
        return self

    def error_proba(self, F: np.ndarray) -> np.ndarray:
        """p̂_j^i(x) = P[agent j wrong on endpoint i], (N, 2, A)."""
        check_is_fitted(self, "head_")
        z = self.head_.raw_scores(np.asarray(F, dtype=np.float32)).astype(np.float64)
        if self.platt_ is not None:
            z = z * self.platt_[None, :, :, 0] + self.platt_[None, :, :, 1]
        return expit(z)

    def predict(self, F: np.ndarray, costs: CostConfig) -> np.ndarray:
        """The reweight policy (SPEC §5) at ``costs`` on these estimates: the agent per query."""
        return plugin_policy(self.error_proba(F), costs)

    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        extra = {"posthoc_calibration": self.calibration, "calibration_fraction": self.calibration_fraction}
        self.head_.save(directory, extra)
        if self.platt_ is not None:
            atomic_save_file({"platt": torch.from_numpy(self.platt_)}, directory / "platt.safetensors")
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> PosthocRejector:
        directory = Path(directory)
        head = PluginRejector.load(directory)
        config = json.loads((directory / "config.json").read_text())
        cal = config.get("posthoc_calibration", "none")
        est = cls(config=head.config, calibration=cal, calibration_fraction=config["calibration_fraction"])
        est.head_, est.agent_ids_ = head, head.agent_ids_
        est.platt_ = (
            load_file(str(directory / "platt.safetensors"))["platt"].numpy() if cal == "platt" else None
        )
        return est


def _fit_platt(z: np.ndarray, errors: np.ndarray, ridge: float = 1.0, steps: int = 50) -> np.ndarray:
    """Per output, (slope, bias) minimising the log loss of sigmoid(slope·z + bias) plus
    ``ridge``/2 · ‖(slope, bias) − (1, 0)‖² (identity when data are scarce); damped Newton."""
    n, e, a = z.shape
    out = np.zeros((e, a, 2))
    w0 = np.array([1.0, 0.0])

    def loss(w, X, y):
        m = X @ w
        return float(np.sum(np.logaddexp(0.0, m) - y * m) + 0.5 * ridge * np.sum((w - w0) ** 2))

    for i in range(e):
        for j in range(a):
            X = np.stack([z[:, i, j].astype(np.float64), np.ones(n)], 1)
            y = errors[:, i, j].astype(np.float64)
            w = w0.copy()
            for _ in range(steps):
                p = np.exp(-np.logaddexp(0.0, -(X @ w)))
                g = X.T @ (p - y) + ridge * (w - w0)
                H = (X * (p * (1 - p))[:, None]).T @ X + ridge * np.eye(2)
                step, t, f0 = np.linalg.solve(H, g), 1.0, loss(w, X, y)
                while t > 1e-4 and loss(w - t * step, X, y) > f0:
                    t /= 2
                w = w - t * step
                if np.abs(t * step).max() < 1e-9:
                    break
            out[i, j] = w
    return out
