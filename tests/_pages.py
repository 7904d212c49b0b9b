"""Run one dashboard page in AppTest as it runs inside the app (its frame marked as done)."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

from pages.ui.app import IN_APP

ROOT = Path(__file__).resolve().parent.parent


def open_page(name: str, pool: str | None = None, timeout: float = 600) -> AppTest:
    """``pages/<name>.py``, not yet run; ``pool``: picked in the sidebar before its first run."""
    at = AppTest.from_file(str(ROOT / "pages" / f"{name}.py"), default_timeout=timeout)
    at.session_state[IN_APP] = True
    if pool is not None:
        at.session_state["pool"] = pool
    return at
