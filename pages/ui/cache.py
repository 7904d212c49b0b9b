"""The one module of Streamlit caches: each function wraps one ``l2d_core`` call and only caches.

Heavy objects (the prepared benchmark, fitted routers, the agent cache) are held once per
process with ``st.cache_resource``; tables and figures are ``st.cache_data`` /
``st.cache_resource`` keyed by what determines them. The long waits before a cached object is
there show a progress bar with the time left instead of a spinner: the dataset's embeddings
(a background job, :mod:`l2d_core.background`) and a router's fit (``pages.ui.progress``).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import streamlit as st

from l2d_core.agents.answering import answer_with
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.catalog import get_agent, get_pool
from l2d_core.app_logic.default_view import DefaultChoice, needs_embeddings
from l2d_core.app_logic.default_view import default_router as pick_default
from l2d_core.app_logic.embedding_job import embedding_key, start_embedding
from l2d_core.app_logic.explorer import sweep_frame
from l2d_core.app_logic.overview import agent_table
from l2d_core.background import expected_duration, record_duration, status
from l2d_core.evaluation.benchmark import Benchmark, embeddings_on_disk, prepare
from l2d_core.evaluation.results import load_results
from l2d_core.evaluation.validation import Ranked, rank_by_validation, waiting
from l2d_core.paths import cache_dir
from l2d_core.routers.registry import Router, make_router, router_class, router_label
from pages.ui.progress import Background, timed_bar, wait_for

__all__ = [
    "benchmark",
    "fitted_router",
    "default_router",
    "embedding_ranking",
    "routers_waiting",
    "embeddings_ready",
    "ensure_embeddings",
    "agent_cache",
    "agent_summary",
    "sweep",
    "sweep_charts",
    "pool_answers",
    "comparison_results",
]


def benchmark(dataset: str, pool: str, embeddings: bool = False) -> Benchmark:
    """The pool on the benchmark split; with the question/context embeddings only when asked
    (computed first where missing, with a progress bar: :func:`ensure_embeddings`)."""
    if embeddings:
        ensure_embeddings(dataset)
    return _benchmark(dataset, pool, embeddings, str(cache_dir()))


@st.cache_resource(show_spinner="Loading the benchmark's questions and every agent's answers…")
def _benchmark(dataset: str, pool: str, embeddings: bool, cache: str) -> Benchmark:
    """``cache``: the cache folder it was read from (a benchmark of one folder — its answers,
    embeddings and user pools — is never served for another)."""
    return prepare(dataset, pool, features_needed=embeddings)


benchmark.clear = _benchmark.clear


@st.cache_data(show_spinner=False)
def embeddings_ready(dataset: str) -> bool:
    return embeddings_on_disk(dataset)


def ensure_embeddings(dataset: str) -> None:
    """Every question and context of ``dataset`` embedded: where some are not, the embedding job
    runs (started, or joined when it runs already) and this page waits with its progress bar —
    texts embedded of all and the time left. The job writes each batch to the embedding cache:
    a tab closed midway leaves it running, and a job stopped midway keeps what it embedded."""
    if embeddings_ready(dataset):
        return
    start_embedding(dataset)
    note = (
        f"Once per dataset for every pool of {dataset}, kept on disk. It runs in a process of its own: "
        "closing this tab does not stop it."
    )
    last = wait_for(lambda: status(embedding_key(dataset)), note)
    embeddings_ready.clear()
    if not embeddings_ready(dataset):
        why = last.error or "it ended without embedding every text"
        st.error(
            f"Embedding the questions and contexts of {dataset} stopped ({why}). Reload the page to "
            "carry on: the texts embedded so far are kept."
        )
        st.stop()


_FITTED: set[tuple[str, str, str]] = set()  # routers fitted in this process (in _fitted_router's cache)
_FITS: dict[tuple[str, str, str], Background] = {}  # routers being fitted now
_FITS_LOCK = threading.Lock()
TRAINED_S = 1.0  # a fit this long trained a head (loading one stored on disk takes a fraction of it)


def _fit(router_id: str, bench: Benchmark) -> Router:
    """Fit one router, timing it: a fit that trained is this machine's measure for the next."""
    start = time.perf_counter()
    router = make_router(router_id).fit(bench)
    if (took := time.perf_counter() - start) > TRAINED_S:
        record_duration(f"fit|{router_id}", took, len(bench.train))
    return router


def fitted_router(dataset: str, pool: str, router_id: str) -> Router:
    """The router fitted on the training articles (once per pool and process). A router that
    reads the embeddings waits for them first (:func:`ensure_embeddings`); the fit shows a bar
    with the time left, scaled from this router's last fit on this machine. The fit runs in a
    thread of its own: a rerun meanwhile waits for the same fit rather than starting another."""
    cls = router_class(router_id)
    reads = cls is not None and cls.reads_embeddings
    if reads:
        ensure_embeddings(dataset)
    key = (dataset, pool, router_id)
    if key not in _FITTED:
        bench = benchmark(dataset, pool, reads)
        with _FITS_LOCK:
            task = _FITS.get(key)
            if task is None or task.error is not None:  # a failed fit is tried again
                task = _FITS[key] = Background(lambda: _fit(router_id, bench))
        n = len(bench.train)
        what = f"Fitting {router_label(router_id)} on {n:,} training questions (once per pool)"
        router = timed_bar(task, what, expected_duration(f"fit|{router_id}", n))
        with _FITS_LOCK:
            if key not in _FITTED:
                _fitted_router(dataset, pool, router_id, _router=router)
                _FITTED.add(key)
                _FITS.pop(key, None)
    return _fitted_router(dataset, pool, router_id)


@st.cache_resource(show_spinner=False, max_entries=64)
def _fitted_router(dataset: str, pool: str, router_id: str, _router: Router | None = None) -> Router:
    """The fitted router of :func:`fitted_router` (``_router``: fitted already, kept here)."""
    if _router is not None:
        return _router
    cls = router_class(router_id)
    return make_router(router_id).fit(benchmark(dataset, pool, cls is not None and cls.reads_embeddings))


def _clear_fitted() -> None:
    _FITTED.clear()
    _fitted_router.clear()


fitted_router.clear = _clear_fitted


@st.cache_data(show_spinner=False)
def default_router(dataset: str, pool: str, rank: bool = True, _progress=None) -> DefaultChoice | None:
    """The default router and price (:func:`~l2d_core.app_logic.default_view.default_router`: the
    furthest above random mixing on validation articles among the routers that read no embeddings,
    else the most accurate single agent). The routers it ranks are fitted through
    :func:`fitted_router`, so the default one is not fitted a second time for the page.
    ``rank=False``: None while the ranking is not on disk (clear this cache once ranked).
    ``_progress(k, n, router id)`` as each router is scored (not part of the key)."""
    return pick_default(
        benchmark(dataset, pool),
        fitted=lambda rid: fitted_router(dataset, pool, rid),
        rank=rank,
        progress=_progress,
    )


@st.cache_data(show_spinner=False)
def embedding_ranking(dataset: str, pool: str, rank: bool = True, _progress=None) -> list[Ranked] | None:
    """The routers that read the question/context embeddings, ranked on validation articles as the
    default's candidates are (None with ``rank=False`` while not on disk); shown beside them,
    never the default. Call only once the embeddings are computed."""
    ids = needs_embeddings()
    bench = benchmark(dataset, pool, True)
    ids = [r for r in ids if router_class(r).unavailable(bench) is None]
    if not ids:
        return []
    fit = lambda rid: fitted_router(dataset, pool, rid)  # noqa: E731
    return rank_by_validation(bench, ids, fitted=fit, compute=rank, progress=_progress)


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


@st.cache_data(show_spinner="Reading the pool's answers in (once per agent: they are kept on disk)…")
def agent_summary(dataset: str, agent_ids: tuple[str, ...]):
    """The pool's agents as :func:`~l2d_core.app_logic.overview.agent_table` tells them; on a fresh
    cache it waits seconds for their answers to be read in, under a spinner."""
    return agent_table(dataset, agent_ids, agent_cache())


@st.cache_data(show_spinner=False, max_entries=64)
def sweep(
    dataset: str, pool: str, router_id: str, rule: str, alpha: tuple[float, ...], points: tuple[float, ...]
):
    """The sweep of one fitted router over a cost rule's ``points`` at fixed α."""
    return sweep_frame(benchmark(dataset, pool), fitted_router(dataset, pool, router_id), rule, alpha, points)


@st.cache_resource(show_spinner=False, max_entries=32)
def sweep_charts(frame, x: str, x_title: str, symlog: float | None = None) -> dict:
    """The sweep charts of a sweep frame, built once; a slider move only moves their marker."""
    from l2d_core.report import charts  # altair: imported once a chart is drawn, after the tiles

    return charts.sweep_charts(frame, x=x, x_title=x_title, symlog=symlog)


@st.cache_data(show_spinner="Asking the agents…", max_entries=64)
def pool_answers(
    pool: str,
    question: str,
    context: str,
    qid: str | None,
    expected: str | None,
    helpers: tuple[str, ...] = (),
) -> list[dict]:
    """Every agent of the pool on one query, then each helper agent a router reads (latency is
    the first call's)."""
    return [
        answer_with(get_agent(a), question, context, qid, agent_cache(), expected or None)
        for a in dict.fromkeys([*get_pool(pool).agent_ids, *helpers])
    ]


@st.cache_data(show_spinner=False, max_entries=16)
def comparison_results(path: str, mtime: float) -> dict:
    """A saved results file (``mtime`` in the key: a rewritten file is read again)."""
    return load_results(path)
