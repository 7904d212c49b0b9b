"""Single-query routing (l2d_core.app_logic.live), router comparison
(l2d_core.evaluation.comparison, results files of l2d_core.evaluation.results), the AIQ/PGR
metrics, and AppTest runs of the two pages (pages/single_query.py, pages/comparison.py).

Uses the real benchmark (P3 and P2 on squad11); the embeddings are computed once per session
in the session cache directory. Live extractive answers are checked with a tiny BERT built here
and with a stub model whose logits are set by hand.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from _charts import chart_rows
from _pages import open_page
from _tiny_models import VOCAB, LogitsByToken, bert_tokenizer, one_thread

from l2d_core.agents import AgentSpec, get_agent
from l2d_core.agents.answering import answer_with, check_expected_answer, runnable_agent
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.runners import ExtractiveAgent
from l2d_core.app_logic.comparison_jobs import comparison_status
from l2d_core.data import QARecord
from l2d_core.deploy import deploy
from l2d_core.evaluation import metrics as M
from l2d_core.evaluation.benchmark import BETA_POINTS, PRICE_POINTS
from l2d_core.evaluation.comparison import ComparisonPlan, run_comparison
from l2d_core.evaluation.results import list_results, load_results, save_results
from l2d_core.method.costs import CostConfig
from l2d_core.method.policies import expected_costs, plugin_policy
from l2d_core.report import summary_frame
from l2d_core.routers.base import DENSE_BETAS
from l2d_core.routers.plugin import SHARE_LEVELS
from l2d_core.routers.registry import make_router, router_ids

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

CONTEXT = "Moby-Dick is an 1851 novel by American writer Herman Melville about the whale."


@pytest.fixture(scope="module")
def p3(real_data):
    """Through the pages' own cached loader, so the AppTest runs below reuse the object."""
    from pages.ui.cache import benchmark

    bench = benchmark("squad11", "P3", True)  # with the embeddings the plug-in router reads
    assert bench.pool.name == "P3" and len(bench.test) == 2595
    return bench


@pytest.fixture(scope="module")
def p2(real_data):
    from pages.ui.cache import benchmark

    return benchmark("squad11", "P2", True)


@pytest.fixture(scope="module")
def p2_results(p2):
    with one_thread():
        return run_comparison(p2, ComparisonPlan(seeds=(0,), n_boot=200))


# --- routing one query -----------------------------------------------------------------------


def p_err_of(r: dict) -> np.ndarray:
    return np.array([[w[k] for w in r["chance_wrong"].values()] for k in ("start", "end")])


def test_a_deployed_router_on_test_questions_matches_the_batch_policies(p3):
    costs = p3.costs(0.05)
    with one_thread():
        plugin = make_router("l2d-plugin").fit(p3)
        sdl = make_router("l2d-sdl").fit(p3)
    p_all = plugin.estimator_.predict_proba(p3.X_test)
    s_all = sdl.estimator(costs).decision_function(p3.X_test)
    routed, scored = deploy(plugin, costs), deploy(sdl, costs)
    for i in (0, 17, 1234):
        rec = p3.test_records[i]
        r = routed.route(rec.question, rec.context, rec.qid)  # a dataset question: cached embeddings
        assert list(r["chance_wrong"]) == ["match-lstm", "rnet-plus", "bert-ens"]
        np.testing.assert_allclose(p_err_of(r), p_all[i], rtol=1e-4)  # the benchmark's own features
        ec = expected_costs(p_all[i : i + 1], costs)[0]
        np.testing.assert_allclose(list(r["compared"]["values"].values()), ec, rtol=1e-4, atol=1e-6)
        assert r["compared"]["quantity"] == "expected cost" and r["compared"]["step"] == ""
        assert r["agent_index"] == plugin_policy(p_all[i : i + 1], costs)[0]
        assert r["gflops"]["router"] == p3.rejector_gflops > 1.0 and r["latency_ms"] > 0
        s = scored.route(rec.question, rec.context, rec.qid)
        assert s["agent_index"] == int(s_all[i].sum(axis=0).argmax()) and s["chance_wrong"] is None


def test_a_deployed_router_on_new_text_and_costs_move_the_choice(p3):
    context = f"{CONTEXT} (note {uuid.uuid4().hex})"  # never embedded before
    q = "Who wrote Moby-Dick?"
    plugin = make_router("l2d-plugin").fit(p3)
    r = deploy(plugin, p3.costs(0.0)).route(q, context)
    p = p_err_of(r)
    assert ((p >= 0) & (p <= 1)).all() and np.isfinite(list(r["compared"]["values"].values())).all()
    again = deploy(plugin, p3.costs(0.0)).route(q, context)
    np.testing.assert_allclose(p_err_of(again), p, rtol=1e-5)
    # prohibitive expert costs: the main agent is the only sensible choice
    assert deploy(plugin, CostConfig((1.0, 1.0), (5.0, 5.0))).route(q, context)["agent"] == "match-lstm"


def test_empty_or_malformed_input_is_refused(p3):
    plugin = make_router("l2d-plugin").fit(p3)
    routed = deploy(plugin, p3.costs(0.05))
    with pytest.raises(ValueError, match="question must be non-empty"):
        routed.route("   ", CONTEXT)
    with pytest.raises(ValueError, match="context must be non-empty"):
        routed.route("Who?", "")
    with pytest.raises(ValueError, match="experts"):
        deploy(plugin, CostConfig((1.0,), (0.1,)))
    with pytest.raises(ValueError, match="question is empty"):
        answer_with(get_agent("bert-ens"), "", CONTEXT)
    with pytest.raises(ValueError, match="context is empty"):
        answer_with(get_agent("bert-ens"), "Who?", " \n ")


# --- answering -------------------------------------------------------------------------------


def test_answer_with_returns_the_cached_answer_of_a_dataset_question(p3):
    cache = AgentCache()
    for i in (0, 42):
        rec = p3.test_records[i]
        for j, agent in enumerate(p3.test.agent_ids):
            out = answer_with(get_agent(agent), rec.question, rec.context, rec.qid, cache)
            assert out["status"] == "cached"
            assert out["answer"] == p3.test.answers[i, j]
            assert out["em"] == p3.test.em[i, j] and out["f1"] == pytest.approx(p3.test.f1[i, j])
            assert out["gflops"] == get_agent(agent).gflops


def test_prediction_file_agents_cannot_answer_new_text():
    out = answer_with(get_agent("bert-ens"), "Who wrote Moby-Dick?", CONTEXT)
    assert out["status"] == "cannot_answer"
    assert out["answer"] is None and out["em"] is None
    assert "cannot answer new text" in out["message"]
    # a dataset-looking id the cache does not know: still no made-up answer
    missing = answer_with(get_agent("bert-ens"), "Who?", CONTEXT, dataset_qid="no-such-question")
    assert missing["status"] == "not_cached" and missing["answer"] is None


def test_an_expected_answer_missing_from_the_context_is_reported():
    assert check_expected_answer(CONTEXT, "Herman Melville")["in_context"] is True
    bad = check_expected_answer(CONTEXT, "Charles Dickens")
    assert bad["in_context"] is False and "not in the context" in bad["message"]
    out = answer_with(get_agent("bert-ens"), "Who wrote it?", CONTEXT, expected_answer="Charles Dickens")
    assert out["expected_answer"]["in_context"] is False
    with pytest.raises(ValueError, match="empty"):
        check_expected_answer(CONTEXT, "  ")


def test_extractive_runner_answers_new_text_with_a_real_model(bert_path):
    spec = AgentSpec(id="tiny-qa", dataset="squad11", kind="extractive", path=str(bert_path))
    out = answer_with(spec, "Who wrote Moby-Dick?", CONTEXT)
    assert out["status"] == "live" and out["gflops_source"] == "measured"
    assert out["answer"] and out["answer"] in CONTEXT
    assert out["latency_ms"] > 0 and out["gflops"] > 0
    n_tok = len(bert_tokenizer()(out["answer"], add_special_tokens=False)["input_ids"])
    assert n_tok <= 30
    # with an expected answer in the context, EM/F1 are computed against it
    scored = answer_with(spec, "Who wrote Moby-Dick?", CONTEXT, expected_answer=out["answer"])
    assert scored["em"] == 1.0 and scored["f1"] == 1.0
    # a context longer than 384 tokens is cut into windows, and compute grows with the input
    agent = runnable_agent(spec)
    long = agent.predict([_query("Who wrote it?", " ".join([CONTEXT] * 60))])[0]
    short = agent.predict([_query("Who wrote it?", CONTEXT)])[0]
    assert long.windows > 1 and short.windows == 1
    assert long.gflops > short.gflops > 0
    assert runnable_agent(spec) is agent  # loaded once
    assert "windows" in answer_with(spec, "Who wrote it?", " ".join([CONTEXT] * 60))["message"]


def _query(question: str, context: str) -> QARecord:
    return QARecord(qid="q", title="", context=context, question=question, answers=())


def _answer(path, model, question: str, context: str = CONTEXT, **options) -> str:
    """The answer of an extractive agent whose model is replaced by ``model``."""
    agent = ExtractiveAgent(str(path), device="cpu", **options)
    agent.model = model
    return agent.predict([_query(question, context)])[0].answer


def test_span_selection_rules(bert_path):
    ids = {w: i for i, w in enumerate(VOCAB)}
    # best start "herman"; best end "moby" (before it: invalid), then "melville"; the question
    # repeats both words (question tokens are never an answer)
    model = LogitsByToken({ids["herman"]: 10.0}, {ids["moby"]: 10.0, ids["melville"]: 5.0}, len(VOCAB))
    assert _answer(bert_path, model, "Did herman melville write moby dick?") == "Herman Melville"
    # spans longer than max_answer_tokens are excluded: "american … melville" is 4 tokens
    model = LogitsByToken({ids["american"]: 10.0}, {ids["melville"]: 10.0}, len(VOCAB))
    assert _answer(bert_path, model, "Who?") == "American writer Herman Melville"
    assert _answer(bert_path, model, "Who?", max_answer_tokens=3) != "American writer Herman Melville"
    # SQuAD v2.0: a winning [CLS] score means no answer
    model = LogitsByToken({ids["[CLS]"]: 50.0}, {ids["[CLS]"]: 50.0}, len(VOCAB))
    assert _answer(bert_path, model, "Who?", null_answer=True) == ""
    assert _answer(bert_path, model, "Who?", null_answer=False) != ""


# --- comparison metrics on hand-made curves -----------------------------------------------------


def test_aiq_of_a_known_hull():
    # hull (0, 50) → (4, 90) → (10, 96); (2, 60) and (6, 85) lie under it; (12, 99) is beyond hi
    cost = np.array([0.0, 2.0, 4.0, 6.0, 10.0])
    em = np.array([50.0, 60.0, 90.0, 85.0, 96.0])
    expected = ((50 + 90) / 2 * 4 + (90 + 96) / 2 * 6) / 10  # 83.8
    assert M.aiq(cost, em, 0.0, 10.0) == pytest.approx(expected)
    # a router whose cheapest point is at cost 4: zero left of it (RouterBench), or flat
    assert M.aiq(np.array([4.0, 10.0]), np.array([90.0, 96.0]), 0.0, 10.0) == pytest.approx(558 / 10)
    assert M.aiq(np.array([4.0, 10.0]), np.array([90.0, 96.0]), 0.0, 10.0, left="flat") == pytest.approx(91.8)
    # flat to the right: a router topping out at cost 5 keeps its best EM up to hi
    assert M.aiq(np.array([0.0, 5.0]), np.array([50.0, 90.0]), 0.0, 10.0) == pytest.approx(
        (70 * 5 + 90 * 5) / 10
    )


def test_apgr_oracle_like_random_mixing_and_cpt():
    weak, strong = 60.0, 80.0
    assert M.apgr(np.array([0.0, 1.0]), np.array([80.0, 80.0]), weak, strong) == pytest.approx(1.0)
    assert M.apgr(np.array([0.0, 0.5, 1.0]), np.array([60.0, 70.0, 80.0]), weak, strong) == pytest.approx(0.5)
    # a router at share 0.25 with PGR 0.75 (anchored at (0, 0) and (1, 1)):
    # 0.25 * 0.75 / 2 + 0.75 * (0.75 + 1) / 2 = 0.75
    assert M.apgr(np.array([0.25]), np.array([75.0]), weak, strong) == pytest.approx(0.75)
    assert M.cpt(np.array([0.25]), np.array([75.0]), weak, strong, 0.5) == pytest.approx(1 / 6, abs=1e-3)
    assert M.pgr(70.0, weak, strong) == 0.5
    with pytest.raises(ValueError):
        M.pgr(70.0, 60.0, 60.0)


# --- router comparison on the real benchmark -----------------------------------------------------


def test_run_comparison_on_p2(p2, p2_results, tmp_path):
    res = p2_results
    expected_ids = {
        "l2d-sdl",
        "l2d-plugin",
        "l2d-posthoc",
        "l2d-cascade",
        "l2d-staged",
        "random",
        "zero",
        "oracle",
        "ensemble",
    }
    expected_ids |= {"r-det", "r-prob", "r-trans", "knn", "mlp", "agent:match-lstm", "agent:bert-ens"}
    assert set(res["routers"]) == expected_ids == set(router_ids(p2))
    for rid, r in res["routers"].items():
        assert np.isfinite(r["aiq"]) and 0.0 <= r["aiq"] <= 100.0, rid
        if not rid.startswith("agent:"):
            assert np.isfinite(r["apgr"]) and -0.5 < r["apgr"] <= 1.5, rid
    em = res["agent_em"]
    weak, strong = em["match-lstm"], em["bert-ens"]
    assert res["gflops_range"] == [5.0, 1730.0]
    zero = res["routers"]["zero"]
    assert zero["aiq"] == pytest.approx((weak + strong) / 2)  # the straight line between the agents
    assert zero["apgr"] == pytest.approx(0.5)
    assert res["routers"]["agent:match-lstm"]["aiq"] == pytest.approx(weak)  # flat to the right
    assert res["routers"]["agent:bert-ens"]["aiq"] == 0.0  # nothing cheaper than the dearest agent
    oracle = res["routers"]["oracle"]
    assert oracle["aiq"] >= max(r["aiq"] for r in res["routers"].values()) - 1e-9
    assert oracle["apgr"] > 0.8
    sdl, plugin = res["routers"]["l2d-sdl"], res["routers"]["l2d-plugin"]
    assert len(sdl["points"]) == len(BETA_POINTS) + len(PRICE_POINTS)
    shares = 2 * SHARE_LEVELS  # the share sweeps of an error-estimate router (two margins)
    assert len(plugin["points"]) == len(BETA_POINTS) + len(DENSE_BETAS) + shares + len(PRICE_POINTS)
    assert set(sdl["tdl"]) == {f"{b:g}" for b in BETA_POINTS} == set(res["tdl_random"])
    # TDL: the oracle is per-query optimal, so no router does better at any β; the zero router
    # (best mixture of single agents) is the best single agent; at the ends of the sweep the
    # learned routers beat uniform random allocation by a wide margin
    for key in res["tdl_random"]:
        assert oracle["tdl"][key] <= min(r["tdl"][key] for r in res["routers"].values()) + 1e-12
        assert zero["tdl"][key] == pytest.approx(min(res["routers"][f"agent:{a}"]["tdl"][key] for a in em))
    for key in ("0", "0.5"):
        assert sdl["tdl"][key] < res["tdl_random"][key] - 0.05
        assert plugin["tdl"][key] < res["tdl_random"][key] - 0.05
    # the sweep moves the allocation: more expert calls at β₁ = 0 than at 0.5
    shares = [p["share_strong"] for p in sdl["points"]]
    assert shares[0] > shares[-1] + 0.3
    # saved and read back as strict JSON, with the same schema
    path = save_results(res, tmp_path / "squad11-P2")
    doc = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert load_results(path)["routers"].keys() == res["routers"].keys() and doc["pool"] == "P2"
    assert list_results(tmp_path) == [path]
    table = summary_frame(doc)
    assert list(table["router"])[0] == "oracle" and {"AIQ", "APGR"} <= set(table.columns)


# --- pages -------------------------------------------------------------------------------------


def test_single_query_page_answers_a_dataset_question(p3):
    at = open_page("single_query")
    at.session_state["pool"] = "P3"
    at.run()
    assert not at.exception, at.exception
    # the first test question (the selectbox default); every agent's cached answer is shown
    rec = p3.test_records[0]
    answers = {a: p3.test.answers[0, j] for j, a in enumerate(p3.test.agent_ids)}
    chosen = at.metric[0].value
    assert chosen in answers
    assert answers[chosen] in at.success[0].value
    table = at.dataframe[1].value
    assert list(table["answer"]) == list(answers.values())
    assert set(table["status"]) == {"recorded answer"} and "None" not in table.to_string()
    # what the chart marks is what was routed, and the GFLOPs tile adds up only what ran
    (chart,) = at.get("vega_lite_chart")
    rows = chart_rows(chart)
    marked = [r["agent"] for r in rows if r["choice"] == "chosen"]
    assert len(marked) == 1 and (chosen in marked[0])
    assert at.selectbox(key="sq_index").options[0] == f"{rec.question}  [{rec.title}]"

    # P3's main agent is a prediction file: no own-text input, and the page says where to go
    assert at.radio(key="sq_source").options == ["Dataset question"]
    assert any("cannot answer your own text" in i.value for i in at.info)


def test_comparison_page_without_results_then_run(p2_results, tmp_path, monkeypatch):
    monkeypatch.setenv("L2D_REPORTS_DIR", str(tmp_path))
    at = open_page("comparison")
    at.run()
    assert not at.exception, at.exception
    assert any("No results yet" in i.value for i in at.info)
    # a saved results file of another pool is listed, not drawn unasked; picked, it is drawn
    save_results(p2_results, tmp_path / "saved-P2")
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="cmp_file").options == ["saved-P2"]  # labelled by folder name
    assert at.selectbox(key="cmp_file").value is None and not at.get("vega_lite_chart")
    assert any("No results for squad11 P2 yet" in i.value for i in at.info)
    at.selectbox(key="cmp_file").set_value(str(tmp_path / "saved-P2" / "results.json")).run()
    assert not at.exception, at.exception
    assert set(at.dataframe[0].value["router"]) == set(p2_results["routers"])
    assert len(at.get("vega_lite_chart")) == 3 and not at.get("plotly_chart")  # cost–EM, PGR, TDL
    assert len(at.get("download_button")) == 1
    # the button starts the comparison of the selected pool as a background job (a progress bar
    # meanwhile), which saves reports/<dataset>-<pool>/results.json; the page then shows it
    at.selectbox(key="pool").set_value("P2")
    at.button(key="cmp_run").click().run()
    assert not at.exception, at.exception
    assert len(at.get("progress")) == 1
    job = comparison_status("squad11", "P2")
    while job.running:
        time.sleep(1.0)
        job = comparison_status("squad11", "P2")
    at.run()
    assert not at.exception, at.exception
    saved = tmp_path / "squad11-P2" / "results.json"
    assert job.state == "done" and job.result == str(saved), job
    assert saved.is_file() and at.selectbox(key="cmp_file").value == str(saved)
    assert any(s.value.startswith(f"Saved {saved} (") for s in at.success)
    assert load_results(saved)["routers"].keys() == p2_results["routers"].keys()
