"""Routers that learn each agent's chance of being wrong once and apply any cost setting instantly
(SPEC §5 plug-in rule): their base (:class:`ErrorEstimateRouter`, shared with the post-hoc and
cascade routers of :mod:`~l2d_core.routers.posthoc`), the router ``l2d-plugin`` on the
question's and context's embeddings, its estimator (:class:`PluginRejector`) and what they
route once frozen (:meth:`ErrorEstimateRouter.route`).

Such a router also gives out-of-fold error estimates on the training articles (each fold scored
by a head that never saw it: :meth:`ErrorEstimateRouter.oof_error_proba`); the routers are
compared on them for the dashboard's default. Budgets are followed query by query (:mod:`.budget`).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..agents.routing_data import textless_agents
from ..method.costs import CostConfig, realised_usd
from ..method.policies import expected_costs, plugin_policy
from ..method.training import FAST_CONFIG
from . import trained
from .base import DENSE_BETAS, Needs, NotExportable, OperatingPoint, Router
from .budget import (
    PRICE_CEILING,
    Follower,
    PriceFollower,
    budget_stage,
    calibrate_price,
    calibrate_threshold,
    defer_margin,
    pinned_note,
    price_choice,
    price_values,
    reach_note,
    surcharge_choice,
)
from .calibration import article_folds, sigmoid
from .decision import BudgetStart, Decision, Stage
from .encoder import encoder_spec
from .head import AgentHead
from .registry import register
from .saved import Costs, NonNegative, SavedConfig
from .saved import Encoder as EncoderSpec

__all__ = [
    "VALIDATION_FOLDS",
    "PLUGIN_STAGES",
    "PluginRejector",
    "ErrorEstimateRouter",
    "ErrorEstimateConfig",
    "PluginConfig",
    "PluginRouter",
]

VALIDATION_FOLDS = 4  # folds of training articles for the out-of-fold estimates
PLUGIN_STAGES = (
    Stage(
        "",
        "expected cost",
        "the main agent's chance of a wrong start plus a wrong end, against each expert's α × its chance "
        "of a mistake plus its price β on both ends",
    ),
)
# the same where the main agent is known by its outcome log: right or wrong, no span to be wrong on
LOG_STAGES = (
    Stage(
        "",
        "expected cost",
        "the main agent's chance of a wrong answer (its log holds right or wrong, counted on both answer "
        "ends), against each expert's α × its chance of a wrong answer plus its price β",
    ),
)


def plugin_stages(data, spans: bool | None = None) -> tuple[Stage, ...]:
    """What the plug-in rule compares, in words that fit the main agent's kind of record (``data``:
    the routing data decided on; ``spans``: said by the caller instead, e.g. a frozen router)."""
    if spans is not None:
        return PLUGIN_STAGES if spans else LOG_STAGES
    if data is not None and data.agent_ids[0] in textless_agents(data.agent_ids[:1], data.answers[:, :1]):
        return LOG_STAGES
    return PLUGIN_STAGES


class PluginRejector(AgentHead):
    """Learns cost-free error probabilities p̂_j^i(x) once (BCE on every agent's mistakes);
    any α, β then applies instantly."""

    def _targets(self, y: np.ndarray) -> np.ndarray:
        return np.asarray(y, np.float32)

    def _loss(self, out, target):
        from torch.nn.functional import binary_cross_entropy_with_logits

        return binary_cross_entropy_with_logits(out, target)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """p̂_j^i(x) = P[agent j wrong on endpoint i], (N, 2, A)."""
        return sigmoid(self.raw_scores(X).astype(np.float64))


def plugin_decision(
    p_err, costs, overhead, data=None, follower=None, extra_gflops=None, base=None, spans=None, **extra
) -> Decision:
    """The decision on error estimates ``p_err`` (N, 2, A) at ``costs`` — the plug-in rule — or,
    with a budget's ``follower``, the rule with the follower's surcharge (a share) or price (a
    GFLOPs budget; ``extra_gflops`` (N, A) what each agent adds, ``base`` (N,) what every query
    pays), the follower moving on as it decides. ``spans``: whether the main agent answers with a
    span (None: read from ``data``; :func:`plugin_stages`). ``extra``: fields of the curve point."""
    per_query = None
    if follower is None:
        choice, values, stages = (
            plugin_policy(p_err, costs),
            expected_costs(p_err, costs),
            plugin_stages(data, spans),
        )
    else:
        extra["budget"] = follower.target
        if isinstance(follower, PriceFollower):
            choice, values, price = price_choice(p_err, costs.alpha, follower, extra_gflops, base)
            per_query, stages = {"price": price}, (budget_stage("gflops", follower.target),)
        else:
            choice, values, surcharge = surcharge_choice(p_err, costs, follower)
            per_query, stages = {"surcharge": surcharge}, (budget_stage("share", follower.target),)
    return Decision(
        choice, overhead, data=data, expected=values, scores=p_err, score_label="chance wrong",
        per_query=per_query, extra=extra, stages=stages,
    )  # fmt: skip


class ErrorEstimateConfig(SavedConfig):
    """What a frozen router of error estimates saves besides its head: the cost setting, a
    budget's follower, every agent's GFLOPs (and what its head reads: the subclasses' fields)."""

    costs: Costs
    agent_gflops: dict[str, NonNegative]


class PluginConfig(ErrorEstimateConfig):
    """``l2d-plugin``'s: the encoder whose embeddings its head reads."""

    encoder: EncoderSpec


# target shares of expert calls in an error-estimate router's sweep (ErrorEstimateRouter.share_points)
SHARE_LEVELS = 41


class ErrorEstimateRouter(Router):
    """A router whose decision at any cost setting is the plug-in rule on error estimates p̂."""

    kind: ClassVar[str] = ""  # names its stored heads
    config_model = PluginConfig

    def _features(self, split: str) -> np.ndarray:
        """The estimator's input on one split of the benchmark (``train``, ``val``, ``test``)."""
        raise NotImplementedError

    def _new_estimator(self):
        """An unfitted estimator with ``fit(X, y, …)`` and ``predict_proba(X)``."""
        raise NotImplementedError

    def _fit_estimator(self, est, F: np.ndarray, rows: np.ndarray | None = None):
        """``est`` fitted on features ``F`` of the training questions ``rows`` (all: None)."""
        bench = self.bench_
        y = bench.train.errors if rows is None else bench.train.errors[rows]
        val = (self._features("val"), bench.val.errors) if bench.val is not None and rows is None else ()
        return est.fit(F, y, *val)

    def _store_params(self) -> dict:
        """What else determines the stored heads besides the estimator and the benchmark."""
        return {}

    def uses_embeddings(self) -> bool:
        """Whether the fitted heads depend on the benchmark's question/context embeddings."""
        return self.reads_embeddings

    def accounting(self, data) -> tuple:
        """``data`` as this router pays it, and the GFLOPs paid on every query."""
        return data, self.bench_.rejector_gflops

    def _fit(self) -> None:
        bench = self.bench_
        F = self._features("train")
        digest = hashlib.sha256(np.ascontiguousarray(F).tobytes()).hexdigest()[:16]
        self.estimator_ = trained.fitted(
            self.kind,
            bench,
            self._new_estimator(),
            lambda e: self._fit_estimator(e, F),
            embeddings=self.uses_embeddings(),
            train_features=digest,
            **self._store_params(),
        )
        self.__dict__.pop("test_p_err", None)  # a fit again: estimated again when read
        self.data_, self.overhead_ = self.accounting(bench.test)

    @property
    def p_err_(self) -> np.ndarray:
        """p̂ on the test articles, (N_test, 2, A): estimated when first read (a router fitted
        only to be ranked on validation articles never reads its test questions' features)."""
        if "test_p_err" not in self.__dict__:
            self.__dict__["test_p_err"] = self.estimator_.predict_proba(self._features("test"))
        return self.__dict__["test_p_err"]

    def decision(self, p_err: np.ndarray, costs: CostConfig, data=None, overhead=None, **extra) -> Decision:
        """The plug-in rule at ``costs`` on estimates ``p_err`` (default: this router's on test)."""
        overhead = self.overhead_ if overhead is None else overhead
        return plugin_decision(p_err, costs, overhead, self.data_ if data is None else data, **extra)

    def decide(self, costs: CostConfig) -> Decision:
        return self.decision(self.p_err_, costs)

    def _parts(self, p, data, overhead, costs):
        """(α-weighted expected mistakes, what each agent adds, what every query pays)."""
        g = np.asarray(data.gflops, dtype=float)
        free = CostConfig(costs.alpha, (0.0,) * costs.n_experts)  # compute is priced by the budget
        return expected_costs(p, free), g - g[:, :1], overhead + g[:, 0]

    def calibrate_budget(self, costs: CostConfig, kind: str, target: float) -> tuple[Decision, BudgetStart]:
        """The decision on the test articles under a budget followed query by query, starting
        from a surcharge (``share``) or a price (``gflops``) calibrated on the training articles
        as scored by the head that routes."""
        bench = self.bench_
        p_cal = self.estimator_.predict_proba(self._features("train"))
        cal, cal_overhead = self.accounting(bench.train)
        if kind == "share":
            m_cal, best_cal = defer_margin(p_cal, costs)
            bound = 3.0 + 2.0 * max(costs.alpha) + 2.0 * max(costs.beta)  # beyond any margin
            follower = Follower.start(m_cal, target, target, (-bound, bound))
            start, state = follower.threshold, asdict(follower)
            d = plugin_decision(self.p_err_, costs, self.overhead_, self.data_, follower)
            cal_choice = np.where(m_cal > start, best_cal, 0)
            info = dict(start=start, end=follower.threshold, reachable=(0.0, 1.0), note="")
        else:
            e_cal, x_cal, b_cal = self._parts(p_cal, cal, cal_overhead, costs)
            start, least, most = calibrate_price(e_cal, x_cal, b_cal, target)
            _, extra, base = self._parts(self.p_err_, self.data_, self.overhead_, costs)
            follower = PriceFollower(math.log(start), target)
            state = asdict(follower)
            d = plugin_decision(self.p_err_, costs, self.overhead_, self.data_, follower, extra, base)
            spent = float((base + extra[np.arange(len(d.choice)), d.choice]).mean())
            cal_choice = price_values(e_cal, x_cal, start).argmin(axis=1)
            note = reach_note("gflops", target, least, most, PRICE_CEILING) or pinned_note(
                target, spent, d.per_query["price"]
            )
            info = dict(start=start, end=follower.price, reachable=(least, most), note=note)
        cal_gflops = cal_overhead + cal.gflops[np.arange(len(cal_choice)), cal_choice]
        info.update(
            training_share=float((cal_choice != 0).mean()),
            training_gflops=float(cal_gflops.mean()),
            follower=state,
        )
        return d, BudgetStart(**info)

    def share_points(self) -> list[OperatingPoint]:
        """Points at target shares of expert calls (:data:`SHARE_LEVELS` evenly spaced, as many as
        the confidence threshold's quantiles; field ``target_share``): the queries whose best
        expert beats the main agent by the widest expected margin defer, the margin's threshold
        set on the training articles (no label read). Margins at two cost settings: accuracy
        alone (every β 0) and the dearest β₁ of the dense sweep (the cheap experts: on
        PLLM-abstain, main against ``abstain``). An expert at no cost (``abstain``) is chosen at
        every β, so without these points the curve jumps from no deferral to the share the plain
        rule gives it, and the shares between are unseen."""
        bench = self.bench_
        p_cal = self.estimator_.predict_proba(self._features("train"))
        points = []
        for costs in (bench.costs(0.0), bench.costs(DENSE_BETAS[-1])):
            m_cal, _ = defer_margin(p_cal, costs)
            m_test, best = defer_margin(self.p_err_, costs)
            for share in np.linspace(0.0, 1.0, SHARE_LEVELS):
                choice = np.where(m_test > calibrate_threshold(m_cal, share), best, 0)
                d = Decision(choice, self.overhead_, data=self.data_, extra={"target_share": float(share)})
                points.append(OperatingPoint(None, d))
        return points

    def oof_outcome(self, costs: CostConfig, paid: str = "gflops") -> tuple[np.ndarray, np.ndarray]:
        data, overhead = self.accounting(self.bench_.train)
        choice = plugin_policy(self.oof_error_proba(), costs)
        ar = np.arange(len(choice))
        spent = realised_usd(data.usd, choice) if paid == "usd" else overhead + data.gflops[ar, choice]
        return spent, data.em[ar, choice]

    def oof_error_proba(self, folds: int = VALIDATION_FOLDS) -> np.ndarray:
        """p̂ on every training question from a head trained on the other folds of articles,
        (N_train, 2, A), in the order of ``bench.train``. An estimator whose heads are
        cross-fitted gives them itself (``out_of_fold``: each article scored by the head that
        never saw it, no head fitted again); otherwise a head per fold of ``folds``, stored like
        any other."""
        memo = self.__dict__.setdefault("oof_", {})
        if folds not in memo:
            bench = self.bench_
            F = self._features("train")
            own = getattr(self.estimator_, "out_of_fold", None)
            if own is not None and (p := own(F, bench.train.titles)) is not None:
                memo[folds] = p
                return p
            fold = article_folds(bench.train.titles, folds, seed=self.seed_)
            out = np.zeros((len(F), 2, bench.train.n_agents))
            for k in range(folds):
                fit, held = fold != k, fold == k
                if not held.any():  # fewer articles than folds
                    continue
                digest = hashlib.sha256(np.ascontiguousarray(F[fit]).tobytes()).hexdigest()[:16]
                est = trained.fitted(
                    f"{self.kind}-fold",
                    bench,
                    self._new_estimator(),
                    lambda e, fit=fit: self._fit_estimator(e, F[fit], fit),
                    embeddings=self.uses_embeddings(),
                    train_features=digest,
                    fold=[k, folds],
                    **self._store_params(),
                )
                out[held] = est.predict_proba(F[held])
            memo[folds] = out
        return memo[folds]

    def _frozen_config(self, costs: CostConfig, follower: dict | None) -> dict:
        """What every frozen router of error estimates records besides its own inputs."""
        test = self.bench_.test
        gflops = dict(zip(test.agent_ids, (float(g) for g in test.agent_gflops)))
        return {"costs": asdict(costs), "follower": follower, "agent_gflops": gflops}

    def freeze(self, costs: CostConfig, follower: dict | None = None) -> Router:
        bench = self.bench_
        if not self.reads_embeddings:
            raise NotExportable(f"{self.id} does not say what it reads about a new query")
        config = {
            **self._frozen_config(costs, follower),
            "encoder": encoder_spec(bench.encoder_name, bench.features),
        }
        heads = {"": self.estimator_}
        return self.deployed(config, Needs(embeddings=True), float(bench.rejector_gflops), heads)

    # Frozen: its head, and its budget's follower (each process follows the budget on its own
    # stream of queries).

    def error_estimates(self, signals) -> np.ndarray:
        """The frozen head's error estimates of a batch of new queries, (N, 2, A)."""
        return self.deployed_.heads[""].predict_proba(signals.embeddings())

    def tabulate(self, signals) -> bool:  # a query's estimates never depend on its batch
        self.deployed_.table = dict(zip(signals.qids, self.error_estimates(signals)))
        return True

    def route(self, signals) -> Decision:
        dep = self.deployed_
        p = self.tabulated(signals, self.error_estimates)
        costs = CostConfig(**dep.config["costs"])
        extra = base = None
        if isinstance(dep.follower, PriceFollower):  # what each agent adds: those that ran add nothing
            own = [0.0 if a in dep.needs.answers else g for a, g in dep.config["agent_gflops"].items()]
            extra = np.repeat(np.array([own]) - own[0], len(p), axis=0)
            base = np.full(len(p), dep.overhead_gflops + own[0])
        spans = dep.config.get("set") != "confidence"  # a main agent with no text: its confidence only
        return plugin_decision(
            p, costs, dep.overhead_gflops, follower=dep.follower, extra_gflops=extra, base=base, spans=spans
        )

    def load_heads(self, directory: Path) -> dict:
        return {"": self.estimator_class().load(directory)}

    @classmethod
    def estimator_class(cls):
        """The class of its head (what ``load`` reads an artifact's head with)."""
        return PluginRejector


@register
class PluginRouter(ErrorEstimateRouter):
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
        dense = [OperatingPoint(b, self.decide(self.bench_.costs(b))) for b in DENSE_BETAS]
        return dense + self.share_points()
