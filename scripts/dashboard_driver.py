"""Driving the dashboard for measurements and tests: ``streamlit run app.py`` on a free local
port, Debian's chromium through playwright, and locators for the cost explorer's widgets.
Used by ``scripts/bench_dashboard.py`` and ``tests/test_browser.py``."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"  # Debian package chromium, launched by playwright; never `playwright install`
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
VIEWPORT = {"width": 1400, "height": 3000}  # Streamlit scrolls inside its own container: tall viewport
SLIDER_LABEL, SLIDER_KEY, SLIDER_DEFAULT = "λ · errors per TFLOP", "price", 0.1
HEALTH_TIMEOUT_S = 90.0
FIRST_LOAD_TIMEOUT_S = 240.0  # the first visit prepares the benchmark (embeddings from disk or computed)
CHANGE_TIMEOUT_S = 60.0
COLD_TIMEOUT_S = 300.0  # a page run (AppTest) or a first view on an empty cache


def page_scripts() -> dict[str, Path]:
    """Every page of the dashboard: the entry script (it shows the home page) and each other page
    that the navigation lists."""
    from pages.ui.app import PAGES

    home, *others = (name for name, _, _ in PAGES)
    return {f"{home} (app.py)": ROOT / "app.py"} | {name: ROOT / "pages" / f"{name}.py" for name in others}


def app_test(script: Path, timeout: float):
    """An AppTest of one page script as it runs inside the app (``app.py`` runs the frame itself)."""
    from streamlit.testing.v1 import AppTest

    from pages.ui.app import IN_APP

    at = AppTest.from_file(str(script), default_timeout=timeout)
    at.session_state[IN_APP] = True
    return at


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    """Terminate the server's whole process group, then kill it if it lingers."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def dashboard_server(log_path: Path, env: dict | None = None, port: int | None = None) -> Iterator[str]:
    """``streamlit run app.py`` on ``port`` (default: a free local port); yields its base URL once
    healthy.

    The server runs in its own process group, always terminated on exit. Its output goes to
    ``log_path`` (quoted in the error when it dies or never becomes healthy).
    """
    port = port or free_port()
    cmd = [
        sys.executable, "-m", "streamlit", "run", "app.py",
        "--server.headless", "true",
        "--server.address", "127.0.0.1",
        "--server.port", str(port),
        "--browser.gatherUsageStats", "false",
        "--logger.level", "info",  # a rerun request the server drops is logged at info
    ]  # fmt: skip
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=dict(os.environ if env is None else env), stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with {proc.returncode}:\n{log_tail(log_path)}")
            try:
                with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"no health response in {HEALTH_TIMEOUT_S:.0f} s:\n{log_tail(log_path)}")
            time.sleep(0.05)
        yield base
    finally:
        _stop(proc)


def log_tail(path: Path, n: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:])


def launch_chromium(playwright):
    """Headless Debian chromium (the browser playwright downloads is never used)."""
    if not Path(CHROMIUM).is_file():
        raise FileNotFoundError(f"{CHROMIUM} not found: bash scripts/install_system_deps.sh")
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


def _exact(text: str) -> re.Pattern:
    return re.compile(rf"^\s*{re.escape(text)}\s*$")


def metric_value(page, label: str):
    """The value element of the ``st.metric`` labelled exactly ``label``."""
    label_el = page.get_by_test_id("stMetricLabel").filter(has_text=_exact(label))
    return page.get_by_test_id("stMetric").filter(has=label_el).get_by_test_id("stMetricValue")


def slider_thumb(page, label: str):
    """The thumb (ARIA role slider) of the ``st.slider`` labelled exactly ``label``."""
    label_el = page.get_by_test_id("stWidgetLabel").filter(has_text=_exact(label))
    return page.get_by_test_id("stSlider").filter(has=label_el).get_by_role("slider")


def slider_value(thumb) -> float:
    """A slider thumb's value: an ``<input type=range>`` or an ARIA ``role=slider`` element."""
    return float(thumb.evaluate("el => el.value ?? el.getAttribute('aria-valuenow')"))


def number(text: str) -> float:
    """The first number in a metric's text ("1,234.5 GFLOPs" → 1234.5)."""
    m = re.search(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", text.replace(",", ""))
    if m is None:
        raise ValueError(f"no number in metric text {text!r}")
    return float(m.group())


# While a run redraws the page, Streamlit can keep the previous tile (greyed) beside the new one:
# the value counts as changed once a single tile with that label is left and it reads otherwise.
METRIC_CHANGED_JS = """([label, old]) => {
    const values = [];
    for (const m of document.querySelectorAll('[data-testid="stMetric"]')) {
        const l = m.querySelector('[data-testid="stMetricLabel"]');
        const v = m.querySelector('[data-testid="stMetricValue"]');
        if (l && v && l.textContent.trim() === label) values.push(v.textContent);
    }
    return values.length === 1 && values[0] !== old;
}"""


def wait_metric_change(page, label: str, old: str, timeout_s: float = CHANGE_TIMEOUT_S) -> str:
    """Wait, checking every animation frame, until the value of the metric labelled ``label``
    reads other than ``old`` (the element is looked up afresh each frame); returns the text."""
    page.wait_for_function(METRIC_CHANGED_JS, arg=[label, old], polling="raf", timeout=1000 * timeout_s)
    return metric_value(page, label).inner_text()


# The page's own clock (performance.now(), ms since the page was opened): every key release and
# every frame whose EM metric text changed, recorded in the page itself, so that a figure leaves
# out the driver's round trips (a key sent over the DevTools protocol, the polling of a condition).
PAGE_CLOCK_JS = """(() => {
    const clock = window.__l2dClock = {keyup: [], em: [], last: null};
    document.addEventListener('keyup', () => clock.keyup.push(performance.now()), true);
    const em = () => {
        for (const m of document.querySelectorAll('[data-testid="stMetric"]')) {
            const l = m.querySelector('[data-testid="stMetricLabel"]');
            const v = m.querySelector('[data-testid="stMetricValue"]');
            if (l && v && l.textContent.trim() === 'EM') return v.textContent;
        }
        return null;
    };
    new MutationObserver(() => {
        const text = em();
        if (text !== null && text !== clock.last) {
            clock.last = text;
            requestAnimationFrame(() => clock.em.push(performance.now()));  // the frame that shows it
        }
    }).observe(document, {subtree: true, childList: true, characterData: true});
})();"""
# (ms) from the last key release to the first frame showing a new EM text; null if none yet
PAGE_MOVE_MS_JS = """() => {
    const c = window.__l2dClock, k = c.keyup[c.keyup.length - 1];
    const shown = c.em.find(t => t > k);
    return shown === undefined ? null : shown - k;
}"""
# (ms) from opening the page to the first frame showing the EM metric; null if none yet
PAGE_LOAD_MS_JS = "() => window.__l2dClock.em.length ? window.__l2dClock.em[0] : null"


def wait_idle(page, timeout_s: float = CHANGE_TIMEOUT_S) -> None:
    """Wait until the app's "running" indicator is gone (the rerun has finished)."""
    page.get_by_test_id("stStatusWidget").wait_for(state="hidden", timeout=1000 * timeout_s)


def wait_settled(page, quiet_s: float = 3.0, timeout_s: float = CHANGE_TIMEOUT_S) -> None:
    """Wait until the page has been idle for ``quiet_s`` in a row: no running indicator, no
    progress bar, no spinner. A page that finishes its first view by ranking more routers in the
    same run (a progress bar, then a rerun of its own) is settled only after that rerun; a key
    pressed in between can be lost to it."""
    deadline, quiet_since = time.monotonic() + timeout_s, None
    busy = page.locator(
        '[data-testid="stStatusWidget"], [data-testid="stProgress"], [data-testid="stSpinner"]'
    )
    while time.monotonic() < deadline:
        if any(busy.nth(k).is_visible() for k in range(busy.count())):
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return
        time.sleep(0.25)
    raise TimeoutError(f"the page did not settle for {quiet_s:g} s within {timeout_s:g} s")


def wait_final_default(page, timeout_s: float = FIRST_LOAD_TIMEOUT_S) -> str:
    """Wait until the sidebar names the default router (a page shows it only once every
    candidate is ranked); returns that caption."""
    final = re.compile(r"^(Default: |No router )")
    caption = page.get_by_test_id("stSidebar").get_by_text(final).first
    caption.wait_for(timeout=1000 * timeout_s)
    return caption.inner_text()


def open_cost_explorer(page, base: str):
    """Open the cost explorer, wait for its EM metric; returns the EM value locator."""
    page.goto(f"{base}/cost_explorer", timeout=60_000)
    em = metric_value(page, "EM")
    em.wait_for(timeout=1000 * FIRST_LOAD_TIMEOUT_S)
    return em
