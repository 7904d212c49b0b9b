"""The contract with a remote LLM endpoint (OpenAI-compatible ``POST {base_url}/chat/completions``):
a remote service that may hang, throttle, trickle, truncate or lie, read so that none of it
reaches the caller as anything but one :class:`EndpointError`.

- **Deadline**: one call (connect, first byte, whole reply, and the retries) ends within
  ``deadline`` seconds; the caller waits no longer even when the socket does (the request runs in
  a daemon thread whose own socket timeouts end it soon after).
- **Retries**: a refused connection, 408, 409, 429 and 5xx are tried again, ``retries`` times at
  most, only while the deadline leaves time (a numeric ``Retry-After`` is followed when it fits).
- **Size cap**: a reply over :func:`reply_cap` bytes (from ``max_tokens``) is refused while it
  arrives, before it is kept whole.
- **Validation**: every field read is checked — a JSON object (depth-bounded,
  :mod:`~l2d_core.data.safe_json`), ``choices[0].message.content`` a string, each
  ``logprobs.content[*]`` a ``{"token": str, "logprob": finite number <= 0}``; log-probabilities
  absent are reported as absent (``None``), never as a number.
- **Errors**: :class:`EndpointError`, one line naming the endpoint and model, with ``endpoint``,
  ``status`` (the HTTP status, ``None`` without one), ``kind`` (``deadline``, ``unreachable``,
  ``status``, ``bad_reply``) and ``http_status`` (504 for a deadline, else 502: what an API in
  front of it answers).

>>> reply_cap(32)
81920
>>> read_choice({"choices": [{"message": {"content": "Paris"}, "logprobs": None}]}, "e")
('Paris', None)
>>> try:
...     read_choice({"choices": [{"message": {"content": 12345}}]}, "endpoint x")
... except EndpointError as exc:
...     print(exc)
endpoint x sent a malformed reply: choices[0].message.content is a number, not text
"""

from __future__ import annotations

import contextlib
import http.client
import json
import math
import re
import threading
import time
import urllib.parse

from ..data import safe_json

__all__ = [
    "EndpointError",
    "Endpoint",
    "read_choice",
    "reply_cap",
    "released_while_waiting",
    "waiting",
    "RETRY_STATUSES",
]

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
FATAL_STATUSES = frozenset({401, 403, 404})  # every question would get the same answer
GRACE = 0.25  # seconds the caller waits past the deadline for the request's own, more precise error
READ = 1 << 16


_held = threading.local()  # the lock this thread lets go of while it waits on an endpoint


@contextlib.contextmanager
def released_while_waiting(lock):
    """Within it, this thread (holding ``lock``) lets ``lock`` go while it waits on an endpoint
    (:func:`waiting`) and takes it back after: a server's model lock is not held while a remote
    endpoint thinks, so a slow endpoint delays only the requests that ask it."""
    before = getattr(_held, "lock", None)
    _held.lock = lock
    try:
        yield
    finally:
        _held.lock = before


@contextlib.contextmanager
def waiting():
    """Around a wait on an endpoint: the lock of :func:`released_while_waiting` is let go."""
    lock = getattr(_held, "lock", None)
    _held.lock = None  # a nested wait does not release it twice
    if lock is not None:
        lock.release()
    try:
        yield
    finally:
        if lock is not None:
            lock.acquire()
        _held.lock = lock


def reply_cap(max_tokens: int) -> int:
    """The most bytes a reply to ``max_tokens`` tokens may take: 16 KiB of envelope and 2 KiB per
    token (a token with its log-probability and bytes takes under 200)."""
    return 16_384 + 2_048 * int(max_tokens)


class EndpointError(RuntimeError):
    """An endpoint that failed (see the module docstring); ``answered``: the predictions it gave
    before failing (set by the agent)."""

    def __init__(
        self,
        message: str,
        answered: list | None = None,
        *,
        endpoint: str | None = None,
        status: int | None = None,
        kind: str = "bad_reply",
    ):
        super().__init__(" ".join(str(message).split()))
        self.answered = list(answered or [])
        self.endpoint, self.status, self.kind = endpoint, status, kind

    @property
    def http_status(self) -> int:
        """What an API in front of the endpoint answers: 504 past the deadline, else 502."""
        return 504 if self.kind == "deadline" else 502

    @property
    def fatal(self) -> bool:
        """Whether every other question would fail the same way (nobody listens, or the key or
        model is refused): a run stops instead of trying each question."""
        return self.kind == "unreachable" or self.status in FATAL_STATUSES


def _kind_of(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return {str: "text", list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def read_choice(
    doc, where: str, endpoint: str | None = None, completion: bool = False
) -> tuple[str, list[tuple[str, float]] | None]:
    """``(content, tokens)`` of a chat reply's first choice (``completion``: of a text completion,
    ``choices[0].text``), every field checked; ``tokens`` is ``None`` when the reply has no
    log-probabilities. A completion's log-probabilities come as the chat's ``content`` list
    (llama.cpp) or as OpenAI's ``tokens`` and ``token_logprobs`` lists (vLLM).

    >>> chat = {"choices": [{"message": {"content": "Paris"}, "logprobs": {"content": [
    ...     {"token": "Paris", "logprob": -0.25}]}}]}
    >>> read_choice(chat, "endpoint e")
    ('Paris', [('Paris', -0.25)])
    >>> text = {"choices": [{"text": " Paris", "logprobs": {"tokens": [" Par", "is"],
    ...     "token_logprobs": [-0.5, -0.1]}}]}
    >>> read_choice(text, "endpoint e", completion=True)
    (' Paris', [(' Par', -0.5), ('is', -0.1)])
    >>> read_choice({"choices": [{"text": None}]}, "endpoint e", completion=True)
    Traceback (most recent call last):
    ...
    l2d_core.agents.endpoint.EndpointError: endpoint e sent a malformed reply: choices[0].text is null, ...
    """

    def bad(what: str):
        return EndpointError(f"{where} sent a malformed reply: {what}", endpoint=endpoint, kind="bad_reply")

    if not isinstance(doc, dict):
        raise bad(f"the reply is {_kind_of(doc)}, not an object")
    choices = doc.get("choices")
    if not isinstance(choices, list) or not choices:
        raise bad("no choices" if not choices else f"choices is {_kind_of(choices)}, not a list")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise bad(f"choices[0] is {_kind_of(choice)}, not an object")
    if completion:
        message, field = choice, "choices[0].text"
    else:
        message, field = choice.get("message"), "choices[0].message.content"
        if not isinstance(message, dict):
            raise bad(f"choices[0].message is {_kind_of(message)}, not an object")
    content = message.get("text" if completion else "content")
    if not isinstance(content, str):
        raise bad(f"{field} is {_kind_of(content)}, not text")
    logprobs = choice.get("logprobs")
    if completion and isinstance(logprobs, dict) and "content" not in logprobs and "tokens" in logprobs:
        tokens, values = logprobs.get("tokens"), logprobs.get("token_logprobs")
        if not isinstance(tokens, list) or not isinstance(values, list) or len(tokens) != len(values):
            raise bad("choices[0].logprobs.tokens and token_logprobs are not two lists of one length")
        logprobs = {"content": [{"token": t, "logprob": v} for t, v in zip(tokens, values)]}
    if logprobs is None or (isinstance(logprobs, dict) and logprobs.get("content") is None):
        return content, None
    items = logprobs.get("content") if isinstance(logprobs, dict) else logprobs
    if not isinstance(items, list):
        raise bad(f"choices[0].logprobs.content is {_kind_of(items)}, not a list")
    tokens = []
    for k, item in enumerate(items):
        at = f"choices[0].logprobs.content[{k}]"
        if not isinstance(item, dict):
            raise bad(f"{at} is {_kind_of(item)}, not an object")
        tok, lp = item.get("token"), item.get("logprob")
        if not isinstance(tok, str):
            raise bad(f"{at}.token is {_kind_of(tok)}, not text")
        if isinstance(lp, bool) or not isinstance(lp, int | float):
            raise bad(f"{at}.logprob is {_kind_of(lp)}, not a number")
        if not math.isfinite(lp) or lp > 1e-6:
            raise bad(f"{at}.logprob is {lp!r}; a log-probability is a finite number <= 0")
        tokens.append((tok, min(float(lp), 0.0)))
    return content, tokens


def _short(text: str, n: int = 160) -> str:
    text = " ".join(str(text).split())
    return (text[:n] + "…") if len(text) > n else text


def _said(raw: bytes, content_type: str) -> str:
    """What an error reply says, on one line: its JSON error message, an HTML page's title, or its
    first characters."""
    text = raw[:4096].decode("utf-8", "replace")
    try:
        doc = safe_json.loads(text)
    except ValueError:  # not JSON, or nested past the bound
        doc = None
    if isinstance(doc, dict):
        inner = doc.get("error") if isinstance(doc.get("error"), dict) else doc
        for key in ("message", "detail", "error"):
            if isinstance(inner.get(key), str) and inner[key].strip():
                return _short(inner[key])
    if "html" in content_type or text.lstrip().startswith("<"):
        title = re.search(r"<title[^>]*>(.*?)</title>", text, re.I | re.S)
        return f"an HTML page ({_short(title.group(1), 80)})" if title else "an HTML page"
    return _short(text) or "an empty body"


class Endpoint:
    """``post(payload) -> dict``: one chat completion under the contract of the module docstring."""

    def __init__(
        self,
        base_url: str,
        model: str,
        key: str,
        deadline: float,
        retries: int,
        max_tokens: int,
        route: str = "/chat/completions",
    ):
        self.base_url, self.model, self.key = base_url.rstrip("/"), model, key
        self.deadline, self.retries, self.cap = float(deadline), int(retries), reply_cap(max_tokens)
        self.where = f"endpoint {self.base_url} (model {model})"
        self._url = urllib.parse.urlsplit(self.base_url + route)

    def error(self, message: str, kind: str, status: int | None = None) -> EndpointError:
        return EndpointError(f"{self.where} {message}", endpoint=self.base_url, status=status, kind=kind)

    def late(self) -> EndpointError:
        return self.error(f"did not answer within {self.deadline:g} s", "deadline")

    def post(self, payload: dict) -> dict:
        """The reply's JSON object, within the deadline (retries included), or :class:`EndpointError`."""
        body = json.dumps(payload).encode()
        deadline = time.monotonic() + self.deadline
        box: dict = {}
        done = threading.Event()

        def work():
            try:
                box["reply"] = self._with_retries(body, deadline)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=work, daemon=True, name="l2d-endpoint").start()
        if not done.wait(self.deadline + GRACE):
            raise self.late()
        if "error" in box:
            raise box["error"]
        return box["reply"]

    def _with_retries(self, body: bytes, deadline: float) -> dict:
        attempt = 0
        while True:
            try:
                return self._once(body, deadline)
            except EndpointError as exc:
                retry = exc.kind == "unreachable" or exc.status in RETRY_STATUSES
                wait = getattr(exc, "retry_after", None) or 0.5 * 2**attempt
                if not retry or attempt >= self.retries or time.monotonic() + wait >= deadline:
                    raise
            attempt += 1
            time.sleep(wait)

    def _once(self, body: bytes, deadline: float) -> dict:
        u = self._url

        def left() -> float:
            seconds = deadline - time.monotonic()
            if seconds <= 0:
                raise self.late()
            return seconds

        resp = None
        cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        conn = cls(u.hostname, u.port, timeout=left())
        path = u.path + (f"?{u.query}" if u.query else "")
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Authorization": f"Bearer {self.key}",
        }
        try:
            try:
                conn.request("POST", path, body=body, headers=headers)
            except TimeoutError:
                raise self.late() from None
            except OSError as exc:
                raise EndpointError(
                    f"cannot reach {self.where}: {_short(exc, 120)}",
                    endpoint=self.base_url,
                    kind="unreachable",
                ) from None
            sock = conn.sock  # kept: the connection lets go of it when the reply says it closes
            sock.settimeout(left())
            resp = conn.getresponse()
            status, ctype = resp.status, (resp.getheader("content-type") or "").lower()
            declared = (resp.getheader("content-length") or "").strip()
            if declared.isdigit() and int(declared) > self.cap:
                raise self.error(
                    f"sent a reply of {int(declared)} bytes, over the {self.cap} bytes a reply of "
                    "this max_tokens may take",
                    "bad_reply",
                    status,
                )
            raw, size = [], 0
            while True:
                sock.settimeout(left())
                part = resp.read1(READ)
                if not part:
                    break
                size += len(part)
                if size > self.cap:
                    raise self.error(
                        f"sent a reply over {self.cap} bytes, more than a reply of this max_tokens may take",
                        "bad_reply",
                        status,
                    )
                raw.append(part)
            left()
        except TimeoutError:
            raise self.late() from None
        except (http.client.HTTPException, OSError) as exc:
            what = type(exc).__name__ if not str(exc) else _short(exc, 120)
            raise self.error(f"broke off its reply ({what})", "bad_reply") from None
        finally:
            if resp is not None:
                resp.close()
            conn.close()
        data = b"".join(raw)
        if not 200 <= status < 300:
            exc = self.error(f"answered HTTP {status}: {_said(data, ctype)}", "status", status)
            after = (resp.getheader("retry-after") or "").strip()
            exc.retry_after = float(after) if after.isdigit() and 0 < int(after) <= 60 else None
            raise exc
        try:
            return safe_json.loads(data)
        except (ValueError, UnicodeDecodeError):
            kind = ctype.split(";")[0] or "no content type"
            start = _short(data[:200].decode("utf-8", "replace"), 60)
            raise self.error(
                f"sent a reply that is not JSON ({kind}): {start!r}",
                "bad_reply",
                status,
            ) from None
