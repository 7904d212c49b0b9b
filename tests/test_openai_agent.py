"""A live LLM agent behind an OpenAI-compatible chat endpoint (kind ``openai_chat``), against a
small server the tests start on 127.0.0.1 over the tiny causal LM (tests/_openai_server.py): it
answers dataset questions and new text, records each answer's confidence (minimum token
probability) and latency, is the main agent of a pool that routes new text end to end, and an
endpoint that fails is one line, keeping what it answered."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
from _openai_server import free_port, serve
from _slices import bow_bench
from _tiny_models import one_thread

from l2d_core.agents import AgentSpec, PoolSpec, get_agent, load_agent, register_agent, register_pool
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.openai_chat import EndpointError, chat_messages, parse_reply
from l2d_core.agents.runners import run_into_cache
from l2d_core.data import load_dataset
from l2d_core.data.records import QARecord
from l2d_core.deploy import deploy, load_router
from l2d_core.method.costs import CostConfig
from l2d_core.routers.registry import make_router

CONTEXT = "Moby-Dick is an 1851 novel by American writer Herman Melville about the whale."
# three small training articles (the calibration holds whole articles out) and a test article
TRAIN = ("Intergovernmental_Panel_on_Climate_Change", "1973_oil_crisis", "Packet_switching")
TEST = "Jacksonville,_Florida"
GFLOPS = 2.5  # declared for the endpoint's model
PRICES = {"usd_per_1m_input": 0.15, "usd_per_1m_output": 0.6}  # dollars per million tokens


@pytest.fixture(scope="module")
def endpoint(llama_path):
    """``(base_url, server)``: the tiny LM served on loopback for the module."""
    with one_thread(), serve(llama_path) as running:
        yield running


@pytest.fixture(scope="module")
def chat_bench(real_data, endpoint, tmp_path_factory):
    """Pool Tiny-chat (main: the endpoint agent, answering two articles into the cache; expert:
    bert-ens, a prediction file) as a benchmark on those articles, in a cache of the module's own."""
    url, _ = endpoint
    mp = pytest.MonkeyPatch()
    mp.setenv("L2D_CACHE_DIR", str(tmp_path_factory.mktemp("chat_cache")))
    options = {"base_url": url, "max_tokens": 6, "retries": 0, "batch_size": 2, **PRICES}
    spec = register_agent(
        AgentSpec("tiny-chat", "squad11", "openai_chat", GFLOPS, path="tiny-chat", options=options)
    )
    sub = load_dataset("squad11").by_titles([*TRAIN, TEST])
    summary = run_into_cache(load_agent(spec), sub, spec.id, cache=AgentCache(), progress=False)
    pool = register_pool(PoolSpec("Tiny-chat", "squad11", "tiny-chat", ("bert-ens",)))
    bench = bow_bench(sub, pool, [TEST])
    yield bench, summary
    mp.undo()


def test_dataset_answers_are_recorded_with_the_endpoints_confidence_and_latency(chat_bench, endpoint):
    bench, summary = chat_bench
    _, server = endpoint
    n = len(bench.train) + len(bench.test)
    assert summary["computed"] == summary["questions"] == n == 412 and summary["latency_ms"] > 0
    replies = {r["last_turn"]: r for r in server.replies}
    table = AgentCache().table("squad11", "tiny-chat")
    assert AgentCache().meta("squad11", "tiny-chat")["gflops_source"] == "declared"
    for r in (*bench.train_records, *bench.test_records):
        rec, reply = table.loc[r.qid], replies[chat_messages(r.question, r.context)[-1]["content"]]
        assert rec["answer"] == parse_reply(reply["content"])
        assert rec["latency_ms"] > 0
        assert rec["confidence"]["score"] == pytest.approx(math.exp(min(reply["logprobs"])), rel=1e-9)
        assert rec["confidence"]["mean_logprob"] == pytest.approx(np.mean(reply["logprobs"]), rel=1e-9)
        # its price: the reply's token counts at the agent's prices per million tokens
        paid = (reply["prompt_tokens"] * 0.15 + len(reply["logprobs"]) * 0.6) / 1e6
        assert rec["usd"] == pytest.approx(paid, rel=1e-9) and paid > 0
    # what a cascade reads: one confidence per question in (0, 1], latency in seconds, declared GFLOPs
    for part in (bench.train, bench.test):
        assert part.has_score(0) and ((part.score[:, 0] > 0) & (part.score[:, 0] <= 1)).all()
        assert (part.latency[:, 0] > 0).all() and (part.gflops[:, 0] == GFLOPS).all()
    assert len(set(bench.train.score[:, 0])) > 5  # the numbers differ from question to question


def test_new_text_is_answered_by_the_endpoint(endpoint):
    url, server = endpoint
    agent = load_agent(AgentSpec("x", "squad11", "openai_chat", path="tiny-chat", options={"base_url": url}))
    (pred,) = agent.predict([QARecord("new", "", CONTEXT, "Who wrote Moby-Dick?", ())])
    reply = server.replies[-1]
    assert reply["last_turn"].endswith('Question: "Who wrote Moby-Dick?"')
    assert pred.answer == parse_reply(reply["content"]) and pred.latency_ms > 0
    assert 0 < pred.extra["confidence"]["score"] <= 1


def test_a_pool_with_the_endpoint_as_main_routes_new_text_end_to_end(chat_bench, endpoint, tmp_path):
    bench, _ = chat_bench
    _, server = endpoint
    for router_id in ("l2d-cascade", "conf-threshold"):
        router = make_router(router_id).fit(bench)

        def route(costs, router=router):
            return deploy(router, costs).route("Who wrote Moby-Dick?", CONTEXT)

        before = len(server.replies)
        r = route(bench.costs(0.05))
        assert len(server.replies) == before + 1  # the main agent ran now, at the endpoint
        assert r["signals"]["main_answer"] == parse_reply(server.replies[-1]["content"])
        assert r["signals"]["main_latency_ms"] > 0
        assert 0 < r["signals"]["main_confidence"]["score"] <= 1
        assert r["agent"] in ("tiny-chat", "bert-ens")
        # experts far too dear: the main agent keeps the query; free and always right: it defers
        assert route(CostConfig((1.0,), (5.0,)))["agent"] == "tiny-chat", router_id
        assert route(CostConfig((0.0,), (0.0,)))["agent"] == "bert-ens", router_id
        # exported and loaded back (what scripts/serve.py serves): the endpoint answers again
        folder = deploy(router, CostConfig((1.0,), (5.0,))).save(tmp_path / router_id)
        before = len(server.replies)
        again = load_router(folder).route("Who wrote Moby-Dick?", CONTEXT)
        assert len(server.replies) == before + 1 and again["agent"] == "tiny-chat"
        assert again["signals"]["main_answer"] == r["signals"]["main_answer"]  # greedy: the same reply


def test_an_endpoint_that_is_down_is_one_line(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1"
    agent = load_agent(
        AgentSpec("x", "squad11", "openai_chat", path="m", options={"base_url": url, "retries": 0})
    )
    with pytest.raises(EndpointError) as err:
        agent.predict([QARecord("q", "", CONTEXT, "Who wrote Moby-Dick?", ())])
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"cannot reach endpoint {url} (model m)"), msg
    assert "refused" in msg.lower()


def test_endpoint_errors_and_settings_are_one_line(endpoint, monkeypatch):
    url, server = endpoint
    rec = QARecord("q", "", CONTEXT, "Who wrote Moby-Dick?", ())

    def agent(**options):
        return load_agent(AgentSpec("x", "squad11", "openai_chat", path=options.pop("model", "tiny-chat"),
                                    options={"base_url": url, "retries": 0, **options}))  # fmt: skip

    not_served = r"^endpoint .* \(model gpt-9\) answered HTTP 404: The model `gpt-9` does not exist$"
    with pytest.raises(EndpointError, match=not_served):
        agent(model="gpt-9").predict([rec])
    with pytest.raises(ValueError, match="environment variable L2D_NO_SUCH_KEY, which is not set"):
        agent(api_key_env="L2D_NO_SUCH_KEY")
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['api_key'\]"):
        agent(api_key="sk-secret")  # the key itself never goes into the registry
    with pytest.raises(ValueError, match=r"max_tokens an integer in \[1, 65536\]"):
        agent(max_tokens="many")
    server.delay, sent = 1.0, len(server.replies)
    try:
        late = r"^endpoint .* \(model tiny-chat\) did not answer within 0.3 s$"
        with pytest.raises(EndpointError, match=late):
            agent(timeout=0.3).predict([rec])
    finally:
        server.delay = 0.0
        end = time.monotonic() + 10
        while len(server.replies) == sent and time.monotonic() < end:  # its late reply, not the next test's
            time.sleep(0.05)
    with pytest.raises(ValueError, match="needs options.base_url"):
        load_agent(AgentSpec("x", "squad11", "openai_chat", path="tiny-chat"))
    monkeypatch.setenv("L2D_TEST_KEY", "sk-test-123")
    agent(api_key_env="L2D_TEST_KEY").predict([rec])
    assert server.authorization == "Bearer sk-test-123"


def test_a_failed_run_keeps_what_the_endpoint_answered(endpoint, fresh_cache):
    url, server = endpoint
    ds = load_dataset("squad11").by_titles(TRAIN[:1])
    recs = list(ds.records[:8])
    spec = AgentSpec(
        "chat-x", "squad11", "openai_chat", path="tiny-chat", options={"base_url": url, "retries": 0}
    )
    server.fail_after = len(server.replies) + 3
    try:  # a question that fails is listed, the run goes on (issue 38)
        got = run_into_cache(load_agent(spec), ds, spec.id, recs, AgentCache(), batch_size=8, progress=False)
        assert (got["computed"], got["failed"], got["skipped"]) == (3, 5, 0)
        assert {f["qid"] for f in got["failures"]} == {r.qid for r in recs[3:]}
        assert all("answered HTTP 500: the test server is overloaded" in f["error"] for f in got["failures"])
        assert AgentCache().ids_with("squad11", spec.id, "confidence") == {r.qid for r in recs[:3]}
    finally:
        server.fail_after = None
    again = run_into_cache(load_agent(spec), ds, spec.id, recs, AgentCache(), progress=False)
    assert (again["computed"], again["skipped"]) == (5, 3) and "failed" not in again


def test_precompute_registers_an_endpoint_agent_without_its_key(endpoint, fresh_cache, tmp_path, capsys):
    import precompute_cache

    url, _ = endpoint
    entry = {"id": "chat-y", "kind": "openai_chat", "path": "tiny-chat", "gflops": 7.0,
             "base_url": url, "api_key_env": "L2D_TEST_KEY", "max_tokens": 4}  # fmt: skip
    config = tmp_path / "agents.json"
    config.write_text(json.dumps({"dataset": "squad11", "agents": [entry]}))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("L2D_TEST_KEY", "sk-never-stored")
        assert precompute_cache.main(["--config", str(config), "--limit", "3", "--quiet", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["computed"], row["gflops"], row["gflops_384"]) == (3, 7.0, 7.0)
    spec = get_agent("chat-y")
    assert (spec.kind, spec.gflops_source, spec.options["api_key_env"]) == (
        "openai_chat",
        "declared",
        "L2D_TEST_KEY",
    )
    assert "sk-never-stored" not in (fresh_cache / "registry.json").read_text()
    # the endpoint gone: the command fails on one line
    dead = {**entry, "id": "chat-z", "base_url": f"http://127.0.0.1:{free_port()}/v1", "retries": 0}
    config.write_text(json.dumps({"dataset": "squad11", "agents": [dead]}))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("L2D_TEST_KEY", "k")
        assert precompute_cache.main(["--config", str(config), "--limit", "2", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: cannot reach endpoint http://127.0.0.1:") and "\n" not in err
