"""Issue 25: the LLM-pool targets (targets.json: PLLM, PLLM answerable, PLLM-abstain, P3-albert,
the PLLM budget), the paired AIQ / APGR differences they read, the answerable-questions
benchmark, the latency tables and the request–accuracy plot."""

from __future__ import annotations

import numpy as np
import pytest

from l2d_core.evaluation import metrics as M
from l2d_core.evaluation.benchmark import QUESTION_SETS, answerable_mask, prepare
from l2d_core.evaluation.comparison import ComparisonPlan, run_comparison
from l2d_core.evaluation.paired import paired_differences
from l2d_core.evaluation.results import run_key
from l2d_core.report import TARGETS, evaluate_targets, figures, report_markdown
from l2d_core.report.requests import latency_tables, request_accuracy_figure, requests_frame
from l2d_core.report.targets_llm import LLM_TARGETS

# --- the declared targets ------------------------------------------------------------------------


def test_the_issue_25_targets_are_declared_for_their_pools():
    by_id = {t["id"]: t for t in TARGETS}
    assert by_id["apgr-aiq-PLLM"] | {} == {
        "id": "apgr-aiq-PLLM",
        "type": "apgr_aiq_vs",
        "pool": "PLLM",
        "min": 0.80,
        "router": "conf-threshold",
    }
    assert by_id["apgr-PLLM-answerable"]["questions"] == "answerable"
    assert (
        by_id["em-remote-PLLM-abstain"]["max_share"] == 0.10
        and by_id["em-remote-PLLM-abstain"]["min_em"] == 60
    )
    assert by_id["aiq-P3-albert"]["type"] == "aiq_gain" and by_id["aiq-P3-albert"]["min"] == 0.15
    assert by_id["budget-PLLM"]["share"] == 0.20 and by_id["budget-PLLM"]["tolerance"] == 0.02


def _one(results: dict, tid: str, siblings=None) -> dict:
    t = next(t for t in TARGETS if t["id"] == tid)
    return evaluate_targets(results, siblings, [t])[0]


# --- paired AIQ and APGR vs conf-threshold (PLLM) --------------------------------------------


def _pllm(apgr: float, ci: list[float], questions: str = "all") -> dict:
    return {
        "pool": "PLLM",
        "questions": questions,
        "routers": {
            "l2d-cascade": {
                "validation": {"aiq": 30.0, "price": 0.01},  # chosen on the training articles
                "apgr": apgr,
                "apgr_ci": [apgr - 0.1, apgr + 0.1],
                "aiq": 30.5,
                "aiq_diff": {"conf-threshold": 0.4},
                "aiq_diff_ci": {"conf-threshold": ci},
                "apgr_diff": {"conf-threshold": apgr - 0.7},
                "apgr_diff_ci": {"conf-threshold": [apgr - 0.75, apgr - 0.65]},
            },
            "conf-threshold": {"apgr": 0.7, "aiq": 30.1},
        },
    }


@pytest.mark.parametrize(
    ("apgr", "ci", "status"),
    [
        (0.84, [0.04, 0.73], "met"),
        (0.84, [-0.01, 0.73], "not met"),  # the paired interval reaches 0
        (0.79, [0.04, 0.73], "not met"),  # APGR short of 0.80
    ],
)
def test_pllm_needs_both_the_apgr_and_the_paired_aiq_interval_above_zero(apgr, ci, status):
    row = _one(_pllm(apgr, ci), "apgr-aiq-PLLM")
    assert row["status"] == status and row["router"] == "l2d-cascade"
    assert row["interval"] == ci and f"{ci[0]:+.3f}" in row["detail"]


def test_the_answerable_target_reads_only_an_answerable_run():
    everything = _pllm(0.9, [0.1, 0.2])
    assert _one(everything, "apgr-PLLM-answerable")["status"] == "n/a"  # a run on every question
    assert _one(everything, "apgr-aiq-PLLM")["status"] == "met"
    ans = _pllm(0.69, [0.1, 0.2], questions="answerable")
    assert _one(ans, "apgr-aiq-PLLM")["status"] == "n/a"  # the answerable run is not the PLLM run
    assert _one(ans, "apgr-PLLM-answerable")["status"] == "not met"  # 0.69 < conf-threshold 0.70
    sib = {run_key(ans): {"path": "x/results.json", "results": _pllm(0.71, [0.1, 0.2], "answerable")}}
    row = _one(everything, "apgr-PLLM-answerable", sib)
    assert row["status"] == "met" and "x/results.json" in row["detail"]


# --- EM at ≤ 10% remote calls (PLLM-abstain) ------------------------------------------------


def _abstain(points: list[tuple[float, float, float]], cis=None, price: float = 0.01) -> dict:
    """(per-TFLOP price, share to GPT-3, EM) per point; ``price``: the one chosen on validation."""
    pts = [
        {"price": lam, "em": em, "allocation": {"bert-tiny": 0.9 - s, "gpt3-davinci": s, "abstain": 0.1}}
        for lam, s, em in points
    ]
    r = {"points": pts, "validation": {"aiq": 60.0, "price": price}, **({"point_em_ci": cis} if cis else {})}
    return {
        "pool": "PLLM-abstain",
        "agents": ["bert-tiny", "gpt3-davinci", "abstain"],
        "routers": {"l2d-cascade": r, "conf-threshold": {"points": [pts[0]]}},
    }


def test_em_at_a_remote_share_reads_the_point_chosen_on_validation_within_the_cap():
    """The point at the validation price, or the nearest dearer one within the cap — never the
    best EM on test (the cheaper point of EM 70 sends 11% to GPT-3; the point of EM 75 is dearer
    than the first one within the cap)."""
    pts = [(0.001, 0.11, 70.0), (0.01, 0.10, 61.5), (0.1, 0.05, 75.0)]
    res = _abstain(pts, cis=[[69, 71], [60.1, 62.9], [74, 76]], price=0.001)
    row = _one(res, "em-remote-PLLM-abstain")
    assert row["status"] == "met" and row["value"] == 61.5 and row["interval"] == [60.1, 62.9]
    row = _one(_abstain([(0.001, 0.05, 59.0), (0.01, 0.02, 75.0)], price=0.001), "em-remote-PLLM-abstain")
    assert row["status"] == "not met" and row["value"] == 59.0
    assert "conf-threshold EM 59.00" in row["detail"]  # the baseline at the same cap, for reference


# --- AIQ gain (P3-albert) and the budget (PLLM) -------------------------------------------------


def test_the_aiq_gain_target_shows_its_paired_interval():
    res = {
        "pool": "P3-albert",
        "routers": {
            "l2d-staged": {"aiq": 84.0, "aiq_gain_ci": [0.05, 0.2], "validation": {"aiq": 80.0}},
            "zero": {"aiq": 83.0},
            "oracle": {"aiq": 90.0},
        },
    }
    row = _one(res, "aiq-P3-albert")
    assert row["status"] == "not met" and row["value"] == pytest.approx(1 / 7)
    assert row["interval"] == (0.05, 0.2) and "[5.0%, 20.0%]" in row["detail"]


@pytest.mark.parametrize(("realised", "status"), [(0.215, "met"), (0.185, "met"), (0.221, "not met")])
def test_every_l2d_budget_router_must_land_within_the_tolerance(realised, status):
    rows = lambda x: [{"kind": "share", "target": 0.2, "realised": x, "ci": [x - 0.01, x + 0.01]}]  # noqa: E731
    res = {
        "pool": "PLLM",
        "routers": {
            "l2d-cascade": {"budgets": rows(0.2)},
            "l2d-staged": {"budgets": rows(realised)},
            "conf-threshold": {},
        },
    }
    row = _one(res, "budget-PLLM")
    assert row["status"] == status and row["router"] == "l2d-staged"
    assert _one({"pool": "PLLM", "routers": {"l2d-cascade": {}}}, "budget-PLLM")["status"] == "n/a"


def test_every_new_target_type_is_registered_and_says_na_without_its_pool():
    for kind, fn in LLM_TARGETS.items():
        t = next(t for t in TARGETS if t["type"] == kind)
        assert fn({"pool": "elsewhere", "routers": {}}, None, t)["status"] == "n/a"


# --- paired differences ------------------------------------------------------------------------


def test_paired_intervals_follow_the_shared_resamples():
    rng = np.random.default_rng(0)
    base = rng.normal(30.0, 1.0, 500)  # both routers move with the resample
    s = {"l2d-cascade": base + 0.3, "conf-threshold": base, "zero": base - 1.0, "oracle": base + 2.0}
    routers = {k: {"aiq": float(v.mean())} for k, v in s.items()}
    out = paired_differences(routers, {"aiq": s})
    assert set(out) == {"l2d-cascade"}  # only L2D routers get differences
    lo, hi = out["l2d-cascade"]["aiq_diff_ci"]["conf-threshold"]
    assert lo == pytest.approx(0.3) and hi == pytest.approx(0.3)  # paired: the common noise cancels
    alone = M.percentile_interval(s["l2d-cascade"])
    assert alone[1] - alone[0] > 3.0  # each router alone is wide (±2σ of the shared noise)
    assert out["l2d-cascade"]["aiq_gain_ci"] == pytest.approx([1.3 / 3.0, 1.3 / 3.0])
    assert out["l2d-cascade"]["aiq_diff"]["zero"] == pytest.approx(1.3)


# --- the real PLLM pool --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pllm_results(real_data):
    bench = prepare("squad20", "PLLM", features_needed=False)
    routers = ["l2d-cascade", "conf-threshold", "zero", "oracle", "agent:bert-tiny", "agent:gpt3-davinci"]
    return bench, run_comparison(bench, ComparisonPlan((0,), routers, n_boot=200))


def test_a_real_pllm_run_carries_what_the_targets_read(pllm_results):
    bench, res = pllm_results
    r = res["routers"]["l2d-cascade"]
    assert res["questions"] == "all" and res["latency_points"] and bench.has_latency
    lo, hi = r["aiq_diff_ci"]["conf-threshold"]
    assert lo < hi and lo < r["aiq_diff"]["conf-threshold"] < hi
    assert len(r["point_em_ci"]) == len(r["points"])
    assert all(
        c[0] <= p["em"] + 1e-6 and p["em"] - 1e-6 <= c[1] for c, p in zip(r["point_em_ci"], r["points"])
    )
    (b,) = r["budgets"]
    assert b["kind"] == "share" and b["target"] == 0.2 and b["ci"][0] <= b["realised"] <= b["ci"][1]
    lat = [p for p in r["points"] if p.get("latency_price") is not None]
    assert [p["latency_price"] for p in lat] == res["latency_points"]
    assert all(p["latency_s"] > 0 for p in lat)
    rows = {t["id"]: t for t in evaluate_targets(res)}
    assert rows["apgr-aiq-PLLM"]["status"] in ("met", "not met") and rows["budget-PLLM"]["status"] in (
        "met",
        "not met",
    )


def test_the_report_shows_latency_and_the_request_accuracy_plot(pllm_results):
    _, res = pllm_results
    md = report_markdown(res)
    assert "## Latency (mean realised latency per query)" in md and "λ_s=0.1" in md
    assert "request_accuracy" in figures(res)
    frame = requests_frame(res)
    assert {"conf-threshold", "l2d-cascade"} <= set(frame["router"])
    gpt = frame[frame["router"] == "agent:gpt3-davinci"]
    assert gpt["share"].tolist() == [1.0]
    spec = request_accuracy_figure(res).to_dict()
    assert "remote calls" in str(spec)
    assert "mean latency (s)" in latency_tables(res)


def test_the_answerable_benchmark_keeps_the_answerable_questions_in_every_split(real_data):
    assert QUESTION_SETS == ("all", "answerable")
    full = prepare("squad20", "PLLM", features_needed=False, val_fraction=0.2)
    ans = prepare("squad20", "PLLM", features_needed=False, val_fraction=0.2, questions="answerable")
    for split in ("train", "val", "test"):  # routers train, are validated and are scored on them
        whole, kept = getattr(full, split), getattr(ans, split)
        ok = answerable_mask(full.dataset, whole.qids)
        assert kept.qids == tuple(np.array(whole.qids)[ok]) and 0 < len(kept) < len(whole)
    assert ans.cache_key(False) != full.cache_key(False)
    with pytest.raises(ValueError, match="questions must be one of"):
        prepare("squad20", "PLLM", features_needed=False, questions="some")


def test_on_plocal_the_aiq_over_latency_orders_the_routers_where_gflops_cannot(real_data):
    """Plocal's larger LLM counts fewer GFLOPs per answer than its smaller one, so over GFLOPs the
    routers' AIQ is 0; over the latency users wait, the zero router is the hull of both LLMs (each
    on its own latency), and the learned router lies between it and the oracle."""
    bench = prepare("squad11", "Plocal", features_needed=False)
    res = run_comparison(bench, ComparisonPlan((0,), ["l2d-posthoc", "zero", "oracle"], n_boot=0))
    r = res["routers"]
    assert {p["agent"] for p in r["zero"]["points"]} == set(bench.test.agent_ids)
    zero, ours, oracle = (r[k]["aiq_latency"] for k in ("zero", "l2d-posthoc", "oracle"))
    assert 0 < zero < ours < oracle, (zero, ours, oracle)
    paid = [p["latency_s"] for p in r["zero"]["points"]]
    assert min(paid) == pytest.approx(bench.test.latency[:, 0].mean())  # the main LLM alone
