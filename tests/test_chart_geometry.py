"""Where the dashboard's charts put their marks, read from the SVG that Vega draws (vl-convert, no
browser): every point of a sweep inside its axes, a point at λ = 0 on the 0 tick, a share of 0 on
the 0% line and one of 1 on the 100% line."""

from __future__ import annotations

import re

import pandas as pd
import pytest
import vl_convert as vlc
from altair.utils._importers import vl_version_for_vl_convert

from l2d_core.app_logic.explorer import sweep_points
from l2d_core.method.costs import PRICE_POINTS, log_price_scale
from l2d_core.report import charts

FRAME = re.compile(r'class="background"[^>]*d="M0\.5,0\.5h([\d.]+)v([\d.]+)h')
POINT = re.compile(
    r'aria-label="([^"]*)"[^>]*aria-roledescription="point" '
    r'transform="translate\(([-\d.e]+),([-\d.e]+)\)" d="M([\d.]+),0'
)
TICK = re.compile(r'<line transform="translate\(([-\d.e]+),([-\d.e]+)\)"')
LABEL = re.compile(r'<text text-anchor="(\w+)"[^>]*>([^<]*)</text>')


def svg_of(chart) -> str:
    return vlc.vegalite_to_svg(chart.to_json(), vl_version=vl_version_for_vl_convert())


def plot_size(svg: str) -> tuple[float, float]:
    w, h = FRAME.search(svg).groups()
    return float(w), float(h)


def points(svg: str) -> list[dict]:
    """Every point mark: its tooltip text, centre and radius (px, in the plot's frame)."""
    return [{"text": t, "x": float(x), "y": float(y), "r": float(r)} for t, x, y, r in POINT.findall(svg)]


def ticks(svg: str, axis: str) -> dict[str, tuple[str, float]]:
    """An axis's labels: text → (its anchor, its tick's position in px along the axis)."""
    start = svg.index(f'aria-label="{axis}-axis')
    body = svg[start : svg.index("role-axis-domain", start)]
    marks = body[body.index("role-axis-tick") : body.index("role-axis-label")]
    at = [float(m[0 if axis == "X" else 1]) for m in TICK.findall(marks)]
    texts = LABEL.findall(body[body.index("role-axis-label") :])
    assert len(at) == len(texts), (at, texts)
    return {text: (anchor, p) for (anchor, text), p in zip(texts, at)}


def sweep(x: str, xs) -> pd.DataFrame:
    """A router's sweep whose shares reach 0 and 1: all to the main agent first, all to the
    expert last."""
    n = len(xs)
    big = [k / (n - 1) for k in range(n)]
    return pd.DataFrame(
        {
            x: list(xs),
            "router": "L2D",
            "em": [70 + 10 * b for b in big],
            "gflops_per_em": [1 + b for b in big],
            "tdl": 0.3,
            "tdl_random": 0.5,
            "tdl_random_matched": 0.4,
            "share small": [1 - b for b in big],
            "share big": big,
        }
    )


LINEAR = ("price", PRICE_POINTS, None)
PLLM = sweep_points("price", log_price_scale([149.9995]))  # GPT-3 over bert-tiny: a symlog axis
SYMLOG = ("price", PLLM, PLLM[1])


@pytest.mark.parametrize("x, xs, symlog", [LINEAR, SYMLOG], ids=["linear", "symlog"])
def test_every_sweep_point_is_inside_the_axes(x, xs, symlog):
    marked = charts.mark_setting(charts.sweep_charts(sweep(x, xs), x, "λ", symlog=symlog), xs[len(xs) // 2])
    for name, chart in marked.items():
        svg = svg_of(chart)
        w, h = plot_size(svg)
        drawn = points(svg)
        assert len(drawn) >= len(xs), name
        for p in drawn:
            assert p["r"] <= p["x"] <= w - p["r"] and p["r"] <= p["y"] <= h - p["r"], (name, p)


@pytest.mark.parametrize("x, xs, symlog", [LINEAR, SYMLOG], ids=["linear", "symlog"])
def test_a_point_at_zero_sits_on_the_zero_tick_and_shares_on_their_lines(x, xs, symlog):
    svg = svg_of(charts.sweep_charts(sweep(x, xs), x, "λ", symlog=symlog)["Allocation vs λ"])
    drawn = points(svg)
    anchor, tick0 = ticks(svg, "X")["0"]
    assert anchor == "middle"  # centred on its tick, not starting there
    at_zero = [p for p in drawn if p["text"].startswith("λ: 0;")]
    assert len(at_zero) == 2 and all(abs(p["x"] - tick0) < 0.6 for p in at_zero)
    y_ticks = ticks(svg, "Y")
    for share, label in ((0.0, "0%"), (1.0, "100%")):
        on = [p for p in drawn if p["text"].endswith(f"; share: {share:g}")]
        assert on and all(abs(p["y"] - y_ticks[label][1]) < 0.6 for p in on), (label, on)
    assert not [t for t in y_ticks if t.startswith(("-", "−"))]  # no share below 0% on the axis


TEN = [f"agent-{k}" for k in range(10)]  # a pool of ten agents, as P10


def test_every_agent_of_a_large_pool_is_named_on_the_allocation_axis():
    """In half the page beside its legend, the dashboard dropped every other label of ten agents
    (Streamlit's chart theme lets Vega hide overlapping labels)."""
    frame = pd.DataFrame({"router": "L2D", "agent": TEN, "share": [0.1] * 10})
    chart = charts.allocation_chart(frame)
    axis = chart.to_dict()["encoding"]["x"]["axis"]
    assert axis["labelOverlap"] is False and axis["labelAngle"] != 0  # slanted, none dropped
    assert set(ticks(svg_of(chart.properties(width=180)), "X")) == set(TEN)  # beside its legend


def test_a_sweep_of_a_large_pool_names_every_agent_below_the_chart():
    """Beside a sweep chart (three quarters of a chart's height) ten entries were cut at seven;
    below it they all show, and the page's chart grows with them (fit_width)."""
    frame = sweep("price", PRICE_POINTS).drop(columns=["share small", "share big"])
    frame = frame.assign(**{f"share {a}": 0.1 for a in TEN})
    spec = charts.sweep_charts(frame, "price", "λ")["Allocation vs λ"].to_dict()
    assert spec["encoding"]["color"]["legend"]["orient"] == "bottom"
    assert spec["encoding"]["color"]["legend"]["symbolLimit"] == 0
    assert charts.fit_width(charts.sweep_charts(frame, "price", "λ")["Allocation vs λ"]).to_dict()["autosize"]
