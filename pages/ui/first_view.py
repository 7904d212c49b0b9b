"""The first view, prepared as the server starts.

``streamlit run app.py`` serves the ``st.App`` that ``app.py`` assigns (Streamlit finds it there);
its lifespan, :func:`lifespan`, starts :func:`prepare` in a thread while the browser loads the page
(about a second on two cores). Where the default pool's answers are on disk already, it imports
the cost explorer's modules (the page's script needs them first), then loads what its first view
reads — the benchmark, the default router and its fit — into the same Streamlit caches that the
page then reads (a page that asks meanwhile waits for the same computation, never a second one),
draws random mixing's resamples and runs the router's heads on the test questions. On an empty
cache it only starts reading the answers in, in a child process on the other core (the page's
first run would, a second or two later): more work beside it in this process only slowed that
first view down. Anything that fails here is one line in the server's log; the page then computes
it and says why it cannot.

This module imports nothing heavy itself: the server imports it before it serves.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import logging
import threading
from pathlib import Path

THREAD = "l2d first view"
_LOG = logging.getLogger(__name__)
PAGE = Path(__file__).resolve().parent.parent / "cost_explorer.py"


class _QuietHere(logging.Filter):
    """Drops Streamlit's "missing ScriptRunContext" warnings of this module's thread: it calls the
    pages' cached functions outside any browser session, on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return threading.current_thread().name != THREAD


def page_modules(page: Path = PAGE) -> list[str]:
    """The modules a page script imports at its top level (``from X import …``, ``import X``),
    in its order."""
    tree = ast.parse(page.read_text(encoding="utf-8"))
    names = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return list(dict.fromkeys(names))


def prepare() -> bool:
    """Load the default pool's first view into the pages' caches; False (nothing loaded) where its
    answers are not on disk yet: their read-in is started instead."""
    from l2d_core.agents.read_in import read_in_early
    from pages.ui.app import default_helpers
    from pages.ui.defaults import DATASET_CHOICES, DEFAULT_POOL

    dataset, pool = DATASET_CHOICES[0], DEFAULT_POOL
    if not read_in_early(dataset, pool, default_helpers()):  # being read in, in a child process
        return False
    for name in page_modules():  # first: the page's script imports them before it reads any data
        importlib.import_module(name)
    from l2d_core.evaluation.gain import resampling
    from pages.ui import cache

    bench = cache.benchmark(dataset, pool)
    choice = cache.default_router(dataset, pool, rank=False)
    resampling(len(bench.test))  # random mixing's interval resamples, drawn once per process
    if choice is not None:  # None: not ranked yet; the page ranks the routers, with a bar
        router = cache.fitted_router(dataset, pool, choice.router_id)
        # its heads run on the test questions once (kept by the router): the page's first
        # decision then takes milliseconds. Not the whole first view: the page, waiting for the
        # same fit, would compute it at the same time
        router.decide(bench.price_costs(choice.price))
    return True


def prepare_or_log() -> None:
    """:func:`prepare`; what fails is one line in the server's log, never an exception."""
    try:
        prepare()
    except Exception as exc:  # the page computes it again and shows the error
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        _LOG.warning("the first view was not prepared as the server started: %s", why)


@contextlib.asynccontextmanager
async def lifespan(app):
    """The server's lifespan: :func:`prepare` in a thread of its own, started as the server starts."""
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").addFilter(_QuietHere())
    threading.Thread(target=prepare_or_log, name=THREAD, daemon=True).start()
    yield
