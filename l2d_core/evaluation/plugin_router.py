"""The base of the routers that learn each agent's chance of being wrong once and apply any cost
setting instantly (SPEC §5 plug-in rule): the plug-in router on the query's embeddings and the
post-hoc / cascade routers on the main agent's answer.

Besides the test decisions, such a router gives out-of-fold error estimates on the training
articles (:meth:`PlugInRouter.oof_error_proba`): each fold of articles is scored by a head that
never saw it. Budgets are calibrated on them, and the routers are compared on them to pick the
dashboard's default — never on the test articles.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict
from typing import ClassVar

import numpy as np

from ..agents.routing_data import RoutingData
from ..method.costs import CostConfig
from ..method.policies import expected_costs, plugin_policy
from . import store
from .budget import (
    Follower,
    PriceFollower,
    budget_stage,
    calibrate_price,
    defer_margin,
    pinned_note,
    price_choice,
    price_values,
    reach_note,
    surcharge_choice,
)
from .points import Decision, Stage
from .router import Calibrated, Router

__all__ = ["PlugInRouter", "VALIDATION_FOLDS", "article_folds"]

VALIDATION_FOLDS = 4  # folds of training articles for the out-of-fold estimates
PLUGIN_STAGES = (
    Stage(
        "",
        "expected cost",
        "the main agent's chance of a wrong start plus a wrong end, against each expert's α × its chance "
        "of a mistake plus its price β on both ends",
    ),
)


def article_folds(titles: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """Fold index (0..k-1) of each question, by article, seeded.

    >>> article_folds(np.array(["a", "a", "b", "c", "d"]), 2).tolist()
    [1, 1, 0, 0, 1]
    """
    names = np.array(sorted(set(titles)))
    np.random.default_rng(seed).shuffle(names)
    fold_of = {t: i % k for i, t in enumerate(names)}
    return np.array([fold_of[t] for t in titles], dtype=int)


class PlugInRouter(Router):
    """A router whose decision at any cost setting is the plug-in rule on error estimates p̂."""

    supports_budget: ClassVar[bool] = True
    validated: ClassVar[bool] = True
    kind: ClassVar[str] = ""  # names its stored heads

    def _features(self, split: str) -> np.ndarray:
        """The estimator's input on one split of the benchmark (``train``, ``val``, ``test``)."""
        raise NotImplementedError

    def _new_estimator(self):
        """An unfitted estimator with ``fit(F, data)`` and ``error_proba(F)``."""
        raise NotImplementedError

    def _store_params(self) -> dict:
        """What else determines the stored heads besides the estimator and the benchmark."""
        return {}

    def uses_embeddings(self) -> bool:
        """Whether the fitted heads depend on the benchmark's question/context embeddings."""
        return self.reads_embeddings

    def _validation(self) -> tuple:
        """(features, data) of the benchmark's validation articles, when it has them."""
        bench = self.bench_
        return (self._features("val"), bench.val) if bench.val is not None else (None, None)

    def accounting(self, data: RoutingData) -> tuple[RoutingData, float]:
        """``data`` as this router pays it, and the GFLOPs paid on every query."""
        return data, self.bench_.rejector_gflops

    def _fit(self) -> None:
        bench = self.bench_
        F = self._features("train")
        digest = hashlib.sha256(np.ascontiguousarray(F).tobytes()).hexdigest()[:16]
        self.estimator_ = store.fitted(
            self.kind,
            bench,
            self._new_estimator(),
            lambda e: e.fit(F, bench.train, *self._validation()),
            embeddings=self.uses_embeddings(),
            train_features=digest,
            **self._store_params(),
        )
        self.p_err_ = self.estimator_.error_proba(self._features("test"))
        self.data_, self.overhead_ = self.accounting(bench.test)

    def decision(self, p_err: np.ndarray, costs: CostConfig, data=None, overhead=None, **extra) -> Decision:
        """The plug-in rule at ``costs`` on estimates ``p_err`` (default: this router's on test)."""
        return Decision(
            plugin_policy(p_err, costs),
            self.overhead_ if overhead is None else overhead,
            data=self.data_ if data is None else data,
            expected=expected_costs(p_err, costs),
            scores=p_err,
            score_label="chance wrong",
            extra=extra,
            stages=PLUGIN_STAGES,
        )

    def decide(self, costs: CostConfig) -> Decision:
        return self.decision(self.p_err_, costs)

    def calibrate_budget(self, costs: CostConfig, kind: str, target: float) -> Calibrated:
        """The decision on the test articles under a budget followed query by query
        (:mod:`~l2d_core.evaluation.budget`), starting from a surcharge (``share``) or a price
        (``gflops``) calibrated on the training articles as scored by the head that routes."""
        bench = self.bench_
        p_cal = self.estimator_.error_proba(self._features("train"))
        cal, cal_overhead = self.accounting(bench.train)
        if kind == "share":
            return self._share_budget(costs, target, p_cal, cal, cal_overhead)
        return self._gflops_budget(costs, target, p_cal, cal, cal_overhead)

    def _share_budget(self, costs, target, p_cal, cal, cal_overhead) -> Calibrated:
        m_cal, best_cal = defer_margin(p_cal, costs)
        bound = 3.0 + 2.0 * max(costs.alpha) + 2.0 * max(costs.beta)  # beyond any margin
        follower = Follower.start(m_cal, target, target, (-bound, bound))
        start, state = follower.threshold, asdict(follower)
        choice, values, surcharge = surcharge_choice(self.p_err_, costs, follower)
        d = self._budget_decision(choice, values, {"surcharge": surcharge}, "share", target)
        cal_choice = np.where(m_cal > start, best_cal, 0)
        cal_gflops = cal_overhead + cal.gflops[np.arange(len(cal_choice)), cal_choice]
        info = dict(
            start=start,
            end=follower.threshold,
            training_share=float((cal_choice != 0).mean()),
            training_gflops=float(cal_gflops.mean()),
            reachable=(0.0, 1.0),
            follower=state,
        )
        return d, info

    def _gflops_budget(self, costs, target, p_cal, cal, cal_overhead) -> Calibrated:
        def parts(p, data, overhead):  # (errors, extra, base): compute is priced by the budget
            g = np.asarray(data.gflops, dtype=float)
            return (
                expected_costs(p, CostConfig(costs.alpha, (0.0,) * costs.n_experts)),
                g - g[:, :1],
                overhead + g[:, 0],
            )

        e_cal, x_cal, b_cal = parts(p_cal, cal, cal_overhead)
        start, least, most = calibrate_price(e_cal, x_cal, b_cal, target)
        _, extra, base = parts(self.p_err_, self.data_, self.overhead_)
        follower = PriceFollower(math.log(start), target)
        state = asdict(follower)
        choice, values, price = price_choice(self.p_err_, costs.alpha, follower, extra, base)
        d = self._budget_decision(choice, values, {"price": price}, "gflops", target)
        cal_choice = price_values(e_cal, x_cal, start).argmin(axis=1)
        info = dict(
            start=start,
            end=follower.price,
            training_share=float((cal_choice != 0).mean()),
            training_gflops=float((b_cal + x_cal[np.arange(len(cal_choice)), cal_choice]).mean()),
            reachable=(least, most),
            note=reach_note("gflops", target, least, most)
            or pinned_note(target, float((base + extra[np.arange(len(choice)), choice]).mean()), price),
            follower=state,
        )
        return d, info

    def _budget_decision(self, choice, values, per_query, kind: str, target: float) -> Decision:
        return Decision(
            choice,
            self.overhead_,
            data=self.data_,
            expected=values,
            scores=self.p_err_,
            score_label="chance wrong",
            per_query=per_query,
            extra={"budget": target},
            stages=(budget_stage(kind, target),),
        )

    def oof_outcome(self, costs: CostConfig) -> tuple[np.ndarray, np.ndarray]:
        data, overhead = self.accounting(self.bench_.train)
        choice = plugin_policy(self.oof_error_proba(), costs)
        ar = np.arange(len(choice))
        return overhead + data.gflops[ar, choice], data.em[ar, choice]

    def oof_error_proba(self, folds: int = VALIDATION_FOLDS) -> np.ndarray:
        """p̂ on every training question from a head trained on the other folds of articles,
        (N_train, 2, A), in the order of ``bench.train``; heads are stored like any other."""
        memo = self.__dict__.setdefault("oof_", {})
        if folds not in memo:
            bench = self.bench_
            F = self._features("train")
            fold = article_folds(bench.train.titles, folds, seed=self.seed_)
            out = np.zeros((len(F), 2, bench.train.n_agents))
            for k in range(folds):
                fit, held = fold != k, fold == k
                if not held.any():  # fewer articles than folds
                    continue
                digest = hashlib.sha256(np.ascontiguousarray(F[fit]).tobytes()).hexdigest()[:16]
                est = store.fitted(
                    f"{self.kind}-fold",
                    bench,
                    self._new_estimator(),
                    lambda e, fit=fit: e.fit(F[fit], bench.train.take(fit)),
                    embeddings=self.uses_embeddings(),
                    train_features=digest,
                    fold=[k, folds],
                    **self._store_params(),
                )
                out[held] = est.error_proba(F[held])
            memo[folds] = out
        return memo[folds]
