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
from .costs import CostConfig, InvalidCostError, cost_matrix
from .data.records import question_type
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
    "POLICY_LABELS",
    "metric_tiles",
    "allocation_frame",
    "beta_limits",
    "rule_beta1",
    "cost_from_upload",
    "filter_decisions",
    "answer_spans",
    "highlight_segments",
]


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
    return PolicyView(
        "plugin",
        costs,
        choice,
        p_err,
        expected_costs(p_err, costs),
        evaluate_choice(choice, bench.test, costs, bench.rejector_gflops),
    )


def retrain_view(bench: Benchmark, costs: CostConfig, progress: bool = False) -> PolicyView:
    """The SDL rejector trained for ``costs`` (cached on disk: a setting seen before is instant)."""
    scores = fit_sdl(bench, costs, progress=progress).scores(bench.X_test)
    choice = learned_policy(scores)
    return PolicyView(
        "sdl",
        costs,
        choice,
        scores,
        -scores.sum(axis=1),
        evaluate_choice(choice, bench.test, costs, bench.rejector_gflops),
    )


def cost_em_points(bench: Benchmark, costs: CostConfig, views: list[PolicyView] = ()) -> pd.DataFrame:
    """Points of the cost–EM plane: single agents, the zero-router hull, oracle, random, views."""
    test = bench.test
    rows = [
        {
            "name": a,
            "kind": "agent",
            "gflops": float(test.gflops[:, j].mean()),
            "em": 100 * float(test.em[:, j].mean()),
        }
        for j, a in enumerate(test.agent_ids)
    ]
    hc, hq = M.upper_hull(np.array([r["gflops"] for r in rows]), np.array([r["em"] for r in rows]))
    rows += [{"name": "zero router", "kind": "hull", "gflops": c, "em": q} for c, q in zip(hc, hq)]
    oracle = oracle_policy(cost_matrix(test.errors, costs), test.gflops)
    rand = random_policy(len(test), test.n_agents, seed=0)
    for name, choice in (("oracle", oracle), ("random", rand)):
        rows.append(
            {
                "name": name,
                "kind": "baseline",
                "gflops": M.mean_gflops(choice, test.gflops),
                "em": 100 * M.chosen_mean(test.em, choice),
            }
        )
    for v in views:
        rows.append(
            {"name": v.name, "kind": "policy", "gflops": v.metrics["gflops_per_query"], "em": v.metrics["em"]}
        )
    return pd.DataFrame(rows)


def sweep_frame(
    bench: Benchmark,
    policy: str = "plugin",
    betas=BETA_POINTS,
    alpha: float = 1.0,
    p_err: np.ndarray | None = None,
) -> pd.DataFrame:
    """One row per β₁: EM, GFLOPs/EM, TDL, random TDL and allocation shares."""
    rows = []
    for b in betas:
        costs = bench.costs(b, alpha)
        v = reweight_view(bench, costs, p_err) if policy == "plugin" else retrain_view(bench, costs)
        m = v.metrics
        rows.append(
            {
                "beta1": b,
                "em": m["em"],
                "gflops_per_em": m["gflops_per_em"],
                "tdl": m["tdl"],
                "tdl_random": m["tdl_random"],
                "tdl_random_matched": m["tdl_random_matched"],
                **{f"share {a}": s for a, s in m["allocation"].items()},
            }
        )
    return pd.DataFrame(rows)


def decisions_frame(bench: Benchmark, view: PolicyView) -> pd.DataFrame:
    """One row per test question: the decision, whether it was right, every agent's answer."""
    test, ids = bench.test, bench.test.agent_ids
    chosen_ok = M.chosen(test.em, view.choice) > 0
    df = pd.DataFrame(
        {
            "qid": test.qids,
            "article": test.titles,
            "question": [r.question for r in bench.test_records],
            "type": [question_type(r.question) for r in bench.test_records],
            "chosen": [ids[c] for c in view.choice],
            "deferred": view.choice != 0,
            "correct": chosen_ok,
            "main_wrong": test.em[:, 0] == 0,
        }
    )
    for j, a in enumerate(ids):
        df[f"answer {a}"] = test.answers[:, j]
    return df


def explain(bench: Benchmark, view: PolicyView, i: int) -> dict:
    """Why query ``i`` went where it went: scores per endpoint and agent, expected costs, gold."""
    test, rec = bench.test, bench.test_records[i]
    ids = test.agent_ids
    label = "score r̂" if view.name == "sdl" else "P̂[wrong]"
    per_agent = pd.DataFrame(
        {
            "agent": ids,
            f"start {label}": view.scores[i, 0],
            f"end {label}": view.scores[i, 1],
            "expected cost" if view.name == "plugin" else "−Σ scores": view.expected[i],
            "GFLOPs": test.gflops[i],
            "answer": test.answers[i],
            "EM": test.em[i],
            "start ok": test.start_ok[i],
            "end ok": test.end_ok[i],
        }
    )
    winner = int(view.choice[i])
    order = np.argsort(view.expected[i])
    runner = int(order[1]) if order[0] == winner else int(order[0])
    quantity = "expected cost" if view.name == "plugin" else "negated summed score"
    why = (
        f"{ids[winner]} has the lowest {quantity} ({view.expected[i, winner]:.3f}), "
        f"ahead of {ids[runner]} ({view.expected[i, runner]:.3f})."
    )
    return {"record": rec, "table": per_agent, "winner": ids[winner], "why": why}


def metric_deltas(current: dict, previous: dict | None) -> dict:
    """Differences of the scalar metrics between two settings (None when there is no previous)."""
    keys = (
        "em",
        "f1",
        "gflops_per_query",
        "gflops_per_em",
        "tpr",
        "fpr",
        "tdl",
        "tdl_random",
        "tdl_random_matched",
    )
    return {k: (None if previous is None else current[k] - previous[k]) for k in keys}


# --- cost explorer and decisions page helpers ------------------------------------------------

POLICY_LABELS = {"plugin": "Reweight (plug-in)", "sdl": "Retrain (SDL)"}

# Metric tiles: label, metric key, value format, delta format, delta colour (inverse: lower is
# better), help text.
_TILES = (
    ("EM", "em", "{:.2f}", "{:+.2f}", "normal", "exact match of the chosen agent, % of test questions"),
    ("F1", "f1", "{:.2f}", "{:+.2f}", "normal", "token F1 of the chosen agent, %"),
    ("GFLOPs/query", "gflops_per_query", "{:.1f}", "{:+.1f}", "inverse", "rejector + chosen agent, mean"),
    ("GFLOPs/EM", "gflops_per_em", "{:.2f}", "{:+.2f}", "inverse", "mean GFLOPs per query ÷ EM (%)"),
    ("TPR", "tpr", "{:.3f}", "{:+.3f}", "normal", "main wrong → sent to an expert that is right"),
    ("FPR", "fpr", "{:.3f}", "{:+.3f}", "inverse", "main right → sent to an expert that is wrong"),
    ("TDL", "tdl", "{:.4f}", "{:+.4f}", "inverse", "true deferral loss, mean per query"),
    ("TDL random", "tdl_random", "{:.4f}", "{:+.4f}", "off", "uniform random allocation, mean of 5 seeds"),
    (
        "TDL random (matched)",
        "tdl_random_matched",
        "{:.4f}",
        "{:+.4f}",
        "off",
        "random allocation with this policy's allocation ratios, mean of 5 seeds",
    ),
    ("Deferred", "deferred", "{:.1%}", "{:+.1%}", "off", "share of queries sent to an expert"),
)


def _fmt(fmt: str, x: float | None) -> str | None:
    if x is None:
        return None
    if not np.isfinite(x):
        return "∞" if x > 0 else ("−∞" if x < 0 else "n/a")
    return fmt.format(x)


def metric_tiles(current: dict, previous: dict | None) -> list[dict]:
    """The metric tiles of one policy: label, formatted value, formatted delta against the
    previous setting (None without one), delta colour and help — ready for ``st.metric``.

    >>> m = {"em": 80.0, "f1": 88.0, "gflops_per_query": 900.0, "gflops_per_em": 11.25, "tpr": 0.4,
    ...      "fpr": float("nan"), "tdl": 0.4, "tdl_random": 0.43, "tdl_random_matched": 0.41,
    ...      "allocation": {"g": 0.25, "m1": 0.25, "m2": 0.5}}
    >>> tiles = metric_tiles(m, dict(m, em=79.5, allocation={"g": 0.5, "m1": 0.25, "m2": 0.25}))
    >>> [(t["label"], t["value"], t["delta"]) for t in tiles if t["label"] in ("EM", "FPR", "Deferred")]
    [('EM', '80.00', '+0.50'), ('FPR', 'n/a', None), ('Deferred', '75.0%', '+25.0%')]
    >>> metric_tiles(m, None)[0]["delta"] is None
    True
    """

    def extended(m: dict) -> dict:
        return dict(m, deferred=sum(list(m["allocation"].values())[1:]))

    cur = extended(current)
    prev = None if previous is None else extended(previous)
    deltas = metric_deltas(cur, prev)
    deltas["deferred"] = None if prev is None else cur["deferred"] - prev["deferred"]
    tiles = []
    for label, key, vfmt, dfmt, color, help_ in _TILES:
        delta = deltas[key]
        if delta is not None and not np.isfinite(delta):
            delta = None
        tiles.append(
            {
                "label": label,
                "value": _fmt(vfmt, cur[key]),
                "delta": _fmt(dfmt, delta),
                "delta_color": color,
                "help": help_,
            }
        )
    return tiles


def allocation_frame(views: list[PolicyView]) -> pd.DataFrame:
    """Allocation ratios of each view, long format: policy, agent, share."""
    return pd.DataFrame(
        [
            {"policy": POLICY_LABELS.get(v.name, v.name), "agent": a, "share": s}
            for v in views
            for a, s in v.metrics["allocation"].items()
        ]
    )


def beta_limits(expert_gflops) -> tuple[float, ...]:
    """Upper end of each hand-set β_j slider: 1, or β_j of the GFLOPs rule at β₁ = 1 when larger
    (an expert over 20× the GFLOPs of expert 1 costs more than β₁).

    >>> beta_limits([100.0, 1730.0])
    (1.0, 1.0)
    >>> beta_limits([2.0, 1730.0])
    (1.0, 43.25)
    """
    rule = CostConfig.from_beta1(1.0, expert_gflops).beta
    return tuple(max(1.0, float(b)) for b in rule)


def rule_beta1(costs: CostConfig, expert_gflops) -> float | None:
    """β₁ when ``costs.beta`` follows the GFLOPs rule of SPEC §3, else None.

    >>> rule_beta1(CostConfig.from_beta1(0.05, [100.0, 1730.0]), [100.0, 1730.0])
    0.05
    >>> rule_beta1(CostConfig((1.0, 1.0), (0.05, 0.05)), [100.0, 1730.0]) is None
    True
    """
    b1 = costs.beta[0]
    rule = CostConfig.from_beta1(b1, expert_gflops).beta
    return b1 if np.allclose(rule, costs.beta, rtol=1e-9, atol=1e-12) else None


def cost_from_upload(
    data: bytes | str, n_experts: int, alpha_max: float = 2.0, beta_max=(1.0,)
) -> CostConfig:
    """A cost setting read from an uploaded JSON file (:meth:`CostConfig.to_json` format), checked
    against the pool (one α and one β per expert) and the dashboard's slider ranges.

    Every problem raises :class:`~l2d_core.costs.InvalidCostError` with a message for the user.

    >>> cost_from_upload(b'{"alpha": [1.5], "beta": [0.1]}', 1)
    CostConfig(alpha=(1.5,), beta=(0.1,))
    >>> cost_from_upload(b'{"alpha": [1.0], "beta": [0.1]}', 2)
    Traceback (most recent call last):
    ...
    l2d_core.costs.InvalidCostError: the file has costs for 1 expert(s) but this pool has 2
    >>> cost_from_upload('{"alpha": [3.0], "beta": [0.1]}', 1)
    Traceback (most recent call last):
    ...
    l2d_core.costs.InvalidCostError: alpha_1 = 3.0 is outside the dashboard's range [0, 2.0]
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidCostError("the cost file is not UTF-8 text") from None
    costs = CostConfig.from_json(data)
    if costs.n_experts != n_experts:
        raise InvalidCostError(
            f"the file has costs for {costs.n_experts} expert(s) but this pool has {n_experts}"
        )
    beta_max = tuple(beta_max) if len(tuple(beta_max)) == n_experts else (tuple(beta_max)[0],) * n_experts
    for j, (a, b, bmax) in enumerate(zip(costs.alpha, costs.beta, beta_max), start=1):
        if a > alpha_max:
            raise InvalidCostError(f"alpha_{j} = {a} is outside the dashboard's range [0, {alpha_max}]")
        if b > bmax:
            raise InvalidCostError(f"beta_{j} = {b} is outside the dashboard's range [0, {bmax}]")
    return costs


def filter_decisions(
    df: pd.DataFrame, chosen=(), outcome: str = "all", main_wrong: bool = False, types=(), search: str = ""
) -> pd.DataFrame:
    """Rows of :func:`decisions_frame` that pass every filter (empty filters keep everything).

    ``outcome`` is ``all``, ``correct`` or ``incorrect``; ``search`` is a case-insensitive
    substring of the question.

    >>> df = pd.DataFrame({"question": ["What is X?", "Who is Y?", "what about Z"],
    ...                    "type": ["what", "who", "what"], "chosen": ["g", "m", "m"],
    ...                    "correct": [True, False, True], "main_wrong": [False, True, True]})
    >>> filter_decisions(df, chosen=["m"]).index.tolist()
    [1, 2]
    >>> filter_decisions(df, outcome="incorrect").index.tolist()
    [1]
    >>> filter_decisions(df, main_wrong=True).index.tolist()
    [1, 2]
    >>> filter_decisions(df, types=["what"], search="WHAT ab").index.tolist()
    [2]
    """
    if outcome not in ("all", "correct", "incorrect"):
        raise ValueError(f"outcome must be all, correct or incorrect, got {outcome!r}")
    keep = pd.Series(True, index=df.index)
    if len(chosen):
        keep &= df["chosen"].isin(list(chosen))
    if outcome != "all":
        keep &= df["correct"] == (outcome == "correct")
    if main_wrong:
        keep &= df["main_wrong"]
    if len(types):
        keep &= df["type"].isin(list(types))
    if search:
        keep &= df["question"].str.contains(search, case=False, regex=False)
    return df[keep]


def answer_spans(context: str, answers) -> list[tuple[int, int, str]]:
    """Character spans ``(start, end, label)`` of labelled answers in ``context``: the first
    case-insensitive occurrence of each ``(label, text)``; empty or absent answers get none.

    >>> answer_spans("The Eiffel Tower is in Paris.",
    ...              [("gold", "paris"), ("A", "Eiffel Tower"), ("B", "Rome"), ("C", ""), ("D", None)])
    [(23, 28, 'gold'), (4, 16, 'A')]
    """
    spans = []
    for label, text in answers:
        text = (text or "").strip()
        if not text:
            continue
        m = re.search(re.escape(text), context, flags=re.IGNORECASE)
        if m:
            spans.append((m.start(), m.end(), label))
    return spans


def highlight_segments(context: str, spans) -> list[tuple[str, tuple[str, ...]]]:
    """Cut ``context`` at every span boundary: ``(text, labels covering it)`` in order, so
    overlapping answers (an agent giving the gold span) can be drawn together.

    >>> highlight_segments("abcdef", [(1, 4, "gold"), (2, 3, "A")])
    [('a', ()), ('b', ('gold',)), ('c', ('gold', 'A')), ('d', ('gold',)), ('ef', ())]
    >>> highlight_segments("abc", [])
    [('abc', ())]
    """
    cuts = sorted({0, len(context), *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    out = []
    for a, b in zip(cuts, cuts[1:]):
        labels = tuple(dict.fromkeys(lab for s, e, lab in spans if s <= a and b <= e))
        out.append((context[a:b], labels))
    return out
