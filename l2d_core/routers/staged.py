"""The two-stage cascade ``l2d-staged``: the main agent answers; where the router doubts that answer
it asks the pool's cheapest expert too, compares the two answers, and only then decides whether a
dearer expert is worth its cost. Its rule is :mod:`~l2d_core.method.staged`; this module is the
router: its two heads, how it decides on the benchmark and under a budget, what it freezes into
and how a frozen one routes new queries (asking the expert only where it doubts).

Both stages are post-hoc heads (:class:`~l2d_core.routers.posthoc.PosthocRouter`): the first reads
the main agent's answer and confidence (and optional helpers), the second also the asked expert's
answer, described as the main agent's is. At a cost setting the one thing fitted is the doubt
threshold (least TDL on the training articles' out-of-fold estimates: any α/β applies instantly).
An asked expert that cannot answer new text is named ("would ask …"), its answer never made up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..method.costs import CostConfig
from ..method.staged import (
    ask_threshold,
    main_doubt,
    second_stage_choice,
    staged_choice,
    staged_query_costs,
    staged_values,
)
from ..method.training import POSTHOC_CONFIG
from .base import DENSE_BETAS, Frozen, Needs, OperatingPoint, Router
from .budget import (
    PRICE_CEILING,
    Follower,
    PriceFollower,
    PriceGrid,
    follower_from_state,
    pinned_note,
    reach_note,
)
from .decision import Decision, Stage
from .plugin import VALIDATION_FOLDS, article_folds
from .posthoc import PosthocRejector, PosthocRouter, answer_matrix
from .posthoc_inputs import (
    DEFAULT_CALIBRATION,
    DEFAULT_FEATURES,
    GFLOPS_SWEEP,
    asked_adds_nothing,
    gflops_costs,
    helpers_to_import,
)
from .registry import register

__all__ = ["StagedRouter", "StagedFrozen", "staged_stages"]


def _paid(gflops: np.ndarray, overhead, ask: np.ndarray, final: np.ndarray, asked: int) -> np.ndarray:
    """GFLOPs per question: what always runs, the asked expert where asked, a dearer one where kept
    (``gflops`` (N, A): what each agent adds to what always runs)."""
    dear = (final != 0) & (final != asked)
    return overhead + ask * gflops[:, asked] + np.where(dear, gflops[np.arange(len(final)), final], 0.0)


def staged_stages(asked: str, follower=None) -> tuple[Stage, Stage]:
    """The two steps of a two-stage cascade that asks ``asked``, as explanations name them, at the
    costs or under a budget's ``follower`` (a threshold's, or a price's for GFLOPs)."""
    when, priced = "at these costs", ""
    if isinstance(follower, PriceFollower):
        when = f"at the price λ in force, which follows the budget of {follower.target:g} GFLOPs per question"
        priced = " (experts priced at the λ in force)"
    elif follower is not None:
        unit = "{:g} GFLOPs per question" if follower.spend else "{:.0%} of questions"
        when = f"that follows the budget of {unit.format(follower.target)}"
    return (
        Stage(
            "first stage",
            "expected cost",
            f"the expected cost of keeping the main answer (the router's doubt in it) against the "
            f"threshold for asking {asked} {when}",
        ),
        Stage(
            "second stage",
            "expected cost",
            f"{asked} has answered: every agent's expected cost, with {asked}'s price already paid{priced}",
        ),
    )


class StagedFrozen(Frozen):
    """A two-stage cascade at one setting: two heads (saved side by side), the doubt threshold
    at the costs or a budget's follower, and the expert it asks (``config["asked"]``)."""

    first: PosthocRejector | None = None
    second: PosthocRejector | None = None
    follower: Follower | None = None

    def decide(self, signals) -> Decision:
        cfg, records = self.config, signals.records
        answers = signals.answers()
        p = self.first.predict_proba(answer_matrix(cfg, answers, records))
        doubt = main_doubt(p)
        n, parts = len(records), []
        if self.follower is None:
            parts = [self._second(signals, answers, p, doubt, np.full(n, float(cfg["threshold"])), range(n))]
        for i in range(n) if self.follower is not None else ():  # in order: the threshold moves
            tau, costs = PriceGrid.in_force(cfg, self.follower)
            one = self._second(signals, answers, p, doubt, np.array([tau]), [i], costs)
            parts.append(one)
            spent = self.overhead_gflops + self._spent(one)
            if isinstance(self.follower, PriceFollower):
                self.follower.observe(spent)
            else:
                self.follower.observe(bool(one["ask"][0]), spent if self.follower.spend else None)
        cat = {
            k: np.concatenate([q[k] for q in parts]) for k in ("choice", "p", "ask", "tau", "values", "stage")
        }
        listed = {k: [x for q in parts for x in q[k]] for k in ("answers", "notes")}
        asked = cfg["asked"]
        return Decision(
            cat["choice"],
            self.overhead_gflops,
            expected=cat["values"],
            scores=cat["p"],
            score_label="chance wrong",
            per_query={"share": cat["ask"].astype(float), "doubt": doubt, "threshold": cat["tau"]},
            extra={"asked": asked, "asked_answers": listed["answers"], "notes": listed["notes"]},
            stage=cat["stage"],
            stages=staged_stages(asked, self.follower),
        )

    def _spent(self, one: dict) -> float:
        """GFLOPs one routed query spent beyond what always runs: the asked expert where it ran,
        and a dearer expert where it was kept."""
        gflops, asked = self.config["agent_gflops"], self.config["asked"]
        spent = gflops[asked] if one["ask"][0] and one["answers"][0] is not None else 0.0
        kept = list(gflops)[int(one["choice"][0])]
        return spent + (gflops[kept] if kept not in (asked, *self.needs.answers) else 0.0)

    def _second(self, signals, answers, p, doubt, tau, rows, costs=None) -> dict:
        """Both stages for ``rows``: the expert asked where the doubt is above ``tau``; the second
        stage at ``costs`` (None: the saved costs)."""
        cfg, rows = self.config, list(rows)
        asked, k = cfg["asked"], list(cfg["agent_gflops"]).index(cfg["asked"])
        costs = costs or CostConfig(**cfg["costs"])
        p = p[rows].copy()
        ask = doubt[rows] > tau
        n = len(rows)
        choice, got_answers, notes = np.zeros(n, dtype=int), [None] * n, [None] * n
        where = np.flatnonzero(ask).tolist()
        for m, (answer, *_rest, why) in zip(where, signals.ask(asked, [rows[m] for m in where])):
            got_answers[m] = answer
            if answer is None:
                choice[m] = k
                notes[m] = (
                    f"the router doubts the main answer and would ask {asked}, which {why}; with its "
                    "answer it would keep one of the two or defer to a dearer expert"
                )
        known = [m for m in where if got_answers[m] is not None]
        if known:
            both = [
                answers[rows[m]] | {"helpers": {**answers[rows[m]]["helpers"], asked: got_answers[m]}}
                for m in known
            ]
            recs = [signals.records[rows[m]] for m in known]
            p2 = self.second.predict_proba(
                answer_matrix(cfg, both, recs, [*cfg["helpers"], asked], asked=True)
            )
            p[known] = p2
            choice[known] = second_stage_choice(p2, costs, k)
        answered = np.zeros(n, dtype=bool)
        answered[known] = True  # where it asked but got no answer, the first stage decided ("would ask")
        values, stage = staged_values(doubt[rows], tau, answered, p, costs, k)
        return dict(
            choice=choice, p=p, ask=ask, tau=tau, values=values, stage=stage, answers=got_answers, notes=notes
        )

    def save(self, directory: Path) -> None:
        self.first.save(Path(directory) / "first")
        self.second.save(Path(directory) / "second")

    @classmethod
    def load(cls, router_id, config, directory, needs, overhead) -> StagedFrozen:
        frozen = cls(router_id, config, needs, overhead)
        frozen.first = PosthocRejector.load(Path(directory) / "first")
        frozen.second = PosthocRejector.load(Path(directory) / "second")
        frozen.follower = follower_from_state(config.get("follower"))
        return frozen


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
    reads_answers = True
    exportable = True
    frozen = StagedFrozen

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
                "gflops": _paid(first.data_.gflops, first.overhead_, ask, final, self.asked_),
                "tdl": staged_query_costs(test.errors, costs, ask, final, self.asked_),
                "share": ask.astype(float),  # an expert is called wherever one is asked
            },
            extra={"asked_share": float(ask.mean()), "asked": test.agent_ids[self.asked_], **extra},
            stage=stage,
            stages=stages or self.stages(),
        )

    def calibrate_budget(self, costs: CostConfig, kind: str, target: float) -> tuple[Decision, dict]:
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
        spent = float(_paid(data.gflops, overhead, ask_cal, cal_final, self.asked_).mean())
        info = dict(start=start, end=follower.threshold, reachable=(0.0, 1.0), follower=state)
        return d, info | dict(training_share=float(ask_cal.mean()), training_gflops=spent)

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
        return np.stack([_paid(data.gflops, overhead, ask[g], kept[g], k) for g in range(len(settings))])

    def _follow_price(self, costs: CostConfig, target: float) -> tuple[Decision, dict]:
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
        return d, info | calibrated | dict(note=note)

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
        dense = [OperatingPoint(b, self.decide(self.bench_.costs(b))) for b in DENSE_BETAS]
        # marginal GFLOPs prices (as the post-hoc router's sweep): no β₁ of the benchmark, no TDL
        marginal = [
            OperatingPoint(None, self.decide(gflops_costs(self.first_.data_, bm))) for bm in GFLOPS_SWEEP
        ]
        return dense + marginal

    def freeze(self, costs: CostConfig, follower: dict | None = None) -> StagedFrozen:
        first, test = self.first_, self.bench_.test
        config = {
            **first._frozen_config(costs, follower),
            **first.answers_config(),
            "asked": test.agent_ids[self.asked_],
            "threshold": None if follower else self.threshold(costs),
        }
        needs = Needs(answers=(self.bench_.pool.main, *first.helpers_), ask=config["asked"])
        frozen = StagedFrozen(self.id, config, needs, float(first.overhead_))
        frozen.first, frozen.second = first.estimator_, self.second_.estimator_
        frozen.follower = follower_from_state(follower)
        if isinstance(frozen.follower, PriceFollower):  # a GFLOPs budget: the grid it follows on
            settings, taus = self.price_grid(costs)
            config["price_grid"] = PriceGrid().saved(taus, settings)
        return frozen
