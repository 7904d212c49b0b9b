"""The two-stage cascade of the registry (:mod:`~l2d_core.method.staged`): the main agent answers;
where the router doubts that answer it asks the pool's cheapest expert too, compares the two
answers, and only then decides whether a dearer expert is worth its cost.

Both stages are post-hoc routers (:class:`~l2d_core.evaluation.builtin_routers.PosthocRouter`):
the first reads the main agent's answer and its confidence (and optional helpers), the second
also reads the asked expert's answer. Their error estimates are learned once; at a cost setting
the only thing fitted is one threshold on the first stage's doubt, chosen for the least TDL on
the training articles' out-of-fold estimates — milliseconds, so any α/β applies instantly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..method.costs import CostConfig
from ..method.policies import expected_costs
from ..method.staged import ask_threshold, main_doubt, second_stage_choice, staged_choice, staged_query_costs
from ..method.training import POSTHOC_CONFIG
from ..routers.posthoc import DEFAULT_CALIBRATION, DEFAULT_FEATURES, GFLOPS_SWEEP, gflops_costs
from .benchmark import Benchmark
from .budget import calibrate_threshold
from .builtin_routers import PosthocRouter
from .plugin_router import VALIDATION_FOLDS, article_folds
from .points import Decision
from .posthoc_inputs import helpers_to_import
from .router import DENSE_BETAS, Calibrated, Router, register

__all__ = ["StagedRouter"]


def _paid(gflops: np.ndarray, overhead: float, ask: np.ndarray, final: np.ndarray, asked: int) -> np.ndarray:
    """GFLOPs per question: what always runs, the asked expert where asked, a dearer one where kept
    (``gflops`` (N, A): what each agent adds to what always runs)."""
    dear = (final != 0) & (final != asked)
    return overhead + ask * gflops[:, asked] + np.where(dear, gflops[np.arange(len(final)), final], 0.0)


@register
class StagedRouter(Router):
    id = "l2d-staged"
    label = "L2D two-stage cascade (asks the cheapest expert first)"
    description = (
        "The main agent answers first; where the router doubts that answer it asks the cheapest expert "
        "too, compares the two answers, and only then decides whether a dearer expert is worth its cost. "
        "It pays the main agent on every query and the cheapest expert only where it asked it."
    )
    family = "l2d"
    validated = True
    supports_budget = True

    def __init__(
        self,
        helpers: Sequence[str] = (),
        features: str = DEFAULT_FEATURES,
        calibration=DEFAULT_CALIBRATION,
        confidence: bool = True,
        config=POSTHOC_CONFIG,
    ):
        params = dict(features=features, calibration=calibration, confidence=confidence, config=config)
        super().__init__(helpers=tuple(helpers), **params)
        self.helpers, self.features, self.calibration = tuple(helpers), features, calibration
        self.confidence, self.config = confidence, config

    def _stage(self, helpers: tuple[str, ...]) -> PosthocRouter:
        return PosthocRouter(helpers, self.features, self.calibration, self.confidence, self.config)

    def agents_to_import(self, bench: Benchmark) -> tuple[str, ...]:
        return helpers_to_import(bench, self.helpers)

    def _fit(self) -> None:
        bench = self.bench_
        if bench.test.n_agents < 2:
            raise ValueError(f"{self.id} needs a pool with at least one expert")
        self.asked_ = 1 + int(np.argmin(bench.test.agent_gflops[1:]))
        asked_id = bench.test.agent_ids[self.asked_]
        self.first_ = self._stage(self.helpers).fit(bench, self.seed_)
        self.second_ = self._stage((*self.helpers, asked_id)).fit(bench, self.seed_)
        self.thresholds_: dict[CostConfig, float] = {}

    def _oof(self) -> tuple[np.ndarray, np.ndarray]:
        """Out-of-fold (doubt, second-stage estimates) on the training articles."""
        return main_doubt(self.first_.oof_error_proba()), self.second_.oof_error_proba()

    def threshold(self, costs: CostConfig) -> float:
        """The doubt above which the cheapest expert is asked at ``costs`` (from the training
        articles' out-of-fold estimates; memoized per cost setting)."""
        if costs not in self.thresholds_:
            doubt, p2 = self._oof()
            self.thresholds_[costs] = ask_threshold(doubt, self.bench_.train.errors, p2, costs, self.asked_)
        return self.thresholds_[costs]

    def decide(self, costs: CostConfig) -> Decision:
        return self._decision(costs, self.threshold(costs))

    def _decision(self, costs: CostConfig, threshold: float, **extra) -> Decision:
        first, second, test = self.first_, self.second_, self.bench_.test
        ask, final = staged_choice(main_doubt(first.p_err_), threshold, second.p_err_, costs, self.asked_)
        p = np.where(ask[:, None, None], second.p_err_, first.p_err_)
        return Decision(
            final,
            first.overhead_,
            data=first.data_,
            expected=expected_costs(p, costs),
            scores=p,
            score_label="chance wrong",
            per_query={
                "gflops": _paid(first.data_.gflops, first.overhead_, ask, final, self.asked_),
                "tdl": staged_query_costs(test.errors, costs, ask, final, self.asked_),
                "share": ask.astype(float),  # an expert is called wherever one is asked
            },
            extra={"asked_share": float(ask.mean()), "asked": test.agent_ids[self.asked_], **extra},
        )

    def calibrate_budget(self, costs: CostConfig, kind: str, target: float) -> Calibrated:
        """Under a budget the doubt threshold is calibrated instead of chosen for least TDL: on the
        training articles' out-of-fold doubt, the share of questions that ask the cheapest expert
        (``share``), or the mean GFLOPs with what asking adds (``gflops``), meets the target; the
        second stage still picks the answer at ``costs``."""
        bench, first = self.bench_, self.first_
        data, overhead = first.accounting(bench.train)
        doubt, p2 = self._oof()
        kept = second_stage_choice(p2, costs, self.asked_)  # the answer kept, were it asked
        asking = _paid(data.gflops, 0.0, np.ones(len(doubt), bool), kept, self.asked_)
        tau = calibrate_threshold(doubt, kind, target, asking, overhead + float(data.gflops[:, 0].mean()))
        ask, final = staged_choice(doubt, tau, p2, costs, self.asked_)
        val_gflops = float(_paid(data.gflops, overhead, ask, final, self.asked_).mean())
        return self._decision(costs, tau, budget=target), tau, float(ask.mean()), val_gflops

    def oof_outcome(self, costs: CostConfig) -> tuple[np.ndarray, np.ndarray]:
        """(GFLOPs, EM) per training question at ``costs``: both stages' estimates out of fold,
        and each fold's threshold chosen on the other folds."""
        bench, first = self.bench_, self.first_
        data, overhead = first.accounting(bench.train)
        doubt, p2 = self._oof()
        fold = article_folds(bench.train.titles, VALIDATION_FOLDS, seed=self.seed_)
        threshold = np.empty(len(doubt))
        errors = bench.train.errors
        for k in np.unique(fold):
            rest = fold != k
            threshold[~rest] = ask_threshold(doubt[rest], errors[rest], p2[rest], costs, self.asked_)
        ask, final = staged_choice(doubt, threshold, p2, costs, self.asked_)
        return _paid(data.gflops, overhead, ask, final, self.asked_), data.em[np.arange(len(final)), final]

    def sweep(self):
        dense = [(b, self.decide(self.bench_.costs(b)), {}) for b in DENSE_BETAS]
        # marginal GFLOPs prices (as the post-hoc router's sweep): no β₁ of the benchmark, no TDL
        marginal = [(None, self.decide(gflops_costs(self.first_.data_, bm)), {}) for bm in GFLOPS_SWEEP]
        return dense + marginal
