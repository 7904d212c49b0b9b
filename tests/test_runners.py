"""Runnable agents (l2d_core.agents.runners): sliding windows, null answers, character mapping,
measured GFLOPs, the few-shot generative agent, and run_into_cache — on tiny models built here."""

from __future__ import annotations

import math
import types

import pytest
import torch
from _tiny_models import VOCAB, LogitsByToken, bert_tokenizer, one_thread

from l2d_core.agents import AgentSpec
from l2d_core.agents.answering import answer_with
from l2d_core.agents.base import check_windows, eager_attention, load_tokenizer
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.generative import FEW_SHOT, build_prompt, parse_output
from l2d_core.agents.runners import (
    ExtractiveAgent,
    GenerativeAgent,
    ModelLoadError,
    PredictionFileAgent,
    agent_gflops_at,
    load_agent,
    run_into_cache,
)
from l2d_core.data import QADataset, QARecord
from l2d_core.flops import count_gflops, forward_gflops

CONTEXT = "Moby-Dick is an 1851 novel by American writer Herman Melville about the whale."
FILLER = "The whale is an American novel, in the year 1851 and the city. " * 40  # > 384 tokens
IDS = {w: i for i, w in enumerate(VOCAB)}


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    with one_thread():
        yield


@pytest.fixture(scope="session")
def bert(bert_path):
    return ExtractiveAgent(str(bert_path), device="cpu")


@pytest.fixture(scope="session")
def llama(llama_path):
    return GenerativeAgent(str(llama_path), device="cpu", max_new_tokens=6)


def q(context: str, question: str = "Who wrote Moby-Dick?", qid: str = "q", answers=()) -> QARecord:
    return QARecord(qid=qid, title="t", context=context, question=question, answers=tuple(answers))


def stub(bert_path, start: dict, end: dict, **options) -> ExtractiveAgent:
    agent = ExtractiveAgent(str(bert_path), device="cpu", **options)
    agent.model = LogitsByToken({IDS[k]: v for k, v in start.items()}, {IDS[k]: v for k, v in end.items()})
    return agent


# --- extractive ----------------------------------------------------------------------------------


def test_a_long_context_gets_windows_and_the_answer_can_come_from_a_later_one(bert_path):
    context = FILLER + "Herman Melville wrote it."
    agent = stub(bert_path, {"herman": 10.0}, {"melville": 10.0})
    p = agent.predict([q(context)])[0]
    assert p.windows > 1 and p.extra["window"] >= 1  # "herman" lies only in the last window(s)
    assert p.answer == "Herman Melville"  # the context's characters: case and all
    assert (p.extra["char_start"], p.extra["char_end"]) == (len(FILLER), len(FILLER) + len("Herman Melville"))
    # the same with max_length 64: many windows, overlapping by the stride
    small = stub(bert_path, {"herman": 10.0}, {"melville": 10.0}, max_length=64, stride=16)
    assert small.predict([q(context)])[0].windows > p.windows


def test_a_tokenizer_whose_windows_stop_short_is_refused(bert_path):
    """tokenizers 0.23.2 returns two overflow windows whatever the context's length; the agents
    refuse such a tokenizer with a line that says what to install, rather than lose answers."""
    tok = load_tokenizer(str(bert_path))  # checked: the pinned tokenizers covers the whole context

    def two_windows(*args, **kwargs):
        enc = tok(*args, **kwargs)
        for key in ("input_ids", "offset_mapping"):
            enc.data[key] = enc[key][:2]
        return enc

    with pytest.raises(ModelLoadError, match=r"windows stop at character \d+ .*tokenizers==0\.23\.3"):
        check_windows(two_windows)


def test_character_mapping_and_span_rules(bert_path):
    agent = stub(bert_path, {"moby": 8.0}, {"dick": 8.0})
    p = agent.predict([q(CONTEXT, "Which novel?")])[0]
    assert p.answer == "Moby-Dick" and CONTEXT[p.extra["char_start"] : p.extra["char_end"]] == "Moby-Dick"
    # the end must not precede the start, and question tokens never answer
    agent = stub(bert_path, {"herman": 10.0}, {"moby": 10.0, "melville": 5.0})
    assert agent.predict([q(CONTEXT, "Did herman melville write moby dick?")])[0].answer == "Herman Melville"


def test_null_answer_competes_with_the_best_span_on_v2(bert_path):
    span = {"herman": 6.0}, {"melville": 6.0}
    weak_null = stub(bert_path, {**span[0], "[CLS]": 5.0}, {**span[1], "[CLS]": 5.0}, null_answer=True)
    strong_null = stub(bert_path, {**span[0], "[CLS]": 7.0}, {**span[1], "[CLS]": 7.0}, null_answer=True)
    v1 = stub(bert_path, {**span[0], "[CLS]": 7.0}, {**span[1], "[CLS]": 7.0}, null_answer=False)
    assert weak_null.predict([q(CONTEXT)])[0].answer == "Herman Melville"
    out = strong_null.predict([q(FILLER + CONTEXT)])[0]  # several windows: null = min over them
    assert out.answer == "" and out.extra["null_score"] == pytest.approx(14.0)
    assert "char_start" not in out.extra
    assert out.extra["confidence"]["null_margin"] == pytest.approx(12.0 - 14.0)  # negative: null won
    assert weak_null.predict([q(CONTEXT)])[0].extra["confidence"]["null_margin"] == pytest.approx(2.0)
    assert v1.predict([q(CONTEXT)])[0].answer == "Herman Melville"  # v1.1: no null answer
    assert "null_margin" not in v1.predict([q(CONTEXT)])[0].extra["confidence"]


def test_confidence_of_the_chosen_span(bert_path):
    """A clear winner: high span probability and margin; two equal spans: probability ≤ ½, margin 0."""
    sure = stub(bert_path, {"herman": 10.0}, {"melville": 10.0}).predict([q(CONTEXT)])[0]
    conf = sure.extra["confidence"]
    assert conf["span_prob"] > 0.9 and conf["margin"] > 5 and conf["windows"] == 1
    assert conf["start_logit"] == pytest.approx(10.0) and conf["end_logit"] == pytest.approx(10.0)
    torn = stub(bert_path, {"herman": 10.0, "moby": 10.0}, {"melville": 10.0, "dick": 10.0})
    conf = torn.predict([q(CONTEXT)])[0].extra["confidence"]
    assert conf["span_prob"] <= 0.5 + 1e-6 and conf["margin"] == pytest.approx(0.0, abs=1e-4)
    assert (
        stub(bert_path, {"herman": 10.0}, {"melville": 10.0})
        .predict([q(FILLER + CONTEXT)])[0]
        .extra["confidence"]["windows"]
        > 1
    )


def test_batching_does_not_change_answers(bert_path):
    recs = [q(FILLER[: 40 * k] + CONTEXT, qid=f"q{k}") for k in range(1, 12)]
    one = ExtractiveAgent(str(bert_path), device="cpu", batch_size=1).predict(recs)
    many = ExtractiveAgent(str(bert_path), device="cpu", batch_size=7).predict(recs)
    assert [p.qid for p in one] == [r.qid for r in recs]
    assert [p.answer for p in one] == [p.answer for p in many]
    assert all(p.answer and p.answer in r.context for p, r in zip(one, recs))
    assert [p.extra["score"] for p in one] == pytest.approx([p.extra["score"] for p in many], abs=1e-4)


def test_gflops_are_counted_per_window_and_grow_with_windows(bert):
    short, long = bert.predict([q(CONTEXT), q(FILLER + CONTEXT)])
    assert short.windows == 1 and long.windows > 1
    assert long.gflops > short.gflops > 0 and short.latency_ms > 0
    # the fitted count equals torch's counter at any length (eager attention)
    with eager_attention(bert.model):
        for n in (7, 100, 384):
            assert bert.gflops_at(n) == pytest.approx(forward_gflops(bert.model, n), rel=1e-6)
    assert agent_gflops_at(bert, 384) == pytest.approx(bert.gflops_at(384))
    enc = bert_tokenizer()("Who wrote Moby-Dick?", CONTEXT)
    assert short.gflops == pytest.approx(bert.gflops_at(len(enc["input_ids"])))


def test_dtype_device_and_missing_model(bert_path, tmp_path):
    p = ExtractiveAgent(str(bert_path), device="cpu", dtype="bf16").predict([q(CONTEXT)])[0]
    assert p.answer in CONTEXT and p.gflops > 0
    with pytest.raises(ValueError, match="fp16"):
        ExtractiveAgent(str(bert_path), device="cpu", dtype="fp16")
    with pytest.raises(ModelLoadError, match="could not load") as exc:
        ExtractiveAgent(str(tmp_path / "no-such-model"))
    assert "\n" not in str(exc.value)
    with pytest.raises(ValueError, match="stride"):
        ExtractiveAgent(str(bert_path), stride=384)


def test_a_question_too_long_for_a_window_is_reported_not_fatal(bert_path):
    agent = ExtractiveAgent(str(bert_path), device="cpu", max_length=64, stride=16)
    ok, bad = agent.predict([q(CONTEXT, qid="ok"), q(CONTEXT * 3, "who wrote " * 40, "bad")])
    assert ok.answer and bad.answer is None and "too long" in bad.extra["error"]
    options = {"max_length": 64, "stride": 16}
    spec = AgentSpec("tiny", "squad11", kind="extractive", path=str(bert_path), options=options)
    with pytest.raises(ValueError, match="too long"):
        answer_with(spec, "who wrote " * 40, CONTEXT * 3)


# --- generative ----------------------------------------------------------------------------------


def test_prompt_has_the_four_demonstrations_and_question_mark_means_no_answer():
    prompt = build_prompt("Who wrote Moby-Dick?", CONTEXT)
    for context, question, output in FEW_SHOT:
        assert f'Context: "{context}"\nQuestion: "{question}"\nOutput: "{output}"' in prompt
    assert len(FEW_SHOT) == 4 and [o for *_, o in FEW_SHOT].count("?") == 2
    assert prompt.endswith(f'Context: "{CONTEXT}"\nQuestion: "Who wrote Moby-Dick?"\nOutput: "')
    assert parse_output('?"\nContext: "x"') == "" and parse_output("?") == ""
    assert parse_output('Herman Melville"\n') == "Herman Melville" and parse_output(" whale ") == "whale"


def test_generation_parsing_and_cost(llama, monkeypatch):
    """generate() replaced by fixed continuations: stop at the newline, '?' = no answer."""
    tok = llama.tokenizer
    outputs = {"Who wrote it?": 'Herman Melville"\nContext: more', "When was he born?": '?"\nQuestion'}
    real = llama.model.generate

    def fake_generate(input_ids, **_):
        rows = []
        for row in input_ids:
            prompt = tok.decode(row, skip_special_tokens=True)
            key = next(k for k in outputs if f'Question: "{k}"' in prompt.rsplit("Context:", 1)[1])
            rows.append(row.tolist() + tok(outputs[key])["input_ids"])
        width = max(map(len, rows))
        seq = torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r in rows])
        new = seq[:, input_ids.shape[1] :]
        vocab = llama.model.config.vocab_size
        scores = tuple(
            torch.zeros(len(rows), vocab).scatter(1, new[:, k : k + 1], 3.0) for k in range(new.shape[1])
        )
        return types.SimpleNamespace(
            sequences=seq, scores=scores
        )  # as generate(return_dict_in_generate=True)

    monkeypatch.setattr(llama.model, "generate", fake_generate)
    a, b = llama.predict([q(CONTEXT, "Who wrote it?", "a"), q(CONTEXT, "When was he born?", "b")])
    assert (a.answer, b.answer) == ("Herman Melville", "")
    expected_logp = 3.0 - math.log(math.exp(3.0) + llama.model.config.vocab_size - 1)  # every token's
    for p, abstained in ((a, 0.0), (b, 1.0)):
        conf = p.extra["confidence"]
        assert conf["abstained"] == abstained
        assert conf["mean_logprob"] == pytest.approx(expected_logp, rel=1e-5)
        assert conf["min_logprob"] == pytest.approx(expected_logp, rel=1e-5)
    assert a.extra["generated_tokens"] == len(tok('Herman Melville"\n')["input_ids"])
    assert a.extra["prompt_tokens"] == len(tok(build_prompt("Who wrote it?", CONTEXT))["input_ids"])
    assert a.gflops > b.gflops > 0  # more generated tokens, more decoding steps
    monkeypatch.setattr(llama.model, "generate", real)


def test_generative_gflops_equal_a_counted_generate_call(llama):
    ids = torch.full((1, 40), 5, dtype=torch.long)
    for n in (1, 4):
        with eager_attention(llama.model):
            counted = count_gflops(
                lambda n=n: llama.model.generate(
                    input_ids=ids, attention_mask=torch.ones_like(ids), min_new_tokens=n, max_new_tokens=n,
                    do_sample=False, pad_token_id=0,
                )
            )  # fmt: skip
        assert llama.query_gflops(40, n) == pytest.approx(counted, rel=1e-6)
    assert agent_gflops_at(llama, 384) == pytest.approx(llama.query_gflops(384, 1))


def test_real_generation_runs_batched(llama):
    recs = [q(CONTEXT, "Who wrote it?", "a"), q("The whale.", "What?", "b"), q(CONTEXT * 2, "When?", "c")]
    preds = llama.predict(recs)
    assert [p.qid for p in preds] == ["a", "b", "c"]
    assert llama.predict([]) == []
    for p in preds:
        assert isinstance(p.answer, str) and 1 <= p.extra["generated_tokens"] <= 6
        assert p.gflops > 0 and p.latency_ms > 0


# --- one interface, and the cache ---------------------------------------------------------------


def dataset(v2: bool = False) -> QADataset:
    recs = [
        q(CONTEXT, "Who wrote Moby-Dick?", "w", ["Herman Melville"]),
        q(CONTEXT, "What is it about?", "a", ["the whale"]),
        q(FILLER + CONTEXT, "When?", "n", ["1851"]),
        q(CONTEXT, "Where?", "x", ["America"]),
    ]
    return QADataset("squad11", tuple(recs), v2=v2)


def test_load_agent_for_every_kind(bert_path, llama_path, tmp_path):
    spec = AgentSpec("e", "squad11", kind="extractive", path=str(bert_path), options={"stride": 64})
    ext = load_agent(spec)
    assert isinstance(ext, ExtractiveAgent) and ext.stride == 64 and not ext.null_answer
    assert load_agent(AgentSpec("e2", "squad20", kind="extractive", path=str(bert_path))).null_answer
    gen = load_agent(AgentSpec("g", "squad11", kind="generative", path=str(llama_path)), max_new_tokens=3)
    assert isinstance(gen, GenerativeAgent) and gen.max_new_tokens == 3
    with pytest.raises(ValueError, match="unknown option"):
        load_agent(AgentSpec("e3", "squad11", kind="extractive", path=str(bert_path), options={"strid": 1}))
    preds = tmp_path / "p.json"
    preds.write_text('{"w": "Herman Melville", "a": "whale"}')
    file_agent = load_agent(AgentSpec("f", "squad11", kind="prediction_file", gflops=3.0, path=str(preds)))
    assert isinstance(file_agent, PredictionFileAgent) and agent_gflops_at(file_agent) == 3.0
    out = file_agent.predict(dataset().records)
    assert [p.answer for p in out] == ["Herman Melville", "whale", None, None] and out[0].gflops == 3.0


def test_run_into_cache_scores_chunks_and_skips_what_is_cached(bert_path, llama, tmp_path):
    ds, cache = dataset(), AgentCache(tmp_path / "agents")
    agent = stub(bert_path, {"herman": 9.0}, {"melville": 9.0})
    first = run_into_cache(agent, ds, "tiny", ds.records[:2], cache, batch_size=1, progress=False)
    assert (first["questions"], first["computed"], first["skipped"]) == (2, 2, 0)
    again = run_into_cache(agent, ds, "tiny", None, cache, batch_size=3, progress=False)
    assert (again["questions"], again["computed"], again["skipped"]) == (4, 2, 2)
    rec = cache.get("squad11", "tiny", "w")
    assert rec["answer"] == "Herman Melville" and rec["em"] == 1.0 and rec["start_ok"] and rec["end_ok"]
    assert rec["gflops"] > 0 and rec["latency_ms"] > 0 and rec["source"] == f"extractive:{bert_path}"
    assert again["em"] == 25.0 and again["gflops"] > 0 and again["not_found"] == 0
    meta = cache.meta("squad11", "tiny")
    assert meta["gflops_source"] == "measured" and meta["kind"] == "extractive"
    # a generative answer that is not in the context is counted as not found
    gen = run_into_cache(llama, ds, "gen", ds.records[:2], cache, progress=False)
    found = [cache.get("squad11", "gen", k)["status"] for k in ("w", "a")]
    assert gen["not_found"] == found.count("not_found") and gen["computed"] == 2
