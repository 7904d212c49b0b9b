"""One query at a time, possibly new text, as the dashboard shows it: which pools answer new text,
what a query paid, every agent's answer as a table (asking an agent is
:func:`l2d_core.agents.answering.answer_with`; routing one query is the deployed router's,
:mod:`l2d_core.deploy`).
"""

from __future__ import annotations

from ..agents import PoolSpec, get_agent, list_pools
from ..agents.answering import can_answer_new_text
from ..agents.prices import dollars
from ..agents.profiles import PROFILES, train_command
from ..routers.registry import make_router
from .answers import shown_answer

__all__ = [
    "main_runs_live",
    "live_pools",
    "query_gflops",
    "gflops_text",
    "answers_frame",
    "new_text_advice",
    "helper_ids",
    "new_text_routers",
]


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
    >>> logged = [ans[0], {"agent": "m", "answer": None, "gflops": 100.0, "status": "cached"}]
    >>> query_gflops({"agent": "m", "signals": {}}, logged)["total"]  # right or wrong by its log: it ran
    100.0
    """
    by = {a["agent"]: a for a in answers}
    ran = lambda a: by[a]["answer"] is not None or by[a].get("status") == "cached"  # noqa: E731
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
    priced = any(a.get("usd") is not None for a in answers)  # a price column where an agent has one
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
                **({"price": "—" if a.get("usd") is None else dollars(a["usd"])} if priced else {}),
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
