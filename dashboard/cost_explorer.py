"""Cost explorer: move α and β, watch the routers' decisions, their metrics and the cost–EM plane."""

import pandas as pd
import streamlit as st

from dashboard.cache import benchmark, fitted_router, sweep, sweep_figures
from dashboard.widgets import (
    metric_row,
    previous_metrics,
    remember_metrics,
    select_pool,
    select_routers,
    shown_errors,
)
from l2d_core import report
from l2d_core.app_logic.cost_settings import beta_limits, cost_from_upload, rule_beta1
from l2d_core.app_logic.explorer import explore, untrained_betas
from l2d_core.method.costs import CostConfig, InvalidCostError

SUB = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
ALPHA_MAX = 2.0

st.title("Cost explorer")
st.caption(
    "Each expert costs α × (its error) + β per answer endpoint; the main model costs its error. "
    "Raise β and fewer questions go to the experts; raise α and their mistakes weigh more. "
    "Routers marked *reweights instantly* apply any setting at once; the paper's rejector trains "
    "a new head for each setting (seconds, kept on disk)."
)
dataset, pool = select_pool()
with shown_errors():
    bench = benchmark(dataset, pool)
experts, gflops = bench.pool.experts, bench.expert_gflops
beta_max = beta_limits(gflops)


def load_upload() -> None:
    """Uploader callback (runs before the widgets are drawn): the file's costs become slider values."""
    file = st.session_state.get("cost_upload")
    if file is None:
        return
    try:
        costs = cost_from_upload(file.getvalue(), len(experts), ALPHA_MAX, beta_max)
    except InvalidCostError as exc:
        st.session_state["cost_upload_error"] = f"{file.name}: {exc}"
        return
    b1 = rule_beta1(costs, gflops)
    st.session_state["beta_rule"] = b1 is not None
    st.session_state["beta1"] = b1 if b1 is not None else st.session_state["beta1"]
    for j, (a, b) in enumerate(zip(costs.alpha, costs.beta), start=1):
        st.session_state[f"alpha_{j}"], st.session_state[f"beta_{j}"] = a, b


def seed_betas() -> None:
    """Toggle callback: hand-set β sliders start from the rule's values."""
    if not st.session_state["beta_rule"]:
        for j, b in enumerate(bench.costs(st.session_state["beta1"]).beta, start=1):
            st.session_state[f"beta_{j}"] = b


st.session_state.setdefault("beta_rule", True)
st.session_state.setdefault("beta1", 0.05)
for j, b in enumerate(bench.costs(0.05).beta, start=1):
    st.session_state.setdefault(f"alpha_{j}", 1.0)
    st.session_state.setdefault(f"beta_{j}", b)
    if st.session_state[f"beta_{j}"] > beta_max[j - 1]:  # left over from another pool
        st.session_state[f"beta_{j}"] = beta_max[j - 1]

side = st.sidebar
chosen = select_routers("routers")
side.markdown("**α** — weight of each expert's error")
alpha = tuple(
    side.slider(
        f"α{str(j).translate(SUB)} · {a}",
        0.0,
        ALPHA_MAX,
        step=0.05,
        key=f"alpha_{j}",
        persist_state="session",
    )
    for j, a in enumerate(experts, start=1)
)
rule = side.toggle(
    "β from the GFLOPs rule",
    key="beta_rule",
    on_change=seed_betas,
    persist_state="session",
    help="each further expert's β grows with its compute relative to the first expert's",
)
with shown_errors():
    if rule:
        beta1 = side.slider(
            "β₁",
            0.0,
            1.0,
            step=0.005,
            format="%.3f",
            key="beta1",
            persist_state="session",
            help=f"what asking {experts[0]} costs, in errors per answer endpoint",
        )
        costs = CostConfig.from_beta1(beta1, gflops, alpha)
        side.caption(
            " · ".join(
                f"β{str(j).translate(SUB)} = {b:.4f} ({a})"
                for j, (a, b) in enumerate(zip(experts, costs.beta), start=1)
                if j > 1
            )
        )
    else:
        costs = CostConfig(
            alpha,
            tuple(
                side.slider(
                    f"β{str(j).translate(SUB)} · {a}",
                    0.0,
                    beta_max[j - 1],
                    step=0.001,
                    format="%.4f",
                    key=f"beta_{j}",
                    persist_state="session",
                )
                for j, a in enumerate(experts, start=1)
            ),
        )
st.session_state["costs"] = costs
if not chosen:
    st.info("Pick at least one router in the sidebar.")
    st.stop()

with shown_errors():
    routers = {rid: fitted_router(dataset, pool, rid) for rid in chosen}
    if any(r.needs_training(costs) for r in routers.values()):
        with st.spinner("Training the rejector for this cost setting (a few seconds; kept on disk)…"):
            for r in routers.values():
                r.decide(costs)
    slots = {rid: f"{dataset}/{pool}/{rid}" for rid in chosen}
    view = explore(bench, routers, costs, {rid: previous_metrics(s, costs) for rid, s in slots.items()})
for col, v in zip(st.columns(len(view.views)), view.views):
    with col:
        st.subheader(v.label)
        metric_row(view.tiles[v.router_id], per_row=5 if len(view.views) == 1 else 3)
    remember_metrics(slots[v.router_id], costs, v.metrics)
st.caption(f"{len(bench.test):,} test questions. Changes: since the previous setting of each router.")

left, right = st.columns(2)
fig_alloc = report.allocation_bars(view.allocation)
left.plotly_chart(fig_alloc)
fig_plane = report.plane_figure(view.plane, log_x=st.session_state.get("plane_log", False))
right.plotly_chart(fig_plane)
right.checkbox("log GFLOPs axis", key="plane_log", help="the hull is straight in linear cost only")
figures = {"Allocation ratios": fig_alloc, "Cost–EM plane": fig_plane}

st.subheader("β₁ sweep")
st.caption("The benchmark's β₁ points, later experts' β from the GFLOPs rule, α as set in the sidebar.")
frames = []
for rid, r in routers.items():
    needs = untrained_betas(bench, r, alpha)
    done = st.session_state.setdefault("_trained_sweeps", set())
    if needs and (dataset, pool, rid, alpha) not in done:
        if not st.button(f"Train the sweep of {r.label} ({len(needs)} settings)", key=f"sweep_{rid}"):
            st.info(f"{r.label} trains one head per β₁ (seconds each, kept on disk).")
            continue
        bar = st.progress(0.0)
        with shown_errors():
            for k, b in enumerate(needs):
                bar.progress(k / len(needs), text=f"{r.label} at β₁ = {b} ({k + 1}/{len(needs)})…")
                r.decide(bench.costs(b, alpha))
        bar.empty()
        done.add((dataset, pool, rid, alpha))
    frames.append(sweep(dataset, pool, rid, alpha))
if frames:
    sweep_figs = report.mark_beta1(
        sweep_figures(pd.concat(frames, ignore_index=True)), beta1 if rule else None
    )
    for col, fig in zip(st.columns(2) * 2, sweep_figs.values()):
        col.plotly_chart(fig)
    figures |= sweep_figs

st.subheader("Export and import")
c1, c2, c3 = st.columns(3)
c1.download_button(
    "Cost setting (JSON)",
    costs.to_json(),
    f"costs_{pool}.json",
    "application/json",
    key="download_costs",
    on_click="ignore",
    icon=":material/download:",
)
c1.code(costs.to_json(), language="json", wrap_lines=True)
c2.file_uploader("Load a cost setting (JSON)", type=["json"], key="cost_upload", on_change=load_upload)
if err := st.session_state.pop("cost_upload_error", None):
    c2.error(f"InvalidCostError: {err}")
c3.download_button(
    "Charts (HTML, works offline)",
    lambda: report.figures_html(figures, f"Cost explorer — {dataset} {pool}"),
    f"cost_explorer_{dataset}_{pool}.html",
    "text/html",
    key="download_html",
    on_click="ignore",
    icon=":material/download:",
)
