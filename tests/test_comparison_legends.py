"""The router comparison as a user reads it (issue 37, item 7): a legend names every router
drawn, however many; the reference policies have colours of their own; and the page shows the
sidebar pool's results or says there are none yet — never another pool's under its name."""

from __future__ import annotations

import json

import pytest
from _pages import open_page

from l2d_core import report
from l2d_core.evaluation.results import save_results
from l2d_core.report.frames import TDL_CURVES
from l2d_core.routers.registry import router_label, routers

BETAS = [0.0, 0.5]
IDS = [r for r in routers() if r != "agent"]  # every router of the registry: 15 and more


def _router(k: int) -> dict:
    pts = [
        {
            "beta1": b,
            "gflops": g,
            "em": e,
            "share_strong": s,
            "tdl": 0.3 + b / 10 + k / 100,
            "tdl_random_matched": 0.4 + b / 10,
            "allocation": {"small": 1 - s, "big": s},
        }
        for b, e, g, s in zip(BETAS, (85.0 - k, 75.0 - k / 2), (60.0 - k, 20.0 + k), (0.6, 0.1))
    ]
    tdl = {f"{b:g}": p["tdl"] for b, p in zip(BETAS, pts)}
    return {"points": pts, "aiq": 80.0 - k / 3, "apgr": 0.6, "tdl": tdl}


def _agent(gflops: float, em: float) -> dict:
    return {"points": [{"beta1": b, "gflops": gflops, "em": em} for b in BETAS], "aiq": em / 2}


def results(dataset: str = "squad20", pool: str = "PLLM") -> dict:
    """A comparison of every router of the registry and two agents."""
    return {
        "dataset": dataset,
        "pool": pool,
        "agents": ["small", "big"],
        "agent_em": {"small": 70.0, "big": 88.0},
        "agent_gflops": {"small": 10.0, "big": 100.0},
        "n_test": 100,
        "seeds": [0],
        "beta_points": BETAS,
        "gflops_range": [10.0, 100.0],
        "tdl_random": {"0": 0.5, "0.5": 0.55},
        "routers": {rid: _router(k) for k, rid in enumerate(IDS)}
        | {"agent:small": _agent(10.0, 70.0), "agent:big": _agent(100.0, 88.0)},
    }


def _colour_legends(spec: dict) -> list[tuple[list[str], dict]]:
    """(domain, legend) of every colour channel of a chart spec, layers included."""
    out = []
    for view in [spec, *spec.get("layer", [])]:
        color = view.get("encoding", {}).get("color")
        if color and "scale" in color and "domain" in color["scale"]:
            out.append((color["scale"]["domain"], color.get("legend") or {}))
    return out


def _drawn(spec: dict) -> set[str]:
    """The names a chart draws in colour (its rows' router or agent names)."""
    rows = [r for d in spec.get("datasets", {}).values() for r in d]
    return {r.get("label", r.get("name")) for r in rows} - {None}


def test_a_legend_names_every_router_drawn_below_the_plot_when_they_do_not_fit_beside():
    res = results()
    for name, fig in (
        ("cost–EM", report.cost_em_figure(res)),
        ("TDL", report.tdl_figure(res)),
        ("PGR", report.pgr_figure(res)),
    ):
        spec = fig.to_dict()
        drawn = _drawn(spec) - {router_label("zero")}  # the plane draws the zero router as a hull
        assert len(drawn) > 12, (name, drawn)
        legends = _colour_legends(spec)
        assert legends, name
        for domain, legend in legends:
            assert drawn <= set(domain), (name, drawn - set(domain))
            # beside the plot the legend is cut at the chart's height: below it, in columns, all shown
            assert legend.get("orient") == "bottom" and legend.get("columns", 1) >= 2, name
            assert legend.get("symbolLimit") == 0, name
        # the page fits the chart's width only: its height grows with the legend below
        assert report.fit_width(fig).to_dict()["autosize"] == {"type": "fit-x", "contains": "padding"}


def test_a_short_legend_stays_beside_the_plot():
    assert report.legend(4).to_dict().get("orient") is None


def test_reference_policies_have_colours_of_their_own():
    spec = report.tdl_figure(results()).to_dict()
    scale = next(v["encoding"]["color"]["scale"] for v in spec["layer"] if "color" in v.get("encoding", {}))
    colour = dict(zip(scale["domain"], scale["range"]))
    refs = [TDL_CURVES["uniform"], router_label("oracle"), router_label("zero")]
    assert len({colour[r] for r in refs}) == len(refs), {r: colour[r] for r in refs}
    # and none of a learned router's
    learned = {colour[router_label(r)] for r in IDS if r.startswith("l2d-")}
    assert not learned & {colour[r] for r in refs}


@pytest.fixture
def reports(tmp_path, monkeypatch):
    monkeypatch.setenv("L2D_REPORTS_DIR", str(tmp_path))
    return tmp_path


def _page(pool: str, dataset: str):
    at = open_page("comparison", pool)
    at.session_state["dataset"] = dataset
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_page_shows_the_sidebar_pools_results_or_says_there_are_none(reports):
    save_results(results("squad20", "PLLM"), reports / "squad20-PLLM")
    at = _page("P3-albert", "squad11")
    assert at.selectbox(key="cmp_file").value is None
    assert not at.get("vega_lite_chart") and not at.dataframe  # PLLM's figures are not shown as P3-albert's
    assert any("No results for squad11 P3-albert yet" in i.value for i in at.info)
    # the pool's own results, once there, are shown
    save_results(results("squad11", "P3-albert"), reports / "squad11-P3-albert")
    at = _page("P3-albert", "squad11")
    path = at.selectbox(key="cmp_file").value
    assert path == str(reports / "squad11-P3-albert" / "results.json")
    assert json.loads(at.get("vega_lite_chart")[0].proto.spec)["layer"]
    assert any("squad11 P3-albert" in c.value for c in at.caption)
