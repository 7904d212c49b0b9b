"""The dashboard's frame: page config, the early read-in and the navigation, shared by ``app.py``
and by a page that a fresh server runs first.

Streamlit treats a ``pages/`` folder beside the entry script as a legacy multipage app until the
first ``st.navigation`` call: on a fresh server, a visit straight to ``/cost_explorer`` runs
``pages/cost_explorer.py`` itself. Each page therefore starts with ``within_app(__file__)``: when
the frame has not run in this session it runs it (this navigation, whose address for the page is
its file name, finds the page) and stops; otherwise it does nothing. It comes before the page's
own imports, so that such a visit starts the early read-in without waiting for them."""

from pathlib import Path

import streamlit as st

from l2d_core.agents.catalog import cheap_builtin_agents, get_pool
from l2d_core.agents.read_in import read_in_early
from pages.ui.defaults import DATASET_CHOICES, DEFAULT_POOL

PAGES_DIR = Path(__file__).resolve().parent.parent
PAGES = (  # file in pages/ (= its address), title, icon; the first is the home page
    ("overview", "Overview", "home"),
    ("cost_explorer", "Cost explorer", "tune"),
    ("decisions", "Routing decisions", "alt_route"),
    ("single_query", "Single query", "help"),
    ("comparison", "Router comparison", "leaderboard"),
)
IN_APP = "_l2d_in_app"  # session key: the frame ran in this session (tests set it to run a page alone)


def run_app() -> None:
    """Page config, the early read-in on a fresh server, and the navigation; runs the asked page."""
    st.session_state[IN_APP] = True
    # an emoji favicon is drawn by the browser itself (a :material/…: one is fetched from a font host)
    st.set_page_config(page_title="L2D routing for extractive QA", page_icon="🔀", layout="wide")
    # the default pool and the helper agents its best router reads are read in on another core
    # while the page imports (once per process; nothing is started where they are read in already)
    read_in_early(DATASET_CHOICES[0], DEFAULT_POOL, default_helpers())
    pages = [
        st.Page(
            PAGES_DIR / f"{name}.py", title=title, icon=f":material/{icon}:", url_path=name, default=k == 0
        )
        for k, (name, title, icon) in enumerate(PAGES)
    ]
    st.navigation(pages).run()


def default_helpers() -> list[str]:
    """The helper agents that the default pool's best router reads besides the pool's own."""
    return cheap_builtin_agents(DATASET_CHOICES[0], get_pool(DEFAULT_POOL).main)


def within_app(page_file: str) -> None:
    """First statement of every page: run the frame if this session has not (see the module)."""
    if st.session_state.get(IN_APP):
        return
    run_app()
    st.stop()
