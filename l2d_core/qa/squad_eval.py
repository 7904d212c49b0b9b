"""EM and F1 exactly as the official SQuAD v1.1 and v2.0 evaluation scripts define them.

>>> normalize_answer("The  Denver-Broncos!")
'denverbroncos'
>>> exact_match("the Broncos", ["Denver Broncos", "Broncos"])
1.0
>>> round(f1("Denver Broncos team", ["Denver Broncos"]), 4)
0.8
>>> exact_match("", [], v2=True), f1("", [], v2=True)
(1.0, 1.0)
>>> exact_match("Paris", [], v2=True)
0.0
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

__all__ = [
    "normalize_answer",
    "normalized_words",
    "normalize_all",
    "token_f1",
    "counts_f1",
    "exact_match",
    "f1",
    "score_answers",
]

_NO_PUNCT = str.maketrans("", "", string.punctuation)  # the official removal, in C
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


@lru_cache(maxsize=1 << 18)
def normalize_answer(s: str) -> str:
    """Lower text and remove punctuation, articles and extra whitespace (official); memoized:
    the same gold and predicted texts are normalized again for every agent and every pair."""
    s = s.lower().translate(_NO_PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def normalized_words(s: str) -> list[str]:
    """The normalized word sequence of ``s``.

    >>> normalized_words("The cat sat, on a mat.")
    ['cat', 'sat', 'on', 'mat']
    """
    return normalize_answer(s).split()


def normalize_all(answers, missing=None):
    """:func:`normalize_answer` of every answer text in an array; anything that is not text
    (no prediction) becomes ``missing``. Same shape, dtype object.

    >>> normalize_all(np.array([["The Cat", None]], dtype=object), missing="-").tolist()
    [['cat', '-']]
    """
    arr = np.asarray(answers, dtype=object)
    out = np.empty(arr.size, dtype=object)
    out[:] = [normalize_answer(a) if isinstance(a, str) else missing for a in arr.ravel().tolist()]
    return out.reshape(arr.shape)


def token_f1(pred_tokens: Sequence[str], gold_tokens: Sequence[str]) -> float:
    """Token-overlap F1 of two token sequences; two empty ones agree (1.0), one empty: 0.0.

    >>> token_f1(["big", "cat"], ["cat"]), token_f1([], []), token_f1([], ["x"])
    (0.6666666666666666, 1.0, 0.0)
    """
    return counts_f1(len(pred_tokens), Counter(pred_tokens), len(gold_tokens), Counter(gold_tokens))


def counts_f1(n_pred: int, pred_counts: Counter, n_gold: int, gold_counts: Counter) -> float:
    """:func:`token_f1` from each side's word count and word counts (made once, read only)."""
    # The official ``sum((Counter(pred) & Counter(gold)).values())``, with the prediction's
    # counts made once for all gold answers: linear in the answer's length.
    if not n_pred or not n_gold:
        return float(not n_pred and not n_gold)
    num_same = sum(min(c, pred_counts[t]) for t, c in gold_counts.items() if t in pred_counts)
    if num_same == 0:
        return 0.0
    precision = num_same / n_pred
    recall = num_same / n_gold
    return 2 * precision * recall / (precision + recall)


@lru_cache(maxsize=1 << 17)
def _gold_counts(gold: str) -> tuple[int, Counter]:
    """A gold answer's normalized word count and word counts, memoized: every agent's answer to
    a question is scored against the same golds (read-only: never change the Counter)."""
    words = normalized_words(gold)
    return len(words), Counter(words)


def _f1_pair(n_pred: int, pred_counts: Counter, gold: str, v2: bool) -> float:
    n_gold, gold_counts = _gold_counts(gold) if (gold or not v2) else (0, Counter())
    if not v2 and (not n_pred or not n_gold):
        return 0.0  # official v1.1: no token in common
    return counts_f1(n_pred, pred_counts, n_gold, gold_counts)


def _v2_golds(golds: Sequence[str]) -> list[str]:
    # official v2.0: keep answers whose normalization is non-empty; none left -> [""]
    kept = [g for g in golds if normalize_answer(g)]
    return kept or [""]


def exact_match(prediction: str, golds: Sequence[str], v2: bool = False) -> float:
    """1.0 when the prediction equals any gold answer after normalization."""
    if v2:
        golds = _v2_golds(golds)
    if not golds:
        raise ValueError("exact_match needs at least one gold answer for SQuAD v1.1")
    p = normalize_answer(prediction)
    return float(max(p == normalize_answer(g) for g in golds))


def f1(prediction: str, golds: Sequence[str], v2: bool = False) -> float:
    """Token-level F1, max over gold answers."""
    if v2:
        golds = _v2_golds(golds)
    if not golds:
        raise ValueError("f1 needs at least one gold answer for SQuAD v1.1")
    pred_toks = normalized_words(prediction) if (prediction or not v2) else []
    pred_counts = Counter(pred_toks)
    return max(_f1_pair(len(pred_toks), pred_counts, g, v2) for g in golds)


def score_answers(
    predictions: dict[str, str], golds: dict[str, Sequence[str]], v2: bool = False
) -> dict[str, float]:
    """Dataset EM and F1 in percent; ids without a prediction count as wrong.

    >>> score_answers({"q1": "Paris"}, {"q1": ["Paris"], "q2": ["Rome"]})
    {'exact_match': 50.0, 'f1': 50.0, 'missing': 1}
    """
    if not golds:
        raise ValueError("cannot score an empty set of questions")
    em_sum = f1_sum = 0.0
    missing = 0
    for qid, gold in golds.items():
        if qid not in predictions:
            missing += 1
            continue
        em_sum += exact_match(predictions[qid], gold, v2)
        f1_sum += f1(predictions[qid], gold, v2)
    n = len(golds)
    return {"exact_match": 100.0 * em_sum / n, "f1": 100.0 * f1_sum / n, "missing": missing}
