"""Routing decisions: where every test question went under the cost explorer's cost setting or
budget, and why."""

from pages.ui.app import within_app

within_app(__file__)  # before this page's own imports (pages/ui/app.py says why)

import streamlit as st

from l2d_core.app_logic.answers import context_note, f1_note, textless_agents
from l2d_core.app_logic.decisions import (
    BRUSH,
    GFLOPS_ADDED,
    brush_axes,
    csv_download,
    decisions_chart,
    decisions_frame,
    explain,
    filter_decisions,
    option_labels,
)
from l2d_core.app_logic.explorer import budget_words, router_view
from l2d_core.app_logic.highlight import context_html, label_colors, legend_html, md_plain
from l2d_core.report.charts import compared_chart
from pages.ui.cache import benchmark, fitted_router
from pages.ui.widgets import (
    budget_from_state,
    cost_from_state,
    default_choice,
    finish_preparing,
    select_pool,
    select_routers,
    shown_errors,
    train_for,
)

st.title("Routing decisions")
dataset, pool = select_pool()
preparing = st.empty()  # filled at the end while the routers that read embeddings are ranked
with shown_errors():
    bench = benchmark(dataset, pool)
    choice = default_choice(dataset, pool)
    costs = cost_from_state(dataset, pool, choice.costs(bench))
    budget = budget_from_state(dataset, pool)
router_id = select_routers("dec_router", choice.router_id, multiple=False, where=st, bench=bench)
with shown_errors():
    router = fitted_router(dataset, pool, router_id)
    train_for([router], costs)
    view = router_view(bench, router, costs, budget)
    df = decisions_frame(bench, view)
agents = list(bench.test.agent_ids)
if view.budget is not None:  # the budget's own figures; the cost setting's β does not apply
    st.caption(budget_words(view.budget))
else:
    st.caption(
        f"Cost setting of the cost explorer: α = ({', '.join(f'{a:g}' for a in costs.alpha)}), "
        f"β = ({', '.join(f'{b:.4g}' for b in costs.beta)}) for experts {', '.join(agents[1:])}."
    )
if view.budget is None and budget is not None:
    st.caption(
        "This router has no error estimates to follow the cost explorer's budget with: shown at the costs."
    )
if note := f1_note(textless_agents(agents, bench.test.answers)):
    st.caption(note)


def select_row() -> None:
    """Table selection callback: the selected row becomes the question of the detail view."""
    rows = st.session_state["dec_table"].selection.rows
    if rows:
        st.session_state["dec_qid"] = st.session_state["_dec_shown_qids"][rows[0]]


c1, c2, c3 = st.columns([3, 2, 2], vertical_alignment="bottom")
# pills show each agent's whole name, selected or not (a multiselect's chip cut it to "matc…")
chosen = c1.pills("Agent chosen", agents, selection_mode="multi", key="dec_chosen") or []
outcome = c2.radio("Outcome", ("all", "correct", "incorrect"), key="dec_outcome", horizontal=True)
main_wrong = c3.checkbox("Main model wrong", key="dec_main_wrong")
c4, c5 = st.columns([2, 3], vertical_alignment="bottom")
types = c4.multiselect("Question type", sorted(df["type"].unique()), key="dec_type")
search = c5.text_input("Search questions", key="dec_search", placeholder="case-insensitive substring")
shown = filter_decisions(df, chosen, outcome, main_wrong, types, search)
if (axes := brush_axes(df)) and not shown.empty:
    x = st.radio("Chart across", axes, horizontal=True, key="dec_axis") if len(axes) > 1 else axes[0]
    # above the chart: its toolbar then covers this caption, never a filter
    st.caption(
        "Each tick is a question. Drag across the chart to keep only the questions in that range "
        "in the table below; double-click to clear."
    )
    event = st.altair_chart(
        decisions_chart(shown, x), on_select="rerun", key=f"dec_brush_{x}", width="stretch"
    )
    interval = (event.selection.get(BRUSH) or {}).get(x) if event else None
    if interval:
        shown = filter_decisions(shown, within={x: tuple(interval)})
st.session_state["_dec_shown_qids"] = list(shown["qid"])

st.caption(f"{len(shown):,} of {len(df):,} test questions. Select a row to see why it went where it went.")
st.dataframe(
    shown,
    key="dec_table",
    on_select=select_row,
    selection_mode="single-row",
    hide_index=True,
    column_order=["question", "chosen", "correct", "deferred", "main_wrong", "type", "article"]
    + [f"answer {a}" for a in agents]
    + ["qid"],
    column_config={"main_wrong": "main wrong", "question": st.column_config.TextColumn(width="large")},
    height=320,
)
st.download_button(
    "Decisions (CSV)",
    lambda: csv_download(shown),
    f"decisions_{dataset}_{pool}_{router_id}.csv",
    "text/csv",
    key="download_decisions",
    on_click="ignore",
    icon=":material/download:",
)

if shown.empty:
    st.info("No question matches the filters.")
    st.stop()

qids, questions = list(shown["qid"]), dict(zip(shown["qid"], shown["question"]))
if st.session_state.get("dec_qid") not in questions:
    st.session_state["dec_qid"] = qids[0]
qid = st.selectbox("Question", qids, key="dec_qid", format_func=lambda q: f"{questions[q]}  ·  {q}")
row = shown[shown["qid"] == qid].iloc[0]
i = int(shown.index[shown["qid"] == qid][0])  # position in the test set
ex = explain(bench, view, i, router)
rec = ex["record"]

st.subheader(md_plain(rec.question))
verdict = ":green[right]" if row["correct"] else ":red[wrong]"
where = f"Article **{md_plain(rec.title)}** · routed to **{ex['winner']}**, which is {verdict}"
st.markdown(f"{where} · question type *{row['type']}*")
st.info(ex["why"])
if ex["compared"] is not None:
    st.caption(f"What was compared: {ex['compared']['stage'].note}.")
colors = label_colors(agents)
labelled = [("gold", a) for a in dict.fromkeys(rec.answers)] + list(zip(agents, bench.test.answers[i]))
body, missing = context_html(rec.context, labelled, colors)
st.markdown(legend_html(colors), unsafe_allow_html=True)
st.markdown(f'<div style="line-height: 1.9">{body}</div>', unsafe_allow_html=True)
if missing:
    st.caption(f"Answer not found verbatim in the context: {', '.join(missing)}.")
if not rec.answers:
    st.caption("Unanswerable question: the right answer is no answer.")
compared = view.decision.explain(i, agents)
if compared is not None:  # the chart, then the table at full width (beside it, columns were cut)
    chart = compared_chart(compared, ex["winner"], option_labels(compared, agents))
    st.columns([2, 3])[0].altair_chart(chart, key="dec_compared", width="stretch")
st.dataframe(ex["table"], hide_index=True, key="dec_explained")
st.caption(
    f"This query paid {ex['paid']:,.2f} GFLOPs, {ex['paid_always']:,.2f} of them whatever was chosen "
    f"(what runs on every query); '{GFLOPS_ADDED}' is what choosing an agent adds to those."
)
if ex["signals"] and getattr(router, "confidence_", False):
    st.caption(
        f"What the router read besides the answers — {bench.pool.main}'s own confidence in its answer: "
        + ", ".join(f"{k.replace('_', ' ')} {v:.3f}" for k, v in ex["signals"].items())
    )
if ex["context"]:
    st.caption(context_note(bench.pool.main, ex["context"]))
finish_preparing(dataset, pool, preparing)
