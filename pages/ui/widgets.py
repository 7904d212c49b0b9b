"""Widgets and drawing helpers every page shares: the dataset/pool pickers, the router menu,
error messages instead of tracebacks, metric tiles, and the previous setting's metrics."""

from __future__ import annotations

import statistics
import time
from collections import deque
from contextlib import contextmanager

import streamlit as st

from l2d_core.agents import get_pool, list_pools
from l2d_core.agents.read_in import import_agents
from l2d_core.app_logic.default_view import DefaultChoice
from l2d_core.app_logic.job_words import left_words
from l2d_core.data import DataFormatError, dataset_description
from l2d_core.data.user_datasets import user_dataset_names
from l2d_core.method.costs import CostConfig, InvalidCostError
from l2d_core.routers.registry import router_ids, router_label
from pages.ui.cache import benchmark, default_router, embedding_ranking, embeddings_ready, routers_waiting
from pages.ui.defaults import DATASET_CHOICES, DEFAULT_POOL

__all__ = [
    "DATASET_CHOICES",
    "shown_errors",
    "select_pool",
    "pool_menu_help",
    "select_routers",
    "default_choice",
    "default_caption",
    "default_price",
    "page_sets",
    "finish_preparing",
    "cost_from_state",
    "budget_from_state",
    "previous_metrics",
    "remember_metrics",
    "metric_row",
    "train_for",
    "training_time",
]

USER_ERRORS = (DataFormatError, FileNotFoundError, InvalidCostError, KeyError, ValueError, LookupError)
# how long training a router for one cost setting took in this server process (seconds, latest last)
_TRAINED_IN: deque[float] = deque(maxlen=20)
# st.metric's colouring of a change, from which way the metric is better
_DELTA_COLOR = {"higher": "normal", "lower": "inverse", None: "off"}


@contextmanager
def shown_errors():
    """Turn the errors users can cause into a message on the page and stop the page."""
    try:
        yield
    except USER_ERRORS as exc:
        st.error(user_message(exc))
        st.stop()


def user_message(exc: BaseException, limit: int = 400) -> str:
    """An error in words for the page: no Python class name, at most ``limit`` characters."""
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    text = text or type(exc).__name__
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters in all)"


def select_pool(sidebar: bool = True) -> tuple[str, str]:
    """Dataset and pool pickers, shared by every page through session state."""
    where = st.sidebar if sidebar else st
    # persist_state: the choice outlives a page that does not draw the widget — or a cost move
    # on the cost explorer, which re-runs its fragment only (the pool fell back to P2 after one)
    dataset = where.selectbox(  # SQuAD's dev sets, then the datasets registered from your logs
        "Dataset",
        [*DATASET_CHOICES, *user_dataset_names()],
        key="dataset",
        format_func=lambda d: f"{d} — {dataset_description(d)}",
        persist_state="session",
    )
    pools = [p.name for p in list_pools(dataset)]
    if not pools:
        st.error(f"no pool is defined for {dataset}")
        st.stop()
    if st.session_state.get("pool") not in pools:
        st.session_state["pool"] = pools[0] if DEFAULT_POOL not in pools else DEFAULT_POOL
    pool = where.selectbox(
        "Pool",
        pools,
        key="pool",
        format_func=lambda p: f"{p}: {' → '.join(get_pool(p).agent_ids)}",
        persist_state="session",
        help=pool_menu_help(dataset),
    )
    if description := get_pool(pool).description:
        where.caption(f"{pool}: {description}.")
    return dataset, pool


def pool_menu_help(dataset: str) -> str:
    """One line per pool of ``dataset``: its name, main agent → experts, and what it is."""
    return "\n".join(
        f"- **{p.name}** ({' → '.join(p.agent_ids)}){': ' + p.description if p.description else ''}"
        for p in list_pools(dataset)
    )


def default_choice(dataset: str, pool: str) -> DefaultChoice:
    """The default router and price: the furthest above random mixing on validation articles among
    the routers that read no embeddings (:func:`~l2d_core.app_logic.default_view.default_router`,
    a pure function of the pool's data and the code). What the first view needs is computed before
    anything is shown — the agents those routers read are read in, then the routers ranked, each
    with a progress bar in place (once per pool: the ranking is kept on disk) — so the numbers
    shown first are the numbers that stay."""
    choice = default_router(dataset, pool, rank=False)
    if choice is not None:
        return choice
    where = st.empty()
    if pending := routers_waiting(dataset, pool):
        agents = sorted({a for todo in pending.values() for a in todo})
        names = " and ".join(router_label(r) for r in pending)
        step = _bar(where, f"Reading in the answers of {len(agents)} agents that {names} reads", "agents")
        with shown_errors():  # in two child processes: this server keeps serving other pages
            import_agents(benchmark(dataset, pool).dataset, agents, processes=2, on_done=step)
        routers_waiting.clear()
    what = "Choosing the default router: each router ranked on validation articles (once per pool)"
    with shown_errors():
        choice = default_router(dataset, pool, rank=True, _progress=_bar(where, what, "routers"))
    where.empty()
    default_router.clear()  # the ranking is on disk now: the cached None of rank=False goes
    return choice


def default_caption(choice: DefaultChoice) -> str:
    """What the sidebar says of the default router and cost setting."""
    label, lam = router_label(choice.router_id), choice.setting_words
    gain = "EM points above random mixing of agents on validation articles"
    lost = choice.instead_of
    if lost is not None:
        return (
            f"No router pays for itself on this pool: the best, {router_label(lost.router_id)}, is "
            f"{choice.unpaid_gain:+.2f} {gain} at best, and its 95% interval reaches down to "
            f"{choice.unpaid_low:+.2f}. Default: every question to {label}, the most "
            f"accurate agent on the training articles, which random mixing cannot beat ({choice.gain:+.2f})."
        )
    return f"Default: {label} at {lam}, the best on validation articles: {choice.gain:+.2f} {gain}."


# the cost explorer's slider of each rule
PRICE_KEYS = {"price": "price", "latency": "latency_price", "money": "money_price"}


# each widget key's value as the page itself last wrote it: a key still there is not the user's own
_PAGE_VALUES = "_page_values"


def users_own(key: str) -> bool:
    """Whether widget ``key`` holds a value the user chose (the page did not write it)."""
    wrote = st.session_state.get(_PAGE_VALUES, {})
    return key in st.session_state and (key not in wrote or st.session_state[key] != wrote[key])


def page_sets(key: str, value, *, if_absent: bool = False) -> None:
    """Write widget ``key`` as the page's own starting value (a later default may replace it, a
    user's choice it never does); ``if_absent``: only where the key has no value yet. A value
    the page brought onto a slider's scale stays the page's; the user's stays the user's."""
    if if_absent and key in st.session_state:
        return
    mine = not users_own(key)
    st.session_state[key] = value
    if mine:
        st.session_state[_PAGE_VALUES] = {**st.session_state.get(_PAGE_VALUES, {}), key: value}


def default_price(choice: DefaultChoice) -> None:
    """Start the default rule's price slider (λ, or λₛ on a pool that logs latency) at the default
    router's best price, and the rule at the default's; a user's own price and rule are kept. A
    price or rule the page wrote itself (another pool's default, a slider's starting value) is not
    the user's: the sidebar names this pool's default, and the controls show it."""
    # a widget's key is written only to change it: one set by hand on every run lost the next slider move
    for key, value in ((PRICE_KEYS[choice.rule], choice.price), ("cost_rule", choice.rule)):
        if not users_own(key) and st.session_state.get(key) != value:
            page_sets(key, value)
    st.session_state["_price_default"] = (choice.price, choice.rule)
    if choice.rule != "price" and choice.ranking:  # λ's slider starts at that router's best λ
        page_sets("price", choice.ranking[0].price, if_absent=True)


def finish_preparing(dataset: str, pool: str, where) -> list | None:
    """After the page is drawn: where the embeddings are computed already and the routers that
    read them are not ranked yet, rank them on validation articles (once per pool, a progress bar
    in ``where``) and return that ranking (None: nothing to rank), for a page that shows it to
    draw it in place. They are ranked beside the default's candidates, never instead of the
    default (a default that changed once the embeddings came would contradict the numbers shown
    first). The page is not rerun: a control moved meanwhile queues a rerun of its fragment
    behind this run, and a rerun of the whole page here dropped it (the slider showed the new
    value, the figures the old one)."""
    if not embeddings_ready(dataset) or embedding_ranking(dataset, pool, rank=False) is not None:
        return None
    what = "Ranking the routers that read the question and context (once per pool)"
    ranked = None
    with shown_errors():
        ranked = embedding_ranking(dataset, pool, rank=True, _progress=_bar(where, what, "routers"))
    where.empty()
    embedding_ranking.clear()
    return ranked


def _bar(where, what: str, unit: str):
    """A progress bar in ``where`` saying ``what``; returns its ``step(k, n, name)``, which shows
    the item just done, the count and the time left."""
    bar, start = where.progress(0.0, text=f"{what}…"), time.perf_counter()

    def step(k: int, n: int, name: str) -> None:
        left = left_words(time.perf_counter() - start, k, n)
        bar.progress(k / n, text=f"{what}: {name} done ({k}/{n} {unit}); {left}")

    return step


def select_routers(key: str, default: str, multiple: bool = True, where=None, ids=None, bench=None):
    """The router menu: every router of the registry that can run on ``bench``'s pool, then its
    single agents (or ``ids``), by its human name. When the default changes (a better router
    became ready) and the menu still shows the previous default, it moves to the new one; a
    choice of the user's own is kept (a choice the pool cannot run is dropped)."""
    where = where or st.sidebar
    ids = router_ids(bench) if ids is None else list(ids)
    if default not in ids:
        ids = [default, *ids]
    shown = st.session_state.get(key)
    chosen = shown if isinstance(shown, list) else [shown] if isinstance(shown, str) else []
    dropped = any(r not in ids for r in chosen)  # a choice this pool cannot run (another dataset's)
    if dropped:  # set, not deleted: the browser would keep showing the old one
        st.session_state[key] = ([r for r in chosen if r in ids] or [default]) if multiple else default
    auto, shown = f"_{key}_default", st.session_state.get(key)
    before = st.session_state.get(auto)
    moved = before is not None and before != default and shown in ([before], before)
    if moved:
        st.session_state[key] = [default] if multiple else default
    st.session_state[auto] = default
    kw = dict(key=key, format_func=router_label, persist_state="session")
    set_here = moved or dropped  # a widget given a default and a value set here logs a warning
    if multiple:
        return where.multiselect("Routers", ids, default=None if set_here else [default], **kw)
    return where.selectbox("Router", ids, index=None if set_here else ids.index(default), **kw)


def cost_from_state(dataset: str, pool: str, default: CostConfig) -> CostConfig:
    """The cost setting chosen on the cost explorer for this pool (else the default given)."""
    saved = st.session_state.get("costs")
    if isinstance(saved, CostConfig) and st.session_state.get("costs_pool") == (dataset, pool):
        return saved
    return default


def budget_from_state(dataset: str, pool: str) -> tuple[str, float] | None:
    """The budget ``(kind, target)`` set on the cost explorer for this pool (None: decided by the
    cost setting, or nothing set for this pool)."""
    if st.session_state.get("costs_pool") != (dataset, pool):
        return None
    return st.session_state.get("budget")


def previous_metrics(slot: str, setting) -> dict | None:
    """Metrics of the setting shown before ``setting`` in ``slot`` (kept in session state), so
    metric tiles can show changes; reruns of the same setting keep the same previous."""
    shown = st.session_state.setdefault("_previous_metrics", {}).get(slot)
    if shown is None:
        return None
    return shown[2] if shown[0] == setting else shown[1]


def remember_metrics(slot: str, setting, metrics: dict) -> None:
    """Record what ``slot`` shows now (see :func:`previous_metrics`)."""
    store = st.session_state.setdefault("_previous_metrics", {})
    shown = store.get(slot)
    if shown is None:
        store[slot] = (setting, metrics, None)
    elif shown[0] != setting:
        store[slot] = (setting, metrics, shown[1])


def metric_row(tiles: list[dict], per_row: int = 5) -> None:
    """Draw metric tiles (``l2d_core.app_logic.explorer.metric_tiles``), ``per_row`` to a row."""
    for start in range(0, len(tiles), per_row):
        for col, tile in zip(st.columns(per_row), tiles[start : start + per_row]):
            col.metric(
                tile["label"],
                tile["value"],
                tile["delta"],
                delta_color=_DELTA_COLOR[tile["better"]],
                help=tile["help"],
            )


def training_time() -> str:
    """How long training a router for one cost setting takes, as measured in this process."""
    if not _TRAINED_IN:
        return "not timed on this machine yet"
    return f"about {statistics.median(_TRAINED_IN):.1f} s each here, measured"


def train_for(routers, costs) -> None:
    """Train the routers that need it for ``costs`` (kept on disk), timing each, with a spinner
    that says how long it took before."""
    needing = [r for r in routers if r.needs_training(costs)]
    if not needing:
        return
    with st.spinner(f"Training the rejector for this cost setting ({training_time()}; kept on disk)…"):
        for r in needing:
            start = time.perf_counter()
            r.decide(costs)
            _TRAINED_IN.append(time.perf_counter() - start)
