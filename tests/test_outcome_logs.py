"""Agents known by an outcome log (the LLM routing logs of BENCHMARK.md), the abstaining agent,
confidence files beside prediction files, measured GFLOPs and the latency price rule."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from l2d_core.agents.cache import AgentCache
from l2d_core.agents.catalog import AgentSpec, cheap_builtin_agents, get_agent, get_pool
from l2d_core.agents.outcome_log import LOGGED, import_log, log_needs_import, read_outcome_log
from l2d_core.agents.routing_data import load_routing_data
from l2d_core.data import load_dataset
from l2d_core.data.records import DataFormatError, QADataset, QARecord
from l2d_core.evaluation.benchmark import prepare
from l2d_core.method.costs import InvalidCostError, beta_from_gflops, beta_from_latency, realised_latency

BISUP = "llm_routing/bisupervised"


@pytest.fixture(scope="module")
def squad20(real_data):
    return load_dataset("squad20")


@pytest.fixture(scope="module")
def pllm(squad20):
    return load_routing_data(squad20, ("bert-tiny", "gpt3-davinci", "abstain"))


def answerable(ds, qids) -> np.ndarray:
    return np.array([not ds[q].is_impossible and bool(ds[q].answers) for q in qids])


def test_the_anchor_table_1_is_reproduced_from_the_logs(squad20, pllm):
    """Weiss & Tonella's Table 1, from the same CSVs through the outcome-log loader."""
    ok = answerable(squad20, pllm.qids)
    assert len(pllm) == 10669 and ok.sum() == 4724
    local, remote = pllm.em[:, 0], pllm.em[:, 1]
    assert round(float(local[ok].mean()), 5) == 0.63209 and round(float(remote[ok].mean()), 5) == 0.69496
    assert round(float(local.mean()), 5) == 0.27988 and round(float(remote.mean()), 5) == 0.30771


def test_a_log_without_text_says_right_or_wrong_and_never_invents_a_text(pllm, squad20):
    assert all(a is None for a in pllm.answers[:, :2].ravel())
    assert np.array_equal(pllm.f1[:, :2], pllm.em[:, :2])  # F1 follows EM
    assert np.array_equal(pllm.correct[:, :2], pllm.em[:, :2].astype(bool))
    assert "F1 follows EM" in get_agent("bert-tiny").description
    raw = pd.read_csv(get_agent("bert-tiny").resolved_path())
    assert pllm.em[:, 0].sum() == raw["exact_match"].sum()  # every logged success is kept


def test_confidence_and_latency_arrays_follow_the_logs(pllm):
    for j, aid in enumerate(("bert-tiny", "gpt3-davinci")):
        raw = pd.read_csv(get_agent(aid).resolved_path())
        conf = raw[[c for c in raw.columns if c.endswith("_confidence")][0]]
        assert np.isclose(np.sort(pllm.score[:, j]), np.sort(conf.to_numpy())).all()
        assert np.isclose(pllm.latency[:, j].mean(), raw["pred_time"].mean())
    assert pllm.has_score(0) and not pllm.has_score(2)  # the abstaining agent gives no confidence
    assert pllm.has_latency and (pllm.latency[:, 2] == 0).all()


def test_abstaining_is_right_exactly_on_the_unanswerable_questions(squad20):
    data = load_routing_data(squad20, ("nlnet", "abstain"))
    assert len(data) == len(squad20)  # it answers every question
    assert np.array_equal(data.em[:, 1].astype(bool), ~answerable(squad20, data.qids))
    assert (data.gflops[:, 1] == 0).all() and all(a == "" for a in data.answers[:, 1])


def test_a_log_with_answer_text_is_scored_like_a_prediction_file(squad20):
    data = load_routing_data(squad20, ("llama-3.2-3b", "v2-nullodds"))
    assert len(data) == len(pd.read_csv(get_agent("llama-3.2-3b").resolved_path()))
    raw = pd.read_csv(get_agent("llama-3.2-3b").resolved_path())
    no_answer = int((raw["final_answer"].str.strip() == "NO ANSWER").sum())
    assert sum(a == "" for a in data.answers[:, 0]) == no_answer
    ids = pd.read_csv(str(get_agent("llama-3.2-3b").resolved_path().parent / "row_to_official_id.csv"))
    row = {q: i for i, q in enumerate(data.qids)}
    em = np.array([data.em[row[q], 0] for q in ids["id"]])
    assert np.array_equal(em, ids["em_vs_derived_gold"].to_numpy())  # the map's own check agrees
    # confidence: the margin speaks for "no answer", so an answer given is surer when it is low
    margin = dict(zip(ids["id"], raw["margin"]))
    for i in range(20):
        m = margin[data.qids[i]]
        assert data.score[i, 0] == pytest.approx(m if data.answers[i, 0] == "" else -m)


def test_a_confidence_file_beside_a_prediction_file(squad20, real_data):
    data = load_routing_data(squad20, ("v2-nullodds", "bert-single"))
    odds = json.loads((real_data / get_agent("v2-nullodds").options["confidence_file"]).read_text())
    assert data.has_score(0) and not data.has_score(1)
    for i in range(0, len(data), 997):
        q, a = data.qids[i], data.answers[i, 0]
        assert data.score[i, 0] == pytest.approx(odds[q] if a == "" else -odds[q])
        assert data.confidence[i, 0]["null_margin"] == pytest.approx(odds[q])


def test_measured_gflops_come_from_the_architecture(pllm):
    from transformers import BertConfig, BertForQuestionAnswering

    from l2d_core.flops import forward_gflops

    arch = get_agent("bert-tiny").options["architecture"]
    cfg = BertConfig(**{k: v for k, v in arch.items() if k != "model_type"})
    cfg._attn_implementation = "eager"
    expected = forward_gflops(BertForQuestionAnswering(cfg).eval(), 384)
    assert get_agent("bert-tiny").gflops_source == "measured"
    assert pllm.gflops[:, 0] == pytest.approx(expected)


@pytest.mark.parametrize(
    "arch",
    [
        {"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
         "intermediate_size": 128},
        {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000},
        {"model_type": "deberta-v2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
         "intermediate_size": 128, "vocab_size": 1000},
    ],
)  # fmt: skip
def test_a_measured_architecture_counts_what_a_real_forward_counts(arch, fresh_cache):
    """The count on shapes alone (the meta device, with or without the mask) is a real forward's."""
    import torch

    from l2d_core.agents.measured import architecture_gflops, architecture_model
    from l2d_core.flops import forward_gflops, shape_gflops

    torch.manual_seed(0)
    real = forward_gflops(architecture_model(arch), 48)
    with torch.device("meta"):  # no fallback needed: shapes alone give the count
        shape_only = shape_gflops(architecture_model(arch), 48)
    assert shape_only == pytest.approx(real, rel=1e-12)
    assert architecture_gflops(arch, 48) == pytest.approx(real, rel=1e-12)


def test_logs_and_abstain_are_never_a_cascades_helpers(real_data):
    helpers = cheap_builtin_agents("squad20", "nlnet", max_gflops=1e9)
    assert not {"bert-tiny", "gpt3-davinci", "llama-3.2-3b", "abstain"} & set(helpers)
    assert "v2-nullodds" in helpers  # an agent with answer text still is


# --- reading a log: checks with one-line errors ---------------------------------------------


def tiny_dataset() -> QADataset:
    ctx = "Paris is the capital of France. Berlin is the capital of Germany."
    recs = (
        QARecord("q1", "T", ctx, "Capital of France?", ("Paris",)),
        QARecord("q2", "T", ctx, "Capital of Germany?", ("Berlin",)),
        QARecord("q3", "T", ctx, "Capital of Mars?", (), is_impossible=True),
    )
    return QADataset("tiny", recs, v2=True)


def spec(path, **options) -> AgentSpec:
    return AgentSpec(
        id="logged", dataset="tiny", kind="outcome_log", gflops=3.0, path=str(path), options=options
    )


def test_a_csv_log_with_outcomes_confidence_and_latency(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("id,correct,confidence,latency_s\nq1,True,0.9,0.5\nq3,false,0.2,1.5\nzz,1,0.1,0.1\n")
    cache = AgentCache(tmp_path / "agents")
    report = import_log(spec(log), tiny_dataset(), cache)
    t = cache.table("tiny", "logged")
    assert report.questions == 2 and report.unknown_ids == 1 and report.em == 50.0
    assert set(t.index) == {"q1", "q3"} and (t["status"] == LOGGED).all() and t["answer"].isna().all()
    assert t.loc["q1", "latency_ms"] == 500.0 and t.loc["q3", "confidence"] == {"score": 0.2}
    assert cache.meta("tiny", "logged")["partial"] and "F1 and endpoints follow EM" in " ".join(
        report.lines()
    )


def test_a_jsonl_log_with_answer_text_and_an_id_map(tmp_path):
    log = tmp_path / "log.jsonl"
    rows = [{"answer": "Paris", "margin": -0.5}, {"answer": "Munich", "margin": 0.1}, {"answer": "NO ANSWER"}]
    log.write_text("\n".join(json.dumps(r) for r in rows[:2]) + "\n")
    ids = tmp_path / "ids.csv"
    ids.write_text("row,id\n0,q1\n1,q2\n")
    got, _ = read_outcome_log(spec(log, ids=str(ids)), tiny_dataset())
    assert got == {
        "q1": {"answer": "Paris", "confidence": -0.5},
        "q2": {"answer": "Munich", "confidence": 0.1},
    }
    log.write_text("\n".join(json.dumps({"answer": r["answer"]}) for r in rows) + "\n")
    ids.write_text("row,id\n0,q1\n1,q2\n2,q3\n")
    cache = AgentCache(tmp_path / "agents")
    report = import_log(spec(log, ids=str(ids), no_answer="NO ANSWER"), tiny_dataset(), cache)
    t = cache.table("tiny", "logged")
    assert report.has_text and t["em"].tolist() == [1.0, 0.0, 1.0] and t.loc["q3", "answer"] == ""


def test_a_log_read_in_again_keeps_only_the_questions_it_now_holds(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("id,correct\nq1,True\nq3,False\n")
    cache = AgentCache(tmp_path / "agents")
    import_log(spec(log), tiny_dataset(), cache)
    log.write_text("id,correct\nq2,True\n")  # recorded again, on other questions
    assert log_needs_import(tiny_dataset(), spec(log), cache)
    import_log(spec(log), tiny_dataset(), cache)
    assert set(cache.table("tiny", "logged").index) == {"q2"}


@pytest.mark.parametrize(
    "text, message",
    [
        ("id,correct\nq1,True\nq1,False\n", "appears twice"),
        ("id,correct\nx1,True\nx2,False\n", "none of its 2 questions belong"),
        ("id,correct\nq1,maybe\n", "row 1, column correct must be true/false"),
        ("id,correct,latency_s\nq1,True,-2\n", "must be a finite number >= 0"),
        ("id,correct,confidence\nq1,True,abc\n", "column confidence must be a finite number"),
        ("id,verdict\nq1,True\n", "no column saying whether the agent was right"),
        ("id,correct,is_possible\nq3,False,True\n", "are the rows aligned with the ids?"),
        ("id,correct\n", "has no rows"),
    ],
)
def test_bad_logs_fail_in_one_line(tmp_path, text, message):
    log = tmp_path / "log.csv"
    log.write_text(text)
    with pytest.raises(DataFormatError, match=message) as err:
        import_log(spec(log), tiny_dataset(), AgentCache(tmp_path / "agents"))
    assert "\n" not in str(err.value) and "log.csv" in str(err.value)
    assert not AgentCache(tmp_path / "agents").has("tiny", "logged")  # nothing written


def test_an_id_map_that_misses_a_row_is_refused(tmp_path):
    log, ids = tmp_path / "log.csv", tmp_path / "ids.csv"
    log.write_text("index,correct\n0,True\n7,False\n")
    ids.write_text("index,id\n0,q1\n")
    with pytest.raises(DataFormatError, match=r"1 row keys are not in the id map .* \(e.g. '7'\)"):
        read_outcome_log(spec(log, ids=str(ids)), tiny_dataset())


def test_import_log_command_registers_an_agent(fresh_cache, tmp_path, capsys, real_data):
    import import_log as cli

    ds = load_dataset("squad20")
    qids = list(ds.qids)[:40]
    log = tmp_path / "run.csv"
    pd.DataFrame({"qid": qids, "correct": [i % 2 == 0 for i in range(40)], "pred_time": 0.25}).to_csv(
        log, index=False
    )
    args = ["--file", str(log), "--agent", "my-llm", "--dataset", "squad20", "--gflops", "500"]
    assert cli.main([*args, "--pool", "Mine", "--main", "nlnet"]) == 0
    assert "EM 50.00" in capsys.readouterr().out and get_pool("Mine").experts == ("my-llm",)
    data = load_routing_data(ds, get_pool("Mine"))
    assert len(data) == 40 and np.isclose(data.latency[:, 1], 0.25).all() and data.em[:, 1].mean() == 0.5
    bad = tmp_path / "bad.csv"
    bad.write_text("qid,correct\nnot-a-squad-id,True\n")
    assert cli.main(["--file", str(bad), "--agent", "other", "--gflops", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: outcome log") and "\n" not in err


# --- the latency price rule -----------------------------------------------------------------


def test_latency_price_follows_mean_latencies_on_training_articles(real_data):
    bench = prepare("squad20", "PLLM", features_needed=False)
    t = bench.train.latency.mean(axis=0)
    assert bench.has_latency and t[1] > t[0]
    for lam in (0.0, 0.1, 1.0):
        assert bench.latency_costs(lam).beta == pytest.approx((lam * (t[1] - t[0]),))
        assert bench.rule_costs("latency", lam) == bench.latency_costs(lam)
    local = pd.read_csv(get_agent("bert-tiny").resolved_path())["pred_time"]
    assert not np.isclose(t[0], local.mean())  # training articles only, not the whole log
    with pytest.raises(ValueError, match="latency price needs every agent's latency, and nlnet, bert-single"):
        prepare("squad20", "P2v2", features_needed=False).latency_costs(0.1)


def test_realised_latency_pays_the_main_agent_always():
    t = np.array([[0.02, 0.8, 0.0], [0.01, 0.6, 0.0], [0.03, 0.7, 0.0]])
    assert realised_latency(t, np.array([0, 1, 2])).tolist() == [0.02, 0.61, 0.03]
    assert beta_from_latency(2.0, 0.5, [0.2, 1.0]).tolist() == [0.0, 1.0]
    with pytest.raises(InvalidCostError, match="mean latency"):
        beta_from_latency(1.0, 0.1, [float("nan")])


def test_a_zero_cost_expert_fits_the_gflops_rule():
    assert beta_from_gflops(0.1, [150000.0, 0.0]).tolist() == [0.1, 0.0]
    with pytest.raises(InvalidCostError, match="first expert of positive GFLOPs"):
        beta_from_gflops(0.1, [0.0, 10.0])


def test_an_uploaded_log_becomes_an_agent_on_the_overview(real_data, fresh_cache):
    """The Overview's uploader takes an outcome log (CSV) as it takes a prediction file: the agent
    is registered with a copy of the log, its answers say right/wrong, and a bad log is one line
    that registers nothing."""
    from _pages import open_page

    from l2d_core.agents.catalog import list_agents

    squad11 = load_dataset("squad11")
    qids = list(squad11.qids)[:40]
    rows = "\n".join(
        f"{q},{'true' if i % 4 else 'false'},{0.1 + i / 100:.2f},{100 + i},5" for i, q in enumerate(qids)
    )
    at = open_page("overview", pool="P3").run()
    at.file_uploader(key="agent_upload_0").set_value(
        ("run.csv", f"id,correct,confidence,tokens_in,tokens_out\n{rows}\n".encode(), "text/csv")
    )
    at.text_input(key="agent_upload_id").set_value("my-log")
    at.number_input(key="agent_upload_usd_in").set_value(2.0)  # its token counts priced
    at.number_input(key="agent_upload_usd_out").set_value(8.0)
    at.button(key="agent_upload_add").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("my-log" in s.value for s in at.success)
    spec = get_agent("my-log")
    assert spec.kind == "outcome_log" and spec.path.endswith("squad11-my-log.csv")
    cached = AgentCache().table("squad11", "my-log")
    assert len(cached) == 40 and cached["em"].sum() == 30  # three in four right, as logged
    assert cached.loc[qids[2], "confidence"] == {"score": pytest.approx(0.12)}
    assert cached.loc[qids[2], "usd"] == pytest.approx((102 * 2.0 + 5 * 8.0) / 1e6)

    at.file_uploader(key="agent_upload_1").set_value(("bad.csv", b"id,correct\nx,maybe\n", "text/csv"))
    at.text_input(key="agent_upload_id").set_value("bad-log")
    at.button(key="agent_upload_add").click().run()
    assert not at.exception and len(at.error) == 1 and "\n" not in at.error[0].value
    assert "bad-log" not in {a.id for a in list_agents()}
    assert not (fresh_cache / "uploads" / "squad11-bad-log.csv").exists()


def test_no_majority_vote_over_agents_known_by_their_logs_only(real_data):
    """A vote compares answer texts: on PLLM (two logs without text) the ensemble is not offered
    and fitting it says why, instead of scoring a vote of nothing as EM 0; on P3 it runs."""
    from l2d_core.routers.ensemble import MajorityVoteRouter
    from l2d_core.routers.registry import router_ids

    pllm = prepare("squad20", "PLLM", features_needed=False)
    why = MajorityVoteRouter.unavailable(pllm)
    assert why and "bert-tiny and gpt3-davinci are known by their logs only" in why
    assert "ensemble" not in router_ids(pllm, embeddings=False)
    with pytest.raises(ValueError, match="majority vote compares answer texts"):
        MajorityVoteRouter().fit(pllm)
    p3 = prepare("squad11", "P3", features_needed=False)
    assert MajorityVoteRouter.unavailable(p3) is None and "ensemble" in router_ids(p3, embeddings=False)
