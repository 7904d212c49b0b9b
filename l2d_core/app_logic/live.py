"""One query at a time, possibly new text: route it with the rejector, and ask an agent.

- :func:`route_query` featurizes ``(question, context)`` with the benchmark's encoder and
  feature kind (embeddings go through the on-disk cache), and returns the plug-in error
  probabilities p̂, the expected cost of every agent at the given costs, the chosen agent,
  optional SDL scores, and the rejector's measured latency and GFLOPs.
- :func:`answer_with` returns an agent's answer: the cached, scored answer for a dataset
  question; for new text only *runnable* agents answer (kinds ``extractive`` and
  ``generative``, run by :mod:`l2d_core.agents.runners`: sliding windows over long contexts,
  the paper's few-shot prompt). Prediction-file agents cannot answer new text and the result
  says so; nothing is ever made up.
"""

from __future__ import annotations

import json
import time
from functools import lru_cache

from ..agents import AgentSpec, PoolSpec, get_agent, list_pools
from ..agents.cache import AgentCache
from ..data.records import QARecord
from ..evaluation.benchmark import encoder_for
from ..evaluation.registry import make_router
from ..method.costs import CostConfig
from ..method.policies import expected_costs, learned_policy
from ..qa.positions import ContextIndex, locate
from ..qa.squad_eval import exact_match, f1
from ..routers.features import featurize

__all__ = [
    "RUNNABLE_KINDS",
    "route_query",
    "route_cascade",
    "main_runs_live",
    "live_pools",
    "answer_with",
    "can_answer_new_text",
    "check_expected_answer",
    "runnable_agent",
]

RUNNABLE_KINDS = ("extractive", "generative")  # agent kinds this module can run on new text


def _require_text(question: str, context: str) -> tuple[str, str]:
    if not isinstance(question, str) or not question.strip():
        raise ValueError("the question is empty: type a question")
    if not isinstance(context, str) or not context.strip():
        raise ValueError("the context is empty: paste the passage the answer should come from")
    return question, context  # as given: the embedding cache is keyed by the exact text


# --- routing ---------------------------------------------------------------------------------


def route_query(
    bench, question: str, context: str, costs: CostConfig, p_err_estimator=None, sdl_estimator=None
) -> dict:
    """Route one query ``(question, context)`` of the benchmark's pool at ``costs``.

    ``p_err_estimator`` is a fitted :class:`~l2d_core.routers.rejector.PluginRejector` (default: the
    ``l2d-plugin`` router's, fitted or loaded from disk); ``sdl_estimator`` an optional fitted
    :class:`~l2d_core.routers.rejector.SDLRejector`. Returns plain data:

    - ``agent_ids``; ``p_err`` (2, A) p̂ per endpoint (start, end) and agent;
      ``expected_cost`` (A,) Σ_i ĉ_j^i; ``chosen`` / ``chosen_index`` (plug-in policy);
    - ``sdl_scores`` (2, A), ``sdl_chosen`` when an SDL estimator is given (else ``None``);
    - ``latency_ms``: featurize + heads, measured with ``time.perf_counter``;
      ``embeddings_cached``: whether the embeddings came from the cache (then the latency
      is a cache read, not an encoder forward); ``rejector_gflops``: measured GFLOPs of one
      rejector forward at 384 tokens (``bench.rejector_gflops``).
    """
    question, context = _require_text(question, context)
    n_agents = len(bench.pool.agent_ids)
    if costs.n_experts != n_agents - 1:
        raise ValueError(f"costs have {costs.n_experts} experts, pool {bench.pool.name} has {n_agents - 1}")
    if p_err_estimator is None:
        p_err_estimator = make_router("l2d-plugin").fit(bench).estimator_
    encoder = encoder_for(bench.encoder_name)
    rec = QARecord(qid="live", title="", context=context, question=question, answers=())
    texts = (
        [question, context]
        if bench.features == "separate"
        else [f"{question}{encoder.tokenizer.sep_token}{context}"]
    )
    cached = encoder.is_cached(texts)

    t0 = time.perf_counter()
    x = featurize(encoder, [rec], bench.features)  # (1, d)
    p_err = p_err_estimator.error_proba(x)  # (1, 2, A)
    sdl_scores = sdl_estimator.scores(x) if sdl_estimator is not None else None  # (1, 2, A)
    latency_ms = 1000.0 * (time.perf_counter() - t0)

    expected = expected_costs(p_err, costs)[0]  # (A,)
    j = int(expected.argmin())
    ids = tuple(bench.pool.agent_ids)
    out = {
        "question": question,
        "context": context,
        "agent_ids": ids,
        "costs": {"alpha": list(costs.alpha), "beta": list(costs.beta)},
        "p_err": p_err[0],
        "expected_cost": expected,
        "chosen_index": j,
        "chosen": ids[j],
        "sdl_scores": None,
        "sdl_chosen_index": None,
        "sdl_chosen": None,
        "latency_ms": latency_ms,
        "embeddings_cached": cached,
        "rejector_gflops": float(bench.rejector_gflops),
    }
    if sdl_scores is not None:
        k = int(learned_policy(sdl_scores)[0])
        out.update(sdl_scores=sdl_scores[0], sdl_chosen_index=k, sdl_chosen=ids[k])
    return out


def route_cascade(
    bench,
    router,
    question: str,
    context: str,
    costs: CostConfig,
    dataset_qid: str | None = None,
    cache: AgentCache | None = None,
) -> dict:
    """Route one query with a fitted post-hoc / cascade router: the main agent answers first
    (cached for a dataset question, live for new text when it can run), the router reads that
    answer and its confidence, and picks the agent of least expected cost at ``costs``.

    Returns ``agent_ids``, ``main`` (the main agent's answer, as :func:`answer_with` gives it,
    with its ``confidence``), ``p_err`` (2, A), ``expected_cost`` (A,), ``chosen`` /
    ``chosen_index``, ``router_latency_ms`` (features + head) and ``gflops`` (the main agent
    and helpers, paid on every query). Raises ValueError when the main agent (or a helper)
    cannot answer this text.
    """
    question, context = _require_text(question, context)
    ids = tuple(bench.pool.agent_ids)
    if costs.n_experts != len(ids) - 1:
        raise ValueError(f"costs have {costs.n_experts} experts, pool {bench.pool.name} has {len(ids) - 1}")
    answers = [
        answer_with(get_agent(a), question, context, dataset_qid, cache) for a in (ids[0], *router.helpers_)
    ]
    for a in answers:
        if a["answer"] is None:
            raise ValueError(
                f"{a['agent']} must answer first but {a['message']}: pick a pool whose main agent runs "
                "(the live pools, after `python scripts/train_agent.py`) or a dataset question"
            )
    rec = QARecord(qid=dataset_qid or "live", title="", context=context, question=question, answers=())
    t0 = time.perf_counter()
    p_err = router.route_one(
        rec, answers[0]["answer"], answers[0]["confidence"], [a["answer"] for a in answers[1:]]
    )
    latency_ms = 1000.0 * (time.perf_counter() - t0)
    expected = expected_costs(p_err[None], costs)[0]
    j = int(expected.argmin())
    return {
        "agent_ids": ids,
        "main": answers[0],
        "helpers": answers[1:],
        "p_err": p_err,
        "expected_cost": expected,
        "chosen_index": j,
        "chosen": ids[j],
        "router_latency_ms": latency_ms,
        "gflops": float(sum(a["gflops"] or 0.0 for a in answers)),
    }


# --- answering -------------------------------------------------------------------------------


def can_answer_new_text(spec: AgentSpec) -> bool:
    """Only agents that run a model answer text outside their dataset."""
    return spec.kind in RUNNABLE_KINDS


def main_runs_live(pool: PoolSpec) -> bool:
    """Whether a pool's main agent can answer new text (a cascade then routes it live)."""
    return can_answer_new_text(get_agent(pool.main))


def live_pools(dataset: str) -> list[str]:
    """The pools of ``dataset`` whose main agent answers new text."""
    return [p.name for p in list_pools(dataset) if main_runs_live(p)]


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
    question, context = _require_text(question, context)
    check = check_expected_answer(context, expected_answer) if expected_answer else None
    if dataset_qid is not None:
        rec = (cache or AgentCache()).get(agent_spec.dataset, agent_spec.id, dataset_qid)
        if rec is not None:
            return _result(
                agent_spec,
                "cached",
                f"cached answer ({rec.get('source') or agent_spec.kind})",
                answer=rec["answer"],
                em=rec["em"],
                f1=rec["f1"],
                latency_ms=rec.get("latency_ms"),
                gflops=rec.get("gflops") if rec.get("gflops") is not None else agent_spec.gflops,
                expected_answer=check,
                confidence=rec.get("confidence"),
            )
    if not can_answer_new_text(agent_spec):
        status = "not_cached" if dataset_qid is not None else "cannot_answer"
        why = (
            "known only by its prediction file: it cannot answer new text"
            if agent_spec.kind == "prediction_file"
            else f"agents of kind {agent_spec.kind!r} are not runnable here yet"
        )
        if dataset_qid is not None:
            why = f"no cached answer for question {dataset_qid}; {why}"
        return _result(agent_spec, status, why, gflops=agent_spec.gflops, expected_answer=check)

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
        f"ran {agent_spec.path} now{note}",
        answer=pred.answer,
        latency_ms=pred.latency_ms,
        gflops=pred.gflops,
        gflops_source="measured",
        expected_answer=check,
        confidence=pred.extra.get("confidence"),
        **scored,
    )


def runnable_agent(spec: AgentSpec):
    """The runnable agent of ``spec`` (:func:`~l2d_core.agents.runners.load_agent`), loaded
    once per process and reused for every query."""
    return _load_runnable(
        spec.id, spec.dataset, spec.kind, spec.path, json.dumps(spec.options or {}, sort_keys=True)
    )


@lru_cache(maxsize=4)
def _load_runnable(agent_id: str, dataset: str, kind: str, path: str, options: str):
    from ..agents.runners import load_agent

    return load_agent(
        AgentSpec(id=agent_id, dataset=dataset, kind=kind, path=path, options=json.loads(options))
    )
