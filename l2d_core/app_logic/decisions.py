"""The routing-decisions page without UI: where every test question went under a cost setting,
why, and filters over them."""

from __future__ import annotations

import csv

import altair as alt
import numpy as np
import pandas as pd

from ..data.records import question_type
from ..evaluation import metrics as M
from ..evaluation.benchmark import Benchmark
from ..routers.features import answer_context, reads_answer_context
from ..routers.registry import AGENT_PREFIX
from .answers import shown_answer
from .explorer import RouterView

__all__ = [
    "decisions_frame",
    "explain",
    "why_sentence",
    "filter_decisions",
    "brush_axes",
    "decisions_chart",
    "csv_download",
    "BRUSH",
]

BRUSH = "brush"  # the name of the chart's interval selection (the page reads it back)


def decisions_frame(bench: Benchmark, view: RouterView) -> pd.DataFrame:
    """One row per test question: the decision, whether it was right, every agent's answer."""
    test, ids = bench.test, bench.test.agent_ids
    choice = view.decision.choice
    chosen_ok = M.chosen(test.em, choice) > 0
    df = pd.DataFrame(
        {
            "qid": test.qids,
            "article": test.titles,
            "question": [r.question for r in bench.test_records],
            "type": [question_type(r.question) for r in bench.test_records],
            "chosen": [ids[c] for c in choice],
            "deferred": choice != 0,
            "correct": chosen_ok,
            "main_wrong": test.em[:, 0] == 0,
        }
    )
    d = view.decision
    if d.scores is not None and d.score_label == "chance wrong":  # the router's estimate that the
        df["main chance wrong"] = d.scores[:, :, 0].mean(axis=1)  # main answer is wrong (mean of its ends)
    if "asked" in d.extra:  # a two-stage cascade: where it asked its first expert
        df[f"asked {d.extra['asked']}"] = d.per_query["share"] > 0
    if test.confidence is not None:
        probs = [(c or {}).get("span_prob") for c in test.confidence[:, 0]]
        if any(p is not None for p in probs):
            df["main confidence"] = np.array([np.nan if p is None else p for p in probs], dtype=float)
    for j, a in enumerate(ids):  # text, "(no answer)", or "right"/"wrong" for an agent known by its log only
        df[f"answer {a}"] = [shown_answer(x, e) for x, e in zip(test.answers[:, j], test.em[:, j])]
    return df


def brush_axes(df: pd.DataFrame) -> list[str]:
    """The columns of :func:`decisions_frame` a chart can brush: the main agent's own
    confidence and the router's estimate that its answer is wrong, where the run has them."""
    return [c for c in ("main confidence", "main chance wrong") if c in df]


def decisions_chart(df: pd.DataFrame, x: str, outcome: str = "correct") -> alt.Chart:
    """One dot per question: ``x`` across, the agent it went to down, coloured by whether the
    answer it got was right; dragging across the chart selects an interval of ``x``."""
    brush = alt.selection_interval(name=BRUSH, encodings=["x"])
    data = df[["qid", "question", "chosen", outcome, x]].assign(
        outcome=np.where(df[outcome], "right", "wrong")
    )
    return (
        alt.Chart(data)
        .mark_tick(thickness=2, size=18)
        .encode(
            x=alt.X(f"{x}:Q", title=x, scale=alt.Scale(zero=False)),
            y=alt.Y("chosen:N", title="went to", axis=alt.Axis(titleAngle=0, titleAlign="right", titleY=-6)),
            color=alt.Color(
                "outcome:N",
                scale=alt.Scale(domain=["right", "wrong"], range=["#2e7d32", "#c62828"]),
                title="answer",
            ),
            opacity=alt.condition(brush, alt.value(0.6), alt.value(0.08)),
            tooltip=["question:N", "chosen:N", "outcome:N", alt.Tooltip(f"{x}:Q", format=".3f")],
        )
        .add_params(brush)
        .properties(height=60 + 50 * df["chosen"].nunique())
    )


# what choosing an agent adds to what the query pays anyway (an agent that always runs adds 0)
GFLOPS_ADDED = "GFLOPs added if chosen"


def explain(bench: Benchmark, view: RouterView, i: int, router=None) -> dict:
    """Why query ``i`` went where it went, from the decision itself (:meth:`Decision.compared`):
    the step that decided it, what that step compared per agent (agents it did not consider
    left empty), the router's per-endpoint view, every agent's answer and correctness, one
    sentence whose numbers are the table's, the main agent's own confidence signals when it
    gave them (``signals``) and where its answer sits in the context (``context``, when ``router``,
    the fitted router of ``view``, reads :func:`~l2d_core.routers.features.answer_context`; None
    otherwise, or without answer text)."""
    test, rec, d = bench.test, bench.test_records[i], view.decision
    ids = test.agent_ids
    winner = int(d.choice[i])
    cols: dict = {"agent": ids}
    if d.scores is not None:
        cols[f"start {d.score_label}"] = d.scores[i, 0]
        cols[f"end {d.score_label}"] = d.scores[i, 1]
    compared = d.compared(i)
    if compared is not None:
        stage, values = compared["stage"], compared["values"]
        # the deciding step's values as read (agents it did not weigh: a dash, not a blank)
        cols[stage.quantity] = ["—" if np.isnan(v) else _number(v) for v in values]
    cols.update(
        {
            GFLOPS_ADDED: d.on(test).gflops[i],
            "answer": [shown_answer(x, e) for x, e in zip(test.answers[i], test.em[i])],
            "EM": test.em[i],
            "start ok": test.start_ok[i],
            "end ok": test.end_ok[i],
        }
    )
    if compared is None and view.router_id == AGENT_PREFIX + ids[winner]:
        why = f"Every question goes to {ids[winner]}: a single agent, no routing."
    elif compared is None:
        why = f"{view.label} sent it to {ids[winner]}."
    else:
        why = why_sentence(ids, values, winner, stage)
    conf = test.confidence[i, 0] if test.confidence is not None else None
    signals = {k: float(v) for k, v in (conf or {}).items()}  # the main agent's own confidence
    return {
        "record": rec,
        "table": pd.DataFrame(cols),
        "winner": ids[winner],
        "why": why,
        "signals": signals,
        "context": answer_context(test.answers[i][0], rec.question, rec.context)
        if router is not None and reads_answer_context(router)
        else None,
        "paid": float(d.paid_gflops(test)[i]),
        "paid_always": float(d.overhead_gflops),
        "compared": compared,
    }


def option_labels(compared: dict | None, ids) -> dict[str, str] | None:
    """How a chart names the options of the step that decided: a two-stage cascade's first step
    weighs keeping the main answer against asking an expert (other steps: the agents' ids).

    >>> option_labels({"step": "first stage", "values": {"g": 0.3, "m1": 0.5, "m2": None}}, ("g", "m1", "m2"))
    {'g': "keep g's answer", 'm1': 'ask m1'}
    """
    if not compared or compared["step"] != "first stage":
        return None
    asked = next(a for a, v in compared["values"].items() if v is not None and a != ids[0])
    return {ids[0]: f"keep {ids[0]}'s answer", asked: f"ask {asked}"}


def _number(x: float) -> str:
    return "∞" if x == np.inf else ("−∞" if x == -np.inf else f"{x:.3f}")


def why_sentence(ids, values: np.ndarray, winner: int, stage) -> str:
    """One sentence: the chosen agent has the least value of what the deciding step compared,
    ahead of the next one (NaN: not an option at that step). A two-stage router's first stage
    compares keeping the main answer with the threshold for asking an expert.

    >>> from l2d_core.routers.decision import Stage
    >>> why_sentence(("g", "m1", "m2"), np.array([0.4, 0.2, 0.9]), 1, Stage())
    'm1 has the lowest expected cost (0.200), ahead of g (0.400).'
    >>> first = why_sentence(("g", "m1", "m2"), np.array([0.3, 0.5, np.nan]), 0, Stage("first stage"))
    >>> for part in first.split(" (the doubt in it), "):
    ...     print(part)
    First stage: keeping the main answer costs 0.300
    not above the threshold of 0.500 for asking m1, so g keeps it.
    """
    shown = [k for k in np.argsort(np.where(np.isnan(values), np.inf, values)) if not np.isnan(values[k])]
    runner = next((k for k in shown if k != winner), None)
    fmt = _number
    if stage.name == "first stage":  # keep the main answer, or ask: doubt against the threshold
        asked = runner if winner == 0 else winner
        verb = "not above" if winner == 0 else "above"
        then = f"so {ids[0]} keeps it" if winner == 0 else f"so it asks {ids[asked]}"
        return (
            f"First stage: keeping the main answer costs {fmt(values[0])} (the doubt in it), {verb} the "
            f"threshold of {fmt(values[asked])} for asking {ids[asked]}, {then}."
        )
    lead = f"{stage.name.capitalize()}: " if stage.name else ""
    if runner is None:
        return f"{lead}{ids[winner]} was the only option ({stage.quantity} {fmt(values[winner])})."
    return (
        f"{lead}{ids[winner]} has the lowest {stage.quantity} ({fmt(values[winner])}), "
        f"ahead of {ids[runner]} ({fmt(values[runner])})."
    )


def filter_decisions(
    df: pd.DataFrame,
    chosen=(),
    outcome: str = "all",
    main_wrong: bool = False,
    types=(),
    search: str = "",
    within: dict[str, tuple[float, float]] | None = None,
) -> pd.DataFrame:
    """Rows of :func:`decisions_frame` that pass every filter (empty filters keep everything).

    ``outcome`` is ``all``, ``correct`` or ``incorrect``; ``search`` is a case-insensitive
    substring of the question; ``within`` maps a column to an interval (a chart's brush).

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
    >>> filter_decisions(df.assign(s=[0.1, 0.5, 0.9]), within={"s": (0.4, 1.0)}).index.tolist()
    [1, 2]
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
    for column, (lo, hi) in (within or {}).items():
        keep &= df[column].between(min(lo, hi), max(lo, hi))
    return df[keep]


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # a spreadsheet reads such a cell as a formula


def csv_download(df: pd.DataFrame) -> str:
    """``df`` as CSV for a download, every text cell that a spreadsheet would run as a formula
    (it starts with ``= + - @``, a tab or a carriage return) escaped with a leading ``'``; numbers
    stay numbers.

    >>> print(csv_download(pd.DataFrame({"answer": ["=HYPERLINK(1)", "-5 C", "ok"], "x": [-1.5, 2, 3]})))
    "answer","x"
    "'=HYPERLINK(1)",-1.5
    "'-5 C",2.0
    "ok",3.0
    <BLANKLINE>
    """

    def safe(v):
        return "'" + v if isinstance(v, str) and v.startswith(FORMULA_START) else v

    out = df.copy()
    for c in out.columns:
        if not pd.api.types.is_numeric_dtype(out[c]):
            out[c] = out[c].astype(object).map(safe)
    out.columns = [safe(str(c)) for c in out.columns]
    return out.to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC)  # a text's line breaks stay inside it
