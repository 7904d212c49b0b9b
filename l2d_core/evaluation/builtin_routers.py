"""The L2D routers of the registry (the paper's rejector, the plug-in and the post-hoc router)
and the references (random, oracle, zero router), each one registration; the baselines of
SPEC §8 are in :mod:`~l2d_core.evaluation.baseline_routers`.

Routers that read the question/context embeddings pay the rejector's encoder on every query;
the post-hoc router pays the main agent and its helpers on every query. Trained heads and
baseline scores are stored on disk (:mod:`~l2d_core.evaluation.store`).
"""

from __future__ import annotations

import numpy as np

from ..method.costs import CostConfig, cost_matrix, query_costs
from ..method.policies import learned_policy, oracle_policy, random_policy
from ..method.training import FAST_CONFIG, POSTHOC_CONFIG, SDL_FAST_CONFIG
from ..routers.features import posthoc_matrix
from ..routers.head import Projection
from ..routers.posthoc import (
    DEFAULT_CALIBRATION,
    DEFAULT_FEATURES,
    FEATURE_FORMAT,
    GFLOPS_SWEEP,
    PosthocRejector,
    gflops_costs,
    posthoc_gflops,
    posthoc_helpers,
)
from ..routers.rejector import FullSDLRejector, PluginRejector, SDLRejector
from . import metrics as M
from . import store
from .benchmark import BETA_POINTS, Benchmark
from .plugin_router import PlugInRouter
from .points import Decision, Stage, make_point
from .posthoc_inputs import helpers_to_import, main_has_confidence, posthoc_features
from .router import DENSE_BETAS, Router, best_single_tdl, register

__all__ = [
    "SDLRouter",
    "PluginRouter",
    "PosthocRouter",
    "RandomRouter",
    "OracleRouter",
    "ZeroRouter",
]


SDL_STAGES = (
    Stage(
        "",
        "minus the rejector's score",
        "the rejector scores every agent for both ends of the answer; the highest summed score wins "
        "(shown negated: the least wins, as for the other routers)",
    ),
)


@register
class SDLRouter(Router):
    id = "l2d-sdl"
    label = "L2D rejector (retrained per cost)"
    description = (
        "The paper's rejector: reads the question and context, trained with the surrogate deferral "
        "loss for each cost setting (a new setting trains a new head: about a second on a CPU)."
    )
    family = "l2d"
    reads_embeddings = True
    instant = False

    def __init__(self, config=SDL_FAST_CONFIG, mode: str = "fast"):
        super().__init__(config=config, mode=mode)
        if mode not in ("fast", "full"):
            raise ValueError(f"mode must be 'fast' or 'full', got {mode!r}")
        self.config, self.mode = config, mode

    def _fit(self) -> None:
        self.memo_, self.heads_, self.projection_ = {}, {}, None

    def _estimator(self, costs: CostConfig):
        cfg = self.config.but(seed=self.seed_)
        if self.mode == "full":
            return FullSDLRejector(costs, self.bench_.encoder_name, cfg)
        return SDLRejector(config=cfg, costs=costs)

    def needs_training(self, costs: CostConfig) -> bool:
        return costs not in self.memo_ and not store.is_stored(
            f"sdl-{self.mode}", self.bench_, self._estimator(costs)
        )

    def estimator(self, costs: CostConfig):
        """The rejector trained for ``costs`` (stored on disk: a setting seen before loads); a fast
        full-batch head starts from the nearest setting trained in this session (its SDL is convex:
        the warm start changes the time, not the head)."""
        bench, est = self.bench_, self._estimator(costs)
        if self.mode == "full":
            return store.fitted(
                "sdl-full", bench, est, lambda e: e.fit(list(bench.train_records), bench.train)
            )
        init = None
        if self.config.solver == "lbfgs" and self.heads_:
            gap = lambda c: float(np.abs(np.subtract((*c.alpha, *c.beta), (*costs.alpha, *costs.beta))).sum())  # noqa: E731
            init = self.heads_[min(self.heads_, key=gap)].head_.state_dict()
        self.heads_[costs] = store.fitted("sdl-fast", bench, est, lambda e: self._fit_fast(e, init))
        return self.heads_[costs]

    def _fit_fast(self, est: SDLRejector, init: dict | None) -> SDLRejector:
        """Fit a fast head; a reduced-rank config fits the features' projection once per benchmark."""
        bench = self.bench_
        if self.projection_ is None and Projection.applies(self.config.rank, bench.X_train):
            self.projection_ = Projection.fit(bench.X_train, self.config.rank)
        val = (bench.X_val, bench.val)
        return est.fit(bench.X_train, bench.train, *val, init=init, projection=self.projection_)

    def decide(self, costs: CostConfig) -> Decision:
        if costs not in self.memo_:
            bench, est = self.bench_, self.estimator(costs)
            X = list(bench.test_records) if self.mode == "full" else bench.X_test
            self.memo_[costs] = est.scores(X)
        scores = self.memo_[costs]
        return Decision(
            learned_policy(scores),
            self.bench_.rejector_gflops,
            expected=-scores.sum(axis=1),
            scores=scores,
            score_label="score",
            stages=SDL_STAGES,
        )


@register
class PluginRouter(PlugInRouter):
    id = "l2d-plugin"
    label = "L2D plug-in (instant reweight)"
    description = (
        "Reads the question and context, learns each agent's chance of being wrong once, then "
        "applies any cost setting instantly (SPEC §5 plug-in rule)."
    )
    family = "l2d"
    reads_embeddings = True
    kind = "plugin"

    def __init__(self, config=FAST_CONFIG):
        super().__init__(config=config)
        self.config = config

    def _features(self, split: str) -> np.ndarray:
        return {"train": self.bench_.X_train, "val": self.bench_.X_val, "test": self.bench_.X_test}[split]

    def _new_estimator(self):
        return PluginRejector(config=self.config.but(seed=self.seed_))

    def sweep(self):
        return [(b, self.decide(self.bench_.costs(b)), {}) for b in DENSE_BETAS]


@register
class PosthocRouter(PlugInRouter):
    id = "l2d-posthoc"
    label = "L2D post-hoc (main answer + cheap helpers)"
    description = (
        "The main agent always answers first; the router reads its answer, its own confidence when it "
        "gives one, and whether cheap helper agents agree, then defers to an expert when that is worth "
        "its cost. It pays the main agent and the helpers on every query."
    )
    family = "l2d"
    kind = "posthoc"

    def uses_embeddings(self) -> bool:  # only with the ``…+emb`` feature sets
        return self.features.endswith("+emb")

    def __init__(
        self,
        helpers=None,
        features: str = DEFAULT_FEATURES,
        calibration=DEFAULT_CALIBRATION,
        confidence: bool = True,
        config=POSTHOC_CONFIG,
    ):
        super().__init__(
            helpers=helpers, features=features, calibration=calibration, confidence=confidence, config=config
        )
        self.helpers, self.features, self.calibration = helpers, features, calibration
        self.confidence, self.config = confidence, config

    def helper_ids(self, bench: Benchmark) -> tuple[str, ...]:
        """The helpers this router reads on ``bench`` (its own, or the default cheap ones)."""
        default = posthoc_helpers(bench.dataset.name, bench.pool.main)
        return tuple(default if self.helpers is None else self.helpers)

    def agents_to_import(self, bench: Benchmark) -> tuple[str, ...]:
        return helpers_to_import(bench, self.helper_ids(bench))

    def _fit(self) -> None:
        bench = self.bench_
        self.helpers_ = self.helper_ids(bench)
        self.confidence_ = self.confidence and main_has_confidence(bench)
        super()._fit()

    def _features(self, split: str) -> np.ndarray:
        return posthoc_features(self.bench_, self.helpers_, split, self.features, self.confidence_)

    def _new_estimator(self):
        return PosthocRejector(config=self.config.but(seed=self.seed_), calibration=self.calibration)

    def _store_params(self) -> dict:
        return dict(
            helpers=list(self.helpers_),
            features=self.features,
            confidence=self.confidence_,
            feature_format=FEATURE_FORMAT,
        )

    def route_one(self, record, main_answer, main_confidence=None, helper_answers=()) -> np.ndarray:
        """p̂ (2, A) for a new query, once the main agent (and every helper) has answered it."""
        if len(helper_answers) != len(self.helpers_):
            raise ValueError(f"{self.id} reads the answers of helpers {self.helpers_}: give one each")
        if self.features.endswith("+emb"):
            raise ValueError(f"{self.id} with features {self.features!r} cannot route new text live")
        conf = [main_confidence] if self.confidence_ else None
        F = posthoc_matrix([main_answer], [list(helper_answers)], [record], self.features, conf)
        return self.estimator_.error_proba(F)[0]

    def accounting(self, data):
        data, overhead = posthoc_gflops(data, self.helpers_)
        return data, overhead + (self.bench_.rejector_gflops if self.features.endswith("+emb") else 0.0)

    def sweep(self):
        dense = [(b, self.decide(self.bench_.costs(b)), {}) for b in DENSE_BETAS]
        # no β₁ of the benchmark: these points carry no TDL
        marginal = [
            (None, self.decision(self.p_err_, gflops_costs(self.data_, bm), beta_max=bm), {})
            for bm in GFLOPS_SWEEP
        ]
        return dense + marginal


@register
class CascadeRouter(PosthocRouter):
    id = "l2d-cascade"
    label = "L2D cascade (main answer + its confidence)"
    description = (
        "The main agent always answers first; the router reads that answer and the main agent's own "
        "confidence in it, and defers to an expert when that is worth its cost. Only the main agent "
        "runs on every query, so it routes new text live."
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


@register
class RandomRouter(Router):
    id = "random"
    label = "random (uniform)"
    description = "Sends each query to an agent drawn uniformly at random."
    family = "reference"

    def _fit(self) -> None:
        test = self.bench_.test
        self.choice_ = random_policy(len(test), test.n_agents, self.seed_)

    def decide(self, costs: CostConfig) -> Decision:
        return Decision(self.choice_)


@register
class OracleRouter(Router):
    id = "oracle"
    label = "oracle (knows the answers)"
    description = "Per query the cheapest agent that is right: an upper bound no router can reach."
    family = "reference"

    def decide(self, costs: CostConfig) -> Decision:
        test = self.bench_.test
        return Decision(oracle_policy(cost_matrix(test.errors, costs), test.gflops))

    def sweep(self):
        return [(b, self.decide(self.bench_.costs(b)), {}) for b in DENSE_BETAS]


@register
class ZeroRouter(Router):
    id = "zero"
    label = "zero router (mixing agents)"
    description = (
        "Mixes single agents at random in the best proportions: the line a router must beat to be "
        "worth anything (at a cost setting: the single agent of least loss)."
    )
    family = "reference"

    def decide(self, costs: CostConfig) -> Decision:
        test = self.bench_.test
        j = int(query_costs(cost_matrix(test.errors, costs)).mean(axis=0).argmin())
        return Decision(np.full(len(test), j))

    def points(self, betas=BETA_POINTS, dense: bool = True, prices=()) -> list[dict]:
        """Vertices of the single agents' upper hull (any mixture lies on the segments between)."""
        test = self.bench_.test
        g = test.gflops.mean(axis=0)
        em = 100 * test.em.mean(axis=0)
        pts = []
        for c, q in zip(*M.upper_hull(g, em)):
            j = int(np.flatnonzero(np.isclose(g, c) & np.isclose(em, q))[0])
            pts.append(
                make_point(self.bench_, Decision(np.full(len(test), j)), None, agent=test.agent_ids[j])
            )
        return pts

    def tdl_vectors(self, settings: dict[str, CostConfig]) -> dict[str, np.ndarray]:
        """TDL is linear in the mixing weights: the zero router's is the best single agent's."""
        return best_single_tdl(self.bench_, settings)
