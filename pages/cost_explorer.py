"""Cost explorer: move α and β, watch the routing policy, its metrics and the cost–EM plane."""

import pandas as pd
import streamlit as st

from l2d_core.costs import CostConfig, InvalidCostError
from l2d_core.explorer import (
    POLICY_LABELS,
    allocation_frame,
    beta_limits,
    cost_em_points,
    cost_from_upload,
    metric_tiles,
    rule_beta1,
)
from pages.common import (
    allocation_figure,
    benchmark,
    cost_em_figure,
    figures_html,
    metric_row,
    policy_view,
    previous_metrics,
    select_pool,
    shown_errors,
    sweep,
    sweep_figures,
    train_sweep,
)

SUB = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
ALPHA_MAX = 2.0

st.title("Cost explorer")
st.caption(
    "An expert costs α_j · error + β_j per endpoint, the main model its error (SPEC §3). "
    "**Reweight** applies any setting instantly to error probabilities learned once; "
    "**Retrain** fits the paper's SDL rejector for the setting (cached on disk)."
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
mode = side.radio(
    "Policy", ("Reweight", "Retrain", "Both"), key="mode", horizontal=True, persist_state="session"
)
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
    help="β_j = β₁ · GFLOPs(M_j) / (20 · GFLOPs(M₁)) for j ≥ 2 (SPEC §3)",
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
            help=f"consultation cost of {experts[0]}",
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

with shown_errors():
    views = [
        policy_view(dataset, pool, costs, m) for m in (("Reweight", "Retrain") if mode == "Both" else (mode,))
    ]
for col, view in zip(st.columns(len(views)), views):
    with col:
        st.subheader(POLICY_LABELS[view.name])
        prev = previous_metrics(f"{dataset}/{pool}/{view.name}", costs, view.metrics)
        metric_row(metric_tiles(view.metrics, prev), per_row=5 if len(views) == 1 else 3)
st.caption(f"{view.metrics['n']:,} test questions. Deltas: change since the previous setting of the policy.")

left, right = st.columns(2)
fig_alloc = allocation_figure(allocation_frame(views))
left.plotly_chart(fig_alloc)
points = cost_em_points(bench, costs, views).replace({"name": POLICY_LABELS})
fig_plane = cost_em_figure(points, log_x=st.session_state.get("plane_log", False))
right.plotly_chart(fig_plane)
right.checkbox("log GFLOPs axis", key="plane_log", help="the hull is straight in linear cost only")
figures = {"Allocation ratios": fig_alloc, "Cost–EM plane": fig_plane}

st.subheader("β₁ sweep")
st.caption("BENCHMARK.md β₁ points, β_j from the GFLOPs rule, α as set in the sidebar.")
frames = []
if mode in ("Reweight", "Both"):
    frames.append(sweep(dataset, pool, "plugin", alpha))
if mode in ("Retrain", "Both"):
    done, setting = st.session_state.setdefault("_sdl_sweeps", set()), (dataset, pool, alpha)
    if setting in done or st.button("Train the Retrain sweep (7 SDL rejectors)", key="sweep_retrain"):
        with shown_errors():
            frames.append(train_sweep(dataset, pool, alpha))
        done.add(setting)
    else:
        st.info("The Retrain sweep trains one SDL rejector per β₁ (about 20 s each, cached on disk).")
if frames:
    sweep_figs = sweep_figures(pd.concat(frames, ignore_index=True), beta1 if rule else None)
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
c1.code(costs.to_json(), language="json")
c2.file_uploader("Load a cost setting (JSON)", type=["json"], key="cost_upload", on_change=load_upload)
if err := st.session_state.pop("cost_upload_error", None):
    c2.error(f"InvalidCostError: {err}")
c3.download_button(
    "Charts (HTML, works offline)",
    lambda: figures_html(figures, f"Cost explorer — {dataset} {pool}"),
    f"cost_explorer_{dataset}_{pool}.html",
    "text/html",
    key="download_html",
    on_click="ignore",
    icon=":material/download:",
)
c3.caption("PNG export needs kaleido, which is not installed; the HTML keeps the charts interactive.")
