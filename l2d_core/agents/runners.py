"""Agents that run: one interface for every kind, and the loop that fills the agent cache.

Every agent has ``kind``, ``source``, ``predict(records, progress=False) -> [Prediction]`` and
``gflops_at(n_tokens)``:

- :class:`~l2d_core.agents.extractive.ExtractiveAgent` — a QA model, sliding windows;
- :class:`~l2d_core.agents.generative.GenerativeAgent` — a causal LM with the paper's prompt;
- :class:`~l2d_core.agents.openai_chat.OpenAIChatAgent` — an OpenAI-compatible chat endpoint;
- :class:`PredictionFileAgent` — the answers of a SQuAD prediction file (declared GFLOPs).

:func:`run_into_cache` scores predictions (SPEC §2) into the :class:`AgentCache` chunk by
chunk, one transaction per chunk, skipping questions already cached: a run killed at any
moment loses at most the chunk in flight, and a rerun resumes where it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from tqdm.auto import tqdm

from ..data.records import QADataset, QARecord
from ..qa.scoring import SCORING_VERSION, gold_index, score_answer
from .base import ModelLoadError, Prediction
from .cache import AgentCache
from .catalog import AgentSpec
from .endpoint import EndpointError
from .extractive import ExtractiveAgent
from .generative import GenerativeAgent
from .openai_chat import OPTIONS as OPENAI_OPTIONS
from .openai_chat import OpenAIChatAgent
from .prediction_file import read_prediction_file
from .prices import PRICE_OPTIONS, TokenPrices

__all__ = [
    "Prediction",
    "ModelLoadError",
    "ExtractiveAgent",
    "GenerativeAgent",
    "OpenAIChatAgent",
    "EndpointError",
    "PredictionFileAgent",
    "AGENT_OPTIONS",
    "load_agent",
    "agent_gflops_at",
    "run_into_cache",
    "cache_summary",
    "shard",
    "parse_shard",
]

# options an AgentSpec may carry, per kind (anything else is refused: typos fail loudly)
AGENT_OPTIONS = {
    "extractive": (
        "dtype",
        "batch_size",
        "max_length",
        "stride",
        "max_answer_tokens",
        "null_answer",
        "null_threshold",
    ),
    "generative": ("dtype", "batch_size", "max_new_tokens"),
    "openai_chat": (*OPENAI_OPTIONS, *PRICE_OPTIONS),  # a live chat endpoint (agents.openai_chat)
    # agents.confidence: read beside the file; agents.measured: GFLOPs from the configuration
    "prediction_file": ("confidence_file", "confidence_rule", "architecture"),
    # agents.outcome_log: how its log reads; live_model/live_prompt: the local LLM it was recorded
    # from (agents.llm_server.MODELS), which answers new text
    "outcome_log": (
        "ids",
        "columns",
        "no_answer",
        "confidence_rule",
        "confidence_signal",
        "architecture",
        "live_model",
        "live_prompt",
    ),
}
for _kind in AGENT_OPTIONS:  # one price for every answer (agents.prices), read where its answers are routed
    AGENT_OPTIONS[_kind] += ("usd_per_question",)
V2_DATASETS = ("squad20", "hf-squad_v2")  # no-answer questions: extractive null score on by default


class PredictionFileAgent:
    """The answers of a prediction file ``{qid: answer}``; cannot answer anything else."""

    kind = "prediction_file"

    def __init__(self, path: str | Path, *, gflops: float = 0.0):
        self.path, self.gflops = Path(path), float(gflops)
        self.answers = read_prediction_file(self.path)
        self.source = f"file:{self.path.name}"

    def gflops_at(self, n_tokens: int) -> float:
        return self.gflops  # declared per query: the file says nothing about lengths

    def predict(self, records: Sequence[QARecord], progress: bool = False) -> list[Prediction]:
        return [Prediction(r.qid, self.answers.get(r.qid), self.gflops, None) for r in records]


def _model_path(spec: AgentSpec) -> str:
    """A local model directory (absolute, or relative to the data directory), else a hub id."""
    if not spec.path:
        raise ValueError(f"agent {spec.id}: a {spec.kind} agent needs a model path or hub id")
    local = spec.resolved_path()
    return str(local) if local.exists() else spec.path


def load_agent(spec: AgentSpec, device=None, **overrides):
    """The runnable agent of ``spec``; its settings come from ``spec.options`` then ``overrides``.

    Extractive agents of a SQuAD v2.0 dataset let the null answer compete unless
    ``null_answer`` is set explicitly.
    """
    options = {**(spec.options or {}), **{k: v for k, v in overrides.items() if v is not None}}
    unknown = sorted(set(options) - set(AGENT_OPTIONS[spec.kind]))
    if unknown:
        raise ValueError(
            f"agent {spec.id}: unknown option(s) {unknown} for kind {spec.kind!r}; "
            f"known: {list(AGENT_OPTIONS[spec.kind])}"
        )
    options.pop("usd_per_question", None)  # read with the answers (routing_data), not by the agent
    if spec.kind == "prediction_file":
        return PredictionFileAgent(spec.resolved_path(), gflops=spec.gflops)
    if spec.kind == "extractive":
        options.setdefault("null_answer", spec.dataset in V2_DATASETS)
        return ExtractiveAgent(_model_path(spec), device=device, **options)
    if spec.live_model:  # a log recorded from a local LLM: that LLM, on a server started here
        from .llm_server import shared_server
        from .measured import agent_gflops

        base_url = shared_server(spec.live_model).base_url
        prompt = options.get("live_prompt", "chat")
        return OpenAIChatAgent(spec.live_model, base_url=base_url, gflops=agent_gflops(spec), prompt=prompt)
    if spec.kind == "openai_chat":  # the model runs at the endpoint: no device here
        prices = TokenPrices.of({k: options.pop(k, None) for k in PRICE_OPTIONS}, f"agent {spec.id}")
        return OpenAIChatAgent(spec.path, gflops=spec.gflops, prices=prices, **options)
    return GenerativeAgent(_model_path(spec), device=device, **options)


def agent_gflops_at(agent, n_tokens: int = 384) -> float:
    """The agent-level figure of the paper's table: GFLOPs of one forward at ``n_tokens``
    (extractive: one window; generative: the prompt prefill; prediction file: as declared)."""
    return float(agent.gflops_at(n_tokens))


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/N"`` → ``(i, N)`` with ``0 <= i < N``.

    >>> parse_shard("1/4")
    (1, 4)
    """
    try:
        i, n = (int(x) for x in str(text).split("/"))
    except ValueError:
        raise ValueError(f"bad shard {text!r}: expected i/N with integers, e.g. 0/4") from None
    if n < 1 or not 0 <= i < n:
        raise ValueError(f"bad shard {text!r}: need N >= 1 and 0 <= i < N")
    return i, n


def shard(items: Sequence, index: int, count: int) -> list:
    """Items ``index, index + count, …``: ``count`` shards cover every item exactly once.

    >>> [shard("abcde", i, 2) for i in range(2)]
    [['a', 'c', 'e'], ['b', 'd']]
    """
    return list(items[index::count])


def _record(gold, p: Prediction, source: str) -> dict:
    rec = score_answer(gold, p.qid, p.answer)
    rec.update(gflops=p.gflops, latency_ms=p.latency_ms, source=source, confidence=p.extra.get("confidence"))
    rec["usd"] = p.extra.get("usd")  # what the endpoint's token counts cost at the agent's prices
    if p.extra.get("tokens") is not None:
        rec["tokens"] = p.extra["tokens"]  # [prompt, reply] tokens as the endpoint counted them
    return rec


def run_into_cache(
    agent,
    dataset: QADataset,
    agent_id: str,
    records: Sequence[QARecord] | None = None,
    cache: AgentCache | None = None,
    batch_size: int = 64,
    progress: bool = True,
    meta: dict | None = None,
    desc: str | None = None,
) -> dict:
    """Answer ``records`` (default: all of ``dataset``) with ``agent`` into the cache under
    ``agent_id``, ``batch_size`` questions per transaction, skipping questions already cached.

    Returns a summary over every requested question (cached before or now): ``questions``,
    ``computed``, ``skipped``, ``em``/``f1`` (percent), mean ``gflops`` and ``latency_ms`` per
    query, ``not_found`` (answers not located in the context: both positions wrong),
    ``ambiguous`` (located at their first of several occurrences), ``no_answer``, ``missing``,
    ``seconds`` (this call). An agent behind a remote endpoint (``predict_each``) goes on past a
    question that failed: the summary adds ``failed`` (how many; not cached, so running again asks
    them again) and ``failures`` (``qid``, ``error``), and ``without_confidence`` (answers the
    endpoint sent without log-probabilities); a failure that every question would meet
    (:attr:`~l2d_core.agents.endpoint.EndpointError.fatal`) is raised, what was answered kept.
    """
    t0 = time.perf_counter()
    cache = cache or AgentCache()
    records = list(dataset.records if records is None else records)
    # a model agent's answers count as done once recorded with its confidence (scoring version 3):
    # older ones are answered again, resumably
    done = (
        cache.done_ids(dataset.name, agent_id)
        if agent.kind == "prediction_file"
        else cache.ids_with(dataset.name, agent_id, "confidence")
    )
    todo = [r for r in records if r.qid not in done]
    gold = gold_index(dataset if len(todo) == len(dataset) else dataset.subset(r.qid for r in todo))
    full_meta = {
        "scoring_version": SCORING_VERSION,
        "kind": agent.kind,
        "source": str(getattr(agent, "path", "") or agent.source),
        "gflops_source": getattr(
            agent, "gflops_source", "declared" if agent.kind == "prediction_file" else "measured"
        ),
        **(meta or {}),
    }
    bar = tqdm(total=len(todo), unit="q", desc=desc or agent_id, disable=not progress or not todo)
    failures: list[tuple[str, EndpointError]] = []
    bare = 0  # answers without a confidence score from an endpoint
    for i in range(0, len(todo), batch_size):
        chunk = todo[i : i + batch_size]
        stop = None
        if hasattr(agent, "predict_each"):  # a remote endpoint: a failed question is listed, the run goes on
            preds, failed = agent.predict_each(chunk)
            failures += failed
            bare += sum("score" not in (p.extra.get("confidence") or {}) for p in preds)
            stop = next((e for _, e in failed if e.fatal), None)
        else:
            preds = agent.predict(chunk)
        cache.put_many(
            dataset.name, agent_id, {p.qid: _record(gold, p, agent.source) for p in preds}, full_meta
        )
        if stop is not None:  # nobody listens, or the key or model is refused: every question would fail
            bar.close()
            stop.answered = preds
            raise stop
        bar.update(len(chunk))
    bar.close()
    seconds = time.perf_counter() - t0
    out = cache_summary(cache, dataset, agent_id, records, len(todo) - len(failures), seconds)
    if hasattr(agent, "predict_each"):
        out["without_confidence"] = bare
    if failures:
        out["skipped"] -= len(failures)
        out["failed"] = len(failures)
        out["failures"] = [{"qid": q, "error": str(e)} for q, e in failures]
    return out


def cache_summary(
    cache: AgentCache,
    dataset: QADataset,
    agent_id: str,
    records: Sequence[QARecord],
    computed: int = 0,
    seconds: float = 0.0,
) -> dict:
    """The summary :func:`run_into_cache` returns, read from the cache for ``records``."""
    qids = [r.qid for r in records]
    t = cache.table(dataset.name, agent_id).reindex(qids) if qids else None
    out = {"agent": agent_id, "dataset": dataset.name, "questions": len(qids), "computed": computed}
    out["skipped"] = len(qids) - computed
    out["seconds"] = round(seconds, 3)
    if t is None or t.empty:
        zeros = dict.fromkeys(("em", "f1", "gflops", "not_found", "ambiguous", "no_answer", "missing"), 0)
        return {**out, **zeros, "latency_ms": None}
    latency = t["latency_ms"].astype(float)
    status = t["status"]
    return {
        **out,
        "em": round(100 * float(t["em"].astype(float).fillna(0).mean()), 2),
        "f1": round(100 * float(t["f1"].astype(float).fillna(0).mean()), 2),
        "gflops": float(t["gflops"].astype(float).mean()),
        "latency_ms": None if latency.isna().all() else float(latency.mean()),
        "not_found": int((status == "not_found").sum()),
        "ambiguous": int((status == "ambiguous").sum()),
        "no_answer": int((t["answer"] == "").sum()),
        "missing": int(status.isna().sum() + (status == "missing").sum()),
    }
