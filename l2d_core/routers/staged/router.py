"""The two-stage cascade on a benchmark (:class:`StagedRouter`): its two heads, the doubt threshold
at a cost setting, how it decides on the benchmark and under a budget, what it freezes into and
how it then routes new queries (what it saves and that routing: :mod:`.frozen`); its rule is
:mod:`.rule`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ...method.costs import CostConfig, realised_usd
from ...method.training import POSTHOC_CONFIG
from ..base import DENSE_BETAS, Needs, OperatingPoint, Router
from ..budget import (
    PRICE_CEILING,
    Follower,
    PriceFollower,
    PriceGrid,
    follower_from_state,
    pinned_note,
    reach_note,
)
from ..calibration import article_folds
from ..decision import BudgetStart, Decision, Stage
from ..plugin import VALIDATION_FOLDS
from ..posthoc import PosthocRejector, PosthocRouter
from ..posthoc_inputs import (
    DEFAULT_CALIBRATION,
    DEFAULT_FEATURES,
    GFLOPS_SWEEP,
    asked_adds_nothing,
    gflops_costs,
    helpers_to_import,
)
from ..registry import register
from .frozen import StagedConfig, staged_route, staged_stages
from .rule import (
    ask_threshold,
    main_doubt,
    second_stage_choice,
    staged_choice,
    staged_paid,
    staged_query_costs,
    staged_values,
)

__all__ = ["StagedRouter"]


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
    reads_answers = True
    config_model = StagedConfig

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

    @classmethod
    def unavailable(cls, bench) -> str | None:  # the cascade where the asked expert adds nothing
        return asked_adds_nothing(bench, cls.id)

    def _stage(self, helpers: tuple[str, ...], asked: bool = False) -> PosthocRouter:
        return PosthocRouter(helpers, self.features, self.calibration, self.confidence, self.config, asked)

    def asked_expert(self, bench) -> str:  # the expert it asks first: the pool's cheapest
        return bench.test.agent_ids[1 + int(np.argmin(bench.test.agent_gflops[1:]))]

    def needs(self, bench) -> Needs:
        return Needs(answers=(bench.pool.main, *self.helpers), ask=self.asked_expert(bench))

    def agents_to_import(self, bench) -> tuple[str, ...]:
        return helpers_to_import(bench, self.helpers)

    def _fit(self) -> None:
        bench = self.bench_
        if bench.test.n_agents < 2:
            raise ValueError(f"{self.id} needs a pool with at least one expert")
        asked_id = self.asked_expert(bench)
        self.asked_ = bench.test.agent_ids.index(asked_id)
        self.first_ = self._stage(self.helpers).fit(bench, self.seed_)
        self.second_ = self._stage((*self.helpers, asked_id), asked=True).fit(bench, self.seed_)
        self.thresholds_: dict[CostConfig, float] = {}

    def _oof(self) -> tuple[np.ndarray, np.ndarray]:
        """Out-of-fold (doubt, second-stage estimates) on the training articles."""
        return main_doubt(self.first_.oof_error_proba()), self.second_.oof_error_proba()

    def threshold(self, costs: CostConfig) -> float:
        """The doubt above which the cheapest expert is asked at ``costs`` (memoized)."""
        if costs not in self.thresholds_:
            doubt, p2 = self._oof()
            self.thresholds_[costs] = ask_threshold(doubt, self.bench_.train.errors, p2, costs, self.asked_)
        return self.thresholds_[costs]

    def decide(self, costs: CostConfig) -> Decision:
        return self._decision(costs, self.threshold(costs))

    def stages(self, follower=None) -> tuple[Stage, Stage]:
        """How the two steps are named where a decision is explained (under a budget's follower)."""
        return staged_stages(self.bench_.test.agent_ids[self.asked_], follower)

    def _decision(self, costs: CostConfig, threshold, stages=None, at=None, **extra) -> Decision:
        """The decision at ``costs`` asking where the doubt exceeds ``threshold`` (one number, or
        one per test question); ``at``: ``(settings, index)``, question n decided at cost setting
        ``settings[index[n]]`` (a GFLOPs budget's price in force), its TDL still at ``costs``."""
        first, second, test, k = self.first_, self.second_, self.bench_.test, self.asked_
        doubt, p2 = main_doubt(first.p_err_), second.p_err_
        threshold = np.broadcast_to(np.asarray(threshold, dtype=float), doubt.shape)
        settings, index = at or ([costs], np.zeros(len(doubt), dtype=int))
        ask, final = doubt > threshold, np.zeros(len(doubt), dtype=int)
        values, stage = np.empty((len(doubt), test.n_agents)), ask.astype(int)
        for g in np.unique(index):
            rows = index == g
            final[rows] = staged_choice(doubt[rows], threshold[rows], p2[rows], settings[g], k)[1]
            values[rows] = staged_values(doubt[rows], threshold[rows], ask[rows], p2[rows], settings[g], k)[0]
        return Decision(
            final,
            first.overhead_,
            data=first.data_,
            expected=values,
            scores=np.where(ask[:, None, None], second.p_err_, first.p_err_),
            score_label="chance wrong",
            per_query={
                "gflops": staged_paid(first.data_.gflops, first.overhead_, ask, final, self.asked_),
                "tdl": staged_query_costs(test.errors, costs, ask, final, self.asked_),
                "share": ask.astype(float),  # an expert is called wherever one is asked
            },
            extra={"asked_share": float(ask.mean()), "asked": test.agent_ids[self.asked_], **extra},
            stage=stage,
            stages=stages or self.stages(),
        )

    def calibrate_budget(self, costs: CostConfig, kind: str, target: float) -> tuple[Decision, BudgetStart]:
        """A share of expert calls: the doubt threshold follows it instead of being chosen for
        least TDL (:class:`~l2d_core.routers.budget.Follower`), starting where it holds on the
        training articles as scored by the heads that route; the second stage picks at ``costs``.
        A GFLOPs budget prices compute instead (:meth:`_follow_price`)."""
        if kind == "gflops":
            return self._follow_price(costs, target)
        first, (data, overhead, doubt_cal, p2_cal) = self.first_, self._calibration()
        follower = Follower.start(doubt_cal, target, target, (-1.0, 3.0))  # doubt: [0, 2]
        start, state = follower.threshold, asdict(follower)
        _, threshold = follower.decide(main_doubt(first.p_err_))
        d = self._decision(costs, threshold, stages=self.stages(follower), budget=target)
        ask_cal = doubt_cal > start
        cal_final = np.where(ask_cal, second_stage_choice(p2_cal, costs, self.asked_), 0)
        spent = float(staged_paid(data.gflops, overhead, ask_cal, cal_final, self.asked_).mean())
        info = dict(start=start, end=follower.threshold, reachable=(0.0, 1.0), follower=state)
        return d, BudgetStart(**info, training_share=float(ask_cal.mean()), training_gflops=spent)

    def _calibration(self) -> tuple:
        """Where a budget starts: the training articles' accounting, doubt and second-stage estimates."""
        first, second = self.first_, self.second_
        doubt = main_doubt(first.estimator_.predict_proba(first._features("train")))
        p2 = second.estimator_.predict_proba(second._features("train"))
        return (*first.accounting(self.bench_.train), doubt, p2)

    def price_grid(self, costs: CostConfig) -> tuple[list[CostConfig], np.ndarray]:
        """Each price of :class:`~l2d_core.routers.budget.PriceGrid` as a cost setting (``costs``' α,
        β by the price rule) and the doubt threshold of least TDL there (the doubt is in [0, 2])."""
        settings = [self.bench_.price_costs(float(lam), costs.alpha) for lam in PriceGrid().prices]
        return settings, np.clip([self.threshold(c) for c in settings], -1.0, 3.0)

    def _grid_spend(self, settings, taus, doubt, p2, data, overhead) -> np.ndarray:
        """What each question would spend at each grid price, (grid, N)."""
        k, ask = self.asked_, doubt[None, :] > taus[:, None]
        kept = [np.where(ask[g], second_stage_choice(p2, c, k), 0) for g, c in enumerate(settings)]
        return np.stack(
            [staged_paid(data.gflops, overhead, ask[g], kept[g], k) for g in range(len(settings))]
        )

    def _follow_price(self, costs: CostConfig, target: float) -> tuple[Decision, BudgetStart]:
        """A GFLOPs budget: compute priced at λ errors per TFLOP, both stages deciding at the
        price in force — the threshold of least TDL there and the experts' β — which a
        :class:`~l2d_core.routers.budget.PriceFollower` moves after each question (on the grid
        of :meth:`price_grid`), starting where the spend on the training articles meets the
        target. The doubt threshold alone cannot: the dear expert's price decides the spend."""
        first, second, grid = self.first_, self.second_, PriceGrid()
        settings, taus = self.price_grid(costs)
        data, overhead, doubt_cal, p2_cal = self._calibration()
        spend_cal = self._grid_spend(settings, taus, doubt_cal, p2_cal, data, overhead)
        g0, least, most = grid.start(spend_cal, target)
        follower = PriceFollower(math.log(grid.prices[g0]), target)
        state = asdict(follower)
        doubt = main_doubt(first.p_err_)
        spend = self._grid_spend(settings, taus, doubt, second.p_err_, first.data_, first.overhead_)
        used = grid.follow(follower, spend)
        d = self._decision(
            costs, taus[used], stages=self.stages(follower), at=(settings, used), budget=target
        )
        d.per_query["price"], spent = grid.prices[used], float(d.per_query["gflops"].mean())
        note = reach_note("gflops", target, least, most, PRICE_CEILING) or pinned_note(
            target, spent, grid.prices[used]
        )
        info = dict(start=float(grid.prices[g0]), end=follower.price, reachable=(least, most), follower=state)
        calibrated = dict(
            training_share=float((doubt_cal > taus[g0]).mean()), training_gflops=float(spend_cal[g0].mean())
        )
        return d, BudgetStart(**info, **calibrated, note=note)

    def oof_outcome(self, costs: CostConfig, paid: str = "gflops") -> tuple[np.ndarray, np.ndarray]:
        """(GFLOPs — or with ``paid="usd"`` dollars, as the money rule counts them — and EM) per
        training question at ``costs``: both stages' estimates out of fold, and each fold's
        threshold chosen on the other folds."""
        bench, first = self.bench_, self.first_
        data, overhead = first.accounting(bench.train)
        doubt, p2 = self._oof()
        fold = article_folds(bench.train.titles, VALIDATION_FOLDS, seed=self.seed_)
        threshold = np.empty(len(doubt))
        errors = bench.train.errors
        for k in np.unique(fold):
            rest = fold != k
            # one training article makes one fold: its threshold is then chosen on itself
            mine = rest if rest.any() else np.ones_like(rest)
            threshold[fold == k] = ask_threshold(doubt[mine], errors[mine], p2[mine], costs, self.asked_)
        ask, final = staged_choice(doubt, threshold, p2, costs, self.asked_)
        em = data.em[np.arange(len(final)), final]
        if paid == "usd":
            return realised_usd(bench.train.usd, final), em
        return staged_paid(data.gflops, overhead, ask, final, self.asked_), em

    def sweep(self):
        dense = [OperatingPoint(b, self.decide(self.bench_.costs(b))) for b in DENSE_BETAS]
        # marginal GFLOPs prices (as the post-hoc router's sweep): no β₁ of the benchmark, no TDL
        marginal = [
            OperatingPoint(None, self.decide(gflops_costs(self.first_.data_, bm))) for bm in GFLOPS_SWEEP
        ]
        return dense + marginal

    def freeze(self, costs: CostConfig, follower: dict | None = None) -> Router:
        first, test = self.first_, self.bench_.test
        config = {
            **first._frozen_config(costs, follower),
            **first.answers_config(),
            "asked": test.agent_ids[self.asked_],
            "threshold": None if follower else self.threshold(costs),
        }
        if isinstance(
            follower_from_state(follower), PriceFollower
        ):  # a GFLOPs budget: the grid it follows on
            settings, taus = self.price_grid(costs)
            config["price_grid"] = PriceGrid().saved(taus, settings)
        needs = Needs(answers=(self.bench_.pool.main, *first.helpers_), ask=config["asked"])
        heads = {"first": first.estimator_, "second": self.second_.estimator_}
        return self.deployed(config, needs, float(first.overhead_), heads)

    def route(self, signals) -> Decision:
        return staged_route(self.deployed_, signals)

    def load_heads(self, directory: Path) -> dict:
        return {name: PosthocRejector.load(directory / name) for name in ("first", "second")}
