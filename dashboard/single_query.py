"""Single query: route one question (from the test articles, or your own text) and answer it."""

import pandas as pd
import streamlit as st

from dashboard.cache import benchmark, fitted_router, pool_answers
from dashboard.live_agent import offer_quick_agent, switch_pool_button
from dashboard.widgets import (
    cost_from_state,
    default_choice,
    finish_preparing,
    select_pool,
    select_routers,
    shown_errors,
)
from l2d_core.app_logic.live import live_pools, main_runs_live
from l2d_core.deploy import deploy
from l2d_core.evaluation.registry import router_label
from l2d_core.report.charts import expected_cost_chart

STATUS = {
    "cached": "cached answer",
    "live": "ran now",
    "cannot_answer": "cannot answer new text",
    "not_cached": "no cached answer",
}
# routers that route a single query with error estimates: the cascade family reads the main
# agent's answer, the plug-in router reads the question and context
CASCADES = ("l2d-staged", "l2d-cascade", "l2d-posthoc")
ROUTABLE = (*CASCADES, "l2d-plugin")

st.title("Single query")
st.caption(
    "A router sends one query to one agent. It estimates each agent's chance of being wrong and picks "
    "the agent of least expected cost: the main model's chance of a mistake, or an expert's weighted "
    "chance of a mistake plus its price β — at the costs set on the cost explorer."
)
dataset, pool = select_pool()
preparing = st.empty()  # filled at the end while the routers are compared on validation articles
with shown_errors():
    bench = benchmark(dataset, pool)
    best, ranking, _ = default_choice(dataset, pool)
costs = cost_from_state(bench.price_costs(0.1))
st.sidebar.caption(
    "Costs (from the cost explorer): "
    + ", ".join(f"{a}: α={x:g}, β={b:.4g}" for a, x, b in zip(bench.pool.experts, costs.alpha, costs.beta))
)
live = main_runs_live(bench.pool)
if not live:
    others = live_pools(dataset)
    st.info(
        f"The main agent of {pool} ({bench.pool.main}) is known only by its answers to the dataset: it "
        "cannot answer your own text, so only dataset questions can be routed through it."
        + (f" Pools whose main agent answers new text: {', '.join(others)}." if others else "")
    )
    if others:
        switch_pool_button(others[0])
    else:
        offer_quick_agent(dataset)

sources = ("Dataset question", "Your own text") if live else ("Dataset question",)
source = st.radio("Query", sources, key="sq_source", horizontal=True)
default = best if best in ROUTABLE else "l2d-cascade"
router_id = select_routers("sq_router", default, multiple=False, where=st, ids=ROUTABLE)
if best not in ROUTABLE and ranking is not None:
    st.caption(
        f"The best router of {pool} on validation articles, {router_label(best)}, routes the dataset's "
        "questions on the other pages; this page routes one query at a time with the routers above."
    )
qid, expected = None, None
if source == "Dataset question":
    recs = bench.test_records
    i = st.selectbox(
        "Test question",
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
    router = fitted_router(dataset, pool, router_id)
    answers = pool_answers(pool, question, context, qid, expected or None)
    # the same object as an exported router (scripts/export_router.py) and the routing API
    r = deploy(router, costs).route(question, context, qid)
ids = list(bench.pool.agent_ids)
expected_cost = [r["expected_costs"][a] for a in ids]
chosen = next(a for a in answers if a["agent"] == r["agent"])
main = answers[0]
c1, c2, c3, c4 = st.columns(4)
c1.metric("Routed to", r["agent"], help=router_label(router_id))
c2.metric(
    "Router latency",
    f"{r['latency_ms']:.1f} ms",
    help="what the router reads (the main agent's answer, or the query's embeddings) plus its decision",
)
c3.metric(
    "Paid on every query",
    f"{r['gflops']['router']:.2f} GFLOPs",
    help="the main agent (and helpers) for a cascade; the text encoder for a router that reads the query",
)
c4.metric(
    "GFLOPs of this query",
    f"{r['gflops']['total']:.2f}",
    help="what is paid always, plus the expert asked for a second opinion, plus the expert kept",
)
asked = r["signals"].get("asked")
if asked:
    tau, who = asked["threshold"], asked["agent"]
    if tau == float("-inf"):
        rule = f"at these costs it asks {who} for a second opinion on every query"
    elif tau == float("inf"):
        rule = f"at these costs it never asks {who}"
    else:
        rule = f"above {tau:.3f} it asks {who} for a second opinion"
    verdict = "did not ask" if not asked["asked"] else "asked" if asked["answer"] is not None else "would ask"
    st.caption(
        f"First stage: the router's doubt in the main answer (its estimated chance of a wrong start "
        f"plus a wrong end) is {asked['doubt']:.3f}; {rule}, so it {verdict} {who}"
        + (f", whose answer was “{asked['answer']}”." if asked["answer"] is not None else ".")
    )
if main.get("confidence") and router_id in CASCADES:
    conf = main["confidence"]
    shown = {
        k: conf[k] for k in ("span_prob", "margin", "null_margin", "mean_logprob", "abstained") if k in conf
    }
    st.caption(
        f"{main['agent']}'s confidence in its answer: "
        + ", ".join(f"{k.replace('_', ' ')} {v:.3f}" for k, v in shown.items())
    )

left, right = st.columns(2)
left.altair_chart(expected_cost_chart(ids, expected_cost, r["agent"]), key="sq_cost_chart", width="stretch")
p = pd.DataFrame(
    {
        "agent": ids,
        "chance wrong (start)": [r["chance_wrong"][a]["start"] for a in ids],
        "chance wrong (end)": [r["chance_wrong"][a]["end"] for a in ids],
        "expected cost": expected_cost,
    }
)
right.dataframe(
    p,
    hide_index=True,
    column_config={c: st.column_config.NumberColumn(format="%.3f") for c in p.columns if c != "agent"},
)

st.subheader("Answer")
if chosen["answer"] is not None:
    st.success(f"**{r['agent']}**: {chosen['answer'] or '(no answer)'}")
elif asked and asked["note"]:
    main_answer = main["answer"] if main["answer"] is not None else "(none)"
    st.warning(f"{asked['note'][:1].upper()}{asked['note'][1:]}. The main agent's answer: {main_answer}.")
elif chosen["status"] == "cannot_answer":
    st.warning(
        f"Would defer to **{r['agent']}**, which {chosen['message']}. "
        f"The main agent's answer: {main['answer'] if main['answer'] is not None else '(none)'}."
    )
else:
    st.warning(f"**{r['agent']}** was chosen but {chosen['message']}.")
if expected and main["expected_answer"] and not main["expected_answer"]["in_context"]:
    msg = main["expected_answer"]["message"]
    st.error(msg[:1].upper() + msg[1:] + ": EM/F1 are not computed against it.")
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
# the other pages read in the agents waiting routers need; this one only ranks what is ready
finish_preparing(dataset, pool, ranking, {}, preparing)
