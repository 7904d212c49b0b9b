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
from ..evaluation.staged_router import staged_stages
from ..method.costs import CostConfig
from ..method.staged import main_doubt, second_stage_choice, staged_values
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
    threshold: np.ndarray  # (N,) the doubt above which the expert was asked, for each query
    values: np.ndarray  # (N, A) what the step that decided compared (NaN: not an option there)
    stage: np.ndarray  # (N,) 0: the first stage decided, 1: the second
    stages: tuple  # the two steps, named
    asked_answers: list  # the asked expert's answer where asked and given, else None
    notes: list  # why the decision stopped at "would ask …", else None

    def signals(self, n: int, asked: str) -> dict:
        return {
            "agent": asked,
            "asked": bool(self.ask[n]),
            "doubt": float(self.doubt[n]),
            "threshold": float(self.threshold[n]),
            "answer": self.asked_answers[n],
            "note": self.notes[n],
        }


def route_staged(
    inputs: RouteInputs,
    heads: StagedHeads,
    threshold: float | None,
    costs: CostConfig,
    records: list[QARecord],
    main: list[dict],
    qids=None,
    follower=None,
    base: float = 0.0,
) -> StagedRoute:
    """Both stages for ``records`` whose main (and helper) answers are ``main``; the asked
    expert's answers are read by dataset id (``qids``) or run now, and only where asked. Under a
    budget the queries are decided in order and ``follower`` moves the threshold after each (on
    the share asked, or on the GFLOPs spent: ``base`` on every query, plus what asking added)."""
    asked = inputs.features["asked"]
    k = inputs.pool.agent_ids.index(asked)
    cached = qids is not None
    p = heads.first.error_proba(query_features(inputs, records, main, cached=cached))
    doubt = main_doubt(p)
    n = len(records)
    if follower is None:
        tau = np.full(n, float(threshold))
        return _second_stage(inputs, heads, costs, records, main, qids, p, doubt, tau, asked, k)
    parts, tau = [], np.empty(n)
    for i in range(n):  # one query at a time: the threshold moves on what each one spent
        tau[i] = follower.threshold
        one = _second_stage(inputs, heads, costs, records[i : i + 1], main[i : i + 1],
                            qids[i : i + 1] if cached else None, p[i : i + 1], doubt[i : i + 1],
                            tau[i : i + 1], asked, k)  # fmt: skip
        parts.append(one)
        spent = base + spend_of(inputs, one, asked, k) if follower.spend else None
        follower.observe(bool(one.ask[0]), spent)
    return StagedRoute(
        *(
            np.concatenate([getattr(o, f) for o in parts])
            for f in ("choice", "p_err", "doubt", "ask", "threshold")
        ),
        np.concatenate([o.values for o in parts]),
        np.concatenate([o.stage for o in parts]),
        parts[0].stages if parts else staged_stages(asked),
        [a for o in parts for a in o.asked_answers],
        [m for o in parts for m in o.notes],
    )


def spend_of(inputs: RouteInputs, one: StagedRoute, asked: str, k: int) -> float:
    """GFLOPs one routed query spent beyond what always runs: the asked expert where it ran, and a
    dearer expert where it was kept."""
    spent = inputs.specs[asked].gflops if one.ask[0] and one.asked_answers[0] is not None else 0.0
    j = int(one.choice[0])
    if j not in (0, k):
        spent += inputs.specs[inputs.pool.agent_ids[j]].gflops
    return spent


def _second_stage(inputs, heads, costs, records, main, qids, p, doubt, tau, asked, k) -> StagedRoute:
    cached = qids is not None
    ask = doubt > tau
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
    p = p.copy()
    if known:
        both = [main[i] | {"helpers": {**main[i]["helpers"], asked: answers[i]}} for i in known]
        F = query_features(inputs, [records[i] for i in known], both, cached, [*inputs.helpers, asked])
        p2 = heads.second.error_proba(F)
        p[known] = p2
        choice[known] = second_stage_choice(p2, costs, k)
    # where the expert was asked but could not answer, the first stage decided ("would ask")
    answered = np.zeros(n, dtype=bool)
    answered[known] = True
    values, stage = staged_values(doubt, tau, answered, p, costs, k)
    return StagedRoute(choice, p, doubt, ask, tau, values, stage, staged_stages(asked), answers, notes)
