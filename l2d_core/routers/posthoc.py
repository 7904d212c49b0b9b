"""The post-hoc family (SPEC §5, beyond the paper): the main agent answers first, and the router
reads its answer — its own confidence when it gives one, and whether cheap helper agents agree —
before deciding whether an expert is worth its cost. Two routers: ``l2d-posthoc`` (main answer +
helper agents) and ``l2d-cascade`` (main answer + its confidence: only the main agent runs, so it
routes new text live); their estimator (:class:`PosthocRejector`: the plug-in head on post-hoc
features, Platt-calibrated on held-out articles) and what they freeze into.

They pay the main agent and the helpers on every query; a deferred query pays the expert on top.
What they read on a benchmark: :mod:`~l2d_core.routers.posthoc_inputs`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

from ..agents.catalog import get_agent
from ..method.training import FAST_CONFIG, POSTHOC_CONFIG, TrainConfig
from ..stores import atomic_save_file, model_fingerprint
from .base import DENSE_BETAS, Needs, NotExportable, OperatingPoint, Router
from .calibration import calibration_split, crossfit_splits, fit_platt, sigmoid
from .estimator import Estimator, check_fitted
from .features import posthoc_matrix
from .head import fit_heads
from .plugin import ErrorEstimateConfig, ErrorEstimateRouter, PluginRejector
from .posthoc_inputs import (
    CALIBRATION_FOLDS,
    DEFAULT_CALIBRATION,
    DEFAULT_FEATURES,
    FEATURE_FORMAT,
    GFLOPS_SWEEP,
    feature_set,
    gflops_costs,
    helpers_to_import,
    main_has_confidence,
    posthoc_features,
    posthoc_gflops,
    posthoc_helpers,
)
from .registry import register
from .saved import Text

__all__ = [
    "PosthocRejector",
    "PosthocConfig",
    "PosthocRouter",
    "CascadeRouter",
    "answer_matrix",
]


class PosthocRejector(Estimator):
    """Post-hoc error estimator: the plug-in head (``rejector.PluginRejector``, one network
    with a p̂_j^i output per endpoint i and agent j, trained with BCE) over post-hoc features.

    ``calibration="platt"`` fits a per-output logistic map of a head's logits on training
    *articles* that head did not see. With ``calibration_folds`` = K ≥ 2 (cross-fitting) the
    training articles are cut into K folds; each fold's head is trained on the other folds and
    Platt-calibrated on its own, and p̂ is the mean of the K calibrated probabilities (every
    article serves calibration once; the K heads average out the luck of a single split). K = 1:
    one head on all but a held-out ``calibration_fraction`` of the articles, calibrated on them.
    ``calibration="none"``: one head on every training question (K is then unused).
    Follows scikit-learn's contract: ``fit`` returns ``self``, learned state ends in ``_``.
    """

    def __init__(
        self,
        config: TrainConfig = FAST_CONFIG,
        calibration: str = DEFAULT_CALIBRATION,
        calibration_fraction: float = 0.25,
        calibration_folds: int = CALIBRATION_FOLDS,
        progress: bool = False,
    ):
        self.config = config
        self.calibration = calibration
        self.calibration_fraction = calibration_fraction
        self.calibration_folds = calibration_folds
        self.progress = progress

    def fit(
        self, X: np.ndarray, y: np.ndarray, groups: np.ndarray, X_val=None, y_val=None
    ) -> PosthocRejector:
        """Fit on post-hoc features ``X`` (N, d) and every agent's mistakes ``y`` (N, 2, A);
        ``groups`` (N,): each question's article (Platt calibration holds whole articles out)."""
        if self.calibration not in ("none", "platt"):
            raise ValueError(f"calibration must be 'none' or 'platt', got {self.calibration!r}")
        if int(self.calibration_folds) < 1:
            raise ValueError(f"calibration_folds must be at least 1, got {self.calibration_folds!r}")
        X, y, groups = np.asarray(X, dtype=np.float32), np.asarray(y, bool), np.asarray(groups)
        if not len(X) == len(y) == len(groups):
            raise ValueError(f"{len(X)} feature rows for {len(y)} queries and {len(groups)} articles")
        if self.calibration == "none":
            masks = [np.ones(len(y), bool)]
        elif self.calibration_folds == 1:
            masks = [calibration_split(groups, self.calibration_fraction, self.config.seed)]
        else:
            masks = crossfit_splits(groups, int(self.calibration_folds), self.config.seed)
        # a column constant on the rows a head sees (a question type absent from a few
        # articles) gets scale 1 from the head's StandardScaler: it cannot blow up elsewhere
        self.heads_ = [
            PluginRejector(config=self.config.but(seed=self.config.seed + k), progress=self.progress)
            for k in range(len(masks))
        ]
        fit_heads([(head, (X[m], y[m], X_val, y_val)) for head, m in zip(self.heads_, masks)])
        self.head_ = self.heads_[0]
        self.platt_ = None  # (K, 2, A, 2): slope, bias per head
        if self.calibration == "platt":
            self.platt_ = np.stack([fit_platt(_logits(h, X[~m]), y[~m]) for h, m in zip(self.heads_, masks)])
        return self

    def predict_proba(self, F: np.ndarray) -> np.ndarray:
        """p̂_j^i(x) = P[agent j wrong on endpoint i], (N, 2, A): the mean over the heads of
        their calibrated probabilities."""
        check_fitted(self, "head_")
        F = np.asarray(F, dtype=np.float32)
        p = 0.0
        for k, head in enumerate(self.heads_):
            z = _logits(head, F)
            if self.platt_ is not None:
                z = z * self.platt_[None, k, :, :, 0] + self.platt_[None, k, :, :, 1]
            p = p + sigmoid(z)
        return p / len(self.heads_)

    def out_of_fold(self, F: np.ndarray, groups: np.ndarray) -> np.ndarray | None:
        """p̂ on the rows it was fitted on (``F`` and ``groups`` as given to :meth:`fit`), each row
        from the one cross-fitted head that never saw its article, calibrated on that fold (the
        head's own Platt map): (N, 2, A). None where the heads were not cross-fitted (no
        calibration, or K = 1), so some row was seen by every head."""
        check_fitted(self, "head_")
        if self.platt_ is None or len(self.heads_) < 2:
            return None
        F, groups = np.asarray(F, dtype=np.float32), np.asarray(groups)
        masks = crossfit_splits(groups, int(self.calibration_folds), self.config.seed)
        if len(masks) != len(self.heads_):
            raise ValueError(f"{len(self.heads_)} heads for {len(masks)} folds: not the rows of their fit")
        out = np.empty((len(F), *self.platt_.shape[1:3]))
        for k, (head, fitted_on) in enumerate(zip(self.heads_, masks)):
            z = _logits(head, F[~fitted_on])
            out[~fitted_on] = sigmoid(z * self.platt_[None, k, :, :, 0] + self.platt_[None, k, :, :, 1])
        return out

    def save(self, directory: str | Path) -> Path:
        """The first head in ``directory`` (its ``config.json`` records the calibration), the
        others in ``head1/``, ``head2/``…, the Platt maps of all in ``platt.safetensors``."""
        directory = Path(directory)
        extra = {
            "posthoc_calibration": self.calibration,
            "calibration_fraction": self.calibration_fraction,
            "calibration_folds": int(self.calibration_folds),
            "heads": len(self.heads_),
        }
        self.heads_[0].save(directory, extra)
        for k, head in enumerate(self.heads_[1:], start=1):
            head.save(directory / f"head{k}")
        if self.platt_ is not None:
            atomic_save_file({"platt": np.ascontiguousarray(self.platt_)}, directory / "platt.safetensors")
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> PosthocRejector:
        directory = Path(directory)
        head = PluginRejector.load(directory)
        config = json.loads((directory / "config.json").read_text())
        cal = config.get("posthoc_calibration", "none")
        est = cls(
            config=head.config,
            calibration=cal,
            calibration_fraction=config["calibration_fraction"],
            calibration_folds=config.get("calibration_folds", 1),
        )
        others = range(1, config.get("heads", 1))
        est.heads_ = [head, *(PluginRejector.load(directory / f"head{k}") for k in others)]
        est.head_ = head
        est.platt_ = None
        if cal == "platt":
            platt = load_file(str(directory / "platt.safetensors"))["platt"]
            est.platt_ = platt[None] if platt.ndim == 3 else platt  # a single head's (2, A, 2)
            if len(est.platt_) != len(est.heads_):
                raise ValueError(f"{directory}: {len(est.platt_)} Platt maps for {len(est.heads_)} heads")
        return est


def _logits(head: PluginRejector, X: np.ndarray) -> np.ndarray:
    """The head's logits, (N, 2, A), float64, the same for a query whatever batch it comes in:
    computed in float64 and rounded to float32 (a float32 forward pass differs in its last bits
    between batch sizes, and an artifact must route one query as it routed it in a batch)."""
    return head.arrays().forward(X).astype(np.float32).astype(np.float64)


def answer_matrix(
    config: dict, answers: list[dict], records, helpers=None, asked: bool = False
) -> np.ndarray:
    """A frozen post-hoc router's input for a batch: its feature set of the main agent's answers
    (``answers``: one dict per query, with ``helpers`` by id) and of ``helpers`` (default: the
    router's), and the main agent's confidence when the router reads it; ``asked``: the last of
    ``helpers`` is the asked expert, its answer described too (a cascade's second stage)."""
    read = config["helpers"] if helpers is None else helpers
    conf = [a["confidence"] for a in answers] if config["confidence"] else None
    helper_answers = [[a["helpers"][h] for h in read] for a in answers]
    main = [a["answer"] for a in answers]
    return posthoc_matrix(main, helper_answers, records, config["set"], conf, asked=asked)


class PosthocConfig(ErrorEstimateConfig):
    """What a frozen post-hoc router (and cascade) saves of what it reads: its feature ``set``,
    the ``helpers`` it reads, whether it reads the main agent's ``confidence``, and the main
    agent's fingerprint (its confidence was calibrated on that model)."""

    set: Text
    helpers: list[Text]
    confidence: bool
    main_fingerprint: str


@register
class PosthocRouter(ErrorEstimateRouter):
    id = "l2d-posthoc"
    label = "L2D post-hoc (main answer + cheap helpers)"
    description = (
        "The main agent always answers first; the router reads its answer, its own confidence when it "
        "gives one, and whether cheap helper agents agree, then defers to an expert when that is worth "
        "its cost. It pays the main agent and the helpers on every query."
    )
    family = "l2d"
    kind = "posthoc"
    reads_answers = True
    config_model = PosthocConfig

    def uses_embeddings(self) -> bool:  # only with the ``…+emb`` feature sets
        return self.features.endswith("+emb")

    def __init__(
        self,
        helpers=None,
        features: str = DEFAULT_FEATURES,
        calibration=DEFAULT_CALIBRATION,
        confidence: bool = True,
        config=POSTHOC_CONFIG,
        asked: bool = False,
    ):
        super().__init__(
            helpers=helpers,
            features=features,
            calibration=calibration,
            confidence=confidence,
            config=config,
            asked=asked,
        )
        self.helpers, self.features, self.calibration = helpers, features, calibration
        self.confidence, self.config, self.asked = confidence, config, asked

    @classmethod
    def unavailable(cls, bench) -> str | None:
        """Not offered where no cheap helper agent exists for the pool's main agent: it would read
        what the cascade reads, and be the cascade under another name."""
        if posthoc_helpers(bench.dataset.name, bench.pool.main):
            return None
        return (
            f"{cls.id} is the same as l2d-cascade on pool {bench.pool.name}: no cheap helper agent "
            f"answers its questions besides {bench.pool.main} (choose l2d-cascade)"
        )

    def fit(self, bench, seed: int = 0) -> PosthocRouter:
        if self.helpers is None:  # the pool's default helpers: not offered where there are none
            return super().fit(bench, seed)
        # helpers given (a two-stage cascade's stages): it reads them, whatever the pool's defaults
        self.bench_, self.seed_ = bench, int(seed)
        self._fit()
        return self

    def helper_ids(self, bench) -> tuple[str, ...]:
        """The helpers this router reads on ``bench`` (its own, or the default cheap ones)."""
        default = posthoc_helpers(bench.dataset.name, bench.pool.main)
        return tuple(default if self.helpers is None else self.helpers)

    def needs(self, bench) -> Needs:
        reads = (bench.pool.main, *self.helper_ids(bench))
        return Needs(embeddings=self.features.endswith("+emb"), answers=reads)

    def agents_to_import(self, bench) -> tuple[str, ...]:
        return helpers_to_import(bench, self.helper_ids(bench))

    def _fit(self) -> None:
        bench = self.bench_
        self.helpers_ = self.helper_ids(bench)
        self.confidence_ = self.confidence and main_has_confidence(bench)
        self.features_ = feature_set(bench, self.features, self.confidence_)
        super()._fit()

    def _features(self, split: str) -> np.ndarray:
        return posthoc_features(
            self.bench_, self.helpers_, split, self.features_, self.confidence_, self.asked
        )

    def _new_estimator(self):
        return PosthocRejector(config=self.config.but(seed=self.seed_), calibration=self.calibration)

    def _fit_estimator(self, est, F: np.ndarray, rows: np.ndarray | None = None):
        train = self.bench_.train
        if rows is None:
            return est.fit(F, train.errors, train.titles)
        return est.fit(F, train.errors[rows], train.titles[rows])

    def _store_params(self) -> dict:
        return dict(
            helpers=list(self.helpers_),
            features=self.features_,
            confidence=self.confidence_,
            feature_format=FEATURE_FORMAT,
            asked=bool(self.asked),
        )

    def accounting(self, data):
        data, overhead = posthoc_gflops(data, self.helpers_)
        return data, overhead + (self.bench_.rejector_gflops if self.features.endswith("+emb") else 0.0)

    def sweep(self):
        dense = [OperatingPoint(b, self.decide(self.bench_.costs(b))) for b in DENSE_BETAS]
        # no β₁ of the benchmark: these points carry no TDL
        marginal = [
            OperatingPoint(None, self.decision(self.p_err_, gflops_costs(self.data_, bm), beta_max=bm))
            for bm in GFLOPS_SWEEP
        ]
        return dense + marginal + self.share_points()

    def answers_config(self) -> dict:
        """What a frozen router of the answer family records of what it reads."""
        main = get_agent(self.bench_.pool.main)
        return {
            "set": self.features_,
            "helpers": list(self.helpers_),
            "confidence": bool(self.confidence_),
            "main_fingerprint": model_fingerprint(str(main.path)),
        }

    def export_problem(self) -> str | None:
        if self.features.endswith("+emb"):
            return f"{self.id} with features {self.features!r} reads embeddings besides the answer"
        return super().export_problem()

    def freeze(self, costs, follower: dict | None = None) -> Router:
        if problem := self.export_problem():
            raise NotExportable(problem)
        config = {**self._frozen_config(costs, follower), **self.answers_config()}
        needs = Needs(answers=(self.bench_.pool.main, *self.helpers_))
        return self.deployed(config, needs, float(self.overhead_), {"": self.estimator_})

    def error_estimates(self, signals) -> np.ndarray:
        """The frozen head reads the answers the deployment asked for."""
        answers = answer_matrix(self.deployed_.config, signals.answers(), signals.records)
        return self.deployed_.heads[""].predict_proba(answers)

    @classmethod
    def estimator_class(cls):
        return PosthocRejector


@register
class CascadeRouter(PosthocRouter):
    id = "l2d-cascade"
    label = "L2D cascade (main answer + its confidence if any)"
    description = (
        "The main agent always answers first; the router reads that answer and the main agent's own "
        "confidence in it when it gives one, and defers to an expert when that is worth its cost. Only "
        "the main agent runs on every query, so it routes new text live."
    )

    def __init__(
        self,
        helpers=(),
        features: str = DEFAULT_FEATURES,
        calibration=DEFAULT_CALIBRATION,
        confidence=True,
        config=POSTHOC_CONFIG,
    ):
        super().__init__(helpers, features, calibration, confidence, config)

    @classmethod
    def unavailable(cls, bench) -> str | None:
        return None
