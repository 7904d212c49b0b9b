"""The cost explorer's sweep: each shown router's metrics over the settings of the cost rule in
force (β₁, λ per TFLOP, λₛ per second or λ$ per dollar), up to the slider's end, with the setting
in force marked."""

import streamlit as st

from l2d_core.app_logic.explorer import SWEEPS, sweep_points, untrained_settings
from pages.ui.cache import sweep, sweep_charts
from pages.ui.widgets import shown_errors, train_for, training_time

PRICE_MAX = 2.0  # the latency price slider's top (errors per second)
BETA1_MAX = 1.0  # the β₁ slider's top
X_TITLES = {
    "gflops": "β₁",
    "price": "λ (errors per TFLOP)",
    "latency": "λₛ (errors per second)",
    "money": "λ$ (errors per dollar)",
}


def sweep_panel(
    dataset: str, pool: str, bench, routers: dict, rule: str, alpha, price_end: float, marked: bool
):
    """Draw the sweep of ``rule`` (the price rule's where the costs are set by hand); returns its
    charts by title. ``price_end``: the top of the per-TFLOP price slider; ``marked``: the
    setting in force is marked on the charts."""
    from l2d_core.report import charts  # altair: imported once a chart is drawn, after the tiles

    sweep_rule = rule if rule in SWEEPS else "price"
    st.subheader(f"Sweep over {X_TITLES[sweep_rule]}")
    scale = bench.money_prices if sweep_rule == "money" else bench.log_prices
    ends = {"price": price_end, "gflops": BETA1_MAX, "latency": PRICE_MAX, "money": (scale or (0.0,))[-1]}
    points = sweep_points(sweep_rule, scale, end=ends[sweep_rule])  # up to the slider's end
    symlog = None
    if sweep_rule not in ("price", "money") or not scale:
        st.caption("The benchmark's points of the rule up to the slider's end, α as set above.")
    else:
        symlog = points[1]
        st.caption(
            f"0 and {len(points) - 1} of the slider's prices from {points[1]:g} to {points[-1]:g}, on a log "
            "axis: the decisions change over decades of price. α as set above."
        )
    frames = []
    for rid, r in routers.items():
        needs = untrained_settings(bench, r, sweep_rule, alpha, points)
        done = st.session_state.setdefault("_trained_sweeps", set())
        if needs and (dataset, pool, rid, sweep_rule, alpha) not in done:
            if not st.button(f"Train the sweep of {r.label} ({len(needs)} settings)", key=f"sweep_{rid}"):
                st.info(f"{r.label} trains one head per setting ({training_time()}; kept on disk).")
                continue
            bar = st.progress(0.0)
            with shown_errors():
                for k, b in enumerate(needs):
                    step = f"{r.label} at {X_TITLES[sweep_rule]} = {b} ({k + 1}/{len(needs)})…"
                    bar.progress(k / len(needs), text=step)
                    train_for([r], bench.rule_costs(sweep_rule, b, alpha))
            bar.empty()
            done.add((dataset, pool, rid, sweep_rule, alpha))
        frames.append(sweep(dataset, pool, rid, sweep_rule, alpha, points))
    if not frames:
        return {}
    import pandas as pd  # here, not at the top: the first view's tiles import no pandas

    column = SWEEPS[sweep_rule][0]
    sweep_set = sweep_charts(pd.concat(frames, ignore_index=True), column, X_TITLES[sweep_rule], symlog)
    if marked:
        sweep_set = charts.mark_setting(sweep_set, st.session_state[column])
    for col, chart in zip(st.columns(2) * 2, sweep_set.values()):
        col.altair_chart(charts.fit_width(chart), width="stretch")
    return sweep_set
