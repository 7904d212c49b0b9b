"""Overview: what the tool does, the pool's agents, your own pools and agents, and the data."""

from pages.ui.app import within_app

within_app(__file__)  # before this page's own imports (pages/ui/app.py says why)

import streamlit as st

from l2d_core.agents import PoolSpec, get_pool, list_agents, register_pool
from l2d_core.agents.uploads import UPLOAD_TYPES, add_upload, add_wide_log_from_upload
from l2d_core.app_logic.overview import textless_note
from l2d_core.data import load_dataset
from l2d_core.paths import data_dir
from pages.ui.cache import agent_summary
from pages.ui.widgets import select_pool, shown_errors

DIAGRAM = """
digraph {
  rankdir=LR; node [shape=box, style=rounded, fontname=Helvetica];
  q [label="query x = (question, context)"]; r [label="router\\nreads the query (and the main answer)"];
  g [label="main agent\\n(cheap)"]; m [label="experts\\n(cost β_j, weight α_j)"];
  q -> r; r -> g [label="cheap enough"]; r -> m [label="worth the cost"];
}
"""


def custom_pool_form(dataset: str) -> None:
    agents = [a.id for a in list_agents(dataset)]
    name = st.text_input("Pool name", key="custom_pool_name")
    main = st.selectbox("Main agent (agent 0)", agents, key="custom_pool_main")
    experts = st.multiselect("Experts", [a for a in agents if a != main], key="custom_pool_experts")
    if st.button("Save pool", key="custom_pool_save"):
        if not name.strip():
            st.error("Give the pool a name.")
        elif not experts:
            st.error("A pool needs at least one expert (J ≥ 1).")
        else:
            with shown_errors():
                register_pool(PoolSpec(name.strip(), dataset, main, tuple(experts), "custom pool"))
            st.success(f"Pool {name.strip()} saved: pick it in the sidebar.")


def upload_agent_form(ds) -> None:
    # the uploader's key changes after each import, so an earlier file never stays behind to be
    # imported again under the next id (e.g. when the next file is refused as too large)
    generation = st.session_state.setdefault("agent_upload_generation", 0)
    file = st.file_uploader(
        "Prediction file {question_id: answer} (JSON), or an outcome log (CSV or JSONL: question id, "
        "right or its answer, optionally confidence, latency in seconds and cost_usd in dollars)",
        type=list(UPLOAD_TYPES),
        key=f"agent_upload_{generation}",
    )
    agent_id = st.text_input("Agent id", key="agent_upload_id", max_chars=64)
    gflops = st.number_input("Declared GFLOPs per query", min_value=0.0, value=1.0, key="agent_upload_gflops")
    c1, c2, c3 = st.columns(3)  # optional: what its answers cost in money (the cost explorer's money rule)
    prices = {
        "usd_per_question": c1.number_input(
            "$ per answer (optional)", min_value=0.0, value=None, format="%.6f", key="agent_upload_usd",
            help="one price for every answer: 0 for a model on your own machine",
        ),
        "usd_per_1m_input": c2.number_input(
            "$ per 1M input tokens", min_value=0.0, value=None, key="agent_upload_usd_in",
            help="with the next: prices the log's token counts (tokens_in, tokens_out columns)",
        ),
        "usd_per_1m_output": c3.number_input(
            "$ per 1M output tokens", min_value=0.0, value=None, key="agent_upload_usd_out"
        ),
    }  # fmt: skip
    replace = st.checkbox("Replace my agent of the same id", key="agent_upload_replace")
    if st.button("Add agent", key="agent_upload_add"):
        if file is None or not agent_id.strip():
            st.error("Choose a file and give the agent an id.")
            return
        with shown_errors():
            report = add_upload(
                agent_id, ds, file.getvalue(), gflops, filename=file.name, replace=replace, prices=prices
            )
            st.session_state["agent_upload_generation"] = generation + 1
            st.session_state["agent_upload_done"] = "\n\n".join(report.lines())
            agent_summary.clear()
            st.rerun()
    if done := st.session_state.pop("agent_upload_done", None):
        st.success(done)


def wide_log_form() -> None:
    sample = data_dir() / "llm_routing" / "routerbench-sample" / "reference_data.csv"
    file = st.file_uploader(
        "Routing log (CSV): sample_id, prompt, and per model a score <model> from 0 to 1 (right from "
        "0.5) and <model>|total_cost in dollars — RouterBench's layout",
        type=["csv"],
        key="wide_upload",
    )
    name = st.text_input("Dataset name (lowercase)", value="routerbench", key="wide_name", max_chars=40)
    group = st.text_input(
        "Group column (optional: e.g. eval_name; default each prompt its own)", key="wide_group"
    )
    use_sample = sample.is_file() and st.button(
        "Import the RouterBench sample of the data directory", key="wide_sample"
    )
    if st.button("Import the log", key="wide_add") or use_sample:
        if file is None and not use_sample:
            st.error("Choose a CSV file first.")
            return
        data, filename = (sample.read_bytes(), sample.name) if use_sample else (file.getvalue(), file.name)
        with shown_errors():
            report = add_wide_log_from_upload(data, filename, name.strip(), group.strip())
            said = [*report.lines(), f"Pick dataset {report.dataset} in the sidebar."]
            st.session_state["wide_done"] = "\n\n".join(said)
            st.rerun()  # the sidebar offers the new dataset
    if done := st.session_state.pop("wide_done", None):
        st.success(done)


st.title("Learning-to-Defer routing for extractive QA")
st.markdown(
    "A small **router** reads each query and sends it to one agent: the cheap main model or a "
    "costlier expert. It weighs each agent's chance of being wrong against its cost: the main model "
    "costs its errors, an expert α·error + β. Moving α and β trades accuracy against compute."
)
st.graphviz_chart(DIAGRAM)
dataset, pool = select_pool()
with shown_errors():
    ds = load_dataset(dataset)
    spec = get_pool(pool)
    table = agent_summary(dataset, spec.agent_ids)
st.subheader(f"Pool {pool}")
st.caption(spec.description)
st.dataframe(
    table[
        ["role", "agent", "kind", "new text", "em", "f1", "gflops", "cost"]  # in view without scrolling
        + (["usd_per_1k"] if table["usd_per_1k"].notna().any() else [])  # where an agent has a price
        + ["name", "params", "questions", "missing", "source"]
    ],
    hide_index=True,
    column_config={
        "kind": st.column_config.TextColumn(
            "answers from", help="prediction file, outcome log, model, abstains"
        ),
        "em": st.column_config.NumberColumn("EM %", format="%.2f"),
        "f1": st.column_config.NumberColumn("F1 %", format="%.2f"),
        "gflops": st.column_config.NumberColumn("GFLOPs/query", format="%.2f"),
        "usd_per_1k": st.column_config.NumberColumn(
            "$ per 1,000 questions", format="$%.4g", help="mean price of its answers (the money rule's)"
        ),
        "cost": st.column_config.TextColumn(
            "cost known by", help="measured or declared GFLOPs; latency logged"
        ),
        "new text": st.column_config.TextColumn(
            "answers new text", help="only a model runs on your own text"
        ),
    },
)
if note := textless_note(table):
    st.caption(note)
with st.expander("Build a custom pool from any cached agents"):
    custom_pool_form(dataset)
with st.expander("Add an agent from a prediction file or an outcome log"):
    upload_agent_form(ds)
with st.expander("Add a routing log of prompts without passages (one column per model)"):
    wide_log_form()
st.subheader("Data")
st.markdown(
    f"- **{dataset}**: {len(ds):,} questions in {len(ds.titles)} articles, from `{ds.source}`\n"
    f"- data directory: `{data_dir()}` (set `L2D_DATA_DIR` to change; "
    f"`python scripts/download_data.py` fetches the official files)\n"
    f"- agent answers: real prediction files and outcome logs, scored by the official SQuAD metric; "
    f"costs are declared per query unless marked measured"
)
