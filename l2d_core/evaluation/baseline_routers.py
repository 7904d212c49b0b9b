"""The baseline routers of SPEC §8 in the registry, each one registration: Hybrid-LLM r-det /
r-prob / r-trans, the RouterBench kNN and MLP quality routers, and the majority-vote ensemble.
Those that read the question/context embeddings pay the rejector's encoder on every query;
their scores are stored on disk (:func:`~l2d_core.evaluation.store.memo_arrays`).
"""

from __future__ import annotations

import numpy as np

from ..method.costs import CostConfig
from ..method.training import FAST_CONFIG
from ..routers.ensemble import EnsembleRouter, rescore
from ..routers.hybrid import HybridRouter, calibrate_threshold
from ..routers.quality import KNNRouter, MLPRouter, cost_aware_choice, lambda_grid, utility_choice
from . import store
from .points import Decision
from .router import TARGET_SHARES, Router, register

__all__ = ["HybridDet", "HybridProb", "HybridTrans", "KNNQuality", "MLPQuality", "MajorityVote"]


class _Hybrid(Router):
    """Hybrid LLM routers between the main agent and the expert of best training EM: at each β₁
    the threshold 1 − β_L (defer when the estimated P[S worse than L] exceeds the expert's
    per-endpoint consultation cost); swept at thresholds calibrated on the training scores for
    target shares of expert calls (RouteLLM)."""

    kind = ""
    reads_embeddings = True

    def _fit(self) -> None:
        bench = self.bench_
        est = HybridRouter(config=FAST_CONFIG.but(seed=self.seed_), kind=self.kind)

        def compute():
            est.fit(bench.X_train, bench.train)
            return {
                "train": est.score(bench.X_train),
                "test": est.score(bench.X_test),
                "strong": np.array(est.strong_),
                "t": np.array(est.t_),
            }

        s = store.memo_arrays("hybrid", bench, est, compute)
        self.train_scores_, self.test_scores_ = s["train"], s["test"]
        self.strong_, self.t_ = int(s["strong"]), float(s["t"])

    def _at(self, threshold: float, **extra) -> Decision:
        choice = np.where(self.test_scores_ >= threshold, 0, self.strong_)
        return Decision(choice, self.bench_.rejector_gflops, extra=dict(threshold=threshold, **extra))

    def decide(self, costs: CostConfig) -> Decision:
        return self._at(1.0 - costs.beta[self.strong_ - 1], t=self.t_)

    def sweep(self):
        thresholds = calibrate_threshold(self.train_scores_, np.array(TARGET_SHARES))
        return [(None, self._at(float(t), target_share=s), {}) for s, t in zip(TARGET_SHARES, thresholds)]


@register
class HybridDet(_Hybrid):
    id, kind = "r-det", "det"
    label = "Hybrid-LLM r-det"
    description = "Hybrid-LLM router: a classifier of 'the main agent is at least as good as the expert'."


@register
class HybridProb(_Hybrid):
    id, kind = "r-prob", "prob"
    label = "Hybrid-LLM r-prob"
    description = "Hybrid-LLM router trained on soft labels (graded answer quality, F1)."


@register
class HybridTrans(_Hybrid):
    id, kind = "r-trans", "trans"
    label = "Hybrid-LLM r-trans"
    description = "Hybrid-LLM router with relaxed labels, balanced between the two agents."


class _Quality(Router):
    """RouterBench routers: predicted EM of every agent; at each β₁ the plug-in rule of SPEC §5
    with 1 − EM̂ as the error probability; swept over the willingness to pay λ."""

    reads_embeddings = True

    def _estimator(self):
        raise NotImplementedError

    def _fit(self) -> None:
        bench, est = self.bench_, self._estimator()
        compute = lambda: {"test": est.fit(bench.X_train, bench.train).score(bench.X_test)}
        self.quality_ = store.memo_arrays(self.id, bench, est, compute)["test"]

    def decide(self, costs: CostConfig) -> Decision:
        return Decision(cost_aware_choice(self.quality_, costs), self.bench_.rejector_gflops)

    def sweep(self):
        cost, rg = self.bench_.train.agent_gflops, self.bench_.rejector_gflops
        return [
            (None, Decision(utility_choice(self.quality_, lam, cost), rg), {"lam": float(lam)})
            for lam in lambda_grid(cost)
        ]


@register
class KNNQuality(_Quality):
    id = "knn"
    label = "RouterBench kNN"
    description = (
        "Predicts each agent's accuracy from the 20 most similar training questions (deterministic)."
    )

    def _estimator(self):
        return KNNRouter()


@register
class MLPQuality(_Quality):
    id = "mlp"
    label = "RouterBench MLP"
    description = "Predicts each agent's accuracy with a small network on the question and context."

    def _estimator(self):
        return MLPRouter(config=FAST_CONFIG.but(seed=self.seed_))


@register
class MajorityVote(Router):
    id = "ensemble"
    label = "majority vote (all agents)"
    description = "Every agent answers; the most frequent answer wins. Costs the sum of every agent."

    def _fit(self) -> None:
        bench = self.bench_
        test = bench.test
        self.win_ = EnsembleRouter().fit(bench.X_train, bench.train).predict(test.answers)
        ar = np.arange(len(test))
        self.em_, self.f1_ = rescore(
            test.answers[ar, self.win_], [r.answers for r in bench.test_records], bench.dataset.v2
        )
        self.err_ = test.errors[ar, :, self.win_].sum(axis=1)  # (N,) wrong endpoints of the voted answer

    def decide(self, costs: CostConfig) -> Decision:
        test = self.bench_.test
        pq = {
            "em": self.em_,
            "f1": self.f1_,
            "gflops": test.gflops.sum(axis=1),
            "tdl": self.err_ + 2 * sum(costs.beta),
            "share": np.ones(len(test)),
        }
        # every agent answers (and is paid for) every query: ``share`` 1; the allocation is whose
        # answer won the vote
        return Decision(self.win_, per_query=pq)
