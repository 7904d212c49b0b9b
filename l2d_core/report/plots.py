"""The router benchmark's report figures (and the comparison page's), Altair charts built on the
dashboard's own (:mod:`.charts`: the same cost–EM plane, sweep lines, colour scales and hull of
random mixing) from the long frames of :mod:`.frames`.

From a results dict (the report; the paper's Fig. 2 and 3): :func:`cost_em_figure`,
:func:`tdl_figure`, :func:`em_beta_figure`, :func:`allocation_figure`, :func:`pgr_figure` and
:func:`figures`, all of them by file stem. Written out: :func:`figure_html` (a page that loads
the Vega scripts from :data:`VEGA_SCRIPT` beside it, written once: :func:`vega_script`; works
offline), :func:`figure_png` (vl-convert: no browser) and :func:`figures_html` (one standalone
page). Legends show human names (:func:`~.frames.router_label`), never column names.
"""

from __future__ import annotations

import html
import json

import altair as alt
import pandas as pd

from ..evaluation import metrics as M
from ..evaluation.results import Results
from .charts import charts_html, color_scale, legend, plane_chart, sweep_charts
from .frames import (
    REFERENCE_COLORS,
    TDL_CURVES,
    agent_colors,
    allocation_frame,
    interval,
    pgr_frame,
    pgr_refs,
    points_frame,
    router_colors,
    router_label,
    router_role,
    tdl_frame,
)
from .requests import request_accuracy_figure

# fmt: off
__all__ = [
    "cost_em_figure", "tdl_figure", "em_beta_figure", "allocation_figure", "pgr_figure", "figures",
    "figures_html", "figure_html", "figure_png", "vega_script", "VEGA_SCRIPT",
]
# fmt: on

_WIDTH, _HEIGHT = 760, 420
VEGA_SCRIPT = "vega-embed.js"  # Vega, Vega-Lite and vega-embed in one file, beside the HTML figures
_PNG_FONT = "DejaVu Sans"
_BETA_TITLE = "β₁ (β_j by the GFLOPs rule)"
_TDL_DASHES = {TDL_CURVES["router"]: [1, 0], TDL_CURVES["matched"]: [2, 2], TDL_CURVES["uniform"]: [6, 4]}


def _title(text: str, results: Results) -> alt.Title:
    sub = (
        f"{results.get('dataset', '?')} {results.get('pool', '?')}, "
        f"{results.get('n_test', '?')} test questions, seeds {results.get('seeds', '?')}"
    )
    return alt.Title(text, subtitle=sub, anchor="start")


def _label_colors(results: Results) -> dict[str, str]:
    return {router_label(rid): c for rid, c in router_colors(results).items()}


def _betas(keys) -> list[str]:
    """β₁ keys in numeric order (the x axis of the sweeps)."""
    return sorted(set(keys), key=float)


def _dummy(text: str, title: alt.Title) -> alt.Chart:
    """A chart that says why it is empty."""
    data = pd.DataFrame({"text": [text]})
    return alt.Chart(data).mark_text(fontSize=14).encode(text="text:N").properties(title=title, width=_WIDTH)


# --- the report's figures (from a results dict) -------------------------------------------------


def cost_em_figure(results: Results, log_x: bool = True) -> alt.LayerChart:
    """The cost–EM plane (:func:`~.charts.plane_chart`): every router's points and non-decreasing
    upper hull (what AIQ integrates), the agents, the zero router's hull (random mixing of the
    agents) dotted, and the agents' GFLOPs range shaded; a log GFLOPs axis by default."""
    pts = points_frame(results).dropna(subset=["gflops", "em"])
    agents = pts[pts["kind"] == "agent"].drop_duplicates("router")
    floor = pts["router"].map(router_role, na_action="ignore") == "floor"  # the zero router: the agents' hull
    zero = pts[floor]
    hull = zero.assign(kind="hull")[["label", "kind", "gflops", "em"]]
    if len(zero):
        hx, hy = M.upper_hull(zero["gflops"].to_numpy(float), zero["em"].to_numpy(float))
        hull = pd.DataFrame({"label": zero["label"].iloc[0], "kind": "hull", "gflops": hx, "em": hy})
    marks = pd.concat([agents[["label", "kind", "gflops", "em"]], hull], ignore_index=True)
    routed = pts[(pts["kind"] != "agent") & ~floor]
    curves = routed.rename(columns={"label": "name", "beta": "β₁"})[["name", "gflops", "em", "dense", "β₁"]]
    return plane_chart(
        marks.rename(columns={"label": "name"}),
        log_x=log_x,
        curves=curves,
        colors=_label_colors(results),
        band=interval(results.get("gflops_range")),
        title=_title("Cost–EM plane, every router and its upper hull", results),
    ).properties(width=_WIDTH, height=_HEIGHT)


def tdl_figure(results: Results) -> alt.LayerChart:
    """TDL over β₁ per router (the zero router: the best single agent's), colour by router, dash
    by policy: the router's own, uniform random allocation (the random router's grey) and, for the
    L2D routers, random allocation with the router's own shares — the paper's Fig. 2."""
    t = tdl_frame(results)
    own = (
        (t["curve"] == TDL_CURVES["router"])
        & (t["kind"] != "agent")
        & (t["router"].map(router_role, na_action="ignore") != "chance")
    )
    keep = (
        own
        | (t["curve"] == TDL_CURVES["uniform"])
        | ((t["curve"] == TDL_CURVES["matched"]) & (t["kind"] == "ours"))
    )
    t = t[keep].assign(width=lambda d: d["kind"].map({"ours": 3.0, "reference": 2.5}).fillna(1.5))
    t = t.drop(columns=["router", "kind"])
    colors = {**_label_colors(results), TDL_CURVES["uniform"]: REFERENCE_COLORS["chance"]}
    x = alt.X("beta:O", title=_BETA_TITLE, sort=_betas(t["beta"]), axis=alt.Axis(labelAngle=0))
    y = alt.Y("tdl:Q", title="mean TDL (lower is better)", scale=alt.Scale(zero=False))
    color = alt.Color(
        "label:N",
        title="router",
        scale=color_scale(colors, t["label"]),
        legend=legend(t["label"].nunique(), 320),
    )
    dash = alt.StrokeDash(
        "curve:N",
        title="policy",
        scale=alt.Scale(domain=list(_TDL_DASHES), range=list(_TDL_DASHES.values())),
        legend=alt.Legend(symbolType="stroke", symbolStrokeColor="black", symbolStrokeWidth=2),
    )
    tip = [
        alt.Tooltip("label:N", title="router"),
        alt.Tooltip("curve:N", title="policy"),
        alt.Tooltip("beta:O", title="β₁"),
        alt.Tooltip("tdl:Q", title="TDL", format=".4f"),
    ]
    base = alt.Chart(t).encode(x=x, y=y, color=color, tooltip=tip)
    lines = base.mark_line().encode(strokeDash=dash, strokeWidth=alt.StrokeWidth("width:Q", scale=None))
    chart = alt.layer(lines, base.mark_point(filled=True, size=30, opacity=1))
    title = _title("TDL vs random allocation over β₁ (paper Fig. 2)", results)
    return chart.properties(title=title, width=_WIDTH, height=_HEIGHT)


def em_beta_figure(results: Results) -> alt.HConcatChart | alt.Chart:
    """EM (± std over seeds) and GFLOPs/EM (log) over β₁ per router (the paper's Fig. 3): the
    dashboard's sweep charts (:func:`~.charts.sweep_charts`), the agents alone as labelled
    horizontal reference lines."""
    pts = points_frame(results)
    pts = pts[pts["sweep"] & pts["em"].notna()].sort_values("beta1", kind="stable")
    routed, agents = pts[pts["kind"] != "agent"], pts[pts["kind"] == "agent"].drop_duplicates("router")
    routed = routed.drop(columns="router").rename(columns={"label": "router"})
    title = _title("Accuracy and compute over β₁ (paper Fig. 3)", results)
    if routed.empty:
        return _dummy("no router with a β₁ sweep", title)
    colors = _label_colors(results)
    frame = routed[["beta1", "router", "em", "gflops_per_em"]]
    charts = sweep_charts(frame, "beta1", _BETA_TITLE, colors, ordinal=True)
    em, cost = charts[f"EM vs {_BETA_TITLE}"], charts[f"GFLOPs/EM vs {_BETA_TITLE}"]
    log_y = alt.Y("gflops_per_em:Q", title="GFLOPs per EM point (log scale)", scale=alt.Scale(type="log"))
    cost = cost.encode(y=log_y)
    em = em.encode(y=alt.Y("em:Q", title="EM %", scale=alt.Scale(zero=False)))
    spread = routed.assign(lo=routed["em"] - routed["em_std"], hi=routed["em"] + routed["em_std"])
    spread = spread[spread["em_std"] > 0][["beta1", "router", "lo", "hi"]]
    bars = (
        alt.Chart(spread)
        .mark_errorbar(ticks=True)
        .encode(
            x="beta1:O",
            y=alt.Y("lo:Q", title="EM %"),
            y2="hi:Q",
            color=alt.Color("router:N", scale=color_scale(colors, frame["router"])),
        )
    )
    panels = [
        alt.layer(em, bars, _agent_levels(agents, "em")).properties(title="EM % vs β₁ (± std over seeds)"),
        alt.layer(cost, _agent_levels(agents, "gflops_per_em")).properties(title="GFLOPs/EM vs β₁ (log)"),
    ]
    panels = [p.properties(width=_WIDTH // 2 - 40, height=_HEIGHT) for p in panels]
    return alt.hconcat(*panels, title=title).resolve_scale(y="independent")


def _agent_levels(agents: pd.DataFrame, field: str) -> alt.LayerChart:
    """Each single agent's value as a dotted grey horizontal line labelled with its name."""
    data = agents.dropna(subset=[field]).rename(columns={"label": "agent", field: "level"})[
        ["agent", "level"]
    ]
    y = alt.Y("level:Q")
    rule = (
        alt.Chart(data).mark_rule(strokeDash=[2, 3], color="gray").encode(y=y, tooltip=["agent:N", "level:Q"])
    )
    text = alt.Chart(data).mark_text(align="left", dx=4, dy=-6, color="gray", x=0).encode(y=y, text="agent:N")
    return alt.layer(rule, text)


def allocation_figure(results: Results) -> alt.FacetChart | alt.Chart:
    """Allocation over β₁, stacked per agent, one panel per learned router (and the oracle)."""
    alloc = allocation_frame(results)
    title = _title("Allocation over β₁ (x: β₁, one panel per router)", results)
    if alloc.empty:
        return _dummy("no learned router", title)
    panels = list(dict.fromkeys(alloc["label"]))
    agents = list(dict.fromkeys([*(results.get("agents") or []), *alloc["agent"]]))
    data = alloc.drop(columns="router").assign(order=alloc["agent"].map(agents.index))
    bars = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("beta:O", title="β₁", sort=_betas(data["beta"]), axis=alt.Axis(labelAngle=0)),
            y=alt.Y(
                "share:Q",
                title="share of questions",
                axis=alt.Axis(format=".0%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color(
                "agent:N", title="answered by", sort=agents, scale=color_scale(agent_colors(results), agents)
            ),
            order=alt.Order("order:Q"),
            tooltip=[
                alt.Tooltip("label:N", title="router"),
                alt.Tooltip("beta:O", title="β₁"),
                alt.Tooltip("agent:N", title="answered by"),
                alt.Tooltip("share:Q", title="share", format=".1%"),
            ],
        )
        .properties(width=170, height=200)
    )
    facet = alt.Facet("label:N", title=None, sort=panels, header=alt.Header(labelLimit=200))
    return bars.facet(facet=facet, columns=min(4, len(panels)), title=title)


def pgr_figure(results: Results) -> alt.LayerChart | None:
    """PGR against the share of calls to a non-main agent, per router (the curve APGR averages,
    points as markers), with random mixing (the diagonal); None without two distinct agent EMs."""
    refs = pgr_refs(results)
    if refs is None:
        return None
    weak, strong = refs[:2]
    g = pgr_frame(results).drop(columns="router")
    diag_name = f"random mixing {weak} / {strong}"
    colors = {**_label_colors(results), diag_name: "#7f7f7f"}  # grey: the plane's random mixing
    names = [diag_name, *g["label"]]
    x = alt.X(
        "share:Q", title=f"share of queries not sent to {weak}", axis=alt.Axis(format=".0%", tickCount=10)
    )
    x = x.scale(domain=[0, 1])
    y = alt.Y("pgr:Q", title=f"PGR (EM between {weak} and {strong})")
    color = alt.Color(
        "label:N", title="router", scale=color_scale(colors, names), legend=legend(len(set(names)), 320)
    )
    diag = pd.DataFrame({"share": [0.0, 1.0], "pgr": [0.0, 1.0], "label": diag_name})
    tip = [
        alt.Tooltip("label:N", title="router"),
        alt.Tooltip("share:Q", format=".1%"),
        alt.Tooltip("pgr:Q", title="PGR", format=".3f"),
    ]
    layers = [
        alt.Chart(diag).mark_line(strokeDash=[6, 4]).encode(x=x, y=y, color=color),
        alt.Chart(g[g["curve"]]).mark_line().encode(x=x, y=y, color=color, tooltip=tip),
        alt.Chart(g[~g["curve"]]).mark_point(filled=True, size=30).encode(x=x, y=y, color=color, tooltip=tip),
    ]
    title = _title("Performance gap recovered vs share of expert calls", results)
    return alt.layer(*layers).properties(title=title, width=_WIDTH, height=_HEIGHT)


def figures(results: Results) -> dict[str, alt.TopLevelMixin]:
    """Every figure of the report by file stem (PGR only when it is defined; the request–accuracy
    plot when the pool has a remote agent)."""
    out = {
        "cost_em": cost_em_figure(results),
        "tdl_vs_beta": tdl_figure(results),
        "em_gflops_per_em_vs_beta": em_beta_figure(results),
        "allocation_vs_beta": allocation_figure(results),
    }
    pgr = pgr_figure(results)
    if pgr is not None:
        out["pgr_vs_share"] = pgr
    requests = request_accuracy_figure(results)
    if requests is not None:
        out["request_accuracy"] = requests
    return out


# --- written out --------------------------------------------------------------------------------


def vega_script() -> str:
    """Vega, Vega-Lite (the version Altair writes) and vega-embed in one script (vl-convert's
    bundle: no network), to write once as :data:`VEGA_SCRIPT` beside :func:`figure_html` pages."""
    import vl_convert
    from altair.utils._importers import vl_version_for_vl_convert

    return vl_convert.javascript_bundle(vl_version=vl_version_for_vl_convert())


def figure_html(chart: alt.TopLevelMixin, title: str, script: str = VEGA_SCRIPT) -> str:
    """A page drawing one chart with the scripts of ``script`` (a path relative to the page).

    >>> page = figure_html(alt.Chart(pd.DataFrame({"a": [1]})).mark_point().encode(x="a:Q"), "T & U")
    >>> page.startswith("<!DOCTYPE html>") and "<title>T &amp; U</title>" in page and VEGA_SCRIPT in page
    True
    """
    spec = json.dumps(chart.to_dict()).replace("</", "<\\/")
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<script src='{html.escape(script)}'></script></head><body><div id='vis'></div>"
        f"<script>vegaEmbed('#vis', {spec}).catch(console.error);</script></body></html>"
    )


def figure_png(chart: alt.TopLevelMixin, scale: float = 2.0) -> bytes:
    """A chart as PNG bytes (vl-convert renders it in-process: no browser). Text in DejaVu Sans
    where installed (it has β₁'s subscript; without it vl-convert sets such text in a serif)."""
    import vl_convert
    from altair.utils._importers import vl_version_for_vl_convert

    spec = chart.configure(font=_PNG_FONT).to_dict()
    return vl_convert.vegalite_to_png(spec, scale=scale, vl_version=vl_version_for_vl_convert())


def figures_html(figs: dict, title: str) -> str:
    """One standalone HTML page with every figure (:func:`~.charts.charts_html`: the Vega scripts
    inlined once, works offline)."""
    return charts_html(figs, title)
