"""scripts/benchmark_routers.py on a reduced run of the real benchmark (P2, one seed, 600
training questions, a few routers), the paper table's matched share
(l2d_core.evaluation.paper), and l2d_core.report on incomplete results."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from l2d_core import report as R
from l2d_core.evaluation.paper import matched_share

ROOT = Path(__file__).resolve().parent.parent
ROUTERS = ["l2d-plugin", "r-prob", "random", "zero", "oracle", "agent:match-lstm", "agent:bert-ens"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _script(name: str):
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench_cli():
    return _script("benchmark_routers")


@pytest.fixture(scope="module")
def reduced_run(real_data, bench_cli, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "squad11-P2"
    argv = ["--pool", "P2", "--quick", "--limit-train", "600", "--n-boot", "100", "--png", "--quiet"]
    argv += ["--prices", "0.05", "0.5"]
    rc = bench_cli.main([*argv, "--routers", *ROUTERS, "--out", str(out)])
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return rc, out, results, (out / "report.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_reduced_run_writes_every_file(reduced_run):
    rc, out, _, _ = reduced_run
    assert rc == 0
    stems = ["cost_em", "tdl_vs_beta", "em_gflops_per_em_vs_beta", "allocation_vs_beta", "pgr_vs_share"]
    for stem in stems:
        html = (out / "plots" / f"{stem}.html").read_text(encoding="utf-8")
        assert "vegaEmbed(" in html and f"<script src='{R.VEGA_SCRIPT}'>" in html, stem  # Altair
        png = (out / "plots" / f"{stem}.png").read_bytes()
        assert png[:8] == PNG_MAGIC and len(png) > 10_000, stem
    # HTML plots work offline: the Vega scripts are a file beside them, nothing from a CDN
    assert "vegaEmbed" in (out / "plots" / R.VEGA_SCRIPT).read_text(encoding="utf-8")
    assert not [p for p in (out / "plots").glob("*.html") if "http" in p.read_text().split("<body>")[0]]


@pytest.mark.slow
def test_results_have_the_routers_and_metrics(reduced_run):
    _, _, res, _ = reduced_run
    assert (res["dataset"], res["pool"], res["seeds"]) == ("squad11", "P2", [0])
    assert list(res["routers"]) == ROUTERS
    for rid, r in res["routers"].items():
        assert isinstance(r["aiq"], float) and 0.0 <= r["aiq"] <= 100.0, rid
        assert r["points"] and all(isinstance(p["em"], float) for p in r["points"])
    for rid in ("l2d-plugin", "r-prob", "oracle"):
        assert isinstance(res["routers"][rid]["apgr"], float), rid
    assert res["routers"]["oracle"]["aiq"] > res["routers"]["zero"]["aiq"]
    assert res["run"]["n_train"] == 600 and res["run"]["reduced"]
    table = res["paper_table"]["rows"]
    assert set(table["l2d-plugin"]) == {"0", "0.25", "0.5"}  # 0.25 run for the table only
    assert table["l2d-plugin"]["0.25"]["extra_beta"] is True
    assert set(table["r-prob @ l2d-plugin share"]) == {"0", "0.25", "0.5"}


@pytest.mark.slow
def test_report_tables_and_targets_match_results(reduced_run):
    _, _, res, md = reduced_run
    for section in (
        "## Targets",
        "## Agents",
        "## Routers",
        "## TDL per β₁",
        "## EM, GFLOPs/EM",
        "## Single-expert table",
        "## Plots",
    ):
        assert section in md, section
    # agents table: EM and F1 of each agent, as computed
    for a in res["agents"]:
        f1 = res["routers"][f"agent:{a}"]["points"][0]["f1"]
        assert f"| {a} | " in md and f"{res['agent_em'][a]:.2f} | {f1:.2f}" in md
    # summary table row of the plug-in: AIQ and APGR with the numbers of results.json
    plug = res["routers"]["l2d-plugin"]
    assert f"| l2d-plugin | {plug['aiq']:.2f} ± " in md and f"{plug['apgr']:.3f} ± " in md
    # targets: APGR (P2) of the L2D router chosen on validation within the overhead, the other pools n/a
    targets = md.split("## Targets")[1].split("## Agents")[0]
    m = re.search(r"APGR ≥ 0\.77 on P2 at ≤ 16\.05 GFLOPs per query of overhead \| \*\*(met|not met)\*\* "
                  r"\| chosen on validation (\S+): APGR ([0-9.]+)", targets)  # fmt: skip
    assert m, targets
    best = res["routers"][m.group(2)]
    assert m.group(2).startswith("l2d-") and (best.get("overhead_gflops") or 0.0) <= 16.05
    assert float(m.group(3)) == pytest.approx(best["apgr"], abs=5e-4)
    assert m.group(1) == ("met" if best["apgr"] >= 0.77 else "not met")
    assert "no P2-live results" in targets and "no P3-live results" in targets
    tdl = {"id": "t", "type": "tdl_below_random", "pool": "P2", "level": 0.95}
    (row,) = R.evaluate_targets(res, targets=[tdl])
    below = sum(ci[1] < 0 for ci in plug["tdl_diff_ci"].values())
    assert f"l2d-plugin: {below}/{len(res['beta_points'])} β₁" in row["detail"]
    # the paper table shows the computed β₁ = 0.25 EM
    em25 = res["paper_table"]["rows"]["l2d-plugin"]["0.25"]["em"]
    assert f"| β₁=0.25 | {em25:.2f} |" in md


@pytest.mark.slow
def test_report_only_rerenders_from_results(reduced_run, bench_cli, tmp_path):
    _, run_dir, res, md = reduced_run
    out = tmp_path / "copy"
    shutil.copytree(run_dir, out)
    (out / "report.md").unlink()
    assert bench_cli.main(["--out", str(out), "--report-only", "--no-png", "--quiet"]) == 0
    again = (out / "report.md").read_text(encoding="utf-8")
    assert again.split("## Plots")[0] == md.split("## Plots")[0]  # same results.json, same tables
    assert json.loads((out / "results.json").read_text(encoding="utf-8")) == res


@pytest.mark.slow
def test_png_failure_keeps_json_report_and_html(reduced_run, bench_cli, tmp_path, monkeypatch):
    """PNG export failing (simulated): --png exits 3, everything but the PNGs is written;
    without --png the run succeeds with a warning."""

    def no_png(*args, **kwargs):
        raise RuntimeError("vl-convert failed (simulated)")

    monkeypatch.setattr(R, "figure_png", no_png)
    argv = ["--pool", "P2", "--quick", "--limit-train", "600", "--n-boot", "20", "--quiet", "--png"]
    rc = bench_cli.main([*argv, "--routers", "random", "zero", "--out", str(tmp_path / "r")])
    assert rc == 3
    assert (tmp_path / "r" / "results.json").is_file() and (
        tmp_path / "r" / "plots" / "cost_em.html"
    ).is_file()
    report = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert (
        "PNG plots missing" in report and "vl-convert failed" in report and not list(tmp_path.rglob("*.png"))
    )
    figs = {"cost_em": R.cost_em_figure(reduced_run[2])}
    written, err = bench_cli.write_plots(figs, tmp_path, None, lambda m: None)
    assert written == ["plots/cost_em.html"] and "vl-convert failed" in err and "\n" not in err


def test_write_plots_html_always_png_when_asked(bench_cli, tmp_path):
    """The plots of a tiny results dict: HTML and the Vega scripts always, PNG unless --no-png
    (vl-convert: no browser), no PNG of an earlier run left behind."""
    res = {
        "pool": "P2",
        "agents": ["a", "b"],
        "routers": {"agent:a": {"points": [{"gflops": 1.0, "em": 60.0}]}},
    }
    figs = {"cost_em": R.cost_em_figure(res)}
    written, err = bench_cli.write_plots(figs, tmp_path, None, lambda m: None)
    assert err is None and written == ["plots/cost_em.html", "plots/cost_em.png"]
    assert (tmp_path / "cost_em.png").read_bytes()[:8] == PNG_MAGIC and (tmp_path / R.VEGA_SCRIPT).is_file()
    written, err = bench_cli.write_plots(figs, tmp_path, False, lambda m: None)
    assert written == ["plots/cost_em.html"] and not (tmp_path / "cost_em.png").exists()


def test_bad_inputs_exit_2(bench_cli, tmp_path, capsys):
    """Checked before any data is loaded."""
    a_file = tmp_path / "taken"
    a_file.write_text("x")
    cases = [
        (["--pool", "P99"], "unknown pool"),
        (["--pool", "P3v2"], "is for dataset squad20"),
        (["--routers", "nope"], "unknown router"),
        (["--out", str(a_file)], "is not a folder"),
        (["--seeds"], None),  # argparse: nargs="+" needs one
        (["--prices", "-1"], "--prices must be finite and >= 0"),
        (["--prices", "nan"], "--prices must be finite and >= 0"),
        (["--routers", "l2d-sdl-full", "nope"], "unknown router(s) nope for pool"),  # named: known
    ]
    for argv, msg in cases:
        try:
            out = [] if "--out" in argv else ["--out", str(tmp_path / "o")]
            rc = bench_cli.main([*argv, "--quiet", *out])
        except SystemExit as exc:  # argparse usage errors
            rc = exc.code
        assert rc == 2, argv
        if msg:
            assert msg in capsys.readouterr().err


@pytest.mark.slow
def test_prices_flag_sets_the_price_points(reduced_run):
    _, _, results, _ = reduced_run
    assert results["price_points"] == [0.05, 0.5]
    prices = [p["price"] for p in results["routers"]["l2d-plugin"]["points"] if "price" in p]
    assert prices == [0.05, 0.5]


def test_router_params_reach_the_router(real_data):
    """``ComparisonPlan(params=…)`` builds each router with its own parameters."""
    from _slices import slice_bench

    from l2d_core.evaluation.comparison import ComparisonPlan, run_comparison

    plan = ComparisonPlan([0], ["l2d-sdl"], n_boot=0, params={"l2d-sdl": {"no_such_setting": 1}})
    with pytest.raises(TypeError, match="no_such_setting"):
        run_comparison(slice_bench("P2"), plan)


def test_matched_share_mixes_the_two_nearest_points():
    pts = [
        {"share_strong": 0.0, "em": 60.0, "gflops": 5.0, "threshold": None},
        {"share_strong": 0.5, "em": 76.0, "gflops": 50.0, "threshold": 0.7},
        {"share_strong": 1.0, "em": 80.0, "gflops": 100.0, "threshold": 0.9},
    ]
    p = matched_share(pts, 0.75)
    assert (p["em"], p["gflops"], p["share_strong"], p["thresholds"]) == (78.0, 75.0, 0.75, [0.7, 0.9])
    assert p["gflops_per_em"] == pytest.approx(75.0 / 78.0)
    assert matched_share(pts, 0.5)["em"] == 76.0
    assert matched_share(pts[1:], 0.1)["em"] == 76.0  # below the range: the end point
    assert matched_share(pts, None) is None and matched_share([], 0.3) is None


def test_report_renders_incomplete_results():
    """Old or partial results: missing fields read as n/a, never an error."""
    res = {
        "dataset": "squad11",
        "pool": "P3",
        "agents": ["a", "b", "c"],
        "agent_em": {"a": 60.0, "b": 70.0, "c": 80.0},
        "agent_gflops": {"a": 1.0, "b": 10.0, "c": 100.0},
        "beta_points": [0.0, 0.5],
        "routers": {
            "l2d-sdl": {
                "aiq": 72.0,
                "validation": {"aiq": 70.0},  # chosen on validation (the targets read that router)
                "points": [
                    {
                        "beta1": 0.0,
                        "gflops": 50.0,
                        "em": 78.0,
                        "tdl": 0.3,
                        "allocation": {"a": 0.5, "c": 0.5},
                    },
                    {"beta1": 0.5, "gflops": 5.0, "em": 65.0},
                ],
            },
            "zero": {"aiq": 65.0, "points": [{"beta1": None, "gflops": 1.0, "em": 60.0}]},
            "oracle": {"aiq": 85.0, "points": []},
            "broken": {"points": "not a list"},
        },
    }
    md = R.report_markdown(res)
    assert "n/a" in md and "## Targets" in md
    pool = res["pool"]
    old = [
        {"id": "aiq_gain", "type": "aiq_gain", "pool": pool, "min": 0.3},
        {"id": "apgr", "type": "apgr", "pool": pool, "min": 0.7},
        {"id": "tdl", "type": "tdl_below_random", "pool": pool, "level": 0.95},
        {"id": "vs_agent", "type": "vs_agent", "pool": pool, "agent": "zz", "em_gap": 1, "min_ratio": 4},
    ]
    t = {x["id"]: x for x in R.evaluate_targets(res, targets=old)}
    assert t["aiq_gain"]["status"] == "met" and t["aiq_gain"]["value"] == pytest.approx((72 - 65) / (85 - 65))
    assert t["apgr"]["status"] == "n/a" and t["tdl"]["status"] == "n/a" and t["vs_agent"]["status"] == "n/a"
    figs = R.figures(res)
    assert {"cost_em", "tdl_vs_beta", "allocation_vs_beta"} <= set(figs)
    assert np.isfinite(R.num(res["routers"]["l2d-sdl"]["aiq"]))
