"""The supervisor baseline ``conf-threshold`` (Weiss & Tonella, "Adopting Two Supervisors for
Efficient Use of Large-Scale Remote Deep Neural Networks"): the main agent answers first, and
when its own confidence in that answer is below a threshold the query goes to an expert. Nothing
is learned: the threshold is swept over the quantiles of the main agent's confidence on the
training articles.

- At a cost setting it takes the (expert, threshold) of least mean TDL on the training articles.
- Under a budget it starts from the threshold whose deferral share (or mean GFLOPs) on the
  training articles meets the target, and follows it query by query
  (:class:`~l2d_core.routers.budget.Follower`), like every router of the tool.
- It runs only on pools whose main agent gives its confidence on every question
  (:meth:`ConfThresholdRouter.unavailable` says why not); the confidence is the one number of
  :func:`~l2d_core.agents.confidence.confidence_score`.

It pays the main agent on every query and the expert on top where it defers. Internally the
threshold is on the *doubt* −confidence (a query defers when its doubt exceeds it), the
convention of :mod:`~l2d_core.routers.budget`.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Annotated

import numpy as np
from pydantic import Field, model_validator

from ..agents.confidence import confidence_score
from ..method.costs import CostConfig, cost_matrix, query_costs
from .base import Needs, OperatingPoint, Router
from .budget import Follower, reach_note
from .decision import BudgetStart, Decision, Stage
from .posthoc_inputs import posthoc_gflops
from .registry import register
from .saved import NonNegative, SavedConfig

__all__ = [
    "QUANTILES",
    "ConfThresholdConfig",
    "ConfThresholdRouter",
    "thresholds",
    "threshold_decision",
]

QUANTILES = 41  # levels of the main agent's confidence on the training articles the sweep tries


def thresholds(doubt: np.ndarray, levels: int = QUANTILES) -> np.ndarray:
    """Candidate thresholds on the doubt: its quantiles at ``levels`` evenly spaced levels, plus
    one under every doubt (every query defers); the top quantile defers none of these queries.

    >>> thresholds(np.array([0.0, 1.0, 2.0, 3.0]), 3).tolist()
    [-1.0, 0.0, 1.5, 3.0]
    """
    d = np.asarray(doubt, dtype=float)
    q = np.unique(np.quantile(d, np.linspace(0.0, 1.0, levels)))
    return np.concatenate([[float(d.min()) - 1.0], q])


def threshold_decision(
    doubt: np.ndarray, used: np.ndarray, expert: int, n_agents: int, overhead: float, data=None, **extra
) -> Decision:
    """Queries whose doubt exceeds the threshold in force (``used`` (N,)) go to ``expert``, the
    others stay with the main agent; what is compared per query is the main agent's doubt beyond
    the threshold against 0 for the expert (the chosen one is always the least)."""
    over = doubt > used
    values = np.full((len(doubt), n_agents), np.nan)
    values[:, 0] = doubt - used
    values[:, expert] = 0.0
    values[~over, 0] = np.minimum(values[~over, 0], 0.0)  # a tie stays with the main agent
    stage = Stage(
        "",
        "doubt beyond the threshold",
        "the main agent's doubt in its answer (minus its confidence) beyond the threshold: above 0, "
        "the query goes to the expert",
    )
    return Decision(
        np.where(over, expert, 0), overhead, data=data, expected=values, score_label="doubt",
        extra=extra, stages=(stage,),
    )  # fmt: skip


def _doubt(confidence) -> np.ndarray:
    return -np.array([confidence_score(c) for c in confidence], dtype=float)


class ConfThresholdConfig(SavedConfig):
    """What a frozen ``conf-threshold`` saves: the expert it defers to (``agent``, its index in
    the pool), the threshold on the doubt (±inf: ask everybody / nobody), every agent's GFLOPs."""

    threshold: float
    agent: Annotated[int, Field(ge=0)]
    agent_gflops: dict[str, NonNegative]

    @model_validator(mode="after")
    def _threshold_is_a_number(self) -> ConfThresholdConfig:
        if math.isnan(self.threshold):
            raise ValueError("threshold is not a number")
        return self

    def problem(self, pool, agents) -> str | None:
        ids = pool.agent_ids
        if self.agent >= len(ids):
            return f"config.agent: {self.agent} is not an agent of pool {pool.name} (0 to {len(ids) - 1})"
        return super().problem(pool, agents)


@register
class ConfThresholdRouter(Router):
    id = "conf-threshold"
    label = "confidence threshold (two supervisors)"
    description = (
        "The main agent answers first; when its own confidence in the answer is below a threshold, "
        "the query goes to an expert (no learning: the threshold is chosen on the training articles). "
        "It pays the main agent on every query."
    )
    family = "baseline"
    reads_answers = True
    config_model = ConfThresholdConfig

    @classmethod
    def unavailable(cls, bench) -> str | None:
        for split in (bench.train, bench.test):
            if not split.has_score(0):
                return (
                    f"{cls.id} reads the main agent's own confidence, and {split.agent_ids[0]} does not "
                    f"give it on every question of pool {bench.pool.name}: choose a pool whose main agent "
                    "has confidence (PLLM, PLLM-abstain, Pllama, a live agent)"
                )
        return None

    def needs(self, bench) -> Needs:
        return Needs(answers=(bench.pool.main,))

    def _fit(self) -> None:
        bench = self.bench_
        self.doubt_train_ = -bench.train.score[:, 0]
        self.doubt_test_ = -bench.test.score[:, 0]
        self.thresholds_ = thresholds(self.doubt_train_)
        self.data_, self.overhead_ = posthoc_gflops(bench.test, ())
        self.over_train_ = self.doubt_train_[None, :] > self.thresholds_[:, None]  # (T, N)

    def _train_costs(self, costs: CostConfig) -> np.ndarray:
        """(J, T) mean TDL on the training articles of deferring to expert j above threshold t."""
        qc = query_costs(cost_matrix(self.bench_.train.errors, costs))  # (N, A)
        main = qc[:, 0]
        gain = qc[:, 1:] - main[:, None]  # (N, J): what deferring to j adds
        return (main.mean() + self.over_train_ @ gain / len(main)).T

    def choose(self, costs: CostConfig) -> tuple[int, float]:
        """(expert index, doubt threshold) of least mean TDL on the training articles at ``costs``
        (ties: the higher threshold, i.e. fewer deferrals)."""
        c = self._train_costs(costs)
        js, ts = np.nonzero(c <= c.min() + 1e-12)
        k = np.lexsort((js, -ts))[0]  # the highest threshold, then the first expert
        return 1 + int(js[k]), float(self.thresholds_[ts[k]])

    def _decide_at(self, expert: int, threshold: float, **extra) -> Decision:
        used = np.full(len(self.doubt_test_), threshold)
        return threshold_decision(
            self.doubt_test_, used, expert, self.bench_.test.n_agents, self.overhead_, self.data_,
            threshold=-threshold, **extra,
        )  # fmt: skip

    def decide(self, costs: CostConfig) -> Decision:
        return self._decide_at(*self.choose(costs))

    def sweep(self) -> list[OperatingPoint]:
        """Every expert at every threshold (confidence quantile of the training articles)."""
        return [
            OperatingPoint(None, self._decide_at(j, float(t), to=self.bench_.test.agent_ids[j]))
            for j in range(1, self.bench_.test.n_agents)
            for t in self.thresholds_
        ]

    def _budget_expert(self, costs: CostConfig) -> int:
        """The expert a budget defers to: the one of least training TDL at ``costs`` among the
        thresholds that defer at least one query."""
        c = self._train_costs(costs)[:, :-1]  # the last threshold defers none on training
        return 1 + int(c.min(axis=1).argmin()) if c.size else 1

    def calibrate_budget(self, costs: CostConfig, kind: str, target: float) -> tuple[Decision, BudgetStart]:
        bench = self.bench_
        j = self._budget_expert(costs)
        cal, overhead = posthoc_gflops(bench.train, ())
        least, most = overhead, overhead + float(cal.gflops[:, j].mean())
        if kind == "share":
            share, reach = target, (0.0, 1.0)
        else:
            share = float(np.clip((target - least) / max(most - least, 1e-12), 0.0, 1.0))
            reach = (least, most)
        d = self.doubt_train_
        bounds = (float(d.min()) - 1.0, float(d.max()) + 1.0)
        follower = Follower.start(d, share, target, bounds, spend=kind == "gflops")
        start, state = follower.threshold, asdict(follower)
        spend = ()
        if kind == "gflops":
            n = len(self.doubt_test_)
            spend = (np.full(n, self.overhead_ + self.data_.gflops[:, j].mean()), np.full(n, self.overhead_))
        _, used = follower.decide(self.doubt_test_, *spend)
        decision = threshold_decision(
            self.doubt_test_, used, j, bench.test.n_agents, self.overhead_, self.data_, budget=target
        )
        over_cal = d > start
        info = BudgetStart(
            start=start,
            end=follower.threshold,
            training_share=float(over_cal.mean()),
            training_gflops=float(overhead + np.where(over_cal, cal.gflops[:, j], 0.0).mean()),
            reachable=reach,
            note=reach_note(kind, target, least, most, f"deferring every query to {bench.test.agent_ids[j]}"),
            follower=state,
        )
        return decision, info

    def freeze(self, costs: CostConfig, follower: dict | None = None) -> Router:
        test = self.bench_.test
        j, threshold = self.choose(costs)
        if follower:  # under a budget: the expert the budget defers to
            j = self._budget_expert(costs)
        gflops = dict(zip(test.agent_ids, (float(g) for g in self.data_.agent_gflops)))
        config = {
            "costs": asdict(costs),
            "threshold": threshold,
            "agent": j,
            "agent_gflops": gflops,
            "follower": follower or None,
        }
        return self.deployed(config, Needs(answers=(self.bench_.pool.main,)), float(self.overhead_))

    def route(self, signals) -> Decision:
        """At one setting it reads the main agent's confidence only."""
        dep = self.deployed_
        doubt = _doubt([a.get("confidence") for a in signals.answers()])
        if np.isnan(doubt).any():
            raise ValueError(
                f"{dep.needs.answers[0]} gave no confidence for {int(np.isnan(doubt).sum())} queries: "
                "conf-threshold needs it on every query"
            )
        j, n_agents = int(dep.config["agent"]), len(dep.config["agent_gflops"])
        if dep.follower is None:
            used = np.full(len(doubt), float(dep.config["threshold"]))
        else:
            g = list(dep.config["agent_gflops"].values())
            base = dep.overhead_gflops
            _, used = dep.follower.decide(doubt, np.full(len(doubt), base + g[j]), np.full(len(doubt), base))
        return threshold_decision(doubt, used, j, n_agents, dep.overhead_gflops)
