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

__all__ = ["Stage", "Decision", "evaluate_choice", "decision_metrics", "make_point", "TDL_FIELDS"]

TDL_FIELDS = ("tdl", "tdl_random", "tdl_random_std", "tdl_random_matched")


@dataclass(frozen=True)
class Stage:
    """One step of a router's decision, as its explanation names it: ``name`` (empty for a router
    that decides in one step), what its values are (``quantity``) and one plain sentence of what
    is compared (``note``)."""

    name: str = ""
    quantity: str = "expected cost"
    note: str = ""


@dataclass(frozen=True, eq=False)
class Decision:
    """One router's allocation of the test questions at one operating setting.

    ``choice`` (N,) is the agent each question went to. ``overhead_gflops`` is paid on every
    question (a rejector's encoder, or a cascade's main agent and helpers, which always run);
    ``data`` replaces the benchmark's test data for the accounting (a cascade's main agent then
    costs nothing more when chosen). ``expected`` (N, A) is what the router compared per agent
    for each question — NaN where an agent was not an option at the step that decided — and the
    chosen agent always has the least of them (checked here: every page, chart and sentence that
    explains a decision reads these numbers). ``stage`` (N,) says which of ``stages`` decided
    each question (all the first when None). ``scores`` (N, 2, A) is the router's per-endpoint
    view (``score_label`` says which), when it has one. ``per_query`` overrides per-question
    vectors the choice implies (``em``, ``f1``, ``gflops``, ``tdl``, ``share``: whether an
    expert was consulted, paid, whatever answer was kept); ``extra`` fields are copied into the
    curve point.
    """

    choice: np.ndarray
    overhead_gflops: float = 0.0
    data: RoutingData | None = None
    expected: np.ndarray | None = None
    scores: np.ndarray | None = None
    score_label: str = ""
    per_query: dict[str, np.ndarray] | None = None
    extra: dict = field(default_factory=dict)
    stage: np.ndarray | None = None
    stages: tuple[Stage, ...] = ()

    def __post_init__(self) -> None:
        if self.expected is None:
            return
        choice = np.asarray(self.choice, dtype=int)
        values = np.asarray(self.expected, dtype=float)
        if values.shape[0] != len(choice):
            raise ValueError(f"a decision compares {values.shape[0]} questions but chose for {len(choice)}")
        if len(choice) == 0:
            return
        picked = values[np.arange(len(choice)), choice]
        with np.errstate(invalid="ignore"):
            least = np.nanmin(np.where(np.isnan(values), np.inf, values), axis=1)
            bad = np.isnan(picked) | (picked > least + 1e-9 * np.maximum(1.0, np.abs(least)))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"decision of question {i}: agent {choice[i]} was chosen but the values compared are "
                f"{values[i].round(4).tolist()} — what a router shows must be what it decided"
            )

    def on(self, test: RoutingData) -> RoutingData:
        """The data this decision is accounted on."""
        return test if self.data is None else self.data

    def stage_of(self, i: int) -> Stage:
        """The step that decided question ``i``."""
        stages = self.stages or (
            Stage("", "expected cost" if self.score_label == "chance wrong" else "score"),
        )
        return stages[0 if self.stage is None else int(self.stage[i])]

    def compared(self, i: int) -> dict | None:
        """What decided question ``i``: the step (:class:`Stage`), the value of each agent there
        (NaN: not an option at that step) and the agent chosen — the least of those values.
        ``None`` for a router that compares no values per agent (it is named, not explained)."""
        if self.expected is None:
            return None
        return {
            "stage": self.stage_of(i),
            "values": np.asarray(self.expected[i], float),
            "chosen": int(self.choice[i]),
        }


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
        "gflops": overhead + data.gflops[ar, choice].astype(float),
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
    m["answered_by_expert"] = 1.0 - float(m["allocation"][data.agent_ids[0]])
    m["consulted"] = float(q["share"].mean())
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
