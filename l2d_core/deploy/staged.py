"""A two-stage cascade as an artifact (:class:`~l2d_core.evaluation.staged_router.StagedRouter`).

Two heads: the first reads the main agent's answer and its confidence (and any helpers); where
its doubt in the main answer — its estimated chance of being wrong, both ends — is above the
saved threshold, the pool's cheapest expert is asked: its cached answer for a dataset question,
or its answer now when it can run. The second head, which has read both answers, keeps one of
them or defers to a dearer expert (:func:`~l2d_core.method.staged.second_stage_choice`). An
asked expert that cannot answer new text is named — "would ask …" — and the decision stops
there: its answer is never made up.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data.records import QARecord
from ..method.costs import CostConfig
from ..method.staged import main_doubt, second_stage_choice
from ..routers.posthoc import PosthocRejector
from .signals import RouteInputs, agent_answers, query_features

__all__ = ["StagedHeads", "StagedRoute", "route_staged"]

STAGES = ("first", "second")


@dataclass
class StagedHeads:
    """The two post-hoc heads of a staged router; saved side by side in one folder."""

    first: PosthocRejector
    second: PosthocRejector

    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        for name in STAGES:
            getattr(self, name).save(directory / name)
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> StagedHeads:
        return cls(*(PosthocRejector.load(Path(directory) / name) for name in STAGES))


@dataclass
class StagedRoute:
    """The staged decisions for N queries."""

    choice: np.ndarray  # (N,) the agent whose answer is kept (the asked one where it cannot answer)
    p_err: np.ndarray  # (N, 2, A) the second head's estimates where asked, else the first's
    doubt: np.ndarray  # (N,) the first head's doubt in the main answer
    ask: np.ndarray  # (N,) bool
    asked_answers: list  # the asked expert's answer where asked and given, else None
    notes: list  # why the decision stopped at "would ask …", else None

    def signals(self, n: int, asked: str, threshold: float) -> dict:
        return {
            "agent": asked,
            "asked": bool(self.ask[n]),
            "doubt": float(self.doubt[n]),
            "threshold": float(threshold),
            "answer": self.asked_answers[n],
            "note": self.notes[n],
        }


def route_staged(
    inputs: RouteInputs,
    heads: StagedHeads,
    threshold: float,
    costs: CostConfig,
    records: list[QARecord],
    main: list[dict],
    qids=None,
) -> StagedRoute:
    """Both stages for ``records`` whose main (and helper) answers are ``main``; the asked
    expert's answers are read by dataset id (``qids``) or run now, and only where asked."""
    asked = inputs.features["asked"]
    k = inputs.pool.agent_ids.index(asked)
    cached = qids is not None
    p = heads.first.error_proba(query_features(inputs, records, main, cached=cached))
    doubt = main_doubt(p)
    ask = doubt > threshold
    n = len(records)
    choice, answers, notes = np.zeros(n, dtype=int), [None] * n, [None] * n
    rows = np.flatnonzero(ask).tolist()
    got = agent_answers(
        inputs, asked, [records[i] for i in rows], [qids[i] for i in rows] if cached else None
    )
    for i, (answer, *_rest, why) in zip(rows, got):
        answers[i] = answer
        if answer is None:
            choice[i] = k
            notes[i] = (
                f"the router doubts the main answer and would ask {asked}, which {why}; with its answer "
                "it would keep one of the two or defer to a dearer expert"
            )
    known = [i for i in rows if answers[i] is not None]
    if known:
        both = [main[i] | {"helpers": {**main[i]["helpers"], asked: answers[i]}} for i in known]
        F = query_features(inputs, [records[i] for i in known], both, cached, [*inputs.helpers, asked])
        p2 = heads.second.error_proba(F)
        p[known] = p2
        choice[known] = second_stage_choice(p2, costs, k)
    return StagedRoute(choice, p, doubt, ask, answers, notes)
