"""A live LLM agent behind an OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM,
llama.cpp's server, Ollama, hosted APIs), asked with the paper's few-shot prompt.

The registry entry (kind ``openai_chat``): ``path`` is the model name the endpoint serves,
``options["base_url"]`` the endpoint (e.g. ``http://localhost:8000/v1``). Other options:
``api_key_env`` — the *name* of the environment variable holding the API key (the key itself is
a secret and never written to the registry; without it a placeholder key is sent, which local
servers accept), ``max_tokens`` (32), ``temperature`` (0: greedy), ``timeout`` (seconds per
request, 60), ``retries`` (the client's retries of a failed connection, 429 or 5xx; 2) and
``batch_size`` (requests in flight at once, 1).

The prompt: the instruction as the system message, the four demonstrations of the paper's
appendix as user/assistant turns (the assistant answers with the output alone, ``?`` for no
answer), then the question's ``Context: "…" / Question: "…"`` turn. The reply's first line,
stripped of an ``Output:`` label and quotes, is the answer; ``?``, "no answer" or "unanswerable"
(any case) is no answer ("").

Recorded with every answer (SPEC §5):

- confidence: ``score`` — the **minimum token probability** of the answer line,
  ``exp(min logprob)`` (the confidence the remote log of BENCHMARK.md's PLLM pool gives, so a
  cascade reads the same kind of number), with ``min_logprob``, ``mean_logprob`` and
  ``abstained`` as the generative kind records them; an endpoint that returns no
  log-probabilities gives ``abstained`` only (no score: a cascade cannot use the agent);
- latency: the measured wall time of the request (with ``batch_size`` > 1, waiting at the
  endpoint behind the requests sent with it included: what a user would wait);
- GFLOPs: as declared in the registry (the endpoint's model is not counted here).

An endpoint that cannot be reached, times out or answers with an error raises
:class:`EndpointError` (one line naming the endpoint); the answers it gave before are kept on
the error (``answered``), and :func:`~l2d_core.agents.runners.run_into_cache` records them.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from concurrent.futures import CancelledError, ThreadPoolExecutor

from tqdm.auto import tqdm

from ..data.records import QARecord
from .base import Prediction
from .generative import FEW_SHOT, INSTRUCTION

__all__ = [
    "OPTIONS",
    "EndpointError",
    "OpenAIChatAgent",
    "chat_messages",
    "parse_reply",
    "reply_confidence",
]

OPTIONS = ("base_url", "api_key_env", "max_tokens", "temperature", "timeout", "retries", "batch_size")
NO_ANSWER = ("?", "no answer", "unanswerable")
PLACEHOLDER_KEY = "not-needed"  # local servers ask for no key; the client wants one anyway


class EndpointError(RuntimeError):
    """An endpoint that failed (unreachable, timed out, an error status, a malformed reply);
    ``answered``: the predictions it gave before failing."""

    def __init__(self, message: str, answered: list[Prediction] | None = None):
        super().__init__(message)
        self.answered = list(answered or [])


def _turn(context: str, question: str) -> str:
    return f'Context: "{context}"\nQuestion: "{question}"'


def chat_messages(question: str, context: str) -> list[dict]:
    """The paper's few-shot prompt as chat turns.

    >>> m = chat_messages("Who wrote Moby-Dick?", "Moby-Dick is a novel by Herman Melville.")
    >>> [t["role"] for t in m][:3], m[2]["content"], len(m), m[-1]["content"].endswith('Moby-Dick?"')
    (['system', 'user', 'assistant'], 'Paris, France', 10, True)
    """
    turns = [{"role": "system", "content": INSTRUCTION}]
    for c, q, a in FEW_SHOT:
        turns += [{"role": "user", "content": _turn(c, q)}, {"role": "assistant", "content": a}]
    return [*turns, {"role": "user", "content": _turn(context, question.strip())}]


def parse_reply(text: str | None) -> str:
    """The answer in a reply: its first non-empty line without an ``Output:`` label or quotes;
    ``?``, "no answer" or "unanswerable" is no answer ("").

    >>> parse_reply('Output: "Herman Melville"\\nbecause…'), parse_reply("No answer."), parse_reply(None)
    ('Herman Melville', '', '')
    """
    lines = [s.strip() for s in (text or "").splitlines() if s.strip()]
    line = lines[0] if lines else ""
    if line.lower().startswith("output:"):
        line = line[len("output:") :].strip()
    for q in ('"', "'", "“", "”"):
        line = line.strip(q).strip()
    return "" if line.rstrip(".").strip().lower() in NO_ANSWER else line


def reply_confidence(tokens: Sequence[tuple[str, float]], answer: str) -> dict:
    """The confidence record of a reply from its ``(token, logprob)`` pairs: over the tokens of the
    answer line (leading blank tokens skipped, up to the first newline; all tokens if that leaves
    none), ``score`` = minimum token probability, ``min_logprob``, ``mean_logprob``; ``abstained``
    always. No tokens: ``abstained`` only.

    >>> c = reply_confidence([("Par", -0.1), ("is", -0.5), ("\\n", -2.0)], "Paris")
    >>> round(c["score"], 4), c["min_logprob"], c["mean_logprob"], c["abstained"]
    (0.6065, -0.5, -0.3, 0.0)
    """
    kept: list[float] = []
    for tok, lp in tokens:
        if not kept and not tok.strip():
            continue
        if "\n" in tok:
            break
        kept.append(float(lp))
    kept = kept or [float(lp) for _, lp in tokens]
    out = {"abstained": float(answer == "")}
    if kept:
        low = min(kept)
        out.update(score=math.exp(low), min_logprob=low, mean_logprob=sum(kept) / len(kept))
    return out


class OpenAIChatAgent:
    """``predict(records) -> [Prediction]`` through an OpenAI-compatible chat endpoint (see the
    module docstring); ``gflops``: the registry's declared GFLOPs per query."""

    kind = "openai_chat"
    gflops_source = "declared"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        gflops: float = 0.0,
        api_key_env: str | None = None,
        max_tokens: int = 32,
        temperature: float = 0.0,
        timeout: float = 60.0,
        retries: int = 2,
        batch_size: int = 1,
    ):
        if not model:
            raise ValueError("an openai_chat agent needs the model name the endpoint serves (its path)")
        if not base_url or not str(base_url).startswith(("http://", "https://")):
            raise ValueError(
                f"an openai_chat agent needs options.base_url, an http(s) URL such as "
                f"http://localhost:8000/v1; got {base_url!r}"
            )
        rule = (
            "openai_chat options: max_tokens and batch_size integers >= 1, timeout > 0 (seconds), "
            "retries an integer >= 0, temperature in [0, 2]"
        )
        try:
            max_tokens, batch_size, retries = _integer(max_tokens), _integer(batch_size), _integer(retries)
            timeout, temperature = float(timeout), float(temperature)
        except (TypeError, ValueError):
            raise ValueError(rule) from None
        if min(max_tokens, batch_size) < 1 or not timeout > 0 or retries < 0 or not 0 <= temperature <= 2:
            raise ValueError(rule)
        key = PLACEHOLDER_KEY
        if api_key_env:
            key = os.environ.get(api_key_env, "")
            if not key:
                raise ValueError(
                    f"the API key of {base_url} is read from the environment variable {api_key_env}, "
                    "which is not set"
                )
        from openai import OpenAI

        self.model, self.base_url, self.gflops = model, str(base_url).rstrip("/"), float(gflops)
        self.max_tokens, self.temperature = max_tokens, temperature
        self.source = f"openai_chat:{self.model}@{self.base_url}"
        self.client = OpenAI(api_key=key, base_url=self.base_url, timeout=timeout, max_retries=retries)
        self._timeout, self.batch_size = timeout, batch_size

    def gflops_at(self, n_tokens: int) -> float:
        return self.gflops  # declared per query: the endpoint's model is not counted here

    def _ask(self, record: QARecord) -> Prediction:
        import openai

        where = f"endpoint {self.base_url} (model {self.model})"
        t0 = time.perf_counter()
        try:
            reply = self.client.chat.completions.create(
                model=self.model,
                messages=chat_messages(record.question, record.context),
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                logprobs=True,
                stop=["\n"],
            )
        except openai.APITimeoutError:
            raise EndpointError(f"{where} did not answer within {self._timeout:g} s") from None
        except openai.APIConnectionError as exc:
            raise EndpointError(f"cannot reach {where}: {_first_line(exc.__cause__ or exc)}") from None
        except openai.APIStatusError as exc:
            raise EndpointError(f"{where} answered HTTP {exc.status_code}: {_status_message(exc)}") from None
        seconds = time.perf_counter() - t0
        if not getattr(reply, "choices", None):
            raise EndpointError(f"{where} sent a reply without choices")
        choice = reply.choices[0]
        text = choice.message.content if choice.message is not None else None
        logprobs = getattr(choice.logprobs, "content", None) or []
        answer = parse_reply(text)
        tokens = [(t.token, t.logprob) for t in logprobs]
        extra = {"raw": text or "", "generated_tokens": len(tokens)}
        extra["confidence"] = reply_confidence(tokens, answer)
        return Prediction(record.qid, answer, self.gflops, 1000.0 * seconds, 1, extra)

    def predict(self, records: Sequence[QARecord], progress: bool = False) -> list[Prediction]:
        """One request per record, ``batch_size`` in flight at once; an endpoint failure raises
        :class:`EndpointError` carrying the predictions finished before it (requests not sent
        yet are dropped)."""
        records = list(records)
        out: list[Prediction] = []
        error: EndpointError | None = None
        bar = tqdm(total=len(records), unit="q", desc="ask", disable=not progress, leave=False)
        with ThreadPoolExecutor(max_workers=self.batch_size) as pool:
            futures = [pool.submit(self._ask, r) for r in records]
            for f in futures:
                try:
                    out.append(f.result())
                except EndpointError as exc:
                    error = error or exc
                    for g in futures:
                        g.cancel()  # those not started yet
                except CancelledError:
                    continue
                bar.update(1)
        bar.close()
        if error is not None:
            error.answered = out
            raise error
        return out


def _integer(value) -> int:
    if isinstance(value, bool) or int(value) != value:
        raise ValueError(value)
    return int(value)


def _first_line(exc: BaseException | str) -> str:
    """An error's message on one line, short."""
    text = " ".join(str(exc).split())
    return (text[:200] + "…") if len(text) > 200 else text or type(exc).__name__


def _status_message(exc) -> str:
    """What an endpoint said with its error status: the error object's message where it sent one."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        if isinstance(inner.get("message"), str) and inner["message"].strip():
            return _first_line(inner["message"])
    return _first_line(body if isinstance(body, str) and body.strip() else exc.response.reason_phrase)
