"""Single query: route one question (from the test articles, or your own text) and answer it."""

from pages.ui.app import within_app

within_app(__file__)  # before this page's own imports (pages/ui/app.py says why)

import pandas as pd
import streamlit as st

from l2d_core.app_logic.answers import context_note, f1_note, shown_answer
from l2d_core.app_logic.decisions import option_labels
from l2d_core.app_logic.live import (
    answers_frame,
    gflops_text,
    helper_ids,
    live_pools,
    main_runs_live,
    new_text_routers,
    query_gflops,
)
from l2d_core.deploy import deploy
from l2d_core.report.charts import compared_chart
from l2d_core.routers.registry import exportable, router_class, router_ids, router_label, routers
from pages.ui.cache import benchmark, embeddings_ready, fitted_router, pool_answers
from pages.ui.live_agent import offer_quick_agent, switch_pool_button
from pages.ui.widgets import (
    cost_from_state,
    default_choice,
    finish_preparing,
    select_pool,
    select_routers,
    shown_errors,
)

# the routers that route one query on their own (each has ``freeze``)
ROUTABLE = tuple(r for r, cls in routers().items() if exportable(cls))

st.title("Single query")
st.caption(
    "A router sends one query to one agent. It estimates each agent's chance of being wrong and picks "
    "the agent of least expected cost: the main model's chance of a mistake, or an expert's weighted "
    "chance of a mistake plus its price β — at the costs set on the cost explorer."
)
dataset, pool = select_pool()
preparing = st.empty()  # filled at the end while the routers that read embeddings are ranked
with shown_errors():
    bench = benchmark(dataset, pool)
    choice = default_choice(dataset, pool)
best, ranking = choice.router_id, choice.ranking
costs = cost_from_state(dataset, pool, choice.costs(bench))
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
    for other in others:
        switch_pool_button(other)
    offer_quick_agent(dataset, others)

sources = ("Dataset question", "Your own text") if live else ("Dataset question",)
source = st.radio("Query", sources, key="sq_source", horizontal=True)
available = [r for r in ROUTABLE if r in router_ids(bench)]  # those that can run on this pool
menu = list(available)
if source == "Your own text":  # only routers whose inputs all run on new text
    ready = [r for r in available if embeddings_ready(dataset) or not router_class(r).reads_embeddings]
    menu = new_text_routers(bench, ready)
    left_out = [router_label(r) for r in available if r not in menu]
    if left_out:
        st.caption(
            f"Not offered for your own text: {', '.join(left_out)} — each reads an agent that cannot answer "
            "new text here (a helper known only by its prediction file), or embeddings not computed yet."
        )
ranked = [r.router_id for r in ranking if r.router_id in menu]
default = best if best in menu else (ranked[0] if ranked else menu[0])
router_id = select_routers("sq_router", default, multiple=False, where=st, ids=menu)
if choice.instead_of is not None:
    st.caption(
        f"No router pays for itself on {pool} (the best on validation articles is "
        f"{choice.unpaid_gain:+.2f} EM points above random mixing of agents, its 95% interval down to "
        f"{choice.unpaid_low:+.2f}): the other pages send "
        f"every question to {router_label(best)}, the most accurate agent. This page shows how a router "
        "would route one query."
    )
elif best not in ROUTABLE:
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
    if not context:  # a prompt of a dataset registered from a log
        st.caption(
            "A prompt of a log: no passage and no gold answer; each agent's log says whether it was right."
        )
    else:
        with st.expander("Context and gold answers"):
            st.write(context)
            st.markdown(
                "**Gold:** " + " | ".join(dict.fromkeys(rec.answers)) if rec.answers else "unanswerable"
            )
else:
    question = st.text_input("Question", key="sq_question")
    context = st.text_area("Context", key="sq_context", height=160)
    expected = st.text_input("Expected answer (optional: checked against the context)", key="sq_expected")
    if not question.strip() or not context.strip():
        st.info("Type a question and paste a context passage to route them.")
        st.stop()

with shown_errors():
    router = fitted_router(dataset, pool, router_id)
    helpers = helper_ids(router)
    everyone = pool_answers(pool, question, context, qid, expected or None, helpers)
    # the same object as an exported router (scripts/export_router.py) and the routing API
    r = deploy(router, costs).route(question, context, qid)
ids = list(bench.pool.agent_ids)
chosen = next(a for a in everyone if a["agent"] == r["agent"])
answers = everyone[: len(ids)]  # the pool's agents; the helpers' answers follow
main = answers[0]
paid = query_gflops(r, everyone, helpers)
c1, c2, c3, c4 = st.columns(4)
c1.metric("Routed to", r["agent"], help=router_label(router_id))
c2.metric(
    "Router latency",
    f"{r['latency_ms']:.1f} ms",
    help="what the router reads (the main agent's answer, or the query's embeddings) plus its decision",
)
reads_answer = "main_answer" in r["signals"]
if reads_answer:
    also = f"; the helper agents {', '.join(helpers)} too: {gflops_text(paid['helpers'])} GFLOPs"
    c3.metric(
        "Main agent's GFLOPs",
        gflops_text(paid["main"]),
        help=f"{main['agent']} always answers first ({main['gflops_source']} GFLOPs of this query)"
        + (also if helpers else ""),
    )
else:
    c3.metric("Text encoder's GFLOPs", gflops_text(paid["encoder"]), help="the router reads the query's text")
c4.metric(
    "GFLOPs of this query",
    gflops_text(paid["total"]),
    help="what ran on this query: the main agent, the expert asked for a second opinion when it answered, "
    "and the agent whose answer is kept when it answered",
)

if paid["unpaid"]:
    st.caption(
        "Not paid, because it could not answer this text: "
        + ", ".join(f"{a} ({gflops_text(g)} GFLOPs had it run)" for a, g in paid["unpaid"].items())
        + "."
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
        f"First stage: the router's doubt in the main answer — the number of answer ends (start, end; "
        f"0 to 2) it expects to be wrong — is {asked['doubt']:.3f}; {rule}, so it {verdict} {who}"
        + (f", whose answer was “{asked['answer']}”." if asked["answer"] is not None else ".")
    )
if main.get("confidence") and reads_answer:
    conf = main["confidence"]
    shown = {
        k: conf[k] for k in ("span_prob", "margin", "null_margin", "mean_logprob", "abstained") if k in conf
    }
    st.caption(
        f"{main['agent']}'s confidence in its answer: "
        + ", ".join(f"{k.replace('_', ' ')} {v:.3f}" for k, v in shown.items())
    )
if placed := r["signals"].get("main_answer_context"):
    st.caption(context_note(main["agent"], placed))

left, right = st.columns(2)
compared = r["compared"]
if compared is not None:
    chart = compared_chart(compared, r["agent"], option_labels(compared, ids))
    left.altair_chart(chart, key="sq_cost_chart", width="stretch")
    left.caption(f"{compared['quantity'].capitalize()}: {compared['note']}.")
if r["chance_wrong"] is not None:
    p = pd.DataFrame(
        {
            "agent": ids,
            "chance wrong (start)": [r["chance_wrong"][a]["start"] for a in ids],
            "chance wrong (end)": [r["chance_wrong"][a]["end"] for a in ids],
        }
    )
    right.dataframe(
        p,
        hide_index=True,
        column_config={c: st.column_config.NumberColumn(format="%.3f") for c in p.columns if c != "agent"},
    )
    right.caption(
        "The router's estimate that each agent's answer starts / ends at the wrong word of the context"
        + (" (after the asked expert answered)." if compared and compared["step"] == "second stage" else ".")
    )

st.subheader("Answer")
if chosen["answer"] is not None:
    st.success(f"**{r['agent']}**: {chosen['answer'] or '(no answer)'}")
elif chosen["status"] == "cached":  # known by its outcome log only: no answer text to show
    st.success(f"**{r['agent']}**: {shown_answer(None, chosen['em'])}")
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
st.dataframe(answers_frame(answers), hide_index=True)
if note := f1_note([a["agent"] for a in answers if a["status"] == "cached" and a["answer"] is None]):
    st.caption(note)
finish_preparing(dataset, pool, preparing)
