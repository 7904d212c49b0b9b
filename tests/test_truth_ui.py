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
SWEEP_TITLES = ("EM vs", "GFLOPs/EM vs", "Allocation vs", "Loss vs")
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
    """The cost explorer's sweep charts (with the current setting's rule, when marked) by title:
    the rows of all their datasets."""
    out = {}
    for chart in at.get("vega_lite_chart"):
        spec = json.loads(chart.proto.spec)
        title = spec.get("title") or spec.get("layer", [{}])[0].get("title", "")
        if title.startswith(SWEEP_TITLES):
            out[title] = dataset_rows(chart)
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


def test_under_a_budget_the_cost_setting_is_greyed_out_and_unmarked(real_data):
    at = run("cost_explorer", routers=[ROUTER], decide_by="share")
    assert at.slider(key="price").disabled and at.radio(key="cost_rule").disabled
    assert any("β does not apply" in c.value for c in at.caption)
    assert any(c.value.startswith("Budget 20.0% of questions to an expert") for c in at.caption)
    charts = sweep_specs(at)
    assert charts and all(not drawn_and_marked(rows, "price")[1] for rows in charts.values())
    # by costs again, the controls apply and the sweep marks the setting
    at.radio(key="decide_by").set_value("costs").run()
    assert not at.exception and not at.slider(key="price").disabled
    assert all(drawn_and_marked(rows, "price")[1] for rows in sweep_specs(at).values())


def test_routing_decisions_under_a_budget_lead_with_the_budget(real_data):
    at = run("decisions", dec_router=ROUTER, budget=("share", 0.3), costs_pool=(DATASET, POOL))
    said = [c.value for c in at.caption]
    assert said[0].startswith("Budget 30.0% of questions to an expert"), said[:2]
    assert not any(c.startswith("Cost setting") for c in said)


def test_a_large_starting_price_is_written_out():
    from dataclasses import replace

    from l2d_core.app_logic.explorer import budget_words
    from l2d_core.evaluation.budget_results import BudgetResult

    b = BudgetResult(
        "share", 0.3, 0.41, 0.37, 0.3, 120.0, 0.302, (0.284, 0.32), 150.0, (140.0, 160.0), (0.0, 1.0)
    )
    said = budget_words(replace(b, start=1e4, follower={"log_price": 4.0}))
    assert "from a price of λ = 10,000 errors per TFLOP" in said and "e+" not in said
