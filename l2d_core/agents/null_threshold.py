"""The no-answer threshold of an extractive agent on SQuAD v2.0, calibrated on held-out questions.

A model fine-tuned on few questions, half of them unanswerable, learns the null answer first: at
the usual rule (the null score wins when it beats the best span) the project's MiniLM answered
"no answer" to almost every squad20 question (EM 50.2, F1 = EM). As the official SQuAD v2.0
evaluation does with its "best threshold", a training run picks the margin ``τ`` (best span score
minus null score) above which the span is answered, for the highest EM on questions of articles
the model never trained on; the agent then answers with that ``τ``
(:class:`~l2d_core.agents.extractive.ExtractiveAgent`'s ``null_threshold``).

>>> best_null_threshold(np.array([-3.0, -1.0, 2.0]), np.array([1, 0, 1]), np.array([0, 1, 0]))
(0.0, 0.6666666666666666)
>>> best_null_threshold(np.array([-8.0, -7.0]), np.array([1, 1]), np.array([0, 0]))  # a shy model
(-9.0, 1.0)
>>> m = np.array([200.0, 1.0, -0.5, -2.0, -50.0])  # answering 1 or 4 ties: 1 changes one answer
>>> best_null_threshold(m, np.array([1, 0, 0, 1, 0]), np.array([0, 1, 0, 0, 1]))
(100.5, 0.6)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ..data.records import QARecord
from ..qa.squad_eval import exact_match
from .base import Prediction

__all__ = ["best_null_threshold", "held_out_outcomes", "margin", "at_threshold", "AnsweredBefore"]


def best_null_threshold(margin: np.ndarray, span_em: np.ndarray, null_em: np.ndarray) -> tuple[float, float]:
    """``(τ, EM)``: the threshold on ``margin`` (N,) that answers the span where ``margin >= τ``
    and "no answer" elsewhere for the highest mean EM, given each question's EM with its best span
    (``span_em``) and with no answer (``null_em``). Of the best ways to cut, the one that changes
    fewest answers of the untuned rule (τ = 0) wins; τ is 0 where that cut allows it, else midway
    between neighbouring margins."""
    margin = np.asarray(margin, float)
    if margin.size == 0:
        raise ValueError("no held-out question to calibrate the no-answer threshold on")
    order = np.argsort(-margin, kind="stable")
    m, s, z = margin[order], np.asarray(span_em, float)[order], np.asarray(null_em, float)[order]
    # answering the k questions of largest margin, k = 0 … N: τ in (lo_k, hi_k]
    em = (np.concatenate([[0.0], np.cumsum(s)]) + np.concatenate([np.cumsum(z[::-1])[::-1], [0.0]])) / len(m)
    hi, lo = np.concatenate([[np.inf], m]), np.concatenate([m, [-np.inf]])
    em = np.where(lo < hi, em, -np.inf)  # no cut between equal margins
    mid = np.where(np.isinf(hi), lo + 1.0, np.where(np.isinf(lo), hi - 1.0, (lo + hi) / 2))
    tau = np.where((lo < 0) & (0 <= hi), 0.0, mid)
    best = np.flatnonzero(em == em.max())
    untuned = int((m >= 0).sum())  # what the untuned rule answers: the first ``untuned``
    k = best[np.argmin(np.abs(best - untuned))]  # of the best cuts, the one that changes fewest answers
    return float(tau[k]), float(em[k])


def margin(p: Prediction) -> float:
    """The null margin (best span score minus null score) an extractive agent recorded."""
    return (p.extra.get("confidence") or {}).get("null_margin", -np.inf)


def at_threshold(p: Prediction, tau: float) -> Prediction:
    """``p`` as the agent answers at threshold ``tau``: its best span, or "no answer"."""
    return replace(p, answer=p.extra.get("span", "") if margin(p) >= tau else "")


def held_out_outcomes(preds: Sequence[Prediction], records: Sequence[QARecord]):
    """``(margin, span EM, no-answer EM)`` (N,) of an extractive agent that lets the null answer
    compete, from its predictions ``preds`` for ``records``: questions with gold answers that it
    never trained on."""
    golds = [list(r.answers) for r in records]
    span_em = np.array([exact_match(p.extra.get("span", ""), g, v2=True) for p, g in zip(preds, golds)])
    null_em = np.array([exact_match("", g, v2=True) for g in golds])
    return np.array([margin(p) for p in preds]), span_em, null_em


class AnsweredBefore:
    """An extractive agent whose answers to the questions calibration asked it (``held``: its
    predictions by question id) are those, at threshold ``tau``, not computed twice; it answers
    the other questions itself."""

    def __init__(self, agent, held: dict, tau: float):
        self._agent, self._held, self._tau = agent, held, tau

    def __getattr__(self, name):
        return getattr(self._agent, name)

    def predict(self, records, *args, **kwargs):
        rest = [r for r in records if r.qid not in self._held]
        new = {p.qid: p for p in self._agent.predict(rest, *args, **kwargs)} if rest else {}
        return [new[r.qid] if r.qid in new else at_threshold(self._held[r.qid], self._tau) for r in records]
