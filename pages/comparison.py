"""Router comparison: cost–EM curves, AIQ / APGR and TDL of every router on a pool."""

from pathlib import Path

import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from l2d_core.comparison import hull_frame, points_frame, summary_frame, tdl_frame
from pages.common import (
    comparison_files,
    comparison_results,
    figures_html,
    run_pool_comparison,
    select_pool,
    shown_errors,
)

st.title("Router comparison")
st.caption(
    "Every router on the test articles: the L2D rejectors (SDL, plug-in, post-hoc) over the β₁ sweep, "
    "the baselines (Hybrid-LLM r-det / r-prob / r-trans, kNN and MLP quality routers, majority-vote "
    "ensemble), random allocation, the zero router (random mixing of single agents), the oracle and "
    "each agent alone. "
    "AIQ: area under the router's non-decreasing convex hull of (GFLOPs, EM) over the agents' GFLOPs "
    "range, divided by it (RouterBench; zero left of the router's cheapest point). APGR: mean "
    "performance gap recovered over the share of calls to experts (RouteLLM; with J+1 agents: calls "
    "to any expert, gap from the main agent to the best one)."
)
dataset, pool = select_pool()

if st.button(f"Run comparison for this pool ({dataset} {pool})", key="cmp_run"):
    with st.status(f"Comparing routers on {dataset} {pool}…", expanded=True) as box:
        with shown_errors():
            saved = run_pool_comparison(dataset, pool, progress=box.write)
        box.update(label=f"Saved {saved}", state="complete", expanded=False)
    st.session_state["cmp_file"] = str(saved)

files = [str(p) for p in comparison_files()]
if not files:
    st.info(
        "No results yet: press **Run comparison for this pool** (one seed, a few minutes the first "
        "time; trained routers are cached on disk), or run `python scripts/benchmark_routers.py` "
        "(five seeds, report and plots) into `reports/<name>/`."
    )
    st.stop()
mine = next((f for f in files if Path(f).parent.name == f"{dataset}-{pool}"), None)
if mine is None:
    st.info(f"No results for {dataset} {pool} yet (press the button above); other results are listed.")
    mine = files[0]
if st.session_state.get("cmp_file") not in files or st.session_state.get("cmp_for") != (dataset, pool):
    st.session_state["cmp_file"] = mine  # a pool change shows that pool's results when there are any
st.session_state["cmp_for"] = (dataset, pool)
path = st.selectbox("Results file", files, key="cmp_file", format_func=lambda f: Path(f).parent.name)
with shown_errors():
    res = comparison_results(path, Path(path).stat().st_mtime)
st.caption(
    f"`{path}` — {res.get('dataset')} {res.get('pool')}: {' → '.join(res.get('agents', []))}; "
    f"{res.get('n_test')} test questions; seeds {res.get('seeds')}; created {res.get('created')}"
)

pts, hulls = points_frame(res), hull_frame(res)
lo, hi = res["gflops_range"]
colors = dict(zip(res["routers"], px.colors.qualitative.D3 * 3))
log_x = st.toggle("Log GFLOPs axis", key="cmp_log")
fig = go.Figure()
for rid, d in pts.groupby("router", sort=False):
    single = rid.startswith("agent:") or rid == "random"
    fig.add_trace(
        go.Scatter(
            x=d["gflops"],
            y=d["em"],
            name=rid,
            legendgroup=rid,
            mode="markers",
            marker=dict(size=12 if single else 6, color=colors[rid], opacity=0.9 if single else 0.6),
            customdata=d[["beta1"]],
            hovertemplate=rid + "<br>%{x:.1f} GFLOPs, EM %{y:.2f}<br>β₁ = %{customdata[0]}<extra></extra>",
        )
    )
    h = hulls[hulls["router"] == rid]
    if len(h) > 1:
        fig.add_trace(
            go.Scatter(
                x=h["gflops"],
                y=h["em"],
                name=f"{rid} hull",
                legendgroup=rid,
                showlegend=False,
                mode="lines",
                line=dict(color=colors[rid], dash="dash" if rid == "zero" else "solid"),
                hoverinfo="skip",
            )
        )
fig.add_vrect(x0=lo, x1=hi, fillcolor="grey", opacity=0.05, line_width=0)
fig.update_layout(
    title="Cost–EM on the test articles (lines: each router's upper convex hull, what AIQ integrates)",
    xaxis_title="mean GFLOPs / query",
    yaxis_title="EM %",
    height=540,
    xaxis_type="log" if log_x else "linear",
)
st.plotly_chart(fig, key="cmp_plane")

st.subheader("AIQ and APGR")
summary = summary_frame(res)
st.dataframe(
    summary,
    hide_index=True,
    column_config={
        c: st.column_config.NumberColumn(format="%.3f")
        for c in summary.columns
        if c not in ("router", "points")
    },
)
figures = {"Cost–EM": fig}
if res.get("agents") and len(res["agents"]) == 2 and pts["share_strong"].notna().any():
    pg = pts.dropna(subset=["share_strong"]).sort_values(["router", "share_strong"])
    fig_pgr = px.line(
        pg,
        x="share_strong",
        y="pgr",
        color="router",
        color_discrete_map=colors,
        markers=True,
        labels={"share_strong": f"share of calls to {res['agents'][1]}", "pgr": "PGR"},
        title="Performance gap recovered vs share of strong calls",
    )
    st.plotly_chart(fig_pgr, key="cmp_pgr")
    figures["PGR"] = fig_pgr

st.subheader("TDL vs β₁")
td = tdl_frame(res)
fig_tdl = px.line(
    td,
    x="beta1",
    y="tdl",
    color="router",
    color_discrete_map=colors,
    markers=True,
    labels={"beta1": "β₁", "tdl": "mean TDL"},
    title="True deferral loss over the β₁ sweep (random = uniform random allocation)",
)
st.plotly_chart(fig_tdl, key="cmp_tdl")
figures["TDL vs β₁"] = fig_tdl
st.download_button(
    "Download plots (HTML)",
    figures_html(figures, f"Router comparison {Path(path).parent.name}"),
    file_name=f"router-comparison-{Path(path).parent.name}.html",
    mime="text/html",
    key="cmp_html",
)
