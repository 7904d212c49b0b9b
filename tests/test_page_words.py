"""Issue 37, item 1: every page, on every built-in pool, speaks of its agents in the words of
their kind. A page that names how an agent is known, what it returns or what a wrong answer
means must not use the phrases of a kind the pool does not hold: "known only by its prediction
file" on a pool of outcome logs (the deploy box said so of bert-tiny), "a wrong start plus a
wrong end" where no agent gives a span (the plug-in rule's text on PLLM).

Runtime: one module, one process: the pages share st.cache_resource and the session's cache, and
the default router is the cascade (fitted once per pool, no validation ranking), so each pool
costs one router fit and five page runs."""

from __future__ import annotations

import pandas as pd
import pytest
from _pages import open_page

from l2d_core.agents import get_agent, get_pool, list_pools
from l2d_core.agents.catalog import TEXTLESS_KINDS, builtin_pool_names
from l2d_core.agents.outcome_log import COLUMNS
from l2d_core.app_logic.default_view import DefaultChoice

PAGES = ("overview", "cost_explorer", "decisions", "single_query", "comparison")
# the built-in pools (collected before the session's cache is set: a pool registered in the project's
# own cache, such as P3-quick once trained here, is not the session's)
POOLS = tuple(p.name for p in list_pools() if p.name in builtin_pool_names())
# phrases that say how an agent of a kind is known (checked against the pool's kinds)
KIND_PHRASES = {
    "prediction_file": ("known only by its prediction file", "known only by their prediction file"),
    "outcome_log": ("known only by its outcome log", "known by its log only", "known by their logs only"),
}
SPAN_PHRASES = ("wrong start", "wrong end")  # only where an agent answers with a span of text


def _texts(node) -> list[str]:
    """Every text an element of the page shows (its protobuf, help and labels included)."""
    children = getattr(node, "children", None)
    if children:
        return [t for child in children.values() for t in _texts(child)]
    proto = getattr(node, "proto", None)
    return [str(proto)] if proto is not None else []


def has_text(agent: str) -> bool:
    """Whether an agent's answers are texts: its kind's, or an outcome log with an answer column."""
    spec = get_agent(agent)
    if spec.kind not in TEXTLESS_KINDS:
        return True
    if spec.kind != "outcome_log":
        return False
    header = pd.read_csv(spec.resolved_path(), nrows=0).columns
    return any(c in COLUMNS["answer"] for c in header)


def forbidden(pool: str) -> tuple[str, ...]:
    kinds = {get_agent(a).kind for a in get_pool(pool).agent_ids}
    out = [p for kind, phrases in KIND_PHRASES.items() if kind not in kinds for p in phrases]
    if not any(has_text(a) for a in get_pool(pool).agent_ids):
        out += SPAN_PHRASES
    return tuple(out)


@pytest.fixture(scope="module")
def cascade_default():
    """Every page's default router: the cascade at a mid price (what the pages say is the point)."""
    import pages.ui.cache

    mp = pytest.MonkeyPatch()
    mp.setattr(pages.ui.cache, "pick_default", lambda bench, **kw: DefaultChoice("l2d-cascade", 0.1, 1, []))
    pages.ui.cache.default_router.clear()
    yield
    pages.ui.cache.default_router.clear()
    mp.undo()


def test_the_check_sees_the_phrases_it_looks_for():
    assert "known only by its prediction file" in forbidden("PLLM") and "wrong start" in forbidden("PLLM")
    assert "known by its log only" in forbidden("P2") and "wrong start" not in forbidden("P2")
    assert "wrong start" in forbidden("PLLM-abstain")  # bert-tiny, GPT-3: logs; abstain: no text
    assert "wrong start" not in forbidden("Plocal")  # logs recorded with the LLMs' answer texts


@pytest.mark.slow
@pytest.mark.parametrize("pool", POOLS)
def test_every_page_speaks_of_the_pools_own_kinds(real_data, cascade_default, pool):
    spec = get_pool(pool)
    bad = forbidden(pool)
    for name in PAGES:
        at = open_page(name, pool)
        at.session_state["dataset"] = spec.dataset
        at.run()
        assert not at.exception, (pool, name, [e.value for e in at.exception])
        shown = "\n".join(_texts(at.main) + _texts(at.sidebar))
        assert shown, (pool, name)
        found = [p for p in bad if p in shown]
        assert not found, f"{name} on {pool} says {found}"
