"""A post-hoc rejector: it decides after the main agent has answered.

The paper's rejector sees only ``(question, context)``. On real systems that is close to
random (the main agent's mistakes are hard to foresee from the query alone). A post-hoc
rejector also sees the main agent's answer and cheap signals about it: its length, how often
it occurs in the context, the question type, and whether cheap helper agents agree with it.
Its cost always includes running the main agent and the helpers; a deferred query then pays
the expert on top. Its error estimates plug into the same reweight policy (SPEC §5).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .agents import get_agent, list_agents
from .data.records import QUESTION_TYPES, QARecord, question_type
from .routing_data import RoutingData
from .squad_eval import normalize_answer

__all__ = ["default_helpers", "answer_features", "posthoc_gflops"]


def default_helpers(dataset: str, main: str, exclude: Sequence[str], max_gflops: float) -> tuple[str, ...]:
    """Cheap agents of the dataset (≤ ``max_gflops`` each), other than the pool's agents."""
    return tuple(
        a.id for a in list_agents(dataset) if a.id != main and a.id not in exclude and a.gflops <= max_gflops
    )


def _norm(answers: np.ndarray) -> np.ndarray:
    return np.vectorize(lambda a: normalize_answer(a) if isinstance(a, str) else "\x00none", otypes=[object])(
        answers
    )


def answer_features(
    main_answers: np.ndarray, helper_answers: np.ndarray, records: Sequence[QARecord]
) -> np.ndarray:
    """Features of the main agent's answer, (N, d).

    ``main_answers`` (N,) and ``helper_answers`` (N, H) hold answer texts (None = none).
    Columns: agreement with each helper, share of helpers agreeing, share of the most common
    answer among main + helpers, log answer length in words, no-answer flag, log number of
    occurrences in the context, answer position in the context, question-type one-hot.
    """
    n = len(records)
    main = _norm(np.asarray(main_answers, dtype=object))
    helpers = _norm(np.asarray(helper_answers, dtype=object).reshape(n, -1))
    agree = (helpers == main[:, None]).astype(np.float32)  # (N, H)
    all_ans = np.concatenate([main[:, None], helpers], axis=1)
    majority = np.array([max((row == x).sum() for x in row) / len(row) for row in all_ans], np.float32)
    words = np.array([len(m.split()) if m != "\x00none" else 0 for m in main], np.float32)
    occ, pos = np.zeros(n, np.float32), np.ones(n, np.float32)
    for i, (r, a) in enumerate(zip(records, main_answers)):
        if isinstance(a, str) and a.strip():
            ctx = r.context.lower()
            occ[i] = ctx.count(a.lower())
            at = ctx.find(a.lower())
            pos[i] = at / max(1, len(ctx)) if at >= 0 else 1.0
    qt = np.array(
        [[question_type(r.question) == t for t in (*QUESTION_TYPES, "other")] for r in records], np.float32
    )
    cols = [
        agree,
        agree.mean(1, keepdims=True) if agree.shape[1] else np.zeros((n, 1), np.float32),
        majority[:, None],
        np.log1p(words)[:, None],
        (words == 0)[:, None].astype(np.float32),
        np.log1p(occ)[:, None],
        pos[:, None],
        qt,
    ]
    return np.concatenate(cols, axis=1).astype(np.float32)


def posthoc_gflops(data: RoutingData, helpers: Sequence[str]) -> tuple[RoutingData, float]:
    """Cost accounting of a post-hoc policy: the main agent and the helpers always run, so their
    GFLOPs move into the per-query overhead and the main agent's own column becomes 0."""
    overhead = float(data.agent_gflops[0]) + sum(get_agent(h).gflops for h in helpers)
    return data.with_gflops({data.agent_ids[0]: 0.0}), overhead
