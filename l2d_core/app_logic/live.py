"""One query at a time, possibly new text: ask an agent (routing one query is the deployed
router's, :mod:`l2d_core.deploy`).

- :func:`answer_with` returns an agent's answer: the cached, scored answer for a dataset
  question; for new text only *runnable* agents answer (kinds ``extractive`` and
  ``generative``, run by :mod:`l2d_core.agents.runners`: sliding windows over long contexts,
  the paper's few-shot prompt). Prediction-file agents cannot answer new text and the result
  says so; nothing is ever made up.
"""

from __future__ import annotations

import json
from functools import lru_cache

from ..agents import AgentSpec, PoolSpec, get_agent, list_pools
from ..agents.cache import AgentCache
from ..agents.kind_words import no_new_text
from ..agents.measured import agent_gflops, per_query_gflops
from ..agents.profiles import PROFILES, train_command
from ..agents.registry import RUNNABLE_KINDS
from ..data.records import QARecord
from ..qa.positions import ContextIndex, locate
from ..qa.squad_eval import exact_match, f1
from ..routers.registry import make_router
from .answers import shown_answer

__all__ = [
    "main_runs_live",
    "live_pools",
    "answer_with",
    "can_answer_new_text",
    "check_expected_answer",
    "runnable_agent",
    "query_gflops",
    "gflops_text",
    "answers_frame",
    "new_text_advice",
    "helper_ids",
    "new_text_routers",
]


def _require_text(question: str, context: str) -> tuple[str, str]:
    if not isinstance(question, str) or not question.strip():
        raise ValueError("the question is empty: type a question")
    if not isinstance(context, str) or not context.strip():
        raise ValueError("the context is empty: paste the passage the answer should come from")
    return question, context  # as given: the embedding cache is keyed by the exact text


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


def _made_here(dataset: str) -> str:
    """Which command makes a pool of ``dataset`` whose main agent answers new text (the quick
    profile's), in words."""
    made = PROFILES["quick"].first_pool(dataset)
    if made is None:
        return f"no command here makes a pool of {dataset} whose main agent answers new text"
    command = train_command("quick", dataset)
    return f"a pool whose main agent answers new text comes with `{command}` ({made[0]})"


def new_text_advice(dataset: str) -> str:
    """Where to route new text instead, for a router that routes the dataset's questions only:
    the routers that read the question and context route any text on the same pool, and a pool
    whose main agent answers new text answers it (or the command that makes one)."""
    live = live_pools(dataset)
    where = f"pools whose main agent answers new text: {', '.join(live)}" if live else _made_here(dataset)
    return (
        "For new text: l2d-plugin and l2d-sdl route any question on this pool (they read the question "
        f"and context, not an agent's answer); {where}."
    )


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
        spec.id,
        spec.dataset,
        spec.kind,
        spec.path,
        json.dumps(spec.options or {}, sort_keys=True),
        spec.gflops,
    )


@lru_cache(maxsize=4)
def _load_runnable(agent_id: str, dataset: str, kind: str, path: str, options: str, gflops: float):
    from ..agents.runners import load_agent

    spec = AgentSpec(  # gflops: an endpoint's declared cost (a model's is measured as it runs)
        id=agent_id, dataset=dataset, kind=kind, path=path, options=json.loads(options), gflops=gflops
    )
    return load_agent(spec)


def gflops_text(gflops: float) -> str:
    """GFLOPs as the pages write them: three significant digits, whole numbers with thousands
    separators from 1,000 up (no exponent to read).

    >>> gflops_text(4.9712), gflops_text(247.0), gflops_text(2447.35), gflops_text(92641.4)
    ('4.97', '247', '2,447', '92,641')
    """
    return f"{gflops:,.0f}" if abs(gflops) >= 1000 else f"{gflops:.3g}"


def query_gflops(routed: dict, answers: list[dict], helpers=()) -> dict:
    """GFLOPs this one query paid, from what ran on it (each agent's answer record: measured on
    this query when it ran now, recorded for a dataset question): the text encoder of a router
    that reads the question and context (at its 384-token measure), the main agent and ``helpers``
    for a router that reads their answers (``routed["signals"]`` has the main answer), the expert
    a two-stage cascade asked and that answered, and the chosen agent when it answered. An agent
    chosen or asked that could not answer is under ``unpaid`` with its GFLOPs, never in ``total``.

    >>> ans = [{"agent": "g", "answer": "x", "gflops": 1.6}, {"agent": "m", "answer": None, "gflops": 100.0}]
    >>> paid = query_gflops({"agent": "m", "signals": {"main_answer": "x"}}, ans)
    >>> paid["main"], paid["chosen"], paid["total"], paid["unpaid"]
    (1.6, 0.0, 1.6, {'m': 100.0})
    """
    by = {a["agent"]: a for a in answers}
    ran = lambda a: by[a]["answer"] is not None  # noqa: E731
    signals = routed.get("signals") or {}
    reads_answers = "main_answer" in signals
    main_id = answers[0]["agent"]
    main = float(by[main_id]["gflops"] or 0.0) if reads_answers else 0.0
    helpers_paid = (
        float(sum(float(by[h]["gflops"] or 0.0) for h in helpers if h in by and ran(h)))
        if reads_answers
        else 0.0
    )
    asked = (signals.get("asked") or {}) if reads_answers else {}
    asked_id = asked.get("agent") if asked.get("asked") else None
    unpaid = {}
    asked_paid = 0.0
    if asked_id is not None:
        if asked.get("answer") is not None:
            asked_paid = float(by[asked_id]["gflops"] or 0.0)
        else:
            unpaid[asked_id] = float(by[asked_id]["gflops"] or 0.0)
    chosen_id, chosen = routed["agent"], 0.0
    already = (reads_answers and chosen_id == main_id) or chosen_id == asked_id
    if not already:
        if ran(chosen_id):
            chosen = float(by[chosen_id]["gflops"] or 0.0)
        else:
            unpaid[chosen_id] = float(by[chosen_id]["gflops"] or 0.0)
    encoder = 0.0 if reads_answers else float((routed.get("gflops") or {}).get("router", 0.0))
    total = encoder + main + helpers_paid + asked_paid + chosen
    return {
        "encoder": encoder,
        "main": main,
        "helpers": helpers_paid,
        "asked": asked_paid,
        "chosen": chosen,
        "total": total,
        "unpaid": unpaid,
    }


STATUS_WORDS = {
    "cached": "recorded answer",
    "live": "ran now",
    "cannot_answer": "cannot answer new text",
    "not_cached": "no recorded answer",
}


def answers_frame(answers: list[dict]):
    """Every agent's answer to one query as a table to read: what it said (or why nothing), its
    scores and costs — a dash where there is no figure, never a bare "None"."""
    import pandas as pd

    dash = lambda x, fmt: "—" if x is None else fmt.format(x)  # noqa: E731
    return pd.DataFrame(
        [
            {
                "agent": a["agent"],
                "kind": a["kind"].replace("_", " "),
                "status": STATUS_WORDS.get(a["status"], a["status"]),
                "answer": _answer_cell(a),
                "EM": dash(a["em"], "{:.0f}"),
                "F1": dash(a["f1"], "{:.2f}"),
                "latency ms": dash(a["latency_ms"], "{:.1f}"),
                "GFLOPs": "—" if a["gflops"] is None else gflops_text(a["gflops"]),
                "GFLOPs are": a["gflops_source"],
                "note": a["message"] + (LOGGED_NOTE if _logged_only(a) else "") if a["message"] else "",
            }
            for a in answers
        ]
    )


LOGGED_NOTE = "; known by its log only: right or wrong, F1 follows EM"


def _logged_only(a: dict) -> bool:
    """A recorded answer without text: the agent is known by its outcome log only."""
    return a["status"] == "cached" and a["answer"] is None


def _answer_cell(a: dict) -> str:
    """The answer's cell: its text ("(no answer)" when it abstained), "right"/"wrong" for an agent
    known by its log only, a dash when there is none."""
    if _logged_only(a):
        return shown_answer(None, a["em"])
    return "—" if a["answer"] is None else (a["answer"] or "(no answer)")


def helper_ids(router) -> tuple[str, ...]:
    """The helper agents a fitted router reads besides the main agent (what it ``needs`` first,
    after the main agent); none for a router that reads no answers."""
    return tuple(router.needs(router.bench_).answers[1:])


def new_text_routers(bench, router_ids) -> list[str]:
    """The routers of ``router_ids`` that route new text on ``bench``'s pool: every agent whose
    answer they read first (the main agent, helper agents) runs here; a router that reads only
    the question and context routes any text."""
    return [
        rid
        for rid in router_ids
        if all(can_answer_new_text(get_agent(a)) for a in make_router(rid).needs(bench).answers)
    ]
