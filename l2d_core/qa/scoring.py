"""Score one agent answer against a question: SPEC §2 positions, per-endpoint correctness, EM, F1.

The result is the per-question record the agent cache stores for every agent kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from ..data.records import QADataset, QARecord
from .positions import ContextIndex, endpoint_correct, gold_positions, locate
from .squad_eval import exact_match, f1

__all__ = ["GoldIndex", "gold_index", "score_answer", "MISSING", "SCORING_VERSION"]

MISSING = "missing"  # status of a question an agent gave no answer for (counted wrong)
# Stored with every agent's cache metadata; bump when scoring changes what a record holds,
# so that cached prediction-file agents are re-scored instead of silently reused.
SCORING_VERSION = 3  # 3: model agents record their confidence


@dataclass(frozen=True)
class GoldIndex:
    """Context indices and gold positions of every question of a dataset."""

    dataset: QADataset
    contexts: dict[str, ContextIndex]
    golds: dict[str, list[tuple[int, int]]]
    # (qid, answer) → its score: agents often give the same answer to a question
    scored: dict[tuple[str, str], dict] = field(default_factory=dict, compare=False, repr=False)

    def record(self, qid: str) -> QARecord:
        return self.dataset[qid]


@lru_cache(maxsize=4)
def gold_index(dataset: QADataset) -> GoldIndex:
    """Build (once per dataset object) the context indices and gold positions."""
    contexts: dict[str, ContextIndex] = {}
    golds: dict[str, list[tuple[int, int]]] = {}
    for r in dataset:
        idx = contexts.get(r.context)
        if idx is None:
            idx = contexts[r.context] = ContextIndex.build(r.context)
        starts = r.answer_starts if len(r.answer_starts) == len(r.answers) else None
        golds[r.qid] = gold_positions(r.answers, starts, idx, r.context)
    return GoldIndex(dataset, contexts, golds)


def score_answer(gold: GoldIndex, qid: str, answer: str | None) -> dict:
    """The cache fields for ``answer`` to question ``qid``; ``None`` means no prediction."""
    r = gold.record(qid)
    if answer is None:
        return {
            "answer": None,
            "start": -2,
            "end": -2,
            "status": MISSING,
            "start_ok": False,
            "end_ok": False,
            "em": 0.0,
            "f1": 0.0,
        }
    done = gold.scored.get((qid, answer))
    if done is None:
        loc = locate(answer, gold.contexts[r.context], None, r.context)
        s_ok, e_ok = endpoint_correct(loc, gold.golds[qid])
        done = gold.scored[qid, answer] = {
            "answer": answer,
            "start": loc.start,
            "end": loc.end,
            "status": loc.status,
            "start_ok": s_ok,
            "end_ok": e_ok,
            "em": exact_match(answer, r.answers, gold.dataset.v2),
            "f1": f1(answer, r.answers, gold.dataset.v2),
        }
    return dict(done)  # the caller's own: it adds fields
