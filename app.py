"""L2D routing dashboard: page config and navigation (the pages are in ``dashboard/``)."""

import sys

import streamlit as st

from dashboard.defaults import DATASET_CHOICES, DEFAULT_POOL
from l2d_core.agents.read_in import read_in_early
from l2d_core.agents.registry import cheap_builtin_agents, get_pool

# an emoji favicon is drawn by the browser itself (a :material/…: one is fetched from a font host)
st.set_page_config(page_title="L2D routing for extractive QA", page_icon="🔀", layout="wide")
if "torch" not in sys.modules:  # a fresh server: while the page imports torch, the default pool and
    # the helper agents its best router reads are read in on another core
    helpers = cheap_builtin_agents(DATASET_CHOICES[0], get_pool(DEFAULT_POOL).main)
    read_in_early(DATASET_CHOICES[0], DEFAULT_POOL, helpers)
st.navigation(
    [
        st.Page("dashboard/overview.py", title="Overview", icon=":material/home:", default=True),
        st.Page("dashboard/cost_explorer.py", title="Cost explorer", icon=":material/tune:"),
        st.Page("dashboard/decisions.py", title="Routing decisions", icon=":material/alt_route:"),
        st.Page("dashboard/single_query.py", title="Single query", icon=":material/help:"),
        st.Page("dashboard/comparison.py", title="Router comparison", icon=":material/leaderboard:"),
    ]
).run()
