"""L2D routing dashboard: page config and navigation (the pages are in ``dashboard/``)."""

import streamlit as st

st.set_page_config(page_title="L2D routing for extractive QA", layout="wide")
st.navigation(
    [
        st.Page("dashboard/overview.py", title="Overview", icon=":material/home:", default=True),
        st.Page("dashboard/cost_explorer.py", title="Cost explorer", icon=":material/tune:"),
        st.Page("dashboard/decisions.py", title="Routing decisions", icon=":material/alt_route:"),
        st.Page("dashboard/single_query.py", title="Single query", icon=":material/help:"),
        st.Page("dashboard/comparison.py", title="Router comparison", icon=":material/leaderboard:"),
    ]
).run()
