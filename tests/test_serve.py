"""The routing API, served by uvicorn on 127.0.0.1 in the test: route, answer, batch, agents;
every bad request gets a 4xx JSON answer naming the field and the server keeps serving; a
restart from the saved artifact gives the same decisions; the command line refuses an
artifact of another version with a clear message."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request

import pytest
from _serving import cascade_artifact, serving

from l2d_core.deploy import load_router
from l2d_core.deploy.api import LIMITS

CONTEXT = "Moby-Dick is an 1851 novel by American writer Herman Melville about the whale."
Q = {"question": "Who wrote Moby-Dick?", "context": CONTEXT}


def call(url: str, body=None, raw: bytes | None = None) -> tuple[int, object]:
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def artifact(live_bench, tmp_path_factory):
    return cascade_artifact(live_bench, tmp_path_factory.mktemp("served"))


@pytest.fixture(scope="module")
def url(artifact):
    with serving(load_router(artifact)) as port:
        yield f"http://127.0.0.1:{port}"


def test_route_answer_batch_and_agents(url):
    code, r = call(f"{url}/v1/route", Q)
    assert code == 200 and r["agent"] in ("tiny-live", "bert-ens")
    assert set(r["compared"]["values"]) == {"tiny-live", "bert-ens"}
    assert r["signals"]["main_answer"] in CONTEXT
    assert r["compared"]["values"][r["agent"]] == min(r["compared"]["values"].values())  # what decided
    assert r["gflops"]["router"] > 0 and r["request_ms"] > 0
    code, batch = call(f"{url}/v1/route", [Q, {**Q, "question": "When was Moby-Dick written?"}])
    assert code == 200 and len(batch) == 2 and batch[0]["agent"] == r["agent"]
    code, a = call(f"{url}/v1/answer", Q)
    assert code == 200 and a["agent"] == r["agent"] and a["answer"]["status"] in ("ran", "cannot_answer")
    assert (a["answer"]["text"] is None) == (a["answer"]["status"] == "cannot_answer")
    code, agents = call(f"{url}/v1/agents")
    assert code == 200 and agents["router"]["id"] == "l2d-cascade" and agents["routes_new_text"]
    assert {x["id"]: x["answers_new_text"] for x in agents["agents"]} == {
        "tiny-live": True,
        "bert-ens": False,
    }
    assert call(f"{url}/healthz") == (200, {"status": "ok", "router": "l2d-cascade", "pool": "Tiny-live",
                                             "routes_new_text": True})  # fmt: skip
    code, spec = call(f"{url}/openapi.json")
    assert code == 200 and {"/v1/route", "/v1/answer", "/v1/agents", "/healthz"} <= set(spec["paths"])


BAD = [
    ({"question": "Who?"}, 422, ["body"]),
    ({"question": 5, "context": CONTEXT}, 422, ["body", "question"]),
    ({"question": "Who?", "context": ""}, 422, ["body", "context"]),
    ({"question": "   ", "context": CONTEXT}, 422, ["body", "question"]),
    ({"question": "Who?", "context": "x" * (LIMITS["context_chars"] + 1)}, 422, ["body", "context"]),
    ({**Q, "extra": 1}, 422, ["body", "extra"]),
    ([Q, {"question": "Who?"}], 422, ["body", 1]),
    ([Q, {"qid": "x"}], 422, ["body"]),
    ({"qid": ""}, 422, ["body", "qid"]),
    ([Q] * (LIMITS["batch"] + 1), 422, ["body"]),
    ([], 422, ["body"]),
    ("just text", 422, ["body"]),
]


@pytest.mark.parametrize("body, code, loc", BAD)
def test_bad_requests_get_4xx_naming_the_field(url, body, code, loc):
    got, out = call(f"{url}/v1/route", body)
    assert got == code and out["detail"][0]["loc"] == loc, out
    assert call(f"{url}/healthz")[0] == 200  # still serving


def test_body_over_the_limit_and_broken_json(url):
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("POST", "/v1/route")  # the declared length is refused before the body is sent
    conn.putheader("content-type", "application/json")
    conn.putheader("content-length", str(LIMITS["body_bytes"] + 10))
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 413 and "bytes" in json.loads(resp.read())["detail"]
    conn.close()
    got, out = call(f"{url}/v1/answer", raw=b'{"question": "Who?", "context": ')
    assert got == 422 and out["detail"][0]["loc"][0] == "body"
    assert call(f"{url}/healthz")[0] == 200


def test_restart_from_the_artifact_gives_the_same_decisions(url, artifact):
    queries = [
        Q,
        {"question": "Which whale?", "context": CONTEXT},
        {"question": "Who is Melville?", "context": CONTEXT},
    ]
    _, before = call(f"{url}/v1/route", queries)
    with serving(load_router(artifact)) as port:
        again = f"http://127.0.0.1:{port}"
        _, after = call(f"{again}/v1/route", queries)
    strip = lambda rs: [{k: r[k] for k in ("agent", "compared", "chance_wrong")} for r in rs]  # noqa: E731
    assert strip(before) == strip(after)


def test_the_command_line_refuses_an_artifact_of_another_version(artifact, tmp_path, capsys):
    import shutil

    import serve

    old = tmp_path / "old"
    shutil.copytree(artifact, old)
    manifest = json.loads((old / "router.json").read_text())
    manifest["versions"]["format"] = 0
    (old / "router.json").write_text(json.dumps(manifest))
    assert serve.main(["--router", str(old)]) == 2
    err = capsys.readouterr().err
    assert "artifact format 0" in err and "export it again" in err and "Traceback" not in err


def test_a_request_runs_on_the_model_thread_unless_an_agent_is_a_remote_endpoint(artifact, monkeypatch):
    """Where every agent runs in the process, a request runs whole on the model thread (one thread
    hand-off); where one is a remote endpoint, on a request thread that lets the model lock go
    while the endpoint is waited on."""
    import dataclasses
    import threading

    from l2d_core.runtime import MODEL_THREAD

    plain = load_router(artifact)  # what decides (an agent made remote below has no endpoint to ask)
    for remote in (False, True):
        router, seen = load_router(artifact), []
        monkeypatch.setattr(
            router,
            "route_batch",
            lambda *a, s=seen: s.append(threading.current_thread().name) or plain.route_batch(*a),
        )
        if remote:
            first = next(iter(router.specs))
            router.specs[first] = dataclasses.replace(router.specs[first], kind="openai_chat")
        with serving(router) as port:
            code, _ = call(f"http://127.0.0.1:{port}/v1/route", Q)
        assert code == 200 and len(seen) == 1
        assert seen[0].startswith(MODEL_THREAD) is not remote, seen
