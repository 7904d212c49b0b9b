"""Altair charts of the dashboard, from the frames it computes: the cost–EM plane
(:func:`plane_chart`), allocation bars (:func:`allocation_chart`), the sweep over a cost rule
(:func:`sweep_charts`, marked by :func:`mark_setting`) and one query's expected cost per agent
(:func:`compared_chart`); :func:`charts_html` writes them into one page that works offline.

Altair is the project's one chart stack: a browser draws a Vega-Lite chart with about 0.8 MB
of script against Plotly's 4.7 MB, which a new session has to load and compile before the page's
first chart, and the benchmark's report (:mod:`.plots`) builds its figures on these same
functions (:func:`plane_chart` with every router's curve, :func:`sweep_charts` with fixed colours
by :func:`color_scale`). Legends and axes show human names, never column names.

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

from ..evaluation import metrics as M
from .frames import TDL_CURVES

__all__ = [
    "color_scale",
    "legend",
    "fit_width",
    "plane_chart",
    "allocation_chart",
    "sweep_charts",
    "mark_setting",
    "compared_chart",
    "charts_html",
]

_HEIGHT = 360
_LEGEND_BESIDE = 10  # legend entries that fit beside a chart of the dashboard's height
_EDGE = 8  # px between the axes' ends and the outermost data points of a sweep (a point's radius: 3)
# A five-pointed star as an SVG path (Vega's own symbols have none): the current operating points.
_STAR = (
    "M0,-1L0.22,-0.31L0.95,-0.31L0.36,0.12L0.59,0.81L0,0.38L-0.59,0.81L-0.36,0.12L-0.95,-0.31L-0.22,-0.31Z"
)
PLANE_COSTS = {  # the plane's cost axis: column, title, tooltip format
    "gflops": ("gflops", "GFLOPs per query", ".2f"),
    "usd_per_1k": ("usd_per_1k", "$ per 1,000 questions", "$.4g"),
}
_PLANE_MARKERS = {"agent": ("circle", 90), "baseline": ("diamond", 110), "router": (_STAR, 260)}
_PLANE_KINDS = {"agent": "single agent", "baseline": "reference router", "router": "router shown"}
_SWEEP_CURVES = {
    "tdl": TDL_CURVES["router"],
    "tdl_random": TDL_CURVES["uniform"],
    "tdl_random_matched": TDL_CURVES["matched"],
}


_LEGEND_CHANNELS = ("color", "opacity", "shape", "size", "strokeDash", "strokeWidth")


def _order(values) -> list:
    """Distinct values in the order they first appear (legend and axis order = the frame's)."""
    return list(dict.fromkeys(values))


def legend(n: int, label_limit: int = 170, beside: int = _LEGEND_BESIDE, **kw) -> alt.Legend:
    """A legend of ``n`` entries that shows them all: beside the plot while they fit its height
    (``beside`` entries: fewer on a shorter chart), else below it in columns (a legend beside the
    plot is cut at the chart's height, and the dashboard's pages draw charts at a fixed height).
    ``kw``: any other legend property.

    >>> legend(4).to_dict()
    {'labelLimit': 170}
    >>> legend(16).to_dict()
    {'columns': 2, 'labelLimit': 260, 'orient': 'bottom', 'symbolLimit': 0}
    """
    if n <= beside:
        return alt.Legend(labelLimit=label_limit, **kw)
    return alt.Legend(orient="bottom", columns=2, labelLimit=max(label_limit, 260), symbolLimit=0, **kw)


def fit_width(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """A chart as wide as the page and as tall as its plot plus its legends (Streamlit's default
    fits the whole chart, legends below included, into the plot's height, squashing the plot).

    >>> fit_width(alt.Chart().mark_point()).to_dict()["autosize"]
    {'contains': 'padding', 'type': 'fit-x'}
    """
    return chart.properties(autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))


def color_scale(colors: dict[str, str] | None, names=None) -> alt.Scale | alt.UndefinedType:
    """A colour scale fixing name → colour (every chart of a report colours a router alike;
    :func:`~.frames.router_colors`), restricted to ``names`` in their order when given; no
    colours: the default scheme.

    >>> color_scale({"a": "#000000", "b": "#ffffff"}, ["b"]).to_dict()
    {'domain': ['b'], 'range': ['#ffffff']}
    """
    if not colors:
        return alt.Undefined
    names = list(colors) if names is None else _order(names)
    return alt.Scale(domain=names, range=[colors.get(n, "#888888") for n in names])


def _upper_hulls(curves: pd.DataFrame) -> pd.DataFrame:
    """Each name's non-decreasing upper hull (what AIQ integrates) of its (gflops, em) points."""
    rows = []
    for name, g in curves.groupby("name", sort=False):
        hx, hy = M.upper_hull(g["gflops"].to_numpy(float), g["em"].to_numpy(float))
        rows += [{"name": name, "gflops": x, "em": y} for x, y in zip(hx, hy)] if len(hx) > 1 else []
    return pd.DataFrame(rows, columns=["name", "gflops", "em"])


def plane_chart(
    points: pd.DataFrame,
    log_x: bool = False,
    curves: pd.DataFrame | None = None,
    colors: dict[str, str] | None = None,
    band: tuple[float, float] | None = None,
    title: str | alt.Title = "Cost–EM plane",
) -> alt.LayerChart:
    """The cost–EM plane of a frame with columns name, kind (agent, hull, baseline, router),
    gflops (or usd_per_1k: dollars per 1,000 questions, on a pool whose answers have prices), em:
    the hull (the zero router: mixing single agents at random) as a dotted line, agents as
    circles, reference routers as diamonds, the current operating points as stars. Text labels
    name agents and stars, alternately above and below in cost order so that
    neighbours do not overlap; every mark names itself on hover.

    The benchmark's report adds ``curves``: every point of each router (columns name, gflops,
    em, dense — a point off the β₁ sweep, drawn small), as dots with the router's upper hull as
    a line in its colour; ``colors`` fixes name → colour, ``band`` shades a GFLOPs range.

    >>> pts = pd.DataFrame({"name": ["a", "b", "zero router", "zero router", "oracle", "SDL"],
    ...     "kind": ["agent", "agent", "hull", "hull", "baseline", "router"],
    ...     "gflops": [1.0, 10.0, 1.0, 10.0, 3.0, 4.0], "em": [60.0, 80.0, 60.0, 80.0, 85.0, 75.0]})
    >>> [layer["mark"]["type"] for layer in plane_chart(pts).to_dict()["layer"]]
    ['line', 'point', 'text', 'text']
    >>> cur = pd.DataFrame({"name": "SDL", "gflops": [2.0, 5.0], "em": [70.0, 78.0], "dense": False})
    >>> [layer["mark"]["type"] for layer in plane_chart(pts, curves=cur, band=(1, 10)).to_dict()["layer"]]
    ['rect', 'line', 'line', 'point', 'point', 'point', 'text', 'text']
    """
    cost, unit, fmt = PLANE_COSTS["usd_per_1k" if "usd_per_1k" in points.columns else "gflops"]
    x_title = unit + (" (log scale)" if log_x else "")
    x_scale = alt.Scale(type="log", nice=False, padding=30) if log_x else alt.Scale(type="linear", zero=False)
    x = alt.X(f"{cost}:Q", title=x_title, scale=x_scale)  # log: the data's range, not whole decades
    y = alt.Y("em:Q", title="EM %", scale=alt.Scale(zero=False))
    hull = points[points["kind"] == "hull"].sort_values(cost)
    marks = points[points["kind"].isin(list(_PLANE_MARKERS))].copy()
    marks["shown as"] = marks["kind"].map(_PLANE_KINDS)
    marks["shape"] = marks["kind"].map(lambda k: _PLANE_MARKERS[k][0])
    marks["size"] = marks["kind"].map(lambda k: _PLANE_MARKERS[k][1])
    texted = marks[marks["kind"] != "baseline"].sort_values(cost, kind="stable")
    texted = texted.assign(
        above=[k % 2 == 0 for k in range(len(texted))],
        tag=texted["name"]
        .astype(str)
        .str.split(" (", n=1, regex=False)
        .str[0],  # a router's short name; the legend has it all
    )
    tip = [
        alt.Tooltip("name:N", title="name"),
        alt.Tooltip("shown as:N"),
        alt.Tooltip(f"{cost}:Q", title=unit, format=fmt),
        alt.Tooltip("em:Q", title="EM %", format=".2f"),
    ]
    names = [*marks["name"], *([] if curves is None else curves["name"])]
    color = alt.Color(
        "name:N",
        title="agent or router",
        sort=_order(names),
        scale=color_scale(colors, names),
        legend=legend(len(_order(names))),  # beside: longer names end in "…" (the plot must stay wide)
    )
    line = (
        alt.Chart(hull.assign(line="zero router (mixing single agents)"))
        .mark_line(strokeDash=[3, 3], color="gray")
        .encode(x=x, y=y, opacity=alt.Opacity("line:N", legend=legend(len(_order(names)), title=None)))
    )
    dots = (
        alt.Chart(marks)
        .mark_point(filled=True, opacity=0.9)
        .encode(
            x=x,
            y=y,
            shape=alt.Shape("shape:N", scale=None),
            size=alt.Size("size:Q", scale=None),
            color=color,
            tooltip=tip,
        )
    )
    labels = [
        alt.Chart(texted[texted["above"] == above])
        .mark_text(dy=-14 if above else 14, fontSize=11)
        .encode(x=x, y=y, text="tag:N")
        for above in (True, False)
    ]
    under = []
    if band is not None:
        shade = pd.DataFrame({"lo": [band[0]], "hi": [band[1]]})
        under.append(alt.Chart(shade).mark_rect(color="gray", opacity=0.06).encode(x="lo:Q", x2="hi:Q"))
    if len(hull):  # (an empty legend would give the chart an infinite size)
        under.append(line)
    if curves is not None:
        tip = [tip[0], *tip[2:], *(["β₁:N"] if "β₁" in curves.columns else [])]
        hulls = alt.Chart(_upper_hulls(curves)).mark_line(strokeWidth=2).encode(x=x, y=y, color=color)
        dense = curves["dense"].astype(bool)
        pts = [
            alt.Chart(curves[dense == small].drop(columns="dense"))
            .mark_point(filled=True, size=16 if small else 50, opacity=0.45 if small else 0.85)
            .encode(x=x, y=y, color=color, tooltip=tip)
            for small in (False, True)
        ]
        under += [hulls, *pts]
    return alt.layer(*under, dots, *labels).properties(title=title, height=_HEIGHT)


def allocation_chart(frame: pd.DataFrame) -> alt.Chart:
    """Grouped bars of allocation ratios from a long frame with columns router, agent, share
    (a fraction; shown in %), one colour per router, agents in the frame's order."""
    agents = _order(frame["agent"])
    routers = _order(frame["router"])
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            # every agent named: across while a few fit, slanted for more (Vega drops overlapping labels)
            x=alt.X(
                "agent:N",
                title="answered by",
                sort=agents,
                axis=alt.Axis(labelAngle=0 if len(agents) <= 4 else -40, labelOverlap=False),
            ),
            xOffset=alt.XOffset("router:N", sort=routers),
            y=alt.Y("share:Q", title="share of questions", axis=alt.Axis(format=".0%")),
            color=alt.Color("router:N", sort=routers),
            tooltip=["router:N", "agent:N", alt.Tooltip("share:Q", title="share", format=".1%")],
        )
        .properties(title="Allocation ratios", height=_HEIGHT)
    )


def sweep_charts(
    frame: pd.DataFrame,
    x: str = "beta1",
    x_title: str = "β₁",
    colors: dict[str, str] | None = None,
    ordinal: bool = False,
    symlog: float | None = None,
) -> dict[str, alt.Chart]:
    """EM, GFLOPs/EM, allocation and true-deferral-loss-against-random charts over a cost
    setting, from sweep frames of one or more routers (columns ``x`` — β₁ by default, or the
    per-TFLOP price — router, em, gflops_per_em, tdl, tdl_random, tdl_random_matched and
    ``share <agent>``), by title. Mark the current setting on them with :func:`mark_setting`.
    ``colors`` fixes router → colour; ``ordinal`` spaces the settings evenly (the report's β₁
    points, most of them near 0); ``symlog`` draws the settings on a symmetric-log axis, linear
    below that value (settings spread over decades, 0 among them).

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
    # every point inside the axes: the scales reach _EDGE px past the data (no rounding outwards,
    # which would add a negative λ), and the first and last x labels centred on their ticks
    x_axis = alt.Axis(labelAngle=0) if ordinal else alt.Axis(format="~g", labelFlush=False)
    x_scale = alt.Undefined if ordinal else alt.Scale(padding=_EDGE, nice=False, zero=False)
    if symlog:  # ticks at 0 and each decade from ``symlog`` up
        top, ticks = float(frame[x].max()), [0.0]
        while symlog * 10 ** (len(ticks) - 1) <= top * (1 + 1e-9):
            ticks.append(float(f"{symlog * 10 ** (len(ticks) - 1):.6g}"))
        x_scale = alt.Scale(type="symlog", constant=symlog, padding=_EDGE, nice=False, zero=False)
        x_axis = alt.Axis(values=ticks, format="~g", labelFlush=False)
    x_enc = alt.X(f"{x}:{'O' if ordinal else 'Q'}", title=x_title, axis=x_axis, scale=x_scale)
    y_scale = alt.Scale(padding=_EDGE, nice=False)
    # shares: the axis runs from 0% to 100% whatever the data, values outside it drawn at its ends
    share_scale = alt.Scale(domain=[0, 1], padding=_EDGE, nice=False, clamp=True)

    def lines(data: pd.DataFrame, y: alt.Y, color: alt.Color, dash=alt.Undefined) -> alt.Chart:
        tip = [c for c in data.columns if c != "router" or len(routers) > 1]
        enc = dict(x=x_enc, y=y, color=color, strokeDash=dash, tooltip=tip)
        return alt.Chart(data).mark_line(point=True).encode(**enc).properties(height=_HEIGHT * 3 // 4)

    router_color = alt.Color("router:N", sort=routers, scale=color_scale(colors, routers))
    charts = {
        f"EM vs {x_title}": lines(
            frame[[x, "router", "em"]], alt.Y("em:Q", title="EM %", scale=y_scale), router_color
        ),
        f"GFLOPs/EM vs {x_title}": lines(
            frame[[x, "router", "gflops_per_em"]],
            alt.Y("gflops_per_em:Q", title="GFLOPs per EM point", scale=y_scale),
            router_color,
        ),
        f"Allocation vs {x_title}": lines(
            shares,
            alt.Y("share:Q", title="share of questions", axis=alt.Axis(format=".0%"), scale=share_scale),
            alt.Color(
                "agent:N",
                title="answered by",
                sort=_order(shares["agent"]),
                legend=legend(len(_order(shares["agent"])), beside=_LEGEND_BESIDE * 3 // 4),
            ),
            by_router,
        ),
        f"Loss vs random routing over {x_title}": lines(
            losses,
            alt.Y("loss:Q", title="deferral loss per question", scale=y_scale),
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
    # each chart its own legends (one chart's agents are not another's routers)
    joined = joined.resolve_scale(**{ch: "independent" for ch in _LEGEND_CHANNELS})
    page = joined.to_html(inline=True)  # vl-convert supplies the scripts: no network needed
    name = html.escape(title)
    page = page.replace("<head>", f"<head><title>{name}</title>", 1)
    return page.replace("<body>", f"<body><h1>{name}</h1>", 1)
