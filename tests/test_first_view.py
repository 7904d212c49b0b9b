"""The first view prepared as the server starts (``pages/ui/first_view.py``): Streamlit serves
``app.py``'s ``st.App``, whose lifespan loads the default pool's first view into the pages' caches
where its answers are on disk already; on an empty cache it only starts reading them in."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.web.server.app_discovery import discover_asgi_app

from l2d_core.agents import read_in
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.catalog import get_pool
from l2d_core.data import load_dataset
from pages.ui import cache as page_cache
from pages.ui import first_view
from pages.ui.app import default_helpers
from pages.ui.defaults import DATASET_CHOICES, DEFAULT_POOL

ROOT = Path(__file__).resolve().parents[1]


def test_streamlit_serves_the_app_that_prepares_the_first_view():
    found = discover_asgi_app(ROOT / "app.py")
    assert found.is_asgi_app and found.import_string == "app:app"
    assert "first_view import lifespan" in (ROOT / "app.py").read_text()


def test_page_modules_are_a_page_scripts_top_level_imports_in_order(tmp_path):
    page = tmp_path / "page.py"
    page.write_text(
        "from a.b import c\nimport x, y.z\nfrom . import rel\n"
        "if True:\n    import hidden\nfrom a.b import d\n"
    )
    assert first_view.page_modules(page) == ["a.b", "x", "y.z"]
    shown = first_view.page_modules()  # the cost explorer's: its caches, no model library
    assert "pages.ui.cache" in shown and not {"torch", "transformers"} & set(shown)


def test_on_an_empty_cache_the_answers_are_read_in_as_the_server_starts_and_nothing_else(
    real_data, fresh_cache, monkeypatch
):
    started = []
    monkeypatch.setattr(read_in, "_EARLY", {})
    monkeypatch.setattr(read_in, "_in_children", lambda dataset, groups, _: started.append((dataset, groups)))
    monkeypatch.setattr(page_cache, "prepare", lambda *a, **k: pytest.fail("the benchmark was prepared"))
    assert first_view.prepare() is False
    for future in read_in._EARLY.values():  # the read-in's thread
        future.result(timeout=60)
    pool = get_pool(DEFAULT_POOL)
    assert started == [(DATASET_CHOICES[0], [[*pool.agent_ids, *default_helpers()]])]
    assert AgentCache().agents(DATASET_CHOICES[0]) == []  # nothing was read in here
    # the page's first run finds it started: no second read-in
    assert read_in.read_in_early(DATASET_CHOICES[0], DEFAULT_POOL, default_helpers()) is False
    assert len(started) == 1


@pytest.fixture
def warm_cache(real_data, seeded_cache):
    """A cache that holds the default pool's answers (and its router's helpers'), as after a first
    visit: read in here where the session's cache did not hold them yet."""
    agents = [*get_pool(DEFAULT_POOL).agent_ids, *default_helpers()]
    read_in.import_agents(load_dataset(DATASET_CHOICES[0]), agents)
    assert set(agents) <= set(AgentCache().agents(DATASET_CHOICES[0]))
    return seeded_cache


def test_on_a_warm_cache_the_page_reads_what_was_prepared(warm_cache, monkeypatch):
    import streamlit as st

    st.cache_data.clear()  # as on a fresh server: nothing another test's pages cached
    st.cache_resource.clear()
    page_cache.fitted_router.clear()
    monkeypatch.setattr(read_in, "_EARLY", {})
    assert first_view.prepare() is True
    # what the cost explorer's first run asks for is served from the caches, not computed again
    monkeypatch.setattr(page_cache, "prepare", lambda *a, **k: pytest.fail("benchmark prepared twice"))
    monkeypatch.setattr(page_cache, "_fit", lambda *a, **k: pytest.fail("default router fitted twice"))
    bench = page_cache.benchmark(DATASET_CHOICES[0], DEFAULT_POOL)
    choice = page_cache.default_router(DATASET_CHOICES[0], DEFAULT_POOL, rank=False)
    assert choice is not None and bench.pool.name == DEFAULT_POOL
    router = page_cache.fitted_router(DATASET_CHOICES[0], DEFAULT_POOL, choice.router_id)
    assert router.id == choice.router_id


def test_the_first_view_imports_no_pandas(warm_cache):
    """pandas takes a quarter of a second to import: the tables and charts that need it come
    after the tiles, and import it then."""
    script = (
        "import sys; from pages.ui import cache, first_view, defaults; assert first_view.prepare(); "
        "assert cache.default_router(defaults.DATASET_CHOICES[0], defaults.DEFAULT_POOL, rank=False); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas')[:3])"
    )
    run = [sys.executable, "-c", script]
    out = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_first_view_that_fails_at_start_is_one_line_in_the_log(monkeypatch, caplog):
    def broken():
        raise OSError("cache.db: disk I/O error\nmore detail")

    monkeypatch.setattr(first_view, "prepare", broken)
    first_view.prepare_or_log()  # no exception escapes the server's thread
    assert [r.getMessage() for r in caplog.records if r.name == first_view.__name__] == [
        "the first view was not prepared as the server started: cache.db: disk I/O error"
    ]
