"""What the cost explorer and Routing decisions draw agrees with what they offer: a sweep covers
the whole slider (its default among it), and a budget shows the budget's own figures, not the
cost setting's (issue 37, items 4 and 6)."""

from __future__ import annotations

import json

import pytest
from _charts import dataset_rows
from _pages import open_page
from streamlit.testing.v1 import AppTest

from l2d_core.method.costs import PRICE_TOP

POOL, DATASET = "P2", "squad11"
ROUTER = "l2d-cascade"  # no head to train per setting: its sweep draws at once


def run(name: str, **state) -> AppTest:
    at = open_page(name, POOL)
    at.session_state["dataset"] = DATASET
    for k, v in state.items():
        at.session_state[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def sweep_specs(at: AppTest) -> dict[str, list[dict]]:
    """The cost explorer's sweep charts (layered with the current setting's rule) by title: the
    rows of all their datasets."""
    out = {}
    for chart in at.get("vega_lite_chart"):
        spec = json.loads(chart.proto.spec)
        if "title" in spec.get("layer", [{}])[0]:
            out[spec["layer"][0]["title"]] = dataset_rows(chart)
    return out


def drawn_and_marked(rows: list[dict], column: str) -> tuple[list[float], list[float]]:
    """The settings a sweep chart draws (column ``column``) and where its marker stands."""
    return [r[column] for r in rows if column in r], [r["x"] for r in rows if "x" in r]


def test_the_sweep_covers_the_price_slider_and_the_marker_stands_on_it(real_data):
    """P3-albert's default λ, best on validation, is the slider's top (2): the sweep stopped at
    λ = 1 and its marker stood past every point."""
    at = run("cost_explorer", routers=[ROUTER], price=PRICE_TOP)
    slider = at.slider(key="price")
    assert slider.value == slider.max == PRICE_TOP
    charts = sweep_specs(at)
    assert len(charts) == 4
    for title, spec in charts.items():
        drawn, marked = drawn_and_marked(spec, "price")
        assert marked == [PRICE_TOP] and min(drawn) == 0.0 and max(drawn) == PRICE_TOP, title


@pytest.mark.parametrize(("rule", "key", "column"), [("gflops", "beta1", "beta1")])
def test_every_rules_sweep_reaches_its_sliders_end(real_data, rule, key, column):
    at = run("cost_explorer", routers=[ROUTER], cost_rule=rule)
    top = at.slider(key=key).max
    at.slider(key=key).set_value(top)
    at.run()
    assert not at.exception
    for title, spec in sweep_specs(at).items():
        drawn, marked = drawn_and_marked(spec, column)
        assert marked == [top] and max(drawn) == top, title
