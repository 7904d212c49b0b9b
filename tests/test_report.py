"""l2d_core.report: frames, plots (the report's and the dashboard's), tables, targets and the
markdown, on a small synthetic results dict (no data needed)."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import altair as alt
import pandas as pd
import pytest

import l2d_core.report as R
from l2d_core.report import evaluate_targets, figures, report_markdown, summary_frame
from l2d_core.report import targets as T
from l2d_core.routers.registry import router_label

BETAS = [0.0, 0.5]
SDL, KNN = router_label("l2d-sdl"), router_label("knn")
REPORT_DIR = Path(R.__file__).parent


def _router(aiq, em, gflops, share, **extra) -> dict:
    """A router with one point per β₁ (EM / GFLOPs / share per β₁) and the summary fields."""
    pts = [
        {
            "beta1": b,
            "gflops": g,
            "em": e,
            "em_std": 0.5,
            "share_strong": s,
            "tdl": 0.3 + b / 10,
            "tdl_random_matched": 0.4 + b / 10,
            "allocation": {"small": 1 - s, "big": s},
        }
        for b, e, g, s in zip(BETAS, em, gflops, share)
    ]
    return {
        "points": pts,
        "aiq": aiq,
        "aiq_std": 0.2,
        "aiq_ci": [aiq - 1, aiq + 1] if aiq is not None else None,
        "apgr": 0.6,
        "apgr_ci": [0.5, 0.7],
        "cpt50": 0.4,
        "cpt80": 0.7,
        "tdl": {f"{b:g}": p["tdl"] for b, p in zip(BETAS, pts)},
        "tdl_diff_ci": {"0": [-0.1, -0.01], "0.5": [-0.1, 0.02]},
        "tdl_below_random_95": {"0": True, "0.5": False},
        **extra,
    }


def _agent(gflops: float, em: float, aiq: float) -> dict:
    pts = [{"beta1": b, "gflops": gflops, "em": em} for b in BETAS]
    return {"points": pts, "aiq": aiq, "tdl": {"0": 0.6, "0.5": 0.7}}


@pytest.fixture()
def res() -> dict:
    sdl = _router(80.0, [85.0, 75.0], [60.0, 20.0], [0.6, 0.1])
    sdl["points"].append({"beta1": 0.25, "dense": True, "gflops": 40.0, "em": 80.0, "share_strong": 0.3})
    sdl["validation"] = {"gain": 1.0, "price": 0.1, "aiq": 60.0}  # chosen on the training articles
    return {
        "dataset": "squad11",
        "pool": "P2",
        "agents": ["small", "big"],
        "agent_em": {"small": 70.0, "big": 88.0},
        "agent_gflops": {"small": 10.0, "big": 100.0},
        "n_test": 100,
        "seeds": [0],
        "beta_points": BETAS,
        "gflops_range": [10.0, 100.0],
        "tdl_random": {"0": 0.5, "0.5": 0.55},
        "routers": {
            "l2d-sdl": sdl,
            "knn": _router(80.0, [82.0, 74.0], [55.0, 25.0], [0.5, 0.15], tdl_below_random_95=True),
            "zero": _router(75.0, [79.0, 72.0], [55.0, 22.0], [0.5, 0.1]),
            "oracle": _router(None, [95.0, 90.0], [30.0, 15.0], [0.3, 0.1]),
            "agent:small": _agent(10.0, 70.0, 35.0),
            "agent:big": _agent(100.0, 88.0, 44.0),
        },
    }


def _views(spec: dict, data: dict | None = None) -> list[dict]:
    """Every single view (a spec with a mark) of a chart's dict, layers and panels included, each
    with the data it draws (its own, else the nearest enclosing chart's)."""
    data = spec.get("data") or data
    out = [{**spec, "data": data}] if "mark" in spec else []
    for key in ("layer", "hconcat", "vconcat", "concat"):
        for sub in spec.get(key, []):
            out += _views(sub, data)
    return out + (_views(spec["spec"], data) if "spec" in spec else [])


def _rows(spec: dict, view: dict) -> list[dict]:
    """The rows a view draws (its own data, else the chart's)."""
    data = view.get("data") or spec.get("data")
    if not data:
        return []
    return data["values"] if "values" in data else spec["datasets"][data["name"]]


def _marked(spec: dict, mark: str) -> list[dict]:
    return [
        v for v in _views(spec) if (v["mark"] if isinstance(v["mark"], str) else v["mark"]["type"]) == mark
    ]


# Column names of the frames that are not words: a legend must never show them.
RAW = {c for c in R.POINT_COLUMNS if "_" in c} | {"tdl_random", "share_strong", "gflops_per_em"}
RAW_WORDS = {"label", "curve", "loss", "panel", "beta", "beta1", "kind"}


# --- package ------------------------------------------------------------------------------------


def test_public_names_are_exported():
    assert callable(figures) and callable(R.cost_em_figure) and R.beta_key(0.25) == "0.25"
    for name in ("num", "fmt", "beta_points", "OURS_PREFIX", "PAPER_BETAS", "paper_baselines", "md_table"):
        assert name in R.__all__ and hasattr(R, name)
    assert all(hasattr(R, n) for n in R.__all__)


def _imports(module: str) -> list[ast.ImportFrom]:
    tree = ast.parse((REPORT_DIR / f"{module}.py").read_text(encoding="utf-8"))
    return [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1]


@pytest.mark.parametrize(
    "module, allowed",
    [
        ("frames", set()),
        ("charts", {"frames"}),
        ("plots", {"frames", "charts", "requests"}),
        ("tables", {"frames"}),
        ("requests", {"frames", "charts", "tables"}),
        ("money", {"frames", "tables"}),
        ("target_common", {"frames"}),
        ("targets_llm", {"frames", "target_common"}),
        ("targets", {"frames", "tables", "target_common", "targets_llm"}),
        ("markdown", {"frames", "tables", "targets", "requests", "money"}),
    ],
)
def test_imports_go_one_way_and_name_no_private_helper(module, allowed):
    for node in _imports(module):
        assert node.module in allowed, f"{module} imports .{node.module}"
        assert not [a.name for a in node.names if a.name.startswith("_")], f"{module}: private import"


def test_every_public_function_has_a_docstring():
    for name in R.__all__:
        obj = getattr(R, name)
        if callable(obj):
            assert obj.__doc__ and obj.__doc__.strip(), name


# --- frames -------------------------------------------------------------------------------------


def test_points_frame(res):
    pts = R.points_frame(res)
    assert list(pts.columns) == list(R.POINT_COLUMNS)
    assert len(pts) == 2 + 3 + 2 + 2 + 2 + 2  # l2d-sdl has one dense point more
    sdl = pts[pts["router"] == "l2d-sdl"]
    assert list(sdl["sweep"]) == [True, True, False] and list(sdl["dense"]) == [False, False, True]
    assert set(sdl["label"]) == {SDL}
    assert sdl["gflops_per_em"].iloc[0] == pytest.approx(60 / 85)
    assert set(pts.loc[pts["router"].str.startswith("agent:"), "kind"]) == {"agent"}


def test_tdl_allocation_and_pgr_frames(res):
    t = R.tdl_frame(res)
    uniform = t[t["curve"] == "random (uniform)"]
    assert list(uniform["tdl"]) == [0.5, 0.55] and uniform["router"].isna().all()
    matched = t[(t["router"] == "l2d-sdl") & (t["curve"] == "random (same shares)")]
    assert list(matched["beta"]) == ["0", "0.5"] and list(matched["tdl"]) == [0.4, 0.45]
    alloc = R.allocation_frame(res)
    assert set(alloc["router"]) == {"l2d-sdl", "knn", "oracle"}  # not zero, not single agents
    assert alloc.groupby(["router", "beta"])["share"].sum().tolist() == pytest.approx([1.0] * 6)
    g = R.pgr_frame(res)
    assert set(g["router"]) == {"l2d-sdl", "knn", "oracle"} and g["curve"].any() and (~g["curve"]).any()
    assert R.pgr_frame({**res, "agent_em": {}}).empty


# --- the report's figures -----------------------------------------------------------------------


def test_report_figures_are_altair_charts(res):
    figs = figures(res)
    assert list(figs) == [
        "cost_em",
        "tdl_vs_beta",
        "em_gflops_per_em_vs_beta",
        "allocation_vs_beta",
        "pgr_vs_share",
        "request_accuracy",
    ]
    assert all(isinstance(f, alt.TopLevelMixin) for f in figs.values())
    specs = {name: fig.to_dict() for name, fig in figs.items()}
    colors = {router_label(rid): c for rid, c in R.router_colors(res).items()}

    # the cost–EM plane: the dashboard's plane chart with every router's points and upper hull
    cost = specs["cost_em"]
    dotted, hulls = _marked(cost, "line")
    assert dotted["mark"]["strokeDash"] == [3, 3]  # the zero router's hull: random mixing of agents
    assert {r["name"] for r in _rows(cost, dotted)} == {router_label("zero")}
    assert {r["name"] for r in _rows(cost, hulls)} == {SDL, KNN, router_label("oracle")}
    sweep, dense, agents = _marked(cost, "point")  # every point, the dense ones, the agents
    assert [r["name"] for r in _rows(cost, agents)] == ["small", "big"]
    assert {r["shape"] for r in _rows(cost, agents)} == {"circle"}
    assert [r["gflops"] for r in _rows(cost, dense)] == [40.0] and dense["mark"]["size"] < sweep["mark"][
        "size"
    ]
    assert cost["layer"][0]["mark"]["type"] == "rect" and _rows(cost, cost["layer"][0]) == [
        {"lo": 10.0, "hi": 100.0}
    ]
    assert hulls["encoding"]["x"]["scale"]["type"] == "log"
    scale = hulls["encoding"]["color"]["scale"]
    assert dict(zip(scale["domain"], scale["range"]))[SDL] == colors[SDL]  # one colour per router
    assert (
        R.cost_em_figure(res, log_x=False).to_dict()["layer"][1]["encoding"]["x"]["scale"]["type"] == "linear"
    )

    tdl = specs["tdl_vs_beta"]
    rows = _rows(tdl, tdl["layer"][0])
    uniform = [r["tdl"] for r in rows if r["curve"] == "random (uniform)"]
    assert uniform == [0.5, 0.55] and {r["label"] for r in rows if r["curve"] == "random (uniform)"} == {
        "random (uniform)"
    }
    matched = {r["label"] for r in rows if r["curve"] == "random (same shares)"}
    assert matched == {SDL}  # matched: the L2D routers only
    assert not {"small", "big"} & {r["label"] for r in rows}  # single agents are left out
    scale = tdl["layer"][0]["encoding"]["color"]["scale"]
    assert dict(zip(scale["domain"], scale["range"]))["random (uniform)"] == R.REFERENCE_COLORS["chance"]
    assert tdl["layer"][0]["encoding"]["strokeDash"]["title"] == "policy"

    em = specs["em_gflops_per_em_vs_beta"]
    assert [p["title"] for p in em["hconcat"]] == ["EM % vs β₁ (± std over seeds)", "GFLOPs/EM vs β₁ (log)"]
    assert em["hconcat"][1]["layer"][0]["encoding"]["y"]["scale"]["type"] == "log"
    rules = _marked(em, "rule")
    assert len(rules) == 2 and all({r["agent"] for r in _rows(em, v)} == {"small", "big"} for v in rules)
    lines = [v for v in _marked(em, "line")]
    assert {r["router"] for r in _rows(em, lines[0])} == {
        SDL,
        KNN,
        router_label("zero"),
        router_label("oracle"),
    }
    bars = _marked(em, "errorbar")
    assert len(bars) == 1 and {r["hi"] - r["lo"] for r in _rows(em, bars[0])} == {1.0}  # ± em_std

    alloc = specs["allocation_vs_beta"]
    assert alloc["facet"]["field"] == "label" and alloc["spec"]["mark"]["type"] == "bar"
    assert {r["label"] for r in _rows(alloc, alloc)} == {SDL, KNN, router_label("oracle")}
    enc = alloc["spec"]["encoding"]
    assert enc["color"]["scale"]["domain"] == ["small", "big"] and enc["y"]["axis"]["format"] == ".0%"

    pgr = specs["pgr_vs_share"]
    assert {r["label"] for r in _rows(pgr, pgr["layer"][0])} == {"random mixing small / big"}
    assert {r["label"] for r in _rows(pgr, pgr["layer"][1])} == {SDL, KNN, router_label("oracle")}
    assert R.pgr_figure({**res, "agent_em": {"small": 70.0, "big": 70.0}}) is None

    for fig in figs.values():
        _assert_human_chart(fig)


def test_report_figures_on_incomplete_results():
    res = {"pool": "P3", "routers": {"l2d-sdl": {"points": [{"beta1": 0.0, "gflops": 5.0, "em": 60.0}]}}}
    figs = figures(res)
    assert set(figs) == {"cost_em", "tdl_vs_beta", "em_gflops_per_em_vs_beta", "allocation_vs_beta"}
    alloc = figs["allocation_vs_beta"].to_dict()
    assert _rows(alloc, alloc) == [{"text": "no learned router"}]
    empty = figures({})["cost_em"].to_dict()
    assert not any(_rows(empty, v) for v in _views(empty) if v["mark"]["type"] != "rect")
    for fig in [*figs.values(), *figures({}).values()]:
        assert R.figure_png(fig, scale=0.5)[:4] == b"\x89PNG"  # drawn, empty layers and all


def test_report_figures_written_out(res):
    """HTML pages that load the Vega scripts from a file beside them (or inline them, one page
    for all), and PNG rendered by vl-convert with no browser."""
    figs = figures(res)
    page = R.figure_html(figs["cost_em"], "cost <em>")
    assert f"<script src='{R.VEGA_SCRIPT}'>" in page and "<title>cost &lt;em&gt;</title>" in page
    assert "vegaEmbed('#vis'" in page and "http" not in page.split("<body>")[0]
    assert "vegaEmbed" in R.vega_script()
    one = R.figures_html(figs, "Report <P2>")
    assert (
        "<h1>Report &lt;P2&gt;</h1>" in one and "cdn.jsdelivr" not in one and '<script src="http' not in one
    )
    png = R.figure_png(figs["cost_em"], scale=1.0)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


# --- the dashboard's figures --------------------------------------------------------------------


@pytest.fixture()
def plane() -> pd.DataFrame:
    rows = [
        ("small", "agent", 10.0, 70.0),
        ("big", "agent", 100.0, 88.0),
        ("zero router", "hull", 10.0, 70.0),
        ("zero router", "hull", 100.0, 88.0),
        ("oracle", "baseline", 20.0, 95.0),
        ("random", "baseline", 55.0, 79.0),
        ("Plug-in", "router", 30.0, 80.0),
        ("SDL", "router", 32.0, 81.0),
    ]
    return pd.DataFrame(rows, columns=["name", "kind", "gflops", "em"])


def _chart_texts(chart) -> list[str]:
    """Every title a reader sees on a chart: axes, legends, the chart's own, and the names in
    the legend's domain."""
    spec, out = chart.to_dict(), []

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "title" and isinstance(value, str):
                    out.append(value)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk({k: v for k, v in spec.items() if k != "datasets"})
    return out


def _assert_human_chart(chart) -> None:
    texts = _chart_texts(chart)
    assert texts
    for text in texts:  # a column's name is never a title (phrases may use its words)
        assert not any(raw in text for raw in RAW) and text not in RAW_WORDS, text


def test_plane_chart(plane):
    chart = R.plane_chart(plane, log_x=True)
    line, dots, above, below = chart.layer
    assert list(line.data["name"]) == ["zero router"] * 2 and line.mark.strokeDash == [3, 3]
    shapes = dict(zip(dots.data["name"], dots.data["shape"]))
    assert shapes["small"] == "circle" and shapes["oracle"] == "diamond" and shapes["SDL"].startswith("M0,-1")
    assert list(dots.data["name"]) == ["small", "big", "oracle", "random", "Plug-in", "SDL"]
    # text labels on agents and stars only, alternating above / below in GFLOPs order
    assert list(above.data["name"]) == ["small", "SDL"] and list(below.data["name"]) == ["Plug-in", "big"]
    assert above.mark.dy < 0 < below.mark.dy
    spec = chart.to_dict()
    assert spec["layer"][1]["encoding"]["x"]["scale"]["type"] == "log"
    assert R.plane_chart(plane).to_dict()["layer"][1]["encoding"]["x"]["scale"]["type"] == "linear"
    tips = {t.get("title", t["field"]) for t in spec["layer"][1]["encoding"]["tooltip"]}
    assert tips == {"name", "shown as", "GFLOPs per query", "EM %"}
    _assert_human_chart(chart)


def test_allocation_chart():
    frame = pd.DataFrame(
        {
            "router": ["SDL"] * 2 + ["Plug-in"] * 2,
            "agent": ["small", "big"] * 2,
            "share": [0.7, 0.3, 0.6, 0.4],
        }
    )
    spec = R.allocation_chart(frame).to_dict()
    enc = spec["encoding"]
    assert enc["color"]["sort"] == ["SDL", "Plug-in"] and enc["xOffset"]["field"] == "router"
    assert enc["x"]["sort"] == ["small", "big"] and enc["y"]["axis"]["format"] == ".0%"
    _assert_human_chart(R.allocation_chart(frame))


def _sweep(router: str, k: float) -> pd.DataFrame:
    b = [0.0, 0.1, 0.5]
    return pd.DataFrame(
        {
            "beta1": b,
            "router": router,
            "em": [80 - k * x for x in b],
            "gflops_per_em": [1.0 - x for x in b],
            "tdl": [0.3 + x for x in b],
            "tdl_random": [0.5 + x for x in b],
            "tdl_random_matched": [0.4 + x for x in b],
            "share small": [0.3 + x for x in b],
            "share big": [0.7 - x for x in b],
        }
    )


def test_sweep_charts():
    frame = pd.concat([_sweep("SDL", 10), _sweep("Plug-in", 5)], ignore_index=True)
    charts = R.sweep_charts(frame)
    names = ["EM vs β₁", "GFLOPs/EM vs β₁", "Allocation vs β₁", "Loss vs random routing over β₁"]
    assert list(charts) == names
    assert set(charts["Allocation vs β₁"].data["agent"]) == {"small", "big"}
    curves = set(charts["Loss vs random routing over β₁"].data["curve"])
    assert curves == {"this router", "random (uniform)", "random (same shares)"}
    assert all(c.title == name for name, c in charts.items())
    # two routers: told apart by dashes where colour means something else
    assert charts["Allocation vs β₁"].to_dict()["encoding"]["strokeDash"]["field"] == "router"
    marked = R.mark_setting(charts, 0.1)
    assert all(list(m.layer[1].data["x"]) == [0.1] for m in marked.values())
    again = R.mark_setting(charts, 0.5)  # the charts given stay unmarked: a cached set is marked again
    assert list(again["EM vs β₁"].layer[1].data["x"]) == [0.5] and not hasattr(charts["EM vs β₁"], "layer")
    for chart in [*charts.values(), *marked.values()]:
        _assert_human_chart(chart)
    one = R.sweep_charts(_sweep("SDL", 10).drop(columns="tdl_random_matched"))
    assert set(one["Loss vs random routing over β₁"].data["curve"]) == {"this router", "random (uniform)"}
    assert "strokeDash" not in one["Allocation vs β₁"].to_dict()["encoding"]
    price = R.sweep_charts(frame.rename(columns={"beta1": "price"}), x="price", x_title="λ (errors/TFLOP)")
    assert list(price)[0] == "EM vs λ (errors/TFLOP)"
    assert price["EM vs λ (errors/TFLOP)"].to_dict()["encoding"]["x"]["title"] == "λ (errors/TFLOP)"
    linear = price["EM vs λ (errors/TFLOP)"].to_dict()["encoding"]["x"]["scale"]
    assert "type" not in linear  # linear by default


def test_sweep_charts_over_decades_use_a_symlog_axis():
    """A remote LLM's prices span decades (0, 2e-6 … 0.015 errors per TFLOP): a symlog axis, 0 and
    one tick per decade, and the current setting's marker on the same axis."""
    from l2d_core.app_logic.explorer import sweep_points
    from l2d_core.method.costs import log_price_scale

    scale = log_price_scale([149.9995])  # PLLM: GPT-3 over bert-tiny, TFLOPs per query
    points = sweep_points("price", scale)
    assert set(points) <= set(scale) and points[0] == 0.0 and points[-1] == scale[-1] and len(points) > 10
    frame = pd.concat([_sweep("L2D", 10).iloc[[0]]] * len(points), ignore_index=True)
    frame = frame.drop(columns="beta1").assign(price=points)
    charts = R.sweep_charts(frame, x="price", x_title="λ", symlog=points[1])
    x = charts["EM vs λ"].to_dict()["encoding"]["x"]
    assert x["scale"]["type"] == "symlog" and x["scale"]["constant"] == 2e-06
    assert x["axis"]["values"] == [0.0, 2e-06, 2e-05, 0.0002, 0.002]
    marked = R.mark_setting(charts, 0.0003).values()
    assert all(m.to_dict()["layer"][0]["encoding"]["x"]["scale"]["type"] == "symlog" for m in marked)


def test_charts_html_works_offline():
    page = R.charts_html(R.mark_setting(R.sweep_charts(_sweep("SDL", 10)), 0.1), "Sweep <P3>")
    assert "<h1>Sweep &lt;P3&gt;</h1>" in page and "<title>Sweep &lt;P3&gt;</title>" in page
    # the Vega scripts are inlined (nothing fetched from a CDN) and every chart is on the page
    assert "vegaEmbed" in page and "cdn.jsdelivr" not in page and '<script src="http' not in page
    assert all(name in page or json.dumps(name) in page for name in R.sweep_charts(_sweep("SDL", 10)))


# --- tables -------------------------------------------------------------------------------------


def test_summary_table_is_summary_frame(res):
    res["routers"]["legacy"] = {"aiq": 80.0, "points": [], "tdl_below_random_95": True}
    df = summary_frame(res)
    # best AIQ first, ties in the results' order, missing AIQ last
    assert list(df["router"]) == ["l2d-sdl", "knn", "legacy", "zero", "agent:big", "agent:small", "oracle"]
    lines = R.summary_table(res).splitlines()[2:]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    assert [c[0] for c in cells] == list(df["router"])
    for c, (_, row) in zip(cells, df.iterrows()):
        assert c[1].split(" ")[0] == ("n/a" if math.isnan(row["AIQ"]) else f"{row['AIQ']:.2f}")
    assert cells[0][1] == "80.00 ± 0.20 [79.00, 81.00]" and cells[0][7] == "1/2"
    assert cells[2][7] == "yes" and cells[4][7] == "n/a"  # legacy flag; single agents have none
    assert df.loc[0, "β₁ with TDL < random (95%)"] == 1 and df.loc[0, "β₁ tested"] == 2
    assert "## Routers" in report_markdown(res) and R.summary_table(res) in report_markdown(res)


def test_summary_frame_without_apgr_or_routers():
    df = summary_frame({"routers": {"a": {"aiq": 1.0, "points": "not a list"}, "b": "broken"}})
    assert list(df["router"]) == ["a"] and not [c for c in df.columns if c.startswith(("APGR", "CPT"))]
    assert summary_frame({}).empty


# --- targets ------------------------------------------------------------------------------------


def test_targets_are_read_from_targets_json(res, tmp_path, monkeypatch):
    assert T.TARGETS == json.loads(T.TARGETS_FILE.read_text(encoding="utf-8")) == R.TARGETS
    assert all(t["type"] in T.TARGET_TYPES for t in T.TARGETS)
    mine = [
        {"id": "a", "type": "apgr", "pool": res["pool"], "min": 0.99},
        {
            "id": "v",
            "type": "vs_agent",
            "pool": res["pool"],
            "agent": "nobody",
            "em_gap": 1.0,
            "min_ratio": 4.0,
        },
        {"id": "elsewhere", "type": "aiq_gain", "pool": "no-such-pool", "min": 0.3},
    ]
    path = tmp_path / "targets.json"
    path.write_text(json.dumps(mine), encoding="utf-8")
    by = {t["id"]: t for t in evaluate_targets(res, targets=T.load_targets(path))}
    assert by["a"]["status"] == "not met" and by["a"]["threshold"] == 0.99
    assert by["v"]["status"] == "n/a" and "nobody" in by["v"]["detail"]
    assert by["elsewhere"]["status"] == "n/a" and "no no-such-pool results" in by["elsewhere"]["detail"]
    # a lower threshold in a copy: the status follows the file
    mine[0]["min"] = 0.5
    path.write_text(json.dumps(mine), encoding="utf-8")
    by = {t["id"]: t for t in evaluate_targets(res, targets=T.load_targets(path))}
    assert by["a"]["status"] == "met" and by["a"]["target"] == f"APGR ≥ 0.50 on {res['pool']}"
    # an overhead limit leaves out the routers that pay more on every query
    capped = [{**mine[0], "max_overhead_gflops": -1.0}]
    assert evaluate_targets(res, targets=capped)[0]["status"] == "n/a"
    # the default reads TARGETS when called (not a copy taken at definition)
    monkeypatch.setattr(T, "TARGETS", mine[:1])
    assert [t["id"] for t in evaluate_targets(res)] == ["a"]
    assert f"| APGR ≥ 0.50 on {res['pool']} | **met** |" in T.targets_markdown(res)


def test_load_targets_rejects_a_malformed_file(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"id": "x", "type": "apgr", "pool": "P2"}]), encoding="utf-8")
    with pytest.raises(ValueError, match="min"):
        T.load_targets(path)
    path.write_text(json.dumps({"apgr": {"pool": "P2", "min": 0.7}}), encoding="utf-8")
    with pytest.raises(ValueError, match="type"):
        T.load_targets(path)


def test_targets_code_has_no_threshold_literals():
    src = (REPORT_DIR / "targets.py").read_text(encoding="utf-8")
    code = ast.parse(src)
    numbers = {n.value for n in ast.walk(code) if isinstance(n, ast.Constant) and type(n.value) is float}
    assert not numbers & {0.8, 0.77, 0.2, 0.3, 0.95, 1.0, 4.0, 16.05}
    assert '"P2"' not in src.split('"""', 2)[2] and '"bert-ens"' not in src and '"P3-live"' not in src


def test_aiq_over_latency_is_a_column_only_where_the_results_have_it():
    from l2d_core.report.tables import summary_table

    plain = {"routers": {"a": {"aiq": 70.0}, "b": {"aiq": 80.0}}}
    timed = {"routers": {"a": {"aiq": 0.0, "aiq_latency": 21.5}, "b": {"aiq": 0.0, "aiq_latency": 18.0}}}
    assert "AIQ over latency" not in summary_frame(plain).columns
    assert "AIQ over latency" not in summary_table(plain)
    assert summary_frame(timed).set_index("router")["AIQ over latency"].to_dict() == {"a": 21.5, "b": 18.0}
    assert "| AIQ over latency (s) |" in summary_table(timed) and "| 21.50 |" in summary_table(timed)
