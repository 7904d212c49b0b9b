"""The first view, measured (used by ``bench_dashboard.py --first-view-only``): a fresh server on
an empty cache → the first frame with the cost explorer's EM tile, that EM against the one after
the page is left alone, a fresh server on the warm cache (in a returning user's browser, and in a
new browser profile), and every built-in pool picked in the sidebar."""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import _bootstrap  # noqa: F401
from dashboard_driver import (
    COLD_TIMEOUT_S,
    FIRST_LOAD_TIMEOUT_S,
    PAGE_CLOCK_JS,
    PAGE_LOAD_MS_JS,
    VIEWPORT,
    app_test,
    dashboard_server,
    free_port,
    launch_chromium,
    metric_value,
    open_cost_explorer,
    page_scripts,
    wait_idle,
)

IDLE_S = 30.0  # the first EM must still be shown after the page is left alone this long


def first_view_in_browser(
    runs: int, log_path: Path, idle_s: float = IDLE_S
) -> tuple[dict[str, list[float]], str]:
    """A new user's first view: from launching a fresh server (``streamlit run app.py``) on a new,
    empty cache directory to the first frame that shows the cost explorer's EM tile, on the
    page's own clock (the driver's polling and round trips left out, as for the slider); that EM,
    and the EM after the page has been left alone ``idle_s`` seconds, which must be equal (numbers
    shown first are numbers that stay). Then a fresh server on the same, now warm, cache at the
    same address, opened in the same browser: a returning user's, which holds Streamlit's scripts
    (served as immutable); and once more in a new browser profile, which fetches them all again.
    The browser is started before the clock, as a user's is open already. Returns the times by
    case (``cold``, ``warm``, ``warm_new_profile``) and a note."""
    import tempfile

    from playwright.sync_api import sync_playwright

    times: dict[str, list[float]] = {"cold": [], "warm": [], "warm_new_profile": []}
    driver: dict[str, list[float]] = {k: [] for k in times}
    moved, errors = [], 0
    with sync_playwright() as pw:  # the user's browser is open already: its start is not timed
        browser = launch_chromium(pw)
        try:
            for _ in range(runs):
                port, profile = free_port(), browser.new_context(viewport=VIEWPORT)  # nothing cached
                with tempfile.TemporaryDirectory(prefix="l2d-empty-cache-") as tmp:
                    env = dict(os.environ, L2D_CACHE_DIR=tmp)
                    for case, context in (("cold", profile), ("warm", profile), ("warm_new_profile", None)):
                        context = context or browser.new_context(viewport=VIEWPORT)
                        launched, t = time.time(), time.perf_counter()
                        with dashboard_server(log_path, env, port) as base:
                            page = context.new_page()
                            page.add_init_script(PAGE_CLOCK_JS)
                            first = open_cost_explorer(page, base).inner_text()
                            driver[case].append(time.perf_counter() - t)
                            page.wait_for_function(f"({PAGE_LOAD_MS_JS})() !== null")
                            shown = page.evaluate(f"performance.timeOrigin + ({PAGE_LOAD_MS_JS})()") / 1000
                            times[case].append(shown - launched)
                            if case == "cold":
                                time.sleep(idle_s)
                                wait_idle(page, FIRST_LOAD_TIMEOUT_S)
                                later = metric_value(page, "EM").inner_text()
                                moved += [] if later == first else [f"{first} -> {later}"]
                            errors += page.get_by_test_id("stException").count()
                            page.close()
                        if context is not profile:
                            context.close()
                profile.close()
        finally:
            browser.close()
    same = "equal in every run" if not moved else f"CHANGED in {len(moved)} run(s): {'; '.join(moved)}"
    seen = ", ".join(f"{k} {statistics.median(v):.2f} s" for k, v in driver.items())
    return times, (
        f"first EM and EM after {idle_s:.0f} s idle: {same}; {errors} errors shown. On the page's clock; "
        f"as the driver saw the tile (+ its polling), medians: {seen}"
    )


def pool_switches(log_path: Path) -> dict[str, float]:
    """Each built-in pool picked in the sidebar of the cost explorer, in one session on an empty
    cache (AppTest, server side): seconds from the pick to the page's end with an EM tile."""
    import tempfile

    from l2d_core.agents.catalog import builtin_pool_names, get_pool

    out = {}
    with tempfile.TemporaryDirectory(prefix="l2d-empty-cache-") as tmp:
        os.environ["L2D_CACHE_DIR"] = tmp
        at = app_test(page_scripts()["cost_explorer"], COLD_TIMEOUT_S)
        at.run()
        for name in sorted(builtin_pool_names(), key=lambda n: (get_pool(n).dataset, n)):
            pool = get_pool(name)
            t = time.perf_counter()
            if at.selectbox(key="dataset").value != pool.dataset:
                at.selectbox(key="dataset").set_value(pool.dataset).run()
            at.selectbox(key="pool").set_value(name).run()
            took = time.perf_counter() - t
            if at.exception:
                out[name] = float("nan")
                print(f"{name}: {at.exception[0].message[:200]}")
                continue
            out[name] = took if any(m.label == "EM" for m in at.metric) else float("nan")
    return out
