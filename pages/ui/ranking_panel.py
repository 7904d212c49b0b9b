"""The cost explorer's "How the routers rank on validation articles" panel: the default's
candidates as ranked, then the routers that read the question and context — ranked after the
first view is drawn, and drawn in place once they are (the page is not rerun for them)."""

import streamlit as st

from l2d_core.app_logic.default_view import (
    PRICE_UNITS,
    DefaultChoice,
    needs_embeddings,
    price_column,
    ranking_frame,
)
from l2d_core.routers.registry import router_label
from pages.ui.cache import embedding_ranking, embeddings_ready
from pages.ui.widgets import finish_preparing

FMT_PRICE = {price_column(rule): "{:g}" for rule in PRICE_UNITS}


def _table(ranking, rule: str) -> None:
    frame = ranking_frame(ranking, rule)
    fmt = {c: "{:.2f}" for c in frame.columns if c != "router"} | FMT_PRICE
    st.table(frame.style.format(fmt).hide(axis="index"))  # a plain table: no data grid to load


def _embedding_routers(dataset: str, read, rule: str) -> None:
    """The ranking of the routers that read the question and context, or why it is not shown."""
    unranked = needs_embeddings()
    if read:
        st.markdown("**Routers that read the question and context** (ranked the same way)")
        _table(read, rule)
    if unranked and read is None:
        why = "being ranked now" if embeddings_ready(dataset) else "their embeddings are not computed yet"
        st.caption(f"Not ranked yet ({why}): {', '.join(map(router_label, unranked))}.")
    if unranked:
        st.caption(
            "The default is chosen among the routers that do not read the question and context, so it "
            "never waits for their embeddings and never changes once they are computed."
        )


def ranking_panel(dataset: str, pool: str, choice: DefaultChoice, preparing) -> None:
    """The panel, then the routers that read embeddings ranked (a progress bar in ``preparing``)
    where they are not yet, their table drawn again in place."""
    with st.expander("How the routers rank on validation articles"):
        _table(choice.ranking, choice.rule)
        default_is = (
            "none pays for itself here, so the default above is the most accurate single agent"
            if choice.instead_of is not None
            else "the default router and price above are the best of these"
        )
        symbol, unit = PRICE_UNITS[choice.rule]
        st.caption(
            "Each router on the training articles, each question routed by a head that never saw its "
            f"article: its EM above random mixing of single agents at the same compute, at the price "
            f"{symbol} ({unit}) where that is largest, the low end of that gain's 95% interval (a router "
            f"pays for itself where it is above 0; {default_is}), and AIQ, the mean EM of its cost–EM "
            "curve over the agents' compute range."
        )
        slot = st.empty()
    with slot.container():
        _embedding_routers(
            dataset,
            embedding_ranking(dataset, pool, rank=False) if embeddings_ready(dataset) else None,
            choice.rule,
        )
    if (ranked := finish_preparing(dataset, pool, preparing)) is not None:
        with slot.container():
            _embedding_routers(dataset, ranked, choice.rule)
