"""Single query: route one question (from the test articles, or your own text) and answer it."""

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard.cache import benchmark, fitted_router, pool_answers
from dashboard.widgets import cost_from_state, select_pool, shown_errors
from l2d_core.app_logic.live import route_query

STATUS = {
    "cached": "cached answer",
    "live": "ran now",
    "cannot_answer": "cannot answer new text",
    "not_cached": "no cached answer",
}

st.title("Single query")
st.caption(
    "The router reads one query and sends it to one agent. The plug-in router estimates each agent's "
    "chance of being wrong and picks the agent of least expected cost: the main model's chance of an "
    "error, or an expert's weighted chance of an error plus its price β — at the costs set on the "
    "cost explorer."
)
dataset, pool = select_pool()
with shown_errors():
    bench = benchmark(dataset, pool)
costs = cost_from_state(bench.costs(0.05))
st.sidebar.caption(
    "Costs (from the cost explorer): "
    + ", ".join(f"α{j}={a:g}, β{j}={b:.4g}" for j, (a, b) in enumerate(zip(costs.alpha, costs.beta), start=1))
)

source = st.radio("Query", ("Dataset question", "Your own text"), key="sq_source", horizontal=True)
with_sdl = st.toggle("Also score with the SDL rejector trained for these costs", key="sq_sdl")
qid, expected = None, None
if source == "Dataset question":
    recs = bench.test_records
    i = st.selectbox(
        "Test question (BENCHMARK.md test articles)",
        range(len(recs)),
        key="sq_index",
        format_func=lambda k: f"{recs[k].question}  [{recs[k].title}]",
    )
    rec = recs[i]
    question, context, qid = rec.question, rec.context, rec.qid
    with st.expander("Context and gold answers"):
        st.write(context)
        st.markdown("**Gold:** " + " | ".join(dict.fromkeys(rec.answers)) if rec.answers else "unanswerable")
else:
    question = st.text_input("Question", key="sq_question")
    context = st.text_area("Context", key="sq_context", height=160)
    expected = st.text_input("Expected answer (optional: checked against the context)", key="sq_expected")
    if not question.strip() or not context.strip():
        st.info("Type a question and paste a context passage to route them.")
        st.stop()

with shown_errors():
    plugin = fitted_router(dataset, pool, "l2d-plugin").estimator_
    sdl = fitted_router(dataset, pool, "l2d-sdl").estimator(costs) if with_sdl else None
    r = route_query(bench, question, context, costs, plugin, sdl)
    answers = pool_answers(pool, question, context, qid, expected or None)
ids = list(r["agent_ids"])

chosen = next(a for a in answers if a["agent"] == r["chosen"])
agent_ms, agent_gf = chosen["latency_ms"], chosen["gflops"]
c1, c2, c3, c4, c5 = st.columns(5)
c1.metric("Plug-in choice", r["chosen"])
c2.metric("SDL choice", r["sdl_chosen"] or "—")
c3.metric(
    "Rejector latency",
    f"{r['latency_ms']:.1f} ms",
    help="featurize + heads, this call"
    + (" (embeddings read from the cache)" if r["embeddings_cached"] else ""),
)
c4.metric(
    "Agent latency",
    "—" if agent_ms is None else f"{agent_ms:.1f} ms",
    help="the chosen agent's call: measured when it ran now or when it was cached; none for prediction files",
)
ran = chosen["answer"] is not None and agent_gf is not None
c5.metric(
    "GFLOPs of the call",
    f"{r['rejector_gflops'] + (agent_gf if ran else 0.0):.2f}",
    help=f"rejector {r['rejector_gflops']:.2f} (measured, 384 tokens) + "
    + (
        f"{r['chosen']} {agent_gf:.3g} ({chosen['gflops_source']})"
        if ran
        else "no agent: the chosen one did not run"
    ),
)

left, right = st.columns(2)
fig = go.Figure(
    go.Bar(
        x=ids,
        y=r["expected_cost"],
        text=[f"{v:.3f}" for v in r["expected_cost"]],
        marker_color=["#d62728" if a == r["chosen"] else "#9ecae1" for a in ids],
    )
)
fig.update_layout(
    title="Expected cost per agent (lower is chosen)",
    yaxis_title="expected cost (errors per query)",
    height=340,
    margin=dict(t=50, b=30),
)
left.plotly_chart(fig, key="sq_cost_chart")
p = pd.DataFrame(
    {
        "agent": ids,
        "p̂ wrong (start)": r["p_err"][0],
        "p̂ wrong (end)": r["p_err"][1],
        "expected cost": r["expected_cost"],
    }
)
if r["sdl_scores"] is not None:
    p["SDL r̂ (start)"], p["SDL r̂ (end)"] = r["sdl_scores"][0], r["sdl_scores"][1]
right.dataframe(
    p,
    hide_index=True,
    column_config={c: st.column_config.NumberColumn(format="%.3f") for c in p.columns if c != "agent"},
)

st.subheader("Answer")
if chosen["answer"] is not None:
    st.success(f"**{r['chosen']}**: {chosen['answer'] or '(no answer)'}")
else:
    st.warning(f"**{r['chosen']}** was chosen but {chosen['message']}.")
if expected and answers[0]["expected_answer"] and not answers[0]["expected_answer"]["in_context"]:
    st.error(
        answers[0]["expected_answer"]["message"][:1].upper()
        + answers[0]["expected_answer"]["message"][1:]
        + ": EM/F1 are not computed against it."
    )
table = pd.DataFrame(
    [
        {
            "agent": a["agent"],
            "kind": a["kind"],
            "status": STATUS.get(a["status"], a["status"]),
            "answer": a["answer"],
            "EM": a["em"],
            "F1": a["f1"],
            "latency ms": a["latency_ms"],
            "GFLOPs": a["gflops"],
            "GFLOPs are": a["gflops_source"],
            "note": a["message"],
        }
        for a in answers
    ]
)
st.dataframe(
    table,
    hide_index=True,
    column_config={
        "F1": st.column_config.NumberColumn(format="%.2f"),
        "latency ms": st.column_config.NumberColumn(format="%.1f"),
        "GFLOPs": st.column_config.NumberColumn(format="%.3g"),
    },
)
unable = [a["agent"] for a in answers if a["status"] in ("cannot_answer", "not_cached")]
if unable:
    st.caption(
        "Cannot answer this text (known only by their predictions on the dataset): " + ", ".join(unable)
    )
