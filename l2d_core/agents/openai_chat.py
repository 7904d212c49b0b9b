"""A live LLM agent behind an OpenAI-compatible ``/v1/chat/completions`` endpoint (vLLM,
llama.cpp's server, Ollama, hosted APIs), asked with the paper's few-shot prompt.

The registry entry (kind ``openai_chat``): ``path`` is the model name the endpoint serves,
``options["base_url"]`` the endpoint (e.g. ``http://localhost:8000/v1``). Other options:
``api_key_env`` — the *name* of the environment variable holding the API key (the key itself is
a secret and never written to the registry; without it a placeholder key is sent, which local
servers accept), ``max_tokens`` (32), ``temperature`` (0: greedy), ``timeout`` (the deadline of
one question in seconds — connect, first byte, whole reply and retries —, 60), ``retries`` (tries
again after a refused connection, 408, 409, 429 or 5xx while the deadline leaves time; 2),
``batch_size`` (requests in flight at once, 1) and ``prompt`` (``chat``: the turns below to
``/chat/completions``; ``completion``: the generative kind's prompt text to ``/completions``, for a
pretrained model with no chat template). The contract with the endpoint (deadline, reply
size cap, validation of every field, errors) is :mod:`~l2d_core.agents.endpoint`'s.

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
  log-probabilities gives ``abstained`` only (no score: a cascade cannot use the agent) and a
  ``note`` saying so, and one that stops sending them after it did fails the question (a
  router would otherwise route without the confidence it was trained on);
- latency: the measured wall time of the request (with ``batch_size`` > 1, waiting at the
  endpoint behind the requests sent with it included: what a user would wait);
- GFLOPs: as declared in the registry (the endpoint's model is not counted here);
- price: with ``usd_per_1m_input`` and ``usd_per_1m_output`` among the options, each answer's
  dollars from the reply's ``usage`` token counts (:mod:`.prices`; the money cost rule).

An endpoint that cannot be reached, misses the deadline, answers with an error or a malformed
reply raises :class:`~l2d_core.agents.endpoint.EndpointError` (one line naming the endpoint);
:meth:`OpenAIChatAgent.predict_each` keeps going past a failed question and lists the failures,
which :func:`~l2d_core.agents.runners.run_into_cache` records per question.
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
from .endpoint import Endpoint, EndpointError, read_choice, waiting
from .generative import FEW_SHOT, INSTRUCTION, build_prompt, parse_output
from .prices import TokenPrices

__all__ = [
    "OPTIONS",
    "EndpointError",
    "OpenAIChatAgent",
    "chat_messages",
    "parse_reply",
    "reply_confidence",
]

OPTIONS = (
    "base_url",
    "api_key_env",
    "max_tokens",
    "temperature",
    "timeout",
    "retries",
    "batch_size",
    "prompt",
)
PROMPTS = ("chat", "completion")  # chat turns to /chat/completions, or the prompt text to /completions
NO_ANSWER = ("?", "no answer", "unanswerable")
PLACEHOLDER_KEY = "not-needed"  # local servers ask for no key; the client wants one anyway


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
        prices: TokenPrices | None = None,
        prompt: str = "chat",
    ):
        if not model:
            raise ValueError("an openai_chat agent needs the model name the endpoint serves (its path)")
        if not base_url or not str(base_url).startswith(("http://", "https://")):
            raise ValueError(
                f"an openai_chat agent needs options.base_url, an http(s) URL such as "
                f"http://localhost:8000/v1; got {base_url!r}"
            )
        rule = (
            "openai_chat options: max_tokens an integer in [1, 65536], batch_size in [1, 256], "
            "timeout in (0, 3600] seconds, retries an integer in [0, 10], temperature in [0, 2]"
        )
        try:
            max_tokens, batch_size, retries = _integer(max_tokens), _integer(batch_size), _integer(retries)
            timeout, temperature = float(timeout), float(temperature)
        except (TypeError, ValueError):
            raise ValueError(rule) from None
        if (
            not (1 <= max_tokens <= 65536 and 1 <= batch_size <= 256 and 0 <= retries <= 10)
            or not 0 < timeout <= 3600
            or not 0 <= temperature <= 2
        ):
            raise ValueError(rule)
        if prompt not in PROMPTS:
            raise ValueError(f"openai_chat option prompt is one of {', '.join(PROMPTS)}; got {prompt!r}")
        key = PLACEHOLDER_KEY
        if api_key_env:
            key = os.environ.get(api_key_env, "")
            if not key:
                raise ValueError(
                    f"the API key of {base_url} is read from the environment variable {api_key_env}, "
                    "which is not set"
                )
        self.model, self.base_url, self.gflops = model, str(base_url).rstrip("/"), float(gflops)
        self.max_tokens, self.temperature = max_tokens, temperature
        self.source = f"openai_chat:{self.model}@{self.base_url}"
        self.completion = prompt == "completion"
        route = "/completions" if self.completion else "/chat/completions"
        self.endpoint = Endpoint(self.base_url, model, key, timeout, retries, max_tokens, route)
        self._timeout, self.batch_size = timeout, batch_size
        self.logprobs_seen = False  # once an endpoint sent log-probabilities, their absence is an error
        self.prices = prices  # dollars per 1M tokens: each answer's price from the reply's token counts

    def gflops_at(self, n_tokens: int) -> float:
        return self.gflops  # declared per query: the endpoint's model is not counted here

    def _ask(self, record: QARecord) -> Prediction:
        payload = {"model": self.model, "max_tokens": self.max_tokens, "temperature": self.temperature}
        if self.completion:  # the prompt text; OpenAI's completions ask for log-probabilities as a count
            payload.update(prompt=build_prompt(record.question, record.context), logprobs=1)
        else:
            payload.update(messages=chat_messages(record.question, record.context), logprobs=True)
        payload["stop"] = ["\n"]
        t0 = time.perf_counter()
        reply = self.endpoint.post(payload)
        seconds = time.perf_counter() - t0
        text, tokens = read_choice(reply, self.endpoint.where, self.base_url, self.completion)
        if tokens is None and self.logprobs_seen:
            raise self.endpoint.error(
                "stopped sending log-probabilities: the answer's confidence cannot be read", "bad_reply"
            )
        self.logprobs_seen |= tokens is not None
        answer = parse_output(text) if self.completion else parse_reply(text)
        extra = {"raw": text, "generated_tokens": len(tokens or ())}
        extra["confidence"] = reply_confidence(tokens or [], answer)
        usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
        counts = [usage.get(k) for k in ("prompt_tokens", "completion_tokens")]
        if all(isinstance(c, int) and c >= 0 for c in counts):
            extra["tokens"] = counts  # prompt and reply tokens as the endpoint counted them
            if self.prices is not None:
                extra["usd"] = self.prices.usd(*counts)
        if tokens is None:
            extra["note"] = "the endpoint sent no log-probabilities: no confidence"
        return Prediction(record.qid, answer, self.gflops, 1000.0 * seconds, 1, extra)

    def predict_each(self, records: Sequence[QARecord], progress: bool = False):
        """``(predictions, failures)``: every record asked (``batch_size`` in flight), a failed one
        kept as ``(qid, EndpointError)``; one that says every other question would fail too
        (:attr:`EndpointError.fatal`) stops the rest (they are neither asked nor listed)."""
        records = list(records)
        out: list[Prediction] = []
        failures: list[tuple[str, EndpointError]] = []
        bar = tqdm(total=len(records), unit="q", desc="ask", disable=not progress, leave=False)
        pool = ThreadPoolExecutor(max_workers=self.batch_size, thread_name_prefix="l2d-ask")
        try:
            with waiting():
                futures = [pool.submit(self._ask, r) for r in records]
                for r, f in zip(records, futures):
                    try:
                        out.append(f.result())
                    except EndpointError as exc:
                        failures.append((r.qid, exc))
                        if exc.fatal:
                            for g in futures:
                                g.cancel()  # those not started yet
                    except CancelledError:
                        continue
                    bar.update(1)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            bar.close()
        return out, failures

    def predict(self, records: Sequence[QARecord], progress: bool = False) -> list[Prediction]:
        """One request per record, ``batch_size`` in flight at once; a failure raises the first
        :class:`EndpointError` carrying the predictions finished (``answered``)."""
        out, failures = self.predict_each(records, progress)
        if failures:
            error = failures[0][1]
            error.answered = out
            raise error
        return out


def _integer(value) -> int:
    if isinstance(value, bool) or int(value) != value:
        raise ValueError(value)
    return int(value)
