"""Issue 26 ("nothing lost, no traceback") for the routing server: a hand-edited or damaged
artifact is refused with one line naming the field, before "serving" is printed; the command
line refuses bad numbers; a streamed body over the limit gets 413; invisible text gets 422; the
OpenAPI schema states the request and response bodies; a client that sends its headers slowly
is cut off."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import threading
import time

import pytest
from _serving import cascade_artifact, serving
from fastapi.testclient import TestClient

from l2d_core.deploy import ArtifactError, QueryError, load_router
from l2d_core.deploy.api import LIMITS, create_app
from l2d_core.deploy.deployed import DeployedRouter
from l2d_core.deploy.server import HEADER_TIMEOUT

CONTEXT = "Moby-Dick is an 1851 novel by American writer Herman Melville about the whale."
Q = {"question": "Who wrote Moby-Dick?", "context": CONTEXT}


@pytest.fixture(scope="module")
def artifact(live_bench, tmp_path_factory):
    return cascade_artifact(live_bench, tmp_path_factory.mktemp("reliable"))


@pytest.fixture(scope="module")
def client(artifact):
    return TestClient(create_app(load_router(artifact)), raise_server_exceptions=False)


def edited(artifact, tmp_path, change):
    """A copy of the artifact with ``change(manifest)`` applied to its router.json."""
    folder = tmp_path / "edited"
    shutil.copytree(artifact, folder)
    manifest = json.loads((folder / "router.json").read_text())
    change(manifest)
    (folder / "router.json").write_text(json.dumps(manifest))
    return folder


TWO_COSTS = {"alpha": [1.0, 1.0], "beta": [0.3, 0.3]}  # a pool of two experts
NO_COSTS = {"alpha": [], "beta": []}
EDITS = [
    ("pool-without-fields", lambda m: m.update(pool={"name": "P3"}), "pool.dataset"),
    ("two-costs-one-expert", lambda m: m.update(costs=TWO_COSTS), "costs.alpha"),
    ("overhead-not-a-number", lambda m: m.update(overhead_gflops="abc"), "overhead_gflops"),
    # the cascade's own config model (l2d_core.routers.posthoc.PosthocConfig) checks its fields
    ("confidence-not-a-bool", lambda m: m["config"].update(confidence="yes"), "config.confidence"),
    ("helpers-not-a-list", lambda m: m["config"].update(helpers="bert-ens"), "config.helpers"),
    ("config-costs-empty", lambda m: m["config"].update(costs=NO_COSTS), "config.costs.alpha"),
    ("follower-not-a-number", lambda m: m["config"].update(follower={"threshold": "x", "target": 0.2}),
     "config.follower.threshold"),
    ("agent-gflops-negative", lambda m: m["agents"]["bert-ens"].update(gflops=-1), "agents.bert-ens.gflops"),
    ("needs-unknown-agent", lambda m: m["needs"].update(answers=["nobody"]), "needs"),
]  # fmt: skip


@pytest.mark.parametrize("change, field", [e[1:] for e in EDITS], ids=[e[0] for e in EDITS])
def test_a_hand_edited_router_json_is_refused_naming_the_field(artifact, tmp_path, capsys, change, field):
    import serve

    folder = edited(artifact, tmp_path, change)
    with pytest.raises(ArtifactError) as err:
        load_router(folder)
    said = str(err.value)
    assert field in said and "router.json" in said and "\n" not in said
    assert serve.main(["--router", str(folder)]) == 2
    out, errors = capsys.readouterr()
    assert "serving" not in out and "Traceback" not in errors
    assert errors.count("\n") == 1 and errors.startswith("error: ") and field in errors


@pytest.mark.parametrize(
    "content, field",
    [("[1, 2]", "the whole file"), ('{"estimator": "PluginRejector"', "not readable JSON"),
     (None, "in_dim"), ("out_shape", "out_shape")],
)  # fmt: skip
def test_a_damaged_head_config_is_refused_naming_the_field(artifact, tmp_path, content, field):
    folder = edited(artifact, tmp_path, lambda m: None)
    path = folder / "estimator" / "config.json"
    config = json.loads(path.read_text())
    if content is None:
        config["in_dim"] = "38"
        content = json.dumps(config)
    elif content == "out_shape":
        config["out_shape"] = [2, 3]  # three agents for a pool of two
        content = json.dumps(config)
    path.write_text(content)
    with pytest.raises(ArtifactError, match="estimator/config.json") as err:
        load_router(folder)
    assert field in str(err.value) and "\n" not in str(err.value)


def test_an_artifact_that_cannot_route_is_refused_before_serving(artifact, tmp_path, capsys):
    """It loads, but its first query fails (an unknown feature set): serve.py says so in one line
    and never prints "serving"."""
    import serve

    folder = edited(artifact, tmp_path, lambda m: m["config"].update(set="no-such-features"))
    router = load_router(folder)
    with pytest.raises(ArtifactError, match="fails on a first query"):
        router.warm_up()
    assert serve.main(["--router", str(folder)]) == 2
    out, errors = capsys.readouterr()
    assert "serving" not in out and "Traceback" not in errors and errors.count("\n") == 1
    assert "fails on a first query" in errors


def test_the_server_warms_up_before_it_says_serving(artifact, monkeypatch, capsys):
    import serve
    import uvicorn

    events = []
    warm = DeployedRouter.warm_up

    def warm_up(self, threads=None):
        events.append("warmed")
        return warm(self, threads)

    def run(self, sockets=None):
        events.append(("run", sockets[0].getsockname()[1]))
        sockets[0].close()

    monkeypatch.setattr(DeployedRouter, "warm_up", warm_up)
    monkeypatch.setattr(uvicorn.Server, "run", run)
    assert serve.main(["--router", str(artifact), "--port", "0", "--log-level", "WARNING"]) == 0
    out = capsys.readouterr().out
    port = events[1][1]
    # warmed up before the server ran on a real port; a server that never answered is never "serving"
    # (tests/test_serve_floor.py: "serving" is printed once it answers)
    assert events[0] == "warmed" and port > 0 and "serving" not in out


@pytest.mark.parametrize(
    "argv, words",
    [(["--port", "99999"], "--port"), (["--port", "-1"], "--port"), (["--port", "http"], "--port"),
     (["--threads", "-3"], "--threads"), (["--threads", "0"], "--threads"), (["--workers", "0"], "--workers"),
     (["--log-level", "nonsense"], "--log-level")],
)  # fmt: skip
def test_bad_command_line_numbers_get_one_line(tmp_path, capsys, argv, words):
    import serve

    with pytest.raises(SystemExit) as done:
        serve.main(["--router", str(tmp_path), *argv])
    assert done.value.code == 2
    errors = capsys.readouterr().err
    last = errors.strip().splitlines()[-1]
    assert "Traceback" not in errors and f"error: argument {words}" in last


def test_good_command_line_numbers_are_taken():
    import serve

    args = serve.parse_args(["--router", "x", "--port", "0", "--threads", "2", "--log-level", "DEBUG"])
    assert (args.port, args.threads, args.log_level) == (0, 2, "debug")
    assert serve.parse_args(["--router", "x", "--port", "65535"]).port == 65535


def test_a_chunked_body_over_the_limit_gets_413(artifact):
    with serving(load_router(artifact)) as port:
        conn = socket.create_connection(("127.0.0.1", port), timeout=30)
        conn.sendall(
            b"POST /v1/route HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b'{"question": "' + b"x" * (256 * 1024)
        with contextlib.suppress(OSError):  # the server may stop reading once it answered
            for _ in range(LIMITS["body_bytes"] // len(chunk) + 2):
                conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        reply = b""
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
                got = conn.recv(65536)
                if not got:
                    break
                reply += got
        conn.close()
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413"), reply[:300]
        assert json.loads(body)["detail"] == f"request body over {LIMITS['body_bytes']} bytes"
        again = socket.create_connection(("127.0.0.1", port), timeout=30)
        again.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        assert again.recv(65536).startswith(b"HTTP/1.1 200")  # still serving
        again.close()


INVISIBLE = ["\u200b", "\u200b\u200c\u200d\ufeff", " \t\n\u00a0", "\u2060\u3164\u180e", "\u202e\u0301"]


@pytest.mark.parametrize("text", INVISIBLE)
@pytest.mark.parametrize("field", ["question", "context"])
def test_invisible_text_is_refused_with_422(client, text, field):
    got = client.post("/v1/route", json={**Q, field: text})
    assert got.status_code == 422
    (problem,) = got.json()["detail"]
    assert problem["loc"] == ["body", field] and "visible" in problem["msg"] and "\n" not in problem["msg"]


def test_a_body_that_is_not_utf8_gets_422_not_400(client):
    got = client.post(
        "/v1/route", content=b'{"question": "\xff\xfe"}', headers={"content-type": "application/json"}
    )
    assert got.status_code == 422 and got.json()["detail"][0]["loc"] == ["body"]
    assert "UTF-8" in got.json()["detail"][0]["msg"]


@pytest.mark.parametrize(
    "body, kind, words",
    [
        (b"", "missing", "Field required"),
        (b'{"question": "Who?", ', "json_invalid", "Invalid JSON"),
        (b"[]", "too_short", "at least 1 item"),
        (b'{"question": "Who?", "context": "Me.", "extra": 1}', "extra_forbidden", "not permitted"),
    ],
)
def test_a_body_that_is_not_a_query_gets_one_422_at_the_body(client, body, kind, words):
    """The handlers read a body's bytes and validate them once (not decoded by FastAPI first):
    what is wrong is still one problem, at the field it concerns."""
    got = client.post("/v1/route", content=body, headers={"content-type": "application/json"})
    assert got.status_code == 422
    (problem,) = got.json()["detail"]
    assert problem["type"] == kind and words in problem["msg"], problem
    assert problem["loc"][0] == "body" and "one" not in problem["loc"] and "many" not in problem["loc"]


def test_invisible_text_is_refused_by_the_library_too(artifact):
    router = load_router(artifact)
    with pytest.raises(QueryError, match="visible") as err:
        router.route("\u200b\u2060", CONTEXT)
    assert err.value.field == "question"
    assert router.route("Who wrote it \u200b?", CONTEXT)["agent"] in router.agent_ids  # a visible character


def test_the_openapi_schema_states_the_bodies(client):
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    for path, result in (("/v1/route", "Routed"), ("/v1/answer", "Answered")):
        op = spec["paths"][path]["post"]
        body = op["requestBody"]["content"]["application/json"]["schema"]
        assert op["requestBody"]["required"] is True
        refs = json.dumps(body)
        assert "#/components/schemas/Query" in refs and f'"maxItems": {LIMITS["batch"]}' in refs
        ok = json.dumps(op["responses"]["200"]["content"]["application/json"]["schema"])
        assert f"#/components/schemas/{result}" in ok
        assert {"413", "422"} <= set(op["responses"])
    query = schemas["Query"]
    assert (
        set(query["properties"]) == {"question", "context", "qid"} and query["additionalProperties"] is False
    )
    assert query["properties"]["question"]["anyOf"][0]["maxLength"] == LIMITS["question_chars"]
    assert {"agent", "compared", "gflops"} <= set(schemas["Routed"]["required"])
    assert "answer" in schemas["Answered"]["required"]


def test_a_client_sending_its_headers_slowly_is_cut_off(artifact):
    with serving(load_router(artifact)) as port:
        slow = socket.create_connection(("127.0.0.1", port), timeout=HEADER_TIMEOUT + 10)
        idle = socket.create_connection(("127.0.0.1", port), timeout=HEADER_TIMEOUT + 10)
        t0 = time.monotonic()
        slow.sendall(b"POST /v1/route HTTP/1.1\r\nHost: t\r\nContent-Ty")
        closed = {}

        def wait(name, conn, dribble):
            conn.settimeout(1.0)
            while time.monotonic() - t0 < HEADER_TIMEOUT + 10:
                try:
                    if dribble:  # one more byte a second: the headers never end
                        conn.sendall(b"p")
                    if conn.recv(1024) == b"":
                        break
                except TimeoutError:
                    continue
                except OSError:  # reset by the server
                    break
            else:
                return
            closed[name] = time.monotonic() - t0

        threads = [
            threading.Thread(target=wait, args=a) for a in (("slow", slow, True), ("idle", idle, False))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(HEADER_TIMEOUT + 15)
        slow.close()
        idle.close()
        assert set(closed) == {"slow", "idle"}, closed
        assert all(HEADER_TIMEOUT - 0.5 <= s <= HEADER_TIMEOUT + 3 for s in closed.values()), closed
        ok = socket.create_connection(("127.0.0.1", port), timeout=30)  # a prompt client is served
        ok.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        assert ok.recv(65536).startswith(b"HTTP/1.1 200")
        ok.close()


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_that_never_arrives_whole_gets_408(artifact, monkeypatch, framing):
    """Headers on time, then part of the body and silence: the connection is answered 408 and
    closed once the body deadline passes, and the server goes on serving."""
    monkeypatch.setitem(LIMITS, "body_seconds", 1.5)
    with serving(load_router(artifact)) as port:
        conn = socket.create_connection(("127.0.0.1", port), timeout=30)
        head = b"POST /v1/route HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        part = b'{"question": "Who'
        if framing == "chunked":
            conn.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (len(part), part))
        else:
            conn.sendall(head + b"Content-Length: 200\r\n\r\n" + part)
        t0, reply = time.monotonic(), b""
        with contextlib.suppress(OSError):
            while got := conn.recv(65536):
                reply += got
        waited = time.monotonic() - t0
        conn.close()
        status, _, body = reply.partition(b"\r\n\r\n")
        assert status.startswith(b"HTTP/1.1 408"), reply[:300]
        assert json.loads(body)["detail"] == "request body not received whole within 1.5 s"
        assert 1.0 <= waited < 15, waited  # cut off at the deadline, not at once and not never
        ok = socket.create_connection(("127.0.0.1", port), timeout=30)
        ok.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        assert ok.recv(65536).startswith(b"HTTP/1.1 200")
        ok.close()


def test_a_prompt_body_is_unaffected_by_the_body_deadline(artifact, monkeypatch):
    monkeypatch.setitem(LIMITS, "body_seconds", 1.5)
    client = TestClient(create_app(load_router(artifact)), raise_server_exceptions=False)
    r = client.post("/v1/route", json={"question": "Who wrote it?", "context": "It was written by Ann."})
    assert r.status_code == 200, r.text
