"""The majority-vote ensemble of SPEC §8: every agent answers, the most frequent normalized
answer wins (ties → the strongest agent's answer); its cost is the sum of every agent's."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..agents.routing_data import textless_agents
from ..method.costs import CostConfig
from ..qa.squad_eval import exact_match, f1, normalize_all
from .base import Router
from .decision import Decision
from .registry import register

__all__ = ["majority_vote", "rescore", "MajorityVoteRouter"]


def majority_vote(answers: np.ndarray, preference: Sequence[int]) -> np.ndarray:
    """Index of the agent whose answer wins the vote, (N,): the most frequent normalized
    answer (``None`` = no prediction, abstains); among tied answers, and among the agents
    giving the winning one, the agent first in ``preference`` (strongest first).

    >>> a = np.array([["Paris", "paris.", "Rome"], ["A", "B", "C"], [None, "x", "the X"]], dtype=object)
    >>> majority_vote(a, [2, 1, 0]).tolist()
    [1, 2, 2]
    """
    answers = np.asarray(answers, dtype=object)
    rank = {int(j): r for r, j in enumerate(preference)}
    if sorted(rank) != list(range(answers.shape[1])):
        raise ValueError("preference must list every agent once")
    out = np.empty(len(answers), dtype=int)
    for n, row in enumerate(answers):
        norm = list(normalize_all(row))
        votes: dict[str, int] = {}
        for a in norm:
            if a is not None:
                votes[a] = votes.get(a, 0) + 1
        top = max(votes.values(), default=0)
        voters = [j for j, a in enumerate(norm) if a is not None and votes[a] == top]
        out[n] = min(voters or range(len(row)), key=rank.__getitem__)
    return out


def rescore(texts: Sequence[str | None], golds: Sequence[Sequence[str]], v2: bool = False):
    """EM and F1 (0/1 and [0, 1]) of answer texts against the gold answers; ``None`` → 0.

    >>> em, f = rescore(["Paris", "the big cat", None], [["paris"], ["big dog"], ["x"]])
    >>> em.tolist(), f.round(2).tolist()
    ([1.0, 0.0, 0.0], [1.0, 0.5, 0.0])
    """
    em = np.array([exact_match(t, g, v2) if isinstance(t, str) else 0.0 for t, g in zip(texts, golds)])
    fs = np.array([f1(t, g, v2) if isinstance(t, str) else 0.0 for t, g in zip(texts, golds)])
    return em, fs


@register
class MajorityVoteRouter(Router):
    id = "ensemble"
    label = "majority vote (all agents)"
    description = "Every agent answers; the most frequent answer wins. Costs the sum of every agent."
    role = "all-agents"  # no one-agent allocation: shown beside the agents

    @classmethod
    def unavailable(cls, bench) -> str | None:
        for split in (bench.train, bench.test):
            if textless := textless_agents(split.agent_ids, split.answers):
                one = len(textless) == 1
                return (
                    f"a majority vote compares answer texts, and {' and '.join(textless)} "
                    f"{'is' if one else 'are'} known by {'its log' if one else 'their logs'} only "
                    f"(right or wrong, no text) on pool {bench.pool.name}"
                )
        return None

    def _fit(self) -> None:
        bench = self.bench_
        train, test = bench.train, bench.test
        if len(train) == 0:
            raise ValueError("cannot fit a router on an empty training split")
        em = train.em.mean(axis=0)  # ties go to the agent of best training EM
        order = tuple(int(j) for j in sorted(range(train.n_agents), key=lambda j: (-em[j], j)))
        self.win_ = majority_vote(test.answers, order)
        ar = np.arange(len(test))
        self.em_, self.f1_ = rescore(
            test.answers[ar, self.win_], [r.answers for r in bench.test_records], bench.dataset.v2
        )
        self.err_ = test.errors[ar, :, self.win_].sum(axis=1)  # (N,) wrong endpoints of the voted answer

    def decide(self, costs: CostConfig) -> Decision:
        test = self.bench_.test
        pq = {
            "em": self.em_,
            "f1": self.f1_,
            "gflops": test.gflops.sum(axis=1),
            "tdl": self.err_ + 2 * sum(costs.beta),
            "share": np.ones(len(test)),
        }
        # every agent answers (and is paid for) every query: ``share`` 1; the allocation is whose
        # answer won the vote
        return Decision(self.win_, per_query=pq)
