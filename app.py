"""L2D routing dashboard — entry page (the full dashboard is built on l2d_core)."""

import streamlit as st

from l2d_core.agent_cache import AgentCache
from l2d_core.agents import get_agent, list_pools
from l2d_core.data import load_dataset
from l2d_core.paths import data_dir
from l2d_core.routing_data import ensure_cached

st.set_page_config(page_title="L2D routing for extractive QA", layout="wide")
st.title("Learning-to-Defer routing for extractive QA")
st.write(
    "A small rejector learns, per query, which QA agent should answer, trading accuracy "
    "against compute. Agent 0 is the cheap main model; experts cost more."
)

dataset = st.selectbox("Dataset", ["squad11", "squad20"], key="dataset")
pools = [p.name for p in list_pools(dataset)]
pool = st.selectbox("Pool", pools, key="pool")
try:
    ds = load_dataset(dataset)
except FileNotFoundError as exc:
    st.error(str(exc))
    st.stop()
st.caption(f"{len(ds)} questions in {len(ds.titles)} articles from {ds.source} (data dir: {data_dir()})")
spec = next(p for p in list_pools(dataset) if p.name == pool)
cache = AgentCache()
ensure_cached(ds, [get_agent(a) for a in spec.agent_ids], cache)
st.dataframe(cache.summary(dataset, spec.agent_ids), hide_index=True)
