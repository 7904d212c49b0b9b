"""L2D routing dashboard: page config and navigation (the pages are in ``dashboard/``)."""

import sys

import streamlit as st

from dashboard.defaults import DATASET_CHOICES, DEFAULT_POOL
from l2d_core.agents.routing_data import read_in_early

st.set_page_config(page_title="L2D routing for extractive QA", layout="wide")
if "torch" not in sys.modules:  # a fresh server: the default pool is read in on another core
    read_in_early(DATASET_CHOICES[0], DEFAULT_POOL)  # while the page imports torch
st.navigation(
    [
        st.Page("dashboard/overview.py", title="Overview", icon=":material/home:", default=True),
        st.Page("dashboard/cost_explorer.py", title="Cost explorer", icon=":material/tune:"),
        st.Page("dashboard/decisions.py", title="Routing decisions", icon=":material/alt_route:"),
        st.Page("dashboard/single_query.py", title="Single query", icon=":material/help:"),
        st.Page("dashboard/comparison.py", title="Router comparison", icon=":material/leaderboard:"),
    ]
).run()
