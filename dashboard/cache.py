"""The one module of Streamlit caches: each function wraps one ``l2d_core`` call and only caches.

Heavy objects (the prepared benchmark, fitted routers, the agent cache) are held once per
process with ``st.cache_resource``; tables and figures are ``st.cache_data`` /
``st.cache_resource`` keyed by what determines them.
"""

from __future__ import annotations

import streamlit as st

from l2d_core import report
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.registry import get_agent, get_pool
from l2d_core.app_logic.explorer import sweep_frame
from l2d_core.app_logic.live import answer_with
from l2d_core.app_logic.overview import agent_table
from l2d_core.evaluation.benchmark import Benchmark, prepare
from l2d_core.evaluation.registry import make_router
from l2d_core.evaluation.results import load_results
from l2d_core.evaluation.router import Router

__all__ = [
    "benchmark",
    "fitted_router",
    "agent_cache",
    "agent_summary",
    "sweep",
    "sweep_figures",
    "pool_answers",
    "comparison_results",
]


@st.cache_resource(show_spinner="Preparing the benchmark (embeddings are cached on disk)…")
def benchmark(dataset: str, pool: str) -> Benchmark:
    return prepare(dataset, pool)


@st.cache_resource(
    show_spinner="Fitting the router on the training articles (once per pool)…", max_entries=64
)
def fitted_router(dataset: str, pool: str, router_id: str) -> Router:
    return make_router(router_id).fit(benchmark(dataset, pool))


@st.cache_resource
def agent_cache() -> AgentCache:
    return AgentCache()


@st.cache_data(show_spinner=False)
def agent_summary(dataset: str, agent_ids: tuple[str, ...]):
    return agent_table(dataset, agent_ids, agent_cache())


@st.cache_data(show_spinner=False, max_entries=64)
def sweep(dataset: str, pool: str, router_id: str, alpha: tuple[float, ...]):
    """β₁ sweep (BENCHMARK.md points, GFLOPs rule) of one fitted router at fixed α."""
    return sweep_frame(benchmark(dataset, pool), fitted_router(dataset, pool, router_id), alpha=alpha)


@st.cache_resource(show_spinner=False, max_entries=32)
def sweep_figures(frame) -> dict:
    """The sweep charts of a sweep frame, built once; a slider move only moves their marker."""
    return report.sweep_figures(frame)


@st.cache_data(show_spinner="Asking the agents…", max_entries=64)
def pool_answers(pool: str, question: str, context: str, qid: str | None, expected: str | None) -> list[dict]:
    """Every agent of the pool on one query (latency is the first call's)."""
    return [
        answer_with(get_agent(a), question, context, qid, agent_cache(), expected or None)
        for a in get_pool(pool).agent_ids
    ]


@st.cache_data(show_spinner=False, max_entries=16)
def comparison_results(path: str, mtime: float) -> dict:
    """A saved results file (``mtime`` in the key: a rewritten file is read again)."""
    return load_results(path)
