"""What a router decided, and how it scores: :class:`Decision` (one allocation of the test
questions at one operating setting) → :func:`evaluate_choice` (every SPEC §7 metric) and
:func:`decision_metrics` (the same with the decision's own per-question vectors) and
:func:`make_point` (one point of a cost–EM curve, with per-question vectors for the bootstrap).
"""

from __future__ import annotations

import numpy as np

from ..agents.routing_data import RoutingData
from ..method.costs import BETA_POINTS, CostConfig, cost_matrix, query_costs, realised_latency, realised_usd
from ..routers.base import Router
from ..routers.decision import Decision
from . import metrics as M
from .benchmark import Benchmark

__all__ = [
    "evaluate_choice",
    "decision_metrics",
    "abstaining",
    "make_point",
    "router_points",
    "beta_key",
    "TDL_FIELDS",
]

TDL_FIELDS = ("tdl", "tdl_random", "tdl_random_std", "tdl_random_matched")


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
    :func:`evaluate_choice`, with the decision's ``per_query`` vectors in place of what its choice
    implies), and the per-question vectors behind them."""
    data = decision.on(bench.test)
    choice = np.asarray(decision.choice, dtype=int)
    ar = np.arange(len(choice))
    overhead = decision.overhead_gflops
    m = evaluate_choice(choice, data, costs, overhead)
    q = {
        "em": data.em[ar, choice].astype(float),
        "f1": data.f1[ar, choice].astype(float),
        "gflops": decision.paid_gflops(bench.test),
        "tdl": query_costs(cost_matrix(data.errors, costs))[ar, choice],
        "share": (choice != 0).astype(float),
        **(decision.per_query or {}),
    }
    gq = float(q["gflops"].mean())
    m.update(em=100 * float(q["em"].mean()), f1=100 * float(q["f1"].mean()), gflops_per_query=gq)
    m["gflops_per_em"] = M.gflops_per_em(gq, m["em"])
    m["tdl"] = float(q["tdl"].mean())
    # two figures with two names: questions whose kept answer is an expert's, and questions on
    # which an expert ran and was paid (a two-stage cascade asks one and may keep the main answer)
    # an agent that abstains on every question (``abstain``) is no expert: its share is its own
    abstains = abstaining(data)
    kept_abstention = np.isin(choice, abstains)
    m["answered_by_expert"] = float(((choice != 0) & ~kept_abstention).mean())
    m["consulted"] = float((q["share"] * ~kept_abstention).mean())
    if abstains:
        m["abstained"] = float(kept_abstention.mean())
    if data.has_latency:  # BENCHMARK.md: the main agent's latency always paid, the chosen expert's on top
        m["latency_s"] = float(realised_latency(data.latency, choice).mean())
    if data.has_money:  # the money rule likewise: the main agent's price always, the chosen expert's on top
        q["usd"] = realised_usd(data.usd, choice)
        m["usd_per_1k"] = 1000.0 * float(q["usd"].mean())
    return m, q


def abstaining(data: RoutingData) -> list[int]:
    """The experts of ``data`` that answer "no answer" to every question (the ``abstain`` agent):
    a question they get is abstained on, not answered by an expert.

    >>> z = np.zeros((2, 3), bool)
    >>> d = RoutingData("d", ("m", "x", "no"), ("q1", "q2"), np.array(["t", "t"]), z, z, z * 1.0,
    ...                 z * 1.0, z * 1.0, np.array([["a", "b", ""], ["c", None, ""]], object))
    >>> abstaining(d)
    [2]
    """
    answers = data.answers
    return [j for j in range(1, data.n_agents) if all(isinstance(a, str) and not a for a in answers[:, j])]


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


def router_points(
    router: Router, betas=BETA_POINTS, dense: bool = True, prices=(), latencies=(), monies=()
) -> list[dict]:
    """A fitted router's curve points on the test articles: each of its operating points
    (:meth:`~l2d_core.routers.base.Router.operating_points`) scored by :func:`make_point`, then
    one at each latency price λ_s of ``latencies`` (field ``latency_price``) and at each money
    price λ$ of ``monies`` (field ``money_price``)."""
    ops = list(router.operating_points(betas, dense, prices))
    ops += router.rule_points("latency", latencies) if latencies else []
    ops += router.rule_points("money", monies) if monies else []
    return [
        make_point(router.bench_, op.decision, op.beta1, costs=op.costs, dense=op.dense, **op.fields)
        for op in ops
    ]


def beta_key(beta1: float) -> str:
    """The key of a β₁ point in results files.

    >>> beta_key(0.05), beta_key(0.0)
    ('0.05', '0')
    """
    return f"{beta1:g}"
