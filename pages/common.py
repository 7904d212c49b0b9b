"""The one module between the pages and l2d_core: cached loaders and shared widgets.

Heavy objects (prepared benchmark, encoder, fitted estimators) load once per process with
``st.cache_resource``; derived tables are ``st.cache_data``. Pages import from here and only
draw. Errors from l2d_core become messages on the page, never tracebacks.
"""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import streamlit as st

from l2d_core.agent_cache import AgentCache
from l2d_core.agents import get_agent, get_pool, list_pools
from l2d_core.costs import CostConfig, InvalidCostError
from l2d_core.data import DATASETS, DataFormatError, load_dataset
from l2d_core.experiment import Benchmark, fit_plugin, prepare
from l2d_core.explorer import PolicyView, reweight_view
from l2d_core.routing_data import AgentNotCachedError, ensure_cached

DATASET_CHOICES = ("squad11", "squad20")
USER_ERRORS = (DataFormatError, FileNotFoundError, InvalidCostError, KeyError, ValueError, LookupError)


@contextmanager
def shown_errors():
    """Turn the errors users can cause into a message on the page and stop the page."""
    try:
        yield
    except USER_ERRORS as exc:
        st.error(f"{type(exc).__name__}: {exc}")
        st.stop()


@st.cache_resource(show_spinner="Preparing the benchmark (embeddings are cached on disk)…")
def benchmark(dataset: str, pool: str) -> Benchmark:
    return prepare(dataset, pool)


@st.cache_resource(show_spinner="Learning error probabilities (once per pool)…")
def plugin_errors(dataset: str, pool: str) -> np.ndarray:
    """p̂ of every test question: the reweight policy needs nothing else."""
    bench = benchmark(dataset, pool)
    return fit_plugin(bench).error_proba(bench.X_test)


@st.cache_resource
def agent_cache() -> AgentCache:
    return AgentCache()


@st.cache_data(show_spinner=False)
def agent_summary(dataset: str, agent_ids: tuple[str, ...]):
    ds = load_dataset(dataset)
    cache = agent_cache()
    ensure_cached(ds, [get_agent(a) for a in agent_ids], cache)
    df = cache.summary(dataset, list(agent_ids))
    df["role"] = ["main" if i == 0 else f"expert {i}" for i in range(len(df))]
    df["params"] = [get_agent(a).params for a in agent_ids]
    df["name"] = [get_agent(a).name for a in agent_ids]
    return df


def reweight(dataset: str, pool: str, costs: CostConfig) -> PolicyView:
    """Plug-in policy for a cost setting: instant."""
    return reweight_view(benchmark(dataset, pool), costs, plugin_errors(dataset, pool))


def select_pool(sidebar: bool = True) -> tuple[str, str]:
    """Dataset and pool pickers, shared by every page through session state."""
    where = st.sidebar if sidebar else st
    dataset = where.selectbox("Dataset", DATASET_CHOICES, key="dataset",
                              format_func=lambda d: f"{d} — {DATASETS[d].description}")
    pools = [p.name for p in list_pools(dataset)]
    if not pools:
        st.error(f"no pool is defined for {dataset}")
        st.stop()
    if st.session_state.get("pool") not in pools:
        st.session_state["pool"] = pools[0] if "P3" not in pools else "P3"
    pool = where.selectbox("Pool", pools, key="pool",
                           format_func=lambda p: f"{p}: {' → '.join(get_pool(p).agent_ids)}")
    return dataset, pool


def cost_from_state(bench: Benchmark) -> CostConfig:
    """The cost setting chosen on the cost explorer (BENCHMARK.md default: β₁ = 0.05, α = 1)."""
    saved = st.session_state.get("costs")
    if isinstance(saved, CostConfig) and saved.n_experts == len(bench.pool.experts):
        return saved
    return bench.costs(0.05)


__all__ = [
    "AgentNotCachedError",
    "DATASET_CHOICES",
    "agent_cache",
    "agent_summary",
    "benchmark",
    "cost_from_state",
    "plugin_errors",
    "reweight",
    "select_pool",
    "shown_errors",
]
