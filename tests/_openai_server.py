"""A tiny OpenAI-compatible chat server for the tests: ``POST /v1/chat/completions`` over a local
causal LM (greedy decoding with transformers), served by uvicorn on 127.0.0.1 in a thread.

It answers as the OpenAI schema says: ``choices[0].message.content`` and, when ``logprobs`` is
asked, ``choices[0].logprobs.content[*]`` with each generated token and its log-probability.
Decoding stops at the end of sequence or before the token that brings a ``stop`` string (that
token is neither in the content nor in the log-probabilities). The chat turns become one prompt,
``role: content`` lines then ``assistant:`` (the tiny tokenizer has no chat template), cut from
the left to fit the model's positions. A request for another model is answered 404, as OpenAI
does; ``ChatServer.fail_after = n`` answers 500 once n replies were sent, ``ChatServer.delay``
holds each reply back. Every reply is kept in ``ChatServer.replies`` (with the request's last
turn) for the tests to compare with what the agent recorded; ``ChatServer.authorization`` is the
last request's Authorization header.

:func:`serve_fake` serves a misbehaving endpoint with no model (issue 38): ``FakeEndpoint.mode``
makes it hang, trickle its reply byte by byte, answer 500 / 429 / 401 / an HTML page / text that is
not JSON / 50 MB, or a reply with NaN, −inf or positive log-probabilities, a number as content, a
null choice or token, no choices, no log-probabilities (:data:`MODES`).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import torch
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


class ChatServer:
    """The served model and what the server did."""

    def __init__(self, model_dir: Path, name: str):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.name = name
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        self.replies: list[dict] = []  # {"content", "logprobs", "prompt_tokens"} per answered request
        self.requests = 0
        self.authorization: str | None = None  # the last request's Authorization header
        self.fail_after: int | None = None
        self.delay = 0.0  # seconds each request waits before it is answered
        self.lock = threading.Lock()  # one generation at a time

    def prompt_ids(self, messages: list[dict], max_tokens: int) -> list[int]:
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages) + "assistant:"
        ids = self.tokenizer(text)["input_ids"]
        room = self.model.config.max_position_embeddings - max_tokens
        return ids[-room:]

    def complete(self, messages: list[dict], max_tokens: int, stop: list[str]) -> dict:
        """Greedy decoding: the content, its tokens and their log-probabilities, why it stopped."""
        ids = self.prompt_ids(messages, max_tokens)
        with self.lock, torch.inference_mode():
            out = self.model.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=max_tokens,
                do_sample=False,
                output_scores=True,
                return_dict_in_generate=True,
                pad_token_id=self.tokenizer.pad_token_id,
                suppress_tokens=[self.tokenizer.pad_token_id, self.tokenizer.bos_token_id],
            )
        new = out.sequences[0, len(ids) :].tolist()
        logp = torch.stack(out.scores, 1)[0].float().log_softmax(-1)  # (S, V)
        tokens, reason = [], "length"
        for k, t in enumerate(new):
            piece = self.tokenizer.decode([t])
            if t == self.tokenizer.eos_token_id or any(s in piece for s in stop):
                reason = "stop"
                break
            tokens.append({"token": piece, "logprob": float(logp[k, t]), "bytes": list(piece.encode())})
        content = "".join(t["token"] for t in tokens)
        return {"content": content, "tokens": tokens, "reason": reason, "prompt_tokens": len(ids)}


def make_app(server: ChatServer) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    def chat(body: dict, request: Request):
        server.requests += 1
        server.authorization = request.headers.get("authorization")
        time.sleep(server.delay)
        if server.fail_after is not None and len(server.replies) >= server.fail_after:
            return JSONResponse({"error": {"message": "the test server is overloaded"}}, status_code=500)
        if body.get("model") != server.name:
            msg = f"The model `{body.get('model')}` does not exist"
            return JSONResponse({"error": {"message": msg, "code": "model_not_found"}}, status_code=404)
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else list(stop)
        max_tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        got = server.complete(body["messages"], max_tokens, stop)
        server.replies.append(
            {
                "last_turn": body["messages"][-1]["content"],
                "content": got["content"],
                "logprobs": [t["logprob"] for t in got["tokens"]],
                "prompt_tokens": got["prompt_tokens"],
            }
        )
        logprobs = None
        if body.get("logprobs"):
            logprobs = {"content": [{**t, "top_logprobs": []} for t in got["tokens"]], "refusal": None}
        n = len(got["tokens"])
        return {
            "id": f"chatcmpl-{len(server.replies)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": server.name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": got["content"]},
                    "logprobs": logprobs,
                    "finish_reason": got["reason"],
                }
            ],
            "usage": {
                "prompt_tokens": got["prompt_tokens"],
                "completion_tokens": n,
                "total_tokens": got["prompt_tokens"] + n,
            },
        }

    return app


def free_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(model_dir: Path, name: str = "tiny-chat") -> Iterator[tuple[str, ChatServer]]:
    """``(base_url, server)``: the app served on 127.0.0.1 (a free port) in a thread, until exit."""
    import uvicorn

    server = ChatServer(model_dir, name)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    web = uvicorn.Server(uvicorn.Config(make_app(server), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=web.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not web.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test chat server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1", server
    finally:
        web.should_exit = True
        thread.join(timeout=10)
        sock.close()


# --- a misbehaving endpoint (no model): what a remote LLM service does on a bad day ----------------

GOOD_TOKENS = (("Her", -0.1), ("man", -0.05), (" Melville", -0.3))
HUGE_BYTES = 50 * 1024 * 1024


def chat_reply(content="Herman Melville", tokens=GOOD_TOKENS, choice=None) -> dict:
    """An OpenAI chat completion (``choice`` replaces the whole first choice)."""
    logprobs = None
    if tokens is not None:
        logprobs = {
            "content": [{"token": t, "logprob": lp, "bytes": [], "top_logprobs": []} for t, lp in tokens]
        }
    if choice is None:
        choice = {"index": 0, "message": {"role": "assistant", "content": content}, "logprobs": logprobs}
    return {"id": "chatcmpl-x", "object": "chat.completion", "model": "fake", "choices": [choice]}


# mode -> (status, content type, body) for the modes that are a plain answer
PLAIN = {
    "ok": (200, "application/json", chat_reply()),
    "500": (500, "application/json", {"error": {"message": "the fake endpoint is overloaded"}}),
    "429": (429, "application/json", {"error": {"message": "rate limit reached"}}),
    "401": (401, "application/json", {"error": {"message": "invalid api key"}}),
    "html": (200, "text/html", "<!doctype html><html><head><title>Login required</title></head></html>"),
    "html502": (
        502,
        "text/html",
        "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>",
    ),
    "not_json": (200, "text/plain", "Internal error"),
    "nan": (200, "application/json", chat_reply(tokens=(("Her", float("nan")), ("man", float("nan"))))),
    "neginf": (200, "application/json", chat_reply(tokens=(("Her", float("-inf")),))),
    "positive": (200, "application/json", chat_reply(tokens=(("Her", 5.0),))),
    "content_int": (200, "application/json", chat_reply(content=12345)),
    "null_choice": (200, "application/json", {"choices": [None]}),
    "no_choices": (200, "application/json", {"choices": []}),
    "null_token": (200, "application/json", chat_reply(tokens=((None, -0.1),))),
    "no_logprobs": (200, "application/json", chat_reply(tokens=None)),
}
MODES = (*PLAIN, "hang", "trickle", "huge", "huge_chunked")


class FakeEndpoint:
    """``mode`` (one of :data:`MODES`, or a function of the request number from 1 giving one) says how
    the next requests are answered; ``requests`` counts them; ``release`` ends every hang."""

    def __init__(self):
        self.mode = "ok"
        self.requests = 0
        self.release = threading.Event()
        self.lock = threading.Lock()

    def next_mode(self) -> str:
        with self.lock:
            self.requests += 1
            n = self.requests
        return self.mode(n) if callable(self.mode) else self.mode


def _fake_handler(fake: FakeEndpoint):
    import json
    from http.server import BaseHTTPRequestHandler

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def head(self, status, ctype, length=None):
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            if length is not None:
                self.send_header("Content-Length", str(length))
            else:
                self.send_header("Transfer-Encoding", "chunked")
            if status == 429:
                self.send_header("Retry-After", "1")
            self.send_header("Connection", "close")  # one request per connection, said to the client
            self.end_headers()

        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length") or 0))
            mode = fake.next_mode()
            try:
                self.answer(mode)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up: what a real server meets too
            self.close_connection = True

        def answer(self, mode):
            if mode == "hang":
                fake.release.wait(60)
                return
            if mode == "trickle":  # a valid reply, one byte every 50 ms
                body = json.dumps(chat_reply()).encode()
                self.head(200, "application/json", len(body))
                for k in range(len(body)):
                    if fake.release.is_set():
                        return
                    self.wfile.write(body[k : k + 1])
                    self.wfile.flush()
                    time.sleep(0.05)
                return
            if mode.startswith("huge"):  # 50 MB of text in a JSON string
                chunk = b"x" * (1 << 20)
                declared = None if mode == "huge_chunked" else HUGE_BYTES + 64
                self.head(200, "application/json", declared)
                for _ in range(HUGE_BYTES >> 20):
                    if declared is None:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    else:
                        self.wfile.write(chunk)
                return
            status, ctype, body = PLAIN[mode]
            raw = (body if isinstance(body, str) else json.dumps(body)).encode()  # NaN as JSON's NaN
            self.head(status, ctype, len(raw))
            self.wfile.write(raw)

    return Handler


@contextlib.contextmanager
def serve_fake() -> Iterator[tuple[str, FakeEndpoint]]:
    """``(base_url, fake)``: a misbehaving endpoint on 127.0.0.1 in a thread, until exit."""
    from http.server import ThreadingHTTPServer

    fake = FakeEndpoint()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _fake_handler(fake))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", fake
    finally:
        fake.release.set()
        httpd.shutdown()
        httpd.server_close()
