"""The one module of Streamlit caches: each function wraps one ``l2d_core`` call and only caches.

Heavy objects (the prepared benchmark, fitted routers, the agent cache) are held once per
process with ``st.cache_resource``; tables and figures are ``st.cache_data`` /
``st.cache_resource`` keyed by what determines them.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from l2d_core.agents.cache import AgentCache
from l2d_core.agents.registry import get_agent, get_pool
from l2d_core.app_logic.explorer import default_router as pick_default
from l2d_core.app_logic.explorer import sweep_frame
from l2d_core.app_logic.live import answer_with
from l2d_core.app_logic.overview import agent_table
from l2d_core.evaluation.benchmark import Benchmark, embeddings_on_disk, prepare
from l2d_core.evaluation.registry import make_router, router_class
from l2d_core.evaluation.results import load_results
from l2d_core.evaluation.router import Router
from l2d_core.evaluation.validation import waiting
from l2d_core.paths import cache_dir
from l2d_core.report import charts

__all__ = [
    "benchmark",
    "fitted_router",
    "default_router",
    "routers_waiting",
    "embeddings_ready",
    "agent_cache",
    "agent_summary",
    "sweep",
    "sweep_charts",
    "pool_answers",
    "comparison_results",
]


@st.cache_resource(show_spinner="Loading the benchmark's questions and every agent's answers…")
def benchmark(dataset: str, pool: str, embeddings: bool = False) -> Benchmark:
    """The pool on the benchmark split; with the question/context embeddings only when asked."""
    return prepare(dataset, pool, features_needed=embeddings)


@st.cache_data(show_spinner=False)
def embeddings_ready(dataset: str) -> bool:
    return embeddings_on_disk(dataset)


@st.cache_resource(
    show_spinner="Fitting the router on the training articles (once per pool)…", max_entries=64
)
def fitted_router(dataset: str, pool: str, router_id: str) -> Router:
    cls = router_class(router_id)
    return make_router(router_id).fit(benchmark(dataset, pool, cls is not None and cls.reads_embeddings))


@st.cache_data(show_spinner=False)
def default_router(
    dataset: str, pool: str, waiting_ids: tuple[str, ...] = (), rank: bool = True, _progress=None
) -> tuple[str, list[tuple[str, float]] | None]:
    """The best router by validation AIQ among those ready now: the embedding readers only when
    their embeddings are on disk already, the others once every agent they read is read in, so
    that the first view never waits for the encoder or for helper agents (``waiting_ids``: the
    routers still waiting, part of the key). The routers it ranks are fitted through
    :func:`fitted_router`, so the default one is not fitted a second time for the page.
    ``rank=False``: no ranking is computed now (the first view does not wait for it); without
    one on disk the ranking is None and a router ready stands in (clear this cache once ranked).
    ``_progress(k, n, router id)`` as each router is scored (not part of the key)."""
    bench = benchmark(dataset, pool, embeddings_ready(dataset))
    return pick_default(
        bench,
        ready_only=True,
        fitted=lambda rid: fitted_router(dataset, pool, rid),
        rank=rank,
        progress=_progress,
    )


@st.cache_data(show_spinner=False)
def routers_waiting(dataset: str, pool: str) -> dict[str, tuple[str, ...]]:
    """Routers of the ranking that wait for agents' answers to be read in: id → agents
    (cleared once they are: ``routers_waiting.clear()``)."""
    return waiting(benchmark(dataset, pool))


def agent_cache() -> AgentCache:
    """The process's agent store, one per cache directory (``L2D_CACHE_DIR`` may change)."""
    return _agent_cache_at(str(cache_dir()))


@st.cache_resource
def _agent_cache_at(directory: str) -> AgentCache:
    return AgentCache(Path(directory) / "agents")


@st.cache_data(show_spinner=False)
def agent_summary(dataset: str, agent_ids: tuple[str, ...]):
    return agent_table(dataset, agent_ids, agent_cache())


@st.cache_data(show_spinner=False, max_entries=64)
def sweep(dataset: str, pool: str, router_id: str, rule: str, alpha: tuple[float, ...]):
    """The sweep of a cost rule's benchmark points of one fitted router at fixed α."""
    return sweep_frame(benchmark(dataset, pool), fitted_router(dataset, pool, router_id), rule, alpha)


@st.cache_resource(show_spinner=False, max_entries=32)
def sweep_charts(frame, x: str, x_title: str) -> dict:
    """The sweep charts of a sweep frame, built once; a slider move only moves their marker."""
    return charts.sweep_charts(frame, x=x, x_title=x_title)


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
