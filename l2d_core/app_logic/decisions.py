"""The routing-decisions page without UI: where every test question went under a cost setting,
why, and filters over them."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ..data.records import question_type
from ..evaluation import metrics as M
from ..evaluation.benchmark import Benchmark
from .explorer import RouterView

__all__ = ["decisions_frame", "explain", "filter_decisions", "brush_axes", "decisions_chart", "BRUSH"]

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
    for j, a in enumerate(ids):
        df[f"answer {a}"] = test.answers[:, j]
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
            y=alt.Y("chosen:N", title="went to"),
            color=alt.Color(
                "outcome:N",
                scale=alt.Scale(domain=["right", "wrong"], range=["#2e7d32", "#c62828"]),
                title="answer",
            ),
            opacity=alt.condition(brush, alt.value(0.6), alt.value(0.08)),
            tooltip=["question:N", "chosen:N", "outcome:N", alt.Tooltip(f"{x}:Q", format=".3f")],
        )
        .add_params(brush)
        .properties(height=60 + 30 * df["chosen"].nunique())
    )


def explain(bench: Benchmark, view: RouterView, i: int) -> dict:
    """Why query ``i`` went where it went: the router's per-endpoint view of each agent, what it
    minimised, every agent's answer and correctness, one sentence, and the main agent's own
    confidence signals when it gave them (``signals``)."""
    test, rec, d = bench.test, bench.test_records[i], view.decision
    ids = test.agent_ids
    cols = {"agent": ids}
    if d.scores is not None:
        cols[f"start {d.score_label}"] = d.scores[i, 0]
        cols[f"end {d.score_label}"] = d.scores[i, 1]
    quantity = "expected cost" if d.score_label == "chance wrong" else "negated summed score"
    if d.expected is not None:
        cols[quantity] = d.expected[i]
    cols.update(
        {
            "GFLOPs": d.on(test).gflops[i],
            "answer": test.answers[i],
            "EM": test.em[i],
            "start ok": test.start_ok[i],
            "end ok": test.end_ok[i],
        }
    )
    winner = int(d.choice[i])
    if d.expected is None:
        why = f"{view.label} sent it to {ids[winner]}."
    else:
        order = np.argsort(d.expected[i])
        runner = int(order[1]) if order[0] == winner else int(order[0])
        why = (
            f"{ids[winner]} has the lowest {quantity} ({d.expected[i, winner]:.3f}), "
            f"ahead of {ids[runner]} ({d.expected[i, runner]:.3f})."
        )
    conf = test.confidence[i, 0] if test.confidence is not None else None
    signals = {k: float(v) for k, v in (conf or {}).items()}  # the main agent's own confidence
    return {"record": rec, "table": pd.DataFrame(cols), "winner": ids[winner], "why": why, "signals": signals}


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
