"""Running an agent on one query, possibly new text (:func:`answer_with`): the cached, scored
answer for a dataset question; for new text only *runnable* agents answer (kinds ``extractive``,
``generative`` and ``openai_chat``, run by :mod:`.runners`: sliding windows over long contexts,
the paper's few-shot prompt), each loaded once per process (:func:`runnable_agent`). Prediction-file
agents cannot answer new text and the result says so; nothing is ever made up. The dashboard's
single query and the deployed router's API both answer through here.
"""

from __future__ import annotations

import json
from functools import lru_cache

from ..data.records import QARecord
from ..qa.positions import ContextIndex, locate
from ..qa.squad_eval import exact_match, f1
from .cache import AgentCache
from .catalog import AgentSpec
from .kind_words import no_new_text
from .measured import agent_gflops, per_query_gflops
from .prices import answer_price

__all__ = ["answer_with", "can_answer_new_text", "check_expected_answer", "runnable_agent"]


def _require_text(question: str, context: str, passage: bool = True) -> tuple[str, str]:
    """The question and context as given; an empty one is one plain line (``passage=False``: a
    dataset question of a log's dataset, whose prompts come without a passage)."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("the question is empty: type a question")
    if passage and (not isinstance(context, str) or not context.strip()):
        raise ValueError("the context is empty: paste the passage the answer should come from")
    return question, context  # as given: the embedding cache is keyed by the exact text


def can_answer_new_text(spec: AgentSpec) -> bool:
    """Only agents that run a model answer text outside their dataset."""
    return spec.answers_new_text


def check_expected_answer(context: str, answer: str) -> dict:
    """Locate an answer the user expects (SPEC §2 positions) in the context.

    >>> check_expected_answer("Tesla moved to Paris in 1882.", "Paris")["in_context"]
    True
    >>> r = check_expected_answer("Tesla moved to Paris in 1882.", "London")
    >>> r["in_context"], r["message"]
    (False, "the given answer 'London' is not in the context")
    """
    if not answer or not answer.strip():
        raise ValueError("the expected answer is empty")
    loc = locate(answer, ContextIndex.build(context), None, context)
    found = loc.status != "not_found"
    return {
        "in_context": found,
        "start": loc.start,
        "end": loc.end,
        "status": loc.status,
        "message": "" if found else f"the given answer {answer.strip()!r} is not in the context",
    }


def _result(spec: AgentSpec, status: str, message: str = "", **fields) -> dict:
    base = {
        "agent": spec.id,
        "kind": spec.kind,
        "status": status,  # cached | live | cannot_answer | not_cached
        "answer": None,
        "em": None,
        "f1": None,
        "latency_ms": None,
        "gflops": None,
        "gflops_source": spec.gflops_source,
        "message": message,
        "expected_answer": None,
        "confidence": None,  # the agent's own confidence signals, when it gives them
        "usd": None,  # the answer's price in dollars, where it has one (prices.answer_price)
    }
    base.update(fields)
    return base


def answer_with(
    agent_spec: AgentSpec,
    question: str,
    context: str,
    dataset_qid: str | None = None,
    cache: AgentCache | None = None,
    expected_answer: str | None = None,
) -> dict:
    """``agent_spec``'s answer to ``(question, context)``, as a dict with ``status``:

    - ``cached``: ``dataset_qid`` is a question of the agent's dataset and its scored answer
      is in the agent cache (EM/F1 against the gold answers, GFLOPs and latency as stored);
    - ``live``: the agent ran now (runnable kinds only): answer, measured latency (ms) and
      GFLOPs; EM/F1 against the gold answers of ``dataset_qid`` if given, else against
      ``expected_answer`` when that is in the context, else ``None``;
    - ``cannot_answer``: the agent is known only by its predictions (or is of a kind this
      module does not run) and the text is new — ``answer`` stays ``None``;
    - ``not_cached``: a dataset question the cache has no answer for, and the agent cannot run.

    ``expected_answer`` (optional, new text): reported under ``expected_answer`` with
    ``in_context`` — an answer that is not in the context is said to be so.
    """
    question, context = _require_text(question, context, passage=dataset_qid is None)
    check = check_expected_answer(context, expected_answer) if expected_answer else None
    if dataset_qid is not None:
        rec = (cache or AgentCache()).get(agent_spec.dataset, agent_spec.id, dataset_qid)
        if rec is not None:
            return _result(
                agent_spec,
                "cached",
                f"recorded answer ({(rec.get('source') or agent_spec.kind).replace('_', ' ')})",
                answer=rec["answer"],
                em=rec["em"],
                f1=rec["f1"],
                latency_ms=rec.get("latency_ms"),
                gflops=rec["gflops"]
                if per_query_gflops(agent_spec) and rec.get("gflops") is not None
                else agent_gflops(agent_spec),
                expected_answer=check,
                confidence=rec.get("confidence"),
                usd=answer_price(rec.get("usd"), agent_spec.options, f"agent {agent_spec.id}"),
            )
    if not can_answer_new_text(agent_spec):
        status = "not_cached" if dataset_qid is not None else "cannot_answer"
        why = no_new_text(agent_spec.kind)  # reads after "which": "…, which is known only by …"
        if dataset_qid is not None:
            why = f"has no recorded answer for question {dataset_qid}, and {why}"
        return _result(agent_spec, status, why, gflops=agent_gflops(agent_spec), expected_answer=check)

    query = QARecord(qid="live", title="", context=context, question=question, answers=())
    pred = runnable_agent(agent_spec).predict([query])[0]
    if pred.answer is None:
        raise ValueError(pred.extra.get("error") or f"agent {agent_spec.id} gave no answer")
    note = f" ({pred.windows} windows over the long context)" if pred.windows > 1 else ""
    if pred.answer and locate(pred.answer, ContextIndex.build(context), None, context).status == "not_found":
        note += "; its answer is not in the context (both positions count as wrong)"
    golds = None
    if dataset_qid is not None:
        from ..data import load_dataset

        ds = load_dataset(agent_spec.dataset)
        golds = list(ds[dataset_qid].answers) if dataset_qid in ds else None
        v2 = ds.v2
    elif check is not None and check["in_context"]:
        golds, v2 = [expected_answer], False
    scored = {}
    if golds is not None:
        scored = {"em": exact_match(pred.answer, golds, v2), "f1": f1(pred.answer, golds, v2)}
    return _result(
        agent_spec,
        "live",
        f"ran {agent_spec.live_model or agent_spec.path} now{note}",
        answer=pred.answer,
        latency_ms=pred.latency_ms,
        gflops=pred.gflops,
        gflops_source="measured",
        expected_answer=check,
        confidence=pred.extra.get("confidence"),
        usd=answer_price(pred.extra.get("usd"), agent_spec.options, f"agent {agent_spec.id}"),
        **scored,
    )


def runnable_agent(spec: AgentSpec):
    """The runnable agent of ``spec`` (:func:`~l2d_core.agents.runners.load_agent`), loaded
    once per process and reused for every query (a local LLM's once per start of its shared
    server: one that died is started again on another port)."""
    port = None
    if spec.live_model:
        from .llm_server import shared_server

        port = shared_server(spec.live_model).port
    return _load_runnable(
        spec.id,
        spec.dataset,
        spec.kind,
        spec.path,
        json.dumps(spec.options or {}, sort_keys=True),
        spec.gflops,
        spec.gflops_source,
        port,
    )


@lru_cache(maxsize=4)
def _load_runnable(
    agent_id: str,
    dataset: str,
    kind: str,
    path: str,
    options: str,
    gflops: float,
    source: str,
    port: int | None,  # a local LLM's server port: a new agent when its server started again
):
    from .runners import load_agent

    spec = AgentSpec(  # gflops: an endpoint's declared cost, or measured from an architecture
        id=agent_id,
        dataset=dataset,
        kind=kind,
        path=path,
        options=json.loads(options),
        gflops=gflops,
        gflops_source=source,
    )
    return load_agent(spec)
