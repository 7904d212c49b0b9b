"""Issue 38 items 1-5: an LLM endpoint that hangs, trickles, throttles, errs, sends HTML, a huge
reply or impossible log-probabilities (tests/_openai_server.py's fake endpoint) is one line naming
the endpoint and its status, within the deadline, through the agent, precompute and ``/v1/answer``."""

from __future__ import annotations

import math
import time

import pytest
from _openai_server import MODES, PLAIN, serve_fake

from l2d_core.agents import AgentSpec, load_agent
from l2d_core.agents.endpoint import EndpointError, reply_cap
from l2d_core.data.records import QARecord

CONTEXT = "Moby-Dick is an 1851 novel by American writer Herman Melville about the whale."
REC = QARecord("q", "", CONTEXT, "Who wrote Moby-Dick?", ())
DEADLINE = 1.0


@pytest.fixture(scope="module")
def fake():
    with serve_fake() as running:
        yield running


def agent(url, **options):
    opts = {"base_url": url, "retries": 0, "timeout": DEADLINE, "max_tokens": 32, **options}
    return load_agent(AgentSpec("x", "squad11", "openai_chat", path="fake", options=opts))


# mode -> (error kind, HTTP status of the endpoint, words the one line says)
FAILS = {
    "hang": ("deadline", None, f"did not answer within {DEADLINE:g} s"),
    "trickle": ("deadline", None, f"did not answer within {DEADLINE:g} s"),
    "500": ("status", 500, "answered HTTP 500: the fake endpoint is overloaded"),
    "429": ("status", 429, "answered HTTP 429: rate limit reached"),
    "401": ("status", 401, "answered HTTP 401: invalid api key"),
    "html": ("bad_reply", 200, "not JSON (text/html)"),
    "html502": ("status", 502, "answered HTTP 502: an HTML page (502 Bad Gateway)"),
    "not_json": ("bad_reply", 200, "not JSON (text/plain): 'Internal error'"),
    "huge": ("bad_reply", 200, f"over the {reply_cap(32)} bytes"),
    "huge_chunked": ("bad_reply", 200, f"over {reply_cap(32)} bytes"),
    "nan": ("bad_reply", None, "logprob is nan; a log-probability is a finite number <= 0"),
    "neginf": ("bad_reply", None, "logprob is -inf"),
    "positive": ("bad_reply", None, "logprob is 5.0"),
    "content_int": ("bad_reply", None, "content is a number, not text"),
    "null_choice": ("bad_reply", None, "choices[0] is null, not an object"),
    "no_choices": ("bad_reply", None, "no choices"),
    "null_token": ("bad_reply", None, "token is null, not text"),
}


def test_every_fault_mode_is_covered():
    assert (
        set(FAILS) | {"ok", "no_logprobs"}
        == set(MODES)
        == set(PLAIN) | {"hang", "trickle", "huge", "huge_chunked"}
    )


@pytest.mark.parametrize("mode", sorted(FAILS))
def test_a_misbehaving_endpoint_is_one_line_within_the_deadline(fake, mode):
    url, server = fake
    kind, status, words = FAILS[mode]
    server.mode = mode
    t0 = time.monotonic()
    try:
        with pytest.raises(EndpointError) as err:
            agent(url).predict([REC])
    finally:
        server.mode = "ok"
    assert time.monotonic() - t0 < DEADLINE + 1.0  # the deadline contract
    e = err.value
    msg = str(e)
    assert msg.startswith(f"endpoint {url} (model fake) ") and "\n" not in msg, msg
    assert words in msg, msg
    assert (e.kind, e.endpoint) == (kind, url)
    if status is not None:
        assert e.status == status
    assert e.http_status == (504 if kind == "deadline" else 502)


def test_retries_follow_a_429_within_the_deadline(fake):
    url, server = fake
    server.mode = lambda n: "429" if n == server_first[0] else "ok"
    server_first = [server.requests + 1]
    try:
        (pred,) = agent(url, retries=1, timeout=5).predict([REC])
    finally:
        server.mode = "ok"
    assert pred.answer == "Herman Melville" and server.requests == server_first[0] + 1
    assert pred.extra["confidence"]["score"] == pytest.approx(math.exp(-0.3))


def test_absent_logprobs_are_said_and_their_end_fails(fake):
    url, server = fake
    server.mode = "no_logprobs"
    try:
        (pred,) = agent(url).predict([REC])
        assert "score" not in pred.extra["confidence"] and "no log-probabilities" in pred.extra["note"]
        a = agent(url)
        server.mode = "ok"
        a.predict([REC])
        server.mode = "no_logprobs"  # they stop coming: the router would route without them
        with pytest.raises(EndpointError, match="stopped sending log-probabilities"):
            a.predict([REC])
    finally:
        server.mode = "ok"


def test_a_batch_keeps_going_past_a_failed_question(fake):
    url, server = fake
    recs = [QARecord(f"q{i}", "", CONTEXT, "Who wrote Moby-Dick?", ()) for i in range(6)]
    start = server.requests
    server.mode = lambda n: "nan" if (n - start) % 2 == 0 else "ok"
    try:
        preds, failed = agent(url).predict_each(recs)
    finally:
        server.mode = "ok"
    assert [p.qid for p in preds] == ["q0", "q2", "q4"]
    assert [q for q, _ in failed] == ["q1", "q3", "q5"]
    assert all("logprob is nan" in str(e) for _, e in failed)
