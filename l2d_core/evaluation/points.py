"""What a router decided, and how it scores: :class:`Decision` (one allocation of the test
questions at one operating setting) → :func:`evaluate_choice` (every SPEC §7 metric) and
:func:`decision_metrics` (the same with the decision's own per-question vectors) and
:func:`make_point` (one point of a cost–EM curve, with per-question vectors for the bootstrap).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..agents.routing_data import RoutingData
from ..method.costs import CostConfig, cost_matrix, query_costs
from . import metrics as M
from .benchmark import Benchmark

__all__ = ["Decision", "evaluate_choice", "decision_metrics", "make_point", "TDL_FIELDS"]

TDL_FIELDS = ("tdl", "tdl_random", "tdl_random_std", "tdl_random_matched")


@dataclass(frozen=True, eq=False)
class Decision:
    """One router's allocation of the test questions at one operating setting.

    ``choice`` (N,) is the agent each question went to. ``overhead_gflops`` is paid on every
    question (a rejector's encoder, or a cascade's main agent and helpers, which always run);
    ``data`` replaces the benchmark's test data for the accounting (a cascade's main agent then
    costs nothing more when chosen). ``expected`` (N, A) is what the router minimised per agent
    and ``scores`` (N, 2, A) its per-endpoint view (``score_label`` says which), when it has
    them. ``per_query`` overrides per-question vectors the choice implies (``em``, ``f1``,
    ``gflops``, ``tdl``, ``share``); ``extra`` fields are copied into the curve point.
    """

    choice: np.ndarray
    overhead_gflops: float = 0.0
    data: RoutingData | None = None
    expected: np.ndarray | None = None
    scores: np.ndarray | None = None
    score_label: str = ""
    per_query: dict[str, np.ndarray] | None = None
    extra: dict = field(default_factory=dict)

    def on(self, test: RoutingData) -> RoutingData:
        """The data this decision is accounted on."""
        return test if self.data is None else self.data


def evaluate_choice(
    choice: np.ndarray, data: RoutingData, costs: CostConfig, rejector_gflops: float = 0.0, seeds=range(5)
) -> dict:
    """Every SPEC §7 metric of one allocation on ``data``."""
    cost = cost_matrix(data.errors, costs)
    em = 100 * M.chosen_mean(data.em, choice)
    gq = M.mean_gflops(choice, data.gflops, rejector_gflops)
    alloc = M.allocation(choice, data.n_agents)
    tpr, fpr = M.tpr_fpr(choice, data.correct)
    tdl_r, tdl_r_sd = M.random_tdl(cost, None, seeds)
    tdl_m, _ = M.random_tdl(cost, alloc, seeds)
    return {
        "em": em,
        "f1": 100 * M.chosen_mean(data.f1, choice),
        "gflops_per_query": gq,
        "gflops_per_em": M.gflops_per_em(gq, em),
        "allocation": {a: float(s) for a, s in zip(data.agent_ids, alloc)},
        "tpr": tpr,
        "fpr": fpr,
        "tdl": M.mean_tdl(cost, choice),
        "tdl_random": tdl_r,
        "tdl_random_std": tdl_r_sd,
        "tdl_random_matched": tdl_m,
        "n": len(choice),
    }


def decision_metrics(bench: Benchmark, decision: Decision, costs: CostConfig) -> tuple[dict, dict]:
    """Every SPEC §7 metric of ``decision`` at ``costs`` on the test articles (as
    :func:`evaluate_choice`, with the decision's ``per_query`` vectors and its ``allocation``, if
    it gives one, in place of what its choice implies), and the per-question vectors behind them."""
    data = decision.on(bench.test)
    choice = np.asarray(decision.choice, dtype=int)
    ar = np.arange(len(choice))
    overhead = decision.overhead_gflops
    m = evaluate_choice(choice, data, costs, overhead)
    q = {
        "em": data.em[ar, choice].astype(float),
        "f1": data.f1[ar, choice].astype(float),
        "gflops": overhead + data.gflops[ar, choice].astype(float),
        "tdl": query_costs(cost_matrix(data.errors, costs))[ar, choice],
        "share": (choice != 0).astype(float),
        **(decision.per_query or {}),
    }
    gq = float(q["gflops"].mean())
    m.update(em=100 * float(q["em"].mean()), f1=100 * float(q["f1"].mean()), gflops_per_query=gq)
    m["gflops_per_em"] = M.gflops_per_em(gq, m["em"])
    m["tdl"] = float(q["tdl"].mean())
    if "allocation" in decision.extra:
        m["allocation"] = dict(decision.extra["allocation"])
    if decision.per_query is not None and "share" in decision.per_query:  # who called an expert
        m["deferred"] = float(q["share"].mean())
    return m, q


def make_point(
    bench: Benchmark, decision: Decision, beta1: float | None, costs: CostConfig | None = None, **extra
) -> dict:
    """One operating point of a router on the test articles: the metrics of ``decision`` at the
    BENCHMARK.md cost setting of ``beta1``, or at ``costs`` when given (the TDL fields are
    ``None`` when neither is), under ``gflops`` the mean GFLOPs per query, ``share_strong`` the
    share of questions sent to a non-main agent, and under ``_q`` the per-question vectors
    (dropped from saved results)."""
    has_costs = beta1 is not None or costs is not None
    m, q = decision_metrics(bench, decision, costs or bench.costs(0.05 if beta1 is None else beta1))
    m.pop("n")
    if not has_costs:
        m.update(dict.fromkeys(TDL_FIELDS))
        del q["tdl"]
    return {
        "beta1": beta1,
        "gflops": m.pop("gflops_per_query"),
        **m,
        "share_strong": float(q["share"].mean()),
        **decision.extra,
        **extra,
        "_q": q,
    }
