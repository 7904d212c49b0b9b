"""What the dashboard shows, computed without any UI: policy views for a cost setting,
the cost–EM plane, β sweeps, per-question decisions and their explanations.

Every function takes a prepared :class:`~l2d_core.experiment.Benchmark` (test articles of
the BENCHMARK.md split) and returns plain data (dicts, arrays, DataFrames).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import metrics as M
from .costs import CostConfig, cost_matrix
from .experiment import BETA_POINTS, Benchmark, evaluate_choice, fit_plugin, fit_sdl
from .policies import expected_costs, learned_policy, oracle_policy, plugin_policy, random_policy

__all__ = [
    "PolicyView",
    "reweight_view",
    "retrain_view",
    "cost_em_points",
    "sweep_frame",
    "decisions_frame",
    "explain",
    "question_type",
    "metric_deltas",
]

QUESTION_TYPES = ("what", "which", "who", "whom", "whose", "when", "where", "why", "how")


@dataclass
class PolicyView:
    """One policy at one cost setting on the test articles."""

    name: str  # "plugin" (reweight) or "sdl" (retrain)
    costs: CostConfig
    choice: np.ndarray  # (N,) agent index
    scores: np.ndarray  # (N, 2, A): SDL scores r̂, or plug-in error probabilities p̂
    expected: np.ndarray  # (N, A): the quantity the policy minimises (lower = preferred)
    metrics: dict


def reweight_view(bench: Benchmark, costs: CostConfig, p_err: np.ndarray | None = None) -> PolicyView:
    """The plug-in policy at ``costs``: instant (the error estimates are learned once)."""
    if p_err is None:
        p_err = fit_plugin(bench).error_proba(bench.X_test)
    choice = plugin_policy(p_err, costs)
    return PolicyView("plugin", costs, choice, p_err, expected_costs(p_err, costs),
                      evaluate_choice(choice, bench.test, costs, bench.rejector_gflops))


def retrain_view(bench: Benchmark, costs: CostConfig, progress: bool = False) -> PolicyView:
    """The SDL rejector trained for ``costs`` (cached on disk: a setting seen before is instant)."""
    scores = fit_sdl(bench, costs, progress=progress).scores(bench.X_test)
    choice = learned_policy(scores)
    return PolicyView("sdl", costs, choice, scores, -scores.sum(axis=1),
                      evaluate_choice(choice, bench.test, costs, bench.rejector_gflops))


def cost_em_points(bench: Benchmark, costs: CostConfig, views: list[PolicyView] = ()) -> pd.DataFrame:
    """Points of the cost–EM plane: single agents, the zero-router hull, oracle, random, views."""
    test = bench.test
    rows = [{"name": a, "kind": "agent", "gflops": float(test.gflops[:, j].mean()),
             "em": 100 * float(test.em[:, j].mean())} for j, a in enumerate(test.agent_ids)]
    hc, hq = M.upper_hull(np.array([r["gflops"] for r in rows]), np.array([r["em"] for r in rows]))
    rows += [{"name": "zero router", "kind": "hull", "gflops": c, "em": q} for c, q in zip(hc, hq)]
    oracle = oracle_policy(cost_matrix(test.errors, costs), test.gflops)
    rand = random_policy(len(test), test.n_agents, seed=0)
    for name, choice in (("oracle", oracle), ("random", rand)):
        rows.append({"name": name, "kind": "baseline", "gflops": M.mean_gflops(choice, test.gflops),
                     "em": 100 * M.chosen_mean(test.em, choice)})
    for v in views:
        rows.append({"name": v.name, "kind": "policy", "gflops": v.metrics["gflops_per_query"],
                     "em": v.metrics["em"]})
    return pd.DataFrame(rows)


def sweep_frame(bench: Benchmark, policy: str = "plugin", betas=BETA_POINTS, alpha: float = 1.0,
                p_err: np.ndarray | None = None) -> pd.DataFrame:
    """One row per β₁: EM, GFLOPs/EM, TDL, random TDL and allocation shares."""
    rows = []
    for b in betas:
        costs = bench.costs(b, alpha)
        v = reweight_view(bench, costs, p_err) if policy == "plugin" else retrain_view(bench, costs)
        m = v.metrics
        rows.append({"beta1": b, "em": m["em"], "gflops_per_em": m["gflops_per_em"], "tdl": m["tdl"],
                     "tdl_random": m["tdl_random"], "tdl_random_matched": m["tdl_random_matched"],
                     **{f"share {a}": s for a, s in m["allocation"].items()}})
    return pd.DataFrame(rows)


def question_type(question: str) -> str:
    """The wh-word of a question (first one found), else ``other``.

    >>> question_type("In what year did Tesla die?"), question_type("Is it red?")
    ('what', 'other')
    """
    words = re.findall(r"[a-z]+", question.lower())
    for w in words:
        if w in QUESTION_TYPES:
            return w
    return "other"


def decisions_frame(bench: Benchmark, view: PolicyView) -> pd.DataFrame:
    """One row per test question: the decision, whether it was right, every agent's answer."""
    test, ids = bench.test, bench.test.agent_ids
    chosen_ok = M.chosen(test.em, view.choice) > 0
    df = pd.DataFrame({
        "qid": test.qids,
        "article": test.titles,
        "question": [r.question for r in bench.test_records],
        "type": [question_type(r.question) for r in bench.test_records],
        "chosen": [ids[c] for c in view.choice],
        "deferred": view.choice != 0,
        "correct": chosen_ok,
        "main_wrong": test.em[:, 0] == 0,
    })
    for j, a in enumerate(ids):
        df[f"answer {a}"] = test.answers[:, j]
    return df


def explain(bench: Benchmark, view: PolicyView, i: int) -> dict:
    """Why query ``i`` went where it went: scores per endpoint and agent, expected costs, gold."""
    test, rec = bench.test, bench.test_records[i]
    ids = test.agent_ids
    label = "score r̂" if view.name == "sdl" else "P̂[wrong]"
    per_agent = pd.DataFrame({
        "agent": ids,
        f"start {label}": view.scores[i, 0],
        f"end {label}": view.scores[i, 1],
        "expected cost" if view.name == "plugin" else "−Σ scores": view.expected[i],
        "GFLOPs": test.gflops[i],
        "answer": test.answers[i],
        "EM": test.em[i],
        "start ok": test.start_ok[i],
        "end ok": test.end_ok[i],
    })
    winner = int(view.choice[i])
    order = np.argsort(view.expected[i])
    runner = int(order[1]) if order[0] == winner else int(order[0])
    why = (f"{ids[winner]} has the lowest {'expected cost' if view.name == 'plugin' else 'negated summed score'} "
           f"({view.expected[i, winner]:.3f}), ahead of {ids[runner]} ({view.expected[i, runner]:.3f}).")
    return {"record": rec, "table": per_agent, "winner": ids[winner], "why": why}


def metric_deltas(current: dict, previous: dict | None) -> dict:
    """Differences of the scalar metrics between two settings (None when there is no previous)."""
    keys = ("em", "f1", "gflops_per_query", "gflops_per_em", "tpr", "fpr", "tdl", "tdl_random")
    return {k: (None if previous is None else current[k] - previous[k]) for k in keys}
