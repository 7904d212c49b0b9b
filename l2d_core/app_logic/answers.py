"""How the pages show an agent's answer and what an agent is, in words.

An agent known only by its outcome log (``outcome_log`` without answer text, e.g. the bisupervised
logs of bert-tiny and GPT-3) has no answer to show: the pages say "right" or "wrong" for it, from
its logged exact match, never an empty cell or an invented text, and say that its F1 follows EM.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..agents.routing_data import textless_agents
from ..routers.features import OVERLAP_WINDOW

__all__ = [
    "KIND_WORDS",
    "shown_answer",
    "textless_agents",
    "f1_note",
    "kind_words",
    "cost_words",
]

# what an agent is, by its kind (AgentSpec.kind), as the overview says it
KIND_WORDS = {
    "prediction_file": "prediction file",
    "outcome_log": "outcome log",
    "extractive": "model",
    "generative": "model",
    "openai_chat": "LLM endpoint",
    "abstain": "abstains",
}


def shown_answer(answer: str | None, em: float | None) -> str:
    """The answer as a page shows it: the text ("(no answer)" where the agent abstained), or — for
    an agent known by its outcome only — "right"/"wrong" from its exact match ("—" when that is
    unknown too).

    >>> shown_answer("Denver Broncos", 1.0), shown_answer(None, 1.0), shown_answer(None, 0.0)
    ('Denver Broncos', 'right', 'wrong')
    >>> shown_answer("", 1.0), shown_answer(None, None)
    ('(no answer)', '—')
    """
    if answer is not None:
        return answer or "(no answer)"
    if em is None or (isinstance(em, float) and np.isnan(em)):
        return "—"
    return "right" if em else "wrong"


def f1_note(agents: Sequence[str]) -> str | None:
    """One sentence on agents known by their outcome log only (None when there are none).

    >>> f1_note(["bert-tiny", "gpt3-davinci"])[:72]
    'bert-tiny and gpt3-davinci are known by their logs only (right or wrong,'
    >>> f1_note([]) is None
    True
    """
    if not agents:
        return None
    names = " and ".join([", ".join(agents[:-1]), agents[-1]] if len(agents) > 1 else agents)
    which = "their logs" if len(agents) > 1 else "its log"
    verb = "are" if len(agents) > 1 else "is"
    their = "their" if len(agents) > 1 else "its"
    return (
        f"{names} {verb} known by {which} only (right or wrong, no answer text): {their} answer shows as "
        f"right or wrong, and {their} F1 follows EM (100 when right, 0 when wrong)."
    )


def kind_words(kind: str) -> str:
    """What an agent of ``kind`` is, in words.

    >>> kind_words("outcome_log"), kind_words("extractive")
    ('outcome log', 'model')
    """
    return KIND_WORDS.get(kind, kind.replace("_", " "))


def cost_words(gflops_source: str, latency_logged: bool) -> str:
    """How an agent's cost is known: measured or declared GFLOPs, and whether its latency is logged.

    >>> cost_words("measured", True), cost_words("declared", False)
    ('measured GFLOPs; latency logged', 'declared GFLOPs; no latency logged')
    """
    source = gflops_source or "declared"
    return f"{source} GFLOPs; {'latency logged' if latency_logged else 'no latency logged'}"


def context_note(agent: str, placed: dict[str, float]) -> str:
    """One sentence on where ``agent``'s answer sits in the context, from the signals a router
    read (:func:`~l2d_core.routers.features.answer_context`).

    >>> context_note("m", {"question_words_near_answer": 0.5, "question_words_in_answer_sentence": 1.0})[:85]
    "Where m's answer sits in the context: 50% of the question's words are within 10 words"
    """
    near, sentence = placed["question_words_near_answer"], placed["question_words_in_answer_sentence"]
    return (
        f"Where {agent}'s answer sits in the context: {near:.0%} of the question's words are within "
        f"{OVERLAP_WINDOW} words of it, {sentence:.0%} in its sentence (the answer's own words and words "
        "such as 'the' or 'when' left out)."
    )
