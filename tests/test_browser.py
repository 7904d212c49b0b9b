"""The dashboard in a real browser: ``streamlit run app.py`` driven by Debian's chromium.

Needs the Debian package ``chromium`` (``.ci/run`` installs it; playwright launches it, no WebDriver) and
the ``playwright`` Python package (requirements-dev.txt; its own browser download is never
used). Missing either is a failure, not a skip. The server inherits the session's
``L2D_CACHE_DIR``; the embeddings of the default benchmark are computed into it before the
server starts unless an earlier test did (run alone: about a minute on 2 cores).

A screenshot of the cost explorer after the slider move is saved under the test's
``tmp_path`` and copied to ``$L2D_SCREENSHOT_DIR`` when that is set.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

from l2d_core.agents import get_pool
from l2d_core.app_logic.default_view import default_router, needs_embeddings
from l2d_core.evaluation.benchmark import embeddings_on_disk, prepare
from l2d_core.evaluation.validation import rank_by_validation
from l2d_core.routers.registry import router_class
from pages.ui.defaults import DATASET_CHOICES, DEFAULT_POOL

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _bench():
    """Server and browser helpers, shared with scripts/bench_dashboard.py."""
    sys.path.insert(0, str(ROOT / "scripts"))
    path = ROOT / "scripts" / "dashboard_driver.py"
    spec = importlib.util.spec_from_file_location("dashboard_driver", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bd = _bench()


@pytest.fixture
def dashboard(real_data, tmp_path):
    """Base URL of a streamlit server running app.py; always terminated.

    The page's default benchmark is prepared here first and its default router ranked, so the
    server's first page load reads both from disk."""
    default_price()
    with bd.dashboard_server(tmp_path / "streamlit.log") as base:
        yield base


def default_price() -> float:
    """The default router's best price, ranked as the page ranks it: with the routers that read
    embeddings exactly when those are on disk (an earlier test of the session may have computed
    them), and every agent read in (the ranking reads them). Where the embeddings are on disk,
    the routers that read them are ranked here too, as the page ranks them after its first view:
    the slider is then moved on a page that is not ranking (a key pressed on a page that had
    just ranked them was seen lost, under load, with the slider drawn at its new value: noted
    in the issue)."""
    dataset = DATASET_CHOICES[0]
    embeddings = embeddings_on_disk(dataset)
    bench = prepare(dataset, DEFAULT_POOL, features_needed=embeddings)
    if embeddings:
        ids = [r for r in needs_embeddings() if router_class(r).unavailable(bench) is None]
        rank_by_validation(bench, ids)
    return default_router(bench).price


@pytest.fixture
def browser():
    if not Path(bd.CHROMIUM).is_file():
        pytest.fail(f"{bd.CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the playwright package is missing: pip install -r requirements-dev.txt")
    with sync_playwright() as pw:
        b = bd.launch_chromium(pw)
        try:
            yield b
        finally:
            b.close()


def _screenshot(page, tmp_path) -> Path:
    shot = tmp_path / "cost_explorer.png"
    page.screenshot(path=str(shot))
    if os.environ.get("L2D_SCREENSHOT_DIR"):
        out = Path(os.environ["L2D_SCREENSHOT_DIR"])
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, out / shot.name)
    return shot


def test_cost_explorer_slider_moves_the_metrics(dashboard, browser, tmp_path):
    page = browser.new_page(viewport=bd.VIEWPORT)
    sent = []  # messages the page sent its server: a slider move is one rerun request
    page.on("websocket", lambda ws: ws.on("framesent", lambda f: sent.append(len(f))))
    try:
        em = bd.open_cost_explorer(page, dashboard)
        bd.wait_final_default(page)
        gq = bd.metric_value(page, "GFLOPs/query")
        bd.wait_settled(page)  # a key pressed while the page ranks more routers can be lost to its rerun
        assert gq.count() == 1 and bd.metric_value(page, "TDL").count() == 1
        thumb = bd.slider_thumb(page, bd.SLIDER_LABEL)
        assert thumb.count() == 1, f'no slider labelled "{bd.SLIDER_LABEL}" on the cost explorer'
        start = default_price()  # where the default router pays the most on validation articles
        assert bd.slider_value(thumb) == start
        em_before, gq_before = em.inner_text(), gq.inner_text()

        thumb.focus()
        before = len(sent)
        page.keyboard.press("End")  # λ = 2 errors per TFLOP: experts far dearer → fewer deferrals
        try:
            bd.wait_metric_change(page, "GFLOPs/query", gq_before)
        except Exception as exc:  # seen rarely under load: say whether the browser asked for a rerun
            log = bd.log_tail(tmp_path / "streamlit.log")
            said = f"{len(sent) - before} messages sent after the key; server log:\n{log}"
            raise AssertionError(said) from exc
        bd.wait_idle(page)
        em_after, gq_after = em.inner_text(), gq.inner_text()
    finally:
        _screenshot(page, tmp_path)  # also when a wait timed out: shows what the page was doing

    errors = page.get_by_test_id("stException")
    assert errors.count() == 0, errors.first.inner_text()
    assert bd.slider_value(thumb) == 2.0
    assert em_after != em_before, f"EM stayed {em_before} after λ {start} → 2.0"
    assert bd.number(gq_after) < bd.number(gq_before), (gq_before, gq_after)
    # A deep link as the first visit must still go through the app's own navigation (titles,
    # page config), not Streamlit's pages/-folder auto-discovery ("app", "ui", …), and find the page
    # (no "Page not found" dialog).
    nav = page.get_by_test_id("stSidebarNav")
    assert nav.get_by_text("Cost explorer", exact=True).count() == 1, nav.inner_text()
    assert nav.get_by_text("Overview", exact=True).count() == 1, nav.inner_text()
    assert page.get_by_role("dialog").count() == 0, page.get_by_role("dialog").first.inner_text()


# each page from the sidebar, the heading it draws, and a last element that shows it has drawn
PAGES = {
    "Overview": ("Learning-to-Defer routing for extractive QA", "stDataFrame"),
    "Cost explorer": ("Cost explorer", "stVegaLiteChart"),
    "Routing decisions": ("Routing decisions", "stVegaLiteChart"),
    "Single query": ("Single query", "stMetric"),
    "Router comparison": ("Router comparison", "stButton"),
}


def test_every_page_draws_with_no_error_and_no_outside_request(dashboard, browser, tmp_path):
    """A newcomer's walk: every page from the sidebar, in order. No exception on any page, no
    error in the browser's console, and no request to any host but the dashboard's own (the
    icons and fonts come from the server: the tool works offline). Screenshots are kept."""
    page = browser.new_page(viewport=bd.VIEWPORT)
    console, outside = [], []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
    failed = []
    page.on("response", lambda r: failed.append((r.status, r.url)) if r.status >= 400 else None)
    host = dashboard.split("//", 1)[1]
    page.on(
        "request",
        lambda r: outside.append(r.url) if host not in r.url and not r.url.startswith("data:") else None,
    )
    page.goto(dashboard, timeout=60_000)  # the address `streamlit run` prints
    page.get_by_test_id("stSidebarNav").wait_for(timeout=240_000)
    for name, (heading, last) in PAGES.items():
        page.get_by_test_id("stSidebarNav").get_by_text(name, exact=True).click()
        main = page.get_by_test_id("stMain")
        main.get_by_role("heading", name=heading).first.wait_for(timeout=240_000)
        main.get_by_test_id(last).first.wait_for(timeout=240_000)
        bd.wait_idle(page, 240)
        if name == "Routing decisions":  # a filter the chart's toolbar covered could not be clicked
            main.get_by_test_id("stCheckbox").filter(has_text="Main model wrong").click(timeout=20_000)
            bd.wait_idle(page, 240)
        shot = tmp_path / f"{name.lower().replace(' ', '_')}.png"
        page.screenshot(path=str(shot))
        if os.environ.get("L2D_SCREENSHOT_DIR"):
            Path(os.environ["L2D_SCREENSHOT_DIR"]).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, Path(os.environ["L2D_SCREENSHOT_DIR"]) / shot.name)
        errors = page.get_by_test_id("stException")
        assert errors.count() == 0, (name, errors.first.inner_text())
    assert not console, (console[:5], failed[:5])
    assert not outside, outside[:5]


def test_the_chosen_pool_stays_chosen_after_a_cost_move(dashboard, browser):
    """A cost move re-runs only the cost explorer's results (a fragment); the pool chosen in the
    sidebar must survive the next page switch (it fell back to the default pool — seen in the
    browser, after choosing a budget on P3-albert and opening Routing decisions — once the
    pool's routers were ranked on an earlier visit, as they are here). Routing decisions follow
    the explorer's budget, and the budget is as it was left on the way back (it was reset)."""
    default_router(prepare("squad11", "P3-albert", features_needed=embeddings_on_disk("squad11")))
    page = browser.new_page(viewport=bd.VIEWPORT)
    page.goto(dashboard, timeout=60_000)
    side, main = page.get_by_test_id("stSidebar"), page.get_by_test_id("stMain")
    nav = page.get_by_test_id("stSidebarNav")
    nav.wait_for(timeout=240_000)
    side.get_by_test_id("stSelectbox").filter(has_text="Pool").first.click()
    page.get_by_role("option").filter(has_text="P3-albert:").first.click()
    bd.wait_idle(page, 240)
    chosen = f"P3-albert: {get_pool('P3-albert').description}."  # the sidebar's line under the pool menu
    for name in ("Cost explorer", "Routing decisions", "Cost explorer"):
        nav.get_by_text(name, exact=True).click()
        main.get_by_role("heading", name=name).first.wait_for(timeout=240_000)
        bd.wait_idle(page, 240)
    share = main.get_by_text("a share of expert calls").first
    share.wait_for(timeout=240_000)
    bd.wait_idle(page, 240)
    assert chosen in side.inner_text()
    share.click()
    main.get_by_text("Share of questions sent to an expert").first.wait_for(timeout=60_000)
    bd.wait_idle(page, 240)
    thumb = bd.slider_thumb(page, "Share of questions sent to an expert")
    thumb.focus()
    for _ in range(5):
        page.keyboard.press("ArrowRight")  # 0.20 → 0.25
    budget = "Budget 25.0% of questions to an expert"
    main.get_by_text(budget).first.wait_for(timeout=120_000)
    bd.wait_idle(page, 240)
    nav.get_by_text("Routing decisions", exact=True).click()
    main.get_by_role("heading", name="Routing decisions").first.wait_for(timeout=240_000)
    main.get_by_text(budget).first.wait_for(timeout=240_000)  # the explorer's budget decides here too
    bd.wait_idle(page, 240)
    assert chosen in side.inner_text(), side.inner_text()[-300:]
    nav.get_by_text("Cost explorer", exact=True).click()  # and back: the budget is as it was left
    main.get_by_text("Share of questions sent to an expert").first.wait_for(timeout=240_000)
    bd.wait_idle(page, 240)
    assert bd.slider_value(bd.slider_thumb(page, "Share of questions sent to an expert")) == 0.25
