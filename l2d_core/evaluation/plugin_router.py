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
from typing import ClassVar

import numpy as np

from ..agents.routing_data import RoutingData
from ..method.costs import CostConfig
from ..method.policies import expected_costs, plugin_policy
from . import store
from .budget import plugin_budget
from .points import Decision
from .router import Calibrated, Router

__all__ = ["PlugInRouter", "VALIDATION_FOLDS", "article_folds"]

VALIDATION_FOLDS = 4  # folds of training articles for the out-of-fold estimates


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
        )

    def decide(self, costs: CostConfig) -> Decision:
        return self.decision(self.p_err_, costs)

    def calibrate_budget(self, costs: CostConfig, kind: str, target: float) -> Calibrated:
        """See :func:`~l2d_core.evaluation.budget.plugin_budget`."""
        return plugin_budget(self, costs, kind, target)

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
