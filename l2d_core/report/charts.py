"""Altair charts of the dashboard, from the frames it computes: the cost–EM plane
(:func:`plane_chart`), allocation bars (:func:`allocation_chart`), the sweep over a cost rule
(:func:`sweep_charts`, marked by :func:`mark_setting`) and one query's expected cost per agent
(:func:`compared_chart`); :func:`charts_html` writes them into one page that works offline.

Why Altair on the pages: a browser draws a Vega-Lite chart with about 0.8 MB of script against
Plotly's 4.7 MB, which a new session has to load and compile before the page's first chart (the
benchmark's report keeps its Plotly figures: they are files, not pages). Legends and axes show
human names, never column names.

>>> import pandas as pd
>>> c = allocation_chart(pd.DataFrame({"router": ["SDL", "SDL"], "agent": ["a", "b"], "share": [0.7, 0.3]}))
>>> spec = c.to_dict()
>>> spec["encoding"]["y"]["axis"]["format"], spec["encoding"]["xOffset"]["field"]
('.0%', 'router')
"""

from __future__ import annotations

import html

import altair as alt
import numpy as np
import pandas as pd

from .frames import TDL_CURVES

__all__ = [
    "plane_chart",
    "allocation_chart",
    "sweep_charts",
    "mark_setting",
    "compared_chart",
    "charts_html",
]

_HEIGHT = 360
# A five-pointed star as an SVG path (Vega's own symbols have none): the current operating points.
_STAR = (
    "M0,-1L0.22,-0.31L0.95,-0.31L0.36,0.12L0.59,0.81L0,0.38L-0.59,0.81L-0.36,0.12L-0.95,-0.31L-0.22,-0.31Z"
)
_PLANE_MARKERS = {"agent": ("circle", 90), "baseline": ("diamond", 110), "router": (_STAR, 260)}
_PLANE_KINDS = {"agent": "single agent", "baseline": "reference router", "router": "router shown"}
_SWEEP_CURVES = {
    "tdl": TDL_CURVES["router"],
    "tdl_random": TDL_CURVES["uniform"],
    "tdl_random_matched": TDL_CURVES["matched"],
}


def _order(values) -> list:
    """Distinct values in the order they first appear (legend and axis order = the frame's)."""
    return list(dict.fromkeys(values))


def plane_chart(points: pd.DataFrame, log_x: bool = False) -> alt.LayerChart:
    """The cost–EM plane of a frame with columns name, kind (agent, hull, baseline, router),
    gflops, em: the hull (the zero router: mixing single agents at random) as a dotted line,
    agents as circles, reference routers as diamonds, the current operating points as stars.
    Text labels name agents and stars, alternately above and below in GFLOPs order so that
    neighbours do not overlap; every mark names itself on hover.

    >>> pts = pd.DataFrame({"name": ["a", "b", "zero router", "zero router", "oracle", "SDL"],
    ...     "kind": ["agent", "agent", "hull", "hull", "baseline", "router"],
    ...     "gflops": [1.0, 10.0, 1.0, 10.0, 3.0, 4.0], "em": [60.0, 80.0, 60.0, 80.0, 85.0, 75.0]})
    >>> [layer["mark"]["type"] for layer in plane_chart(pts).to_dict()["layer"]]
    ['line', 'point', 'text', 'text']
    """
    x_title = "GFLOPs per query" + (" (log scale)" if log_x else "")
    x = alt.X("gflops:Q", title=x_title, scale=alt.Scale(type="log" if log_x else "linear", zero=False))
    y = alt.Y("em:Q", title="EM %", scale=alt.Scale(zero=False))
    hull = points[points["kind"] == "hull"].sort_values("gflops")
    marks = points[points["kind"].isin(list(_PLANE_MARKERS))].copy()
    marks["shown as"] = marks["kind"].map(_PLANE_KINDS)
    marks["shape"] = marks["kind"].map(lambda k: _PLANE_MARKERS[k][0])
    marks["size"] = marks["kind"].map(lambda k: _PLANE_MARKERS[k][1])
    texted = marks[marks["kind"] != "baseline"].sort_values("gflops", kind="stable")
    texted = texted.assign(
        above=[k % 2 == 0 for k in range(len(texted))],
        tag=texted["name"]
        .str.split(" (", n=1, regex=False)
        .str[0],  # a router's short name; the legend has it all
    )
    tip = [
        alt.Tooltip("name:N", title="name"),
        alt.Tooltip("shown as:N"),
        alt.Tooltip("gflops:Q", title="GFLOPs per query", format=".2f"),
        alt.Tooltip("em:Q", title="EM %", format=".2f"),
    ]
    line = (
        alt.Chart(hull.assign(line="zero router (mixing single agents)"))
        .mark_line(strokeDash=[3, 3], color="gray")
        .encode(x=x, y=y, opacity=alt.Opacity("line:N", legend=alt.Legend(title=None, labelLimit=320)))
    )
    dots = (
        alt.Chart(marks)
        .mark_point(filled=True, opacity=0.9)
        .encode(
            x=x,
            y=y,
            shape=alt.Shape("shape:N", scale=None),
            size=alt.Size("size:Q", scale=None),
            color=alt.Color(
                "name:N", title="agent or router", sort=list(marks["name"]), legend=alt.Legend(labelLimit=320)
            ),
            tooltip=tip,
        )
    )
    labels = [
        alt.Chart(texted[texted["above"] == above])
        .mark_text(dy=-14 if above else 14, fontSize=11)
        .encode(x=x, y=y, text="tag:N")
        for above in (True, False)
    ]
    return alt.layer(line, dots, *labels).properties(title="Cost–EM plane", height=_HEIGHT)


def allocation_chart(frame: pd.DataFrame) -> alt.Chart:
    """Grouped bars of allocation ratios from a long frame with columns router, agent, share
    (a fraction; shown in %), one colour per router, agents in the frame's order."""
    agents = _order(frame["agent"])
    routers = _order(frame["router"])
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("agent:N", title="answered by", sort=agents, axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset("router:N", sort=routers),
            y=alt.Y("share:Q", title="share of questions", axis=alt.Axis(format=".0%")),
            color=alt.Color("router:N", sort=routers),
            tooltip=["router:N", "agent:N", alt.Tooltip("share:Q", title="share", format=".1%")],
        )
        .properties(title="Allocation ratios", height=_HEIGHT)
    )


def sweep_charts(frame: pd.DataFrame, x: str = "beta1", x_title: str = "β₁") -> dict[str, alt.Chart]:
    """EM, GFLOPs/EM, allocation and true-deferral-loss-against-random charts over a cost
    setting, from sweep frames of one or more routers (columns ``x`` — β₁ by default, or the
    per-TFLOP price — router, em, gflops_per_em, tdl, tdl_random, tdl_random_matched and
    ``share <agent>``), by title. Mark the current setting on them with :func:`mark_setting`.

    >>> f = pd.DataFrame({"beta1": [0.0, 0.5], "router": "SDL", "em": [80.0, 70.0],
    ...     "gflops_per_em": [1.0, 0.5], "tdl": [0.3, 0.4], "tdl_random": [0.5, 0.6],
    ...     "tdl_random_matched": [0.4, 0.5], "share a": [0.2, 0.9], "share b": [0.8, 0.1]})
    >>> list(sweep_charts(f))
    ['EM vs β₁', 'GFLOPs/EM vs β₁', 'Allocation vs β₁', 'Loss vs random routing over β₁']
    """
    share_cols = [c for c in frame.columns if c.startswith("share ")]
    shares = frame.melt([x, "router"], share_cols, "agent", "share")
    shares["agent"] = shares["agent"].str.removeprefix("share ")
    losses = frame.melt([x, "router"], [c for c in _SWEEP_CURVES if c in frame.columns], "curve", "loss")
    losses["curve"] = losses["curve"].map(_SWEEP_CURVES)
    routers = _order(frame["router"])
    by_router = alt.StrokeDash("router:N", sort=routers) if len(routers) > 1 else alt.Undefined

    def lines(data: pd.DataFrame, y: alt.Y, color: alt.Color, dash=alt.Undefined) -> alt.Chart:
        tip = [c for c in data.columns if c != "router" or len(routers) > 1]
        enc = dict(x=alt.X(f"{x}:Q", title=x_title), y=y, color=color, strokeDash=dash, tooltip=tip)
        return alt.Chart(data).mark_line(point=True).encode(**enc).properties(height=_HEIGHT * 3 // 4)

    router_color = alt.Color("router:N", sort=routers)
    charts = {
        f"EM vs {x_title}": lines(frame[[x, "router", "em"]], alt.Y("em:Q", title="EM %"), router_color),
        f"GFLOPs/EM vs {x_title}": lines(
            frame[[x, "router", "gflops_per_em"]],
            alt.Y("gflops_per_em:Q", title="GFLOPs per EM point"),
            router_color,
        ),
        f"Allocation vs {x_title}": lines(
            shares,
            alt.Y("share:Q", title="share of questions", axis=alt.Axis(format=".0%")),
            alt.Color("agent:N", title="answered by", sort=_order(shares["agent"])),
            by_router,
        ),
        f"Loss vs random routing over {x_title}": lines(
            losses,
            alt.Y("loss:Q", title="deferral loss per question"),
            alt.Color("curve:N", title="policy", sort=list(_SWEEP_CURVES.values())),
            by_router,
        ),
    }
    return {name: chart.properties(title=name) for name, chart in charts.items()}


def mark_setting(charts: dict[str, alt.Chart], x: float) -> dict[str, alt.LayerChart]:
    """The charts with a dashed grey vertical line at ``x`` layered on (the charts given are
    left as they are, so a cached set can be marked again)."""
    rule = alt.Chart(pd.DataFrame({"x": [x]})).mark_rule(strokeDash=[5, 4], color="gray").encode(x="x:Q")
    return {name: alt.layer(chart, rule) for name, chart in charts.items()}


def compared_chart(compared: dict, chosen: str, labels: dict | None = None) -> alt.Chart:
    """What decided one query, per agent (``compared``: a routed query's ``compared`` — the step,
    its quantity and each agent's value, None where the step did not weigh the agent): a bar per
    agent it weighed, the chosen one (the least) in red, each labelled with its value; an
    infinite value (a threshold that asks nobody) is drawn at the top and labelled ∞.
    ``labels`` renames agents on the axis (a two-stage first step: keep the answer / ask).

    >>> c = compared_chart({"step": "", "quantity": "expected cost",
    ...                     "values": {"a": 0.4, "b": 0.2, "c": None}}, "b").to_dict()
    >>> c["layer"][0]["encoding"]["color"]["scale"]["range"]
    ['#d62728', '#9ecae1']
    >>> [row["agent"] for row in c["datasets"][c["data"]["name"]]]   # c was not weighed
    ['a', 'b']
    """
    shown = {a: v for a, v in compared["values"].items() if v is not None}
    finite = [v for v in shown.values() if np.isfinite(v)]
    top = max([abs(v) for v in finite] + [1e-9]) * 1.15
    names = labels or {}
    data = pd.DataFrame(
        {
            "agent": [names.get(a, a) for a in shown],
            "value": [v if np.isfinite(v) else np.sign(v) * top for v in shown.values()],
            "label": [f"{v:.3f}" if np.isfinite(v) else ("∞" if v > 0 else "−∞") for v in shown.values()],
            "choice": ["chosen" if a == chosen else "not chosen" for a in shown],
        }
    )
    quantity = compared["quantity"]
    bars = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("agent:N", sort=list(data["agent"]), axis=alt.Axis(labelAngle=0), title=None),
            y=alt.Y("value:Q", title=quantity),
            color=alt.Color(
                "choice:N",
                scale=alt.Scale(domain=["chosen", "not chosen"], range=["#d62728", "#9ecae1"]),
                legend=None,
            ),
            tooltip=["agent:N", alt.Tooltip("label:N", title=quantity), "choice:N"],
        )
    )
    text = bars.mark_text(dy=-8).encode(text="label:N")
    step = f"{compared['step'].capitalize()}: " if compared.get("step") else ""
    title = f"{step}{quantity} per option (the lowest is chosen)"
    return alt.layer(bars, text).properties(title=title, height=300)


def charts_html(charts: dict, title: str) -> str:
    """One standalone HTML page with every chart, the Vega scripts inlined once (works offline).

    >>> one = compared_chart({"step": "", "quantity": "expected cost", "values": {"a": 0.1}}, "a")
    >>> page = charts_html({"a": one}, "T & U")
    >>> page.startswith("<!DOCTYPE html>") and "<h1>T &amp; U</h1>" in page and "cdn.jsdelivr" not in page
    True
    """
    joined = alt.vconcat(*(c.properties(title=name) for name, c in charts.items()))
    page = joined.to_html(inline=True)  # vl-convert supplies the scripts: no network needed
    name = html.escape(title)
    page = page.replace("<head>", f"<head><title>{name}</title>", 1)
    return page.replace("<body>", f"<body><h1>{name}</h1>", 1)
