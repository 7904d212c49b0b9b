"""Plotly figures of the router benchmark's report (and of the comparison page), drawn with
``plotly.express`` on the long frames of :mod:`.frames` (``graph_objects`` only for overlays:
hulls, reference lines).

From a results dict (the report; the paper's Fig. 2 and 3): :func:`cost_em_figure`,
:func:`tdl_figure`, :func:`em_beta_figure`, :func:`allocation_figure`, :func:`pgr_figure` and
:func:`figures`, all of them by file stem, and :func:`figures_html` (one offline page). The
dashboard's own live charts are Altair (:mod:`.charts`). Legends show human names
(:func:`~.frames.router_label`), never column names.
"""

from __future__ import annotations

import html
import math

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

from ..evaluation import metrics as M
from .frames import (
    TDL_CURVES,
    agent_colors,
    allocation_frame,
    interval,
    pgr_frame,
    pgr_refs,
    points_frame,
    router_colors,
    router_label,
    tdl_frame,
)

# fmt: off
__all__ = [
    "cost_em_figure", "tdl_figure", "em_beta_figure", "allocation_figure", "pgr_figure", "figures",
    "figures_html",
]
# fmt: on

_WIDTH, _HEIGHT = 1000, 600
# Axis, hover and legend titles of the frames' columns (the others are words already).
_LABELS = dict(label="router", beta="β₁", beta1="β₁", gflops="GFLOPs/query", em="EM %", em_std="EM std")
_LABELS.update(gflops_per_em="GFLOPs/EM", share="share of queries", pgr="PGR", loss="TDL", curve="TDL of")
_LABELS.update(panel="panel", err="± std over seeds", value="value")


def _layout(fig: go.Figure, title: str) -> go.Figure:
    legend = dict(font=dict(size=10))
    return fig.update_layout(
        title=title, template="plotly_white", width=_WIDTH, height=_HEIGHT, legend=legend
    )


def _subtitle(results: dict) -> str:
    return (
        f"{results.get('dataset', '?')} {results.get('pool', '?')}, "
        f"{results.get('n_test', '?')} test questions, seeds {results.get('seeds', '?')}"
    )


def _label_colors(results: dict) -> dict[str, str]:
    return {router_label(rid): c for rid, c in router_colors(results).items()}


# --- the report's figures (from a results dict) -------------------------------------------------


def cost_em_figure(results: dict, log_x: bool = True) -> go.Figure:
    """The cost–EM plane: every router's points and non-decreasing upper hull (what AIQ
    integrates), the agents, the oracle and the zero router's hull, on a log GFLOPs axis."""
    pts = points_frame(results).dropna(subset=["gflops", "em"])
    colors, routed = _label_colors(results), pts[pts["kind"] != "agent"]
    hover = dict(
        hover_name="label", hover_data={"label": False, "gflops": ":.2f", "em": ":.2f", "beta": True}
    )
    kw = dict(x="gflops", y="em", color="label", color_discrete_map=colors, labels=_LABELS, **hover)
    sweep, dense = px.scatter(routed[~routed["dense"]], **kw), px.scatter(routed[routed["dense"]], **kw)
    sweep.update_traces(marker=dict(size=8, opacity=0.85))
    dense.update_traces(marker=dict(size=4, opacity=0.45), showlegend=False)
    hulls = []
    for (rid, label), g in routed.groupby(["router", "label"], sort=False):
        hx, hy = M.upper_hull(g["gflops"].to_numpy(float), g["em"].to_numpy(float))
        if len(hx) > 1:
            line = dict(color=colors[label], width=2, dash="dash" if rid == "zero" else "solid")
            hulls.append(go.Scatter(x=hx, y=hy, mode="lines", line=line, name=label, legendgroup=label))
            sweep.update_traces(showlegend=False, selector=dict(name=label))
    fig = go.Figure(data=[*hulls, *sweep.data, *dense.data])
    agents = pts[pts["kind"] == "agent"].drop_duplicates("router")
    if len(agents):
        left = agents["gflops"].min()
        fig.add_traces(
            px.scatter(agents, x="gflops", y="em", text="label", hover_name="label", labels=_LABELS)
            .update_traces(
                marker=dict(symbol="diamond", size=14, color="#222222"),
                textposition=["bottom right" if x <= left else "bottom left" for x in agents["gflops"]],
                name="agents",
                showlegend=True,
            )
            .data
        )
    lo_hi = interval(results.get("gflops_range"))
    if lo_hi:
        fig.add_vrect(x0=lo_hi[0], x1=lo_hi[1], fillcolor="grey", opacity=0.05, line_width=0)
    fig.update_xaxes(title="mean GFLOPs / query (rejector included)", type="log" if log_x else "linear")
    fig.update_yaxes(title="EM %")
    return _layout(fig, f"Cost–EM plane, every router and its upper hull — {_subtitle(results)}")


def tdl_figure(results: dict) -> go.Figure:
    """TDL over β₁ per router (the zero router: the best single agent's) against uniform random
    allocation (black, dashed) and, for the L2D routers, random allocation with the router's own
    shares (dotted, the router's colour) — the paper's Fig. 2."""
    t, colors = tdl_frame(results), _label_colors(results)
    betas = [f"{b:g}" for b in results.get("beta_points") or []]
    own = t[(t["curve"] == TDL_CURVES["router"]) & (t["kind"] != "agent") & (t["router"] != "random")]
    fig = px.line(
        own, x="beta", y="tdl", color="label", markers=True, color_discrete_map=colors, labels=_LABELS
    )
    ours = set(own.loc[own["kind"] == "ours", "label"])
    fig.for_each_trace(lambda tr: tr.update(line_width=3 if tr.name in ours else 1.5))
    uniform = t[t["curve"] == TDL_CURVES["uniform"]]
    if len(uniform):
        line = dict(color="black", width=3, dash="dash")
        ref = go.Scatter(x=uniform["beta"], y=uniform["tdl"], mode="lines+markers", line=line)
        fig = go.Figure(data=[ref.update(name=TDL_CURVES["uniform"]), *fig.data], layout=fig.layout)
    matched = t[(t["curve"] == TDL_CURVES["matched"]) & (t["kind"] == "ours")]
    for label, g in matched.groupby("label", sort=False):
        fig.add_scatter(
            x=g["beta"],
            y=g["tdl"],
            mode="lines",
            line=dict(color=colors[label], dash="dot", width=1.5),
            name=f"{label}: {TDL_CURVES['matched']}",
            legendgroup=label,
        )
    fig.update_xaxes(title="β₁ (β_j by the GFLOPs rule)", type="category", categoryarray=betas)
    fig.update_yaxes(title="mean TDL (lower is better)")
    fig = _layout(fig, f"TDL vs random allocation over β₁ (paper Fig. 2) — {_subtitle(results)}")
    return fig.update_layout(height=700)


def em_beta_figure(results: dict) -> go.Figure:
    """EM and GFLOPs/EM over β₁ (the paper's Fig. 3), the agents alone as flat dotted lines."""
    pts = points_frame(results)
    pts = pts[pts["sweep"] & pts["em"].notna()].sort_values("beta1", kind="stable")
    titles = ("EM % vs β₁", "GFLOPs/EM vs β₁ (log)")
    long = pd.concat(
        [
            pts.assign(panel=titles[0], value=pts["em"], err=pts["em_std"].fillna(0.0)),
            pts.assign(panel=titles[1], value=pts["gflops_per_em"], err=0.0),
        ]
    )
    order = {"panel": list(titles), "beta": sorted(set(pts["beta"]), key=float)}
    kw = dict(color="label", color_discrete_map=_label_colors(results), category_orders=order, labels=_LABELS)
    facets = dict(facet_col="panel", facet_col_spacing=0.1)
    fig = px.line(long, x="beta", y="value", error_y="err", markers=True, **facets, **kw)
    agents = set(pts.loc[pts["kind"] == "agent", "label"])
    for tr in fig.data:
        err = tr.error_y.array
        tr.error_y.visible = err is not None and any(e for e in err)
        if tr.name in agents:
            tr.update(mode="lines", line=dict(dash="dot", width=1))
        else:
            tr.update(line_width=2)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1]))
    fig.update_xaxes(title="β₁", type="category")
    fig.update_yaxes(matches=None, showticklabels=True)
    fig.update_yaxes(title="EM %", col=1)
    fig.update_yaxes(title="GFLOPs / EM", type="log", col=2)
    return _layout(fig, f"Accuracy and compute over β₁ (paper Fig. 3) — {_subtitle(results)}")


def allocation_figure(results: dict) -> go.Figure:
    """Allocation over β₁, stacked per agent, one panel per learned router (and the oracle)."""
    alloc = allocation_frame(results)
    title = f"Allocation over β₁ (x: β₁, one panel per router) — {_subtitle(results)}"
    if alloc.empty:
        fig = go.Figure().add_annotation(text="no learned router", showarrow=False, x=0.5, y=0.5)
        return _layout(fig.update_xaxes(visible=False).update_yaxes(visible=False), title)
    panels = list(dict.fromkeys(alloc["label"]))
    cols = min(4, len(panels))
    rows = math.ceil(len(panels) / cols)
    order = {"label": panels, "agent": list(results.get("agents") or [])}
    kw = dict(color="agent", color_discrete_map=agent_colors(results), category_orders=order, labels=_LABELS)
    facets = dict(facet_col="label", facet_col_wrap=cols, facet_row_spacing=0.3 / rows)
    fig = px.bar(alloc, x="beta", y="share", **facets, **kw)
    fig.for_each_annotation(lambda a: a.update(text=a.text.split("=", 1)[-1]))
    fig.update_layout(barmode="stack")
    fig.update_xaxes(type="category", tickangle=0, tickfont=dict(size=9), showticklabels=True)
    fig.update_yaxes(tickformat=".0%", range=[0, 1.0001])
    return _layout(fig, title).update_layout(height=max(_HEIGHT, 300 * rows))


def pgr_figure(results: dict) -> go.Figure | None:
    """PGR against the share of calls to a non-main agent, per router (the curve APGR averages,
    points as markers), with random mixing (the diagonal); None without two distinct agent EMs."""
    refs = pgr_refs(results)
    if refs is None:
        return None
    weak, strong = refs[:2]
    g, colors = pgr_frame(results), _label_colors(results)
    kw = dict(x="share", y="pgr", color="label", color_discrete_map=colors, labels=_LABELS)
    curves = px.line(g[g["curve"]], **kw)
    points = px.scatter(g[~g["curve"]], **kw).update_traces(marker_size=5, showlegend=False)
    diag = go.Scatter(
        x=[0, 1],
        y=[0, 1],
        mode="lines",
        line=dict(color="black", dash="dash"),
        name=f"random mixing {weak} / {strong}",
    )
    fig = go.Figure(data=[diag, *curves.data, *points.data])
    fig.update_xaxes(title=f"share of queries not sent to {weak}", range=[0, 1], tickformat=".0%")
    fig.update_yaxes(title=f"PGR (EM between {weak} and {strong})")
    return _layout(fig, f"Performance gap recovered vs share of expert calls — {_subtitle(results)}")


def figures(results: dict) -> dict[str, go.Figure]:
    """Every figure of the report by file stem (PGR only when it is defined)."""
    out = {
        "cost_em": cost_em_figure(results),
        "tdl_vs_beta": tdl_figure(results),
        "em_gflops_per_em_vs_beta": em_beta_figure(results),
        "allocation_vs_beta": allocation_figure(results),
    }
    pgr = pgr_figure(results)
    if pgr is not None:
        out["pgr_vs_share"] = pgr
    return out


def figures_html(figs: dict, title: str) -> str:
    """One standalone HTML page with every figure (plotly.js embedded once: works offline).

    >>> page = figures_html({"a": go.Figure()}, "T & U")
    >>> page.startswith("<!DOCTYPE html>") and "<h1>T &amp; U</h1>" in page and page.count("<h2>") == 1
    True
    """
    parts = [
        f"<h2>{html.escape(name)}</h2>" + fig.to_html(full_html=False, include_plotlyjs=(k == 0))
        for k, (name, fig) in enumerate(figs.items())
    ]
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
        f"<body><h1>{html.escape(title)}</h1>{''.join(parts)}</body></html>"
    )
