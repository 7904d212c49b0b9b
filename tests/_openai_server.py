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
