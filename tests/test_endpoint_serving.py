"""Issue 38 items 1-4 through the tools: behind the routing API a misbehaving endpoint is a 504
(its deadline) or a 502 (anything else) with its one line, and the API's model lock is not held
while the endpoint is waited on, so a dataset question routed by id (it never asks the endpoint)
is answered while a hanging request waits; precompute records failed questions and goes on."""

from __future__ import annotations

import http.client
import json
import threading
import time

import pytest
from _openai_server import serve_fake
from _serving import serving
from _slices import bow_bench

from l2d_core.agents import AgentSpec, PoolSpec, load_agent, register_agent, register_pool
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.runners import run_into_cache
from l2d_core.data import load_dataset
from l2d_core.deploy import deploy, load_router
from l2d_core.routers.registry import make_router

TRAIN = ("Intergovernmental_Panel_on_Climate_Change", "1973_oil_crisis")
TEST = "Jacksonville,_Florida"
DEADLINE = 1.5
QUERY = {"question": "Who wrote Moby-Dick?", "context": "Moby-Dick is a novel by Herman Melville."}


def post(port: int, path: str, body, timeout: float = 30) -> tuple[int, dict, float]:
    """``(status, JSON body, seconds)`` of one request."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.monotonic()
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    out = resp.status, json.loads(resp.read()), time.monotonic() - t0
    conn.close()
    return out


@pytest.fixture(scope="module")
def api(real_data, tmp_path_factory):
    """``(port, fake endpoint, a dataset qid)``: a conf-threshold router whose main agent is the
    fake endpoint (answers recorded through it), served on loopback."""
    mp = pytest.MonkeyPatch()
    mp.setenv("L2D_CACHE_DIR", str(tmp_path_factory.mktemp("fake_chat_cache")))
    with serve_fake() as (url, fake):
        options = {"base_url": url, "retries": 0, "timeout": DEADLINE, "batch_size": 4}
        spec = register_agent(
            AgentSpec("fake-chat", "squad11", "openai_chat", 3.0, path="fake", options=options)
        )
        sub = load_dataset("squad11").by_titles([*TRAIN, TEST])
        run_into_cache(load_agent(spec), sub, spec.id, cache=AgentCache(), progress=False)
        pool = register_pool(PoolSpec("Fake-chat", "squad11", "fake-chat", ("bert-ens",)))
        bench = bow_bench(sub, pool, [TEST])
        router = make_router("conf-threshold").fit(bench)
        folder = deploy(router, bench.costs(0.05)).save(tmp_path_factory.mktemp("art") / "r")
        with serving(load_router(folder).warm_up()) as port:
            yield port, fake, bench.test.qids[0]
    mp.undo()


@pytest.mark.parametrize(
    ("mode", "words"),
    [
        ("500", "answered HTTP 500: the fake endpoint is overloaded"),
        ("html502", "answered HTTP 502: an HTML page (502 Bad Gateway)"),
        ("not_json", "sent a reply that is not JSON"),
        ("huge", "over the"),
        ("nan", "logprob is nan"),
        ("content_int", "content is a number, not text"),
        ("null_choice", "choices[0] is null"),
    ],
)
def test_a_bad_endpoint_reply_is_502_naming_it(api, mode, words):
    port, fake, _ = api
    fake.mode = mode
    try:
        status, body, _ = post(port, "/v1/answer", QUERY)
    finally:
        fake.mode = "ok"
    assert status == 502, body
    assert body["detail"].startswith("endpoint http://127.0.0.1:") and words in body["detail"], body


def test_a_hanging_endpoint_is_504_within_its_deadline_and_blocks_nobody_else(api):
    port, fake, qid = api
    assert post(port, "/v1/route", {"qid": qid})[0] == 200
    fake.mode, done = "hang", {}

    def hang():
        done["answer"] = post(port, "/v1/answer", QUERY)
        done["answer_at"] = time.monotonic()

    try:
        t = threading.Thread(target=hang)
        t.start()
        time.sleep(0.3)  # the answer request now waits on the endpoint
        routed = [post(port, "/v1/route", {"qid": qid}) for _ in range(5)]
        routed_at = time.monotonic()
        t.join(30)
    finally:
        fake.mode = "ok"
    status, body, seconds = done["answer"]
    assert status == 504 and "did not answer within 1.5 s" in body["detail"], body
    assert seconds < DEADLINE + 1.0  # the deadline contract
    # the qid requests never waited for the hanging one: all came back before it
    assert all(s == 200 for s, _, _ in routed) and routed_at < done["answer_at"]
    assert post(port, "/v1/answer", QUERY)[0] == 200  # the endpoint back: answered again


def test_precompute_records_failed_questions_and_goes_on(real_data, fresh_cache, tmp_path, capsys):
    import precompute_cache

    with serve_fake() as (url, fake):
        start = fake.requests
        fake.mode = lambda n: {1: "content_int", 2: "nan", 3: "not_json"}.get(n - start, "ok")
        entry = {"id": "chat-f", "kind": "openai_chat", "path": "fake", "gflops": 2.0, "base_url": url,
                 "retries": 0, "timeout": DEADLINE}  # fmt: skip
        config = tmp_path / "agents.json"
        config.write_text(json.dumps({"dataset": "squad11", "agents": [entry]}))
        code = precompute_cache.main(["--config", str(config), "--limit", "6", "--quiet", "--json"])
        out, err = capsys.readouterr()
        assert code == 1
        (row,) = json.loads(out)
        assert (row["computed"], row["failed"], row["questions"]) == (3, 3, 6)
        assert [f["error"].split(" sent ")[1][:20] for f in row["failures"]] == [
            "a malformed reply: c",
            "a malformed reply: c",
            "a reply that is not ",
        ]
        (line,) = err.strip().splitlines()
        assert line.startswith("warning: chat-f: 3 of 6 questions failed") and f"endpoint {url}" in line
        assert "Traceback" not in err
        # run again: only the three failed questions are asked, and they are answered now
        fake.mode = "ok"
        assert precompute_cache.main(["--config", str(config), "--limit", "6", "--quiet", "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)
        assert (row["computed"], row["skipped"]) == (3, 3) and "failed" not in row
