"""L2D routing dashboard: entry point (page config, navigation) and the Overview page."""

import streamlit as st

from l2d_core.agents import get_pool
from l2d_core.data import load_dataset
from l2d_core.paths import data_dir
from pages.common import agent_summary, select_pool, shown_errors

DIAGRAM = """
digraph {
  rankdir=LR; node [shape=box, style=rounded, fontname=Helvetica];
  q [label="query x = (question, context)"]; r [label="rejector r(x)\\nstart head + end head"];
  g [label="main agent g\\n(cheap)"]; m [label="experts m_1..m_J\\n(cost β_j, weight α_j)"];
  q -> r; r -> g [label="argmax Σ_i r^i(x, 0)"]; r -> m [label="argmax Σ_i r^i(x, j)"];
}
"""


def overview() -> None:
    st.title("Learning-to-Defer routing for extractive QA")
    st.markdown(
        "A small **rejector** reads each query and sends it to one agent: the cheap main model "
        "or a costlier expert. It is trained with a surrogate of the *true deferral loss*, which "
        "charges the main model its errors and an expert α·error + β. Moving α and β trades "
        "accuracy against compute; the plug-in policy re-routes instantly for any setting."
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
            ["role", "agent", "name", "em", "f1", "gflops", "gflops_source", "params", "questions", "missing"]
        ],
        hide_index=True,
        column_config={
            "em": st.column_config.NumberColumn("EM %", format="%.2f"),
            "f1": st.column_config.NumberColumn("F1 %", format="%.2f"),
            "gflops": st.column_config.NumberColumn("GFLOPs/query", format="%.2f"),
            "gflops_source": "GFLOPs are",
        },
    )
    st.subheader("Data")
    st.markdown(
        f"- **{dataset}**: {len(ds):,} questions in {len(ds.titles)} articles, from `{ds.source}`\n"
        f"- data directory: `{data_dir()}` (set `L2D_DATA_DIR` to change; "
        f"`python scripts/download_data.py` fetches the official files)\n"
        f"- agent answers: real leaderboard prediction files, scored by the official SQuAD metric; "
        f"costs are declared per query unless marked measured"
    )


if __name__ == "__main__":
    st.set_page_config(page_title="L2D routing for extractive QA", layout="wide")
    nav = st.navigation(
        [
            st.Page(overview, title="Overview", icon="🏠", default=True),
            st.Page("pages/cost_explorer.py", title="Cost explorer", icon="🎚️"),
            st.Page("pages/decisions.py", title="Routing decisions", icon="🔀"),
            st.Page("pages/single_query.py", title="Single query", icon="❓"),
            st.Page("pages/comparison.py", title="Router comparison", icon="📊"),
        ]
    )
    nav.run()
