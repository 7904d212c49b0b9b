"""The majority-vote ensemble of SPEC §8: every agent answers, the most frequent normalized
answer wins (ties → the strongest agent's answer); its cost is the sum of every agent's."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ..agents.routing_data import RoutingData
from ..qa.squad_eval import exact_match, f1, normalize_all

__all__ = ["majority_vote", "rescore", "EnsembleRouter"]


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


class EnsembleRouter(BaseEstimator):
    """Majority vote of every agent (SPEC §8); ``fit`` learns the tie order (training EM)."""

    def fit(self, X: np.ndarray | None, data: RoutingData) -> EnsembleRouter:
        """``X`` is unused (the vote needs no features); kept for the common interface."""
        if len(data) == 0:
            raise ValueError("cannot fit a router on an empty training split")
        em = data.em.mean(axis=0)
        self.order_ = tuple(int(j) for j in sorted(range(data.n_agents), key=lambda j: (-em[j], j)))
        self.agent_ids_ = data.agent_ids
        return self

    def score(self, answers: np.ndarray) -> np.ndarray:
        """Votes for each agent's answer (agents giving the same normalized answer), (N, A)."""
        norm = normalize_all(answers)
        same = (norm[:, :, None] == norm[:, None, :]) & (norm != None)[:, :, None]  # noqa: E711
        return same.sum(axis=2)

    def predict(self, answers: np.ndarray) -> np.ndarray:
        """The agent whose answer wins, (N,); its answer text is the ensemble's."""
        check_is_fitted(self, "order_")
        if np.shape(answers)[1:] != (len(self.order_),):
            raise ValueError(f"answers must be (N, {len(self.order_)})")
        return majority_vote(answers, self.order_)

    def vote(self, answers: np.ndarray) -> np.ndarray:
        """The ensemble's answer text per query, (N,) object."""
        answers = np.asarray(answers, dtype=object)
        return answers[np.arange(len(answers)), self.predict(answers)]
