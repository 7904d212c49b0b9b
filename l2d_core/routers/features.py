"""Features a router reads, as pure functions over texts and answers.

- :func:`featurize`: the ex-ante rejector's view of a query ``(question, context)`` — frozen
  encoder embeddings from the on-disk cache (SPEC §6, fast mode). ``separate`` (default)
  encodes question and context apart, ``[q, c, q·c, |q−c|]``, each context once however many
  questions it has; ``pair`` encodes ``question [SEP] context`` jointly as in the paper.
- :func:`answer_features`, :func:`extra_features`: the post-hoc router's view of the main
  agent's answer (SPEC §5): its agreement with cheap helper agents, its length, where it
  occurs in the context, the question type, and softer overlap signals.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from ..data.records import QUESTION_TYPES, QARecord, question_type
from ..qa.squad_eval import normalize_all, normalize_answer, token_f1
from .encoder import Encoder

__all__ = ["FEATURE_KINDS", "featurize", "answer_features", "extra_features"]

FEATURE_KINDS = ("separate", "pair")
NONE = "\x00none"  # a missing answer, normalized: equal to itself, to no text


def featurize(
    encoder: Encoder, records: Sequence[QARecord], kind: str = "separate", progress: bool = False
) -> np.ndarray:
    """Fast-mode features of each query, (N, d); embeddings come from the on-disk cache."""
    if kind == "pair":
        return encoder.embed(
            [f"{r.question}{encoder.tokenizer.sep_token}{r.context}" for r in records], progress=progress
        )
    if kind != "separate":
        raise ValueError(f"unknown feature kind {kind!r}; known: {FEATURE_KINDS}")
    contexts = list(dict.fromkeys(r.context for r in records))
    c_vec = encoder.embed(contexts, progress=progress)
    c_of = {c: i for i, c in enumerate(contexts)}
    q = encoder.embed([r.question for r in records], progress=progress)  # (N, H)
    c = c_vec[[c_of[r.context] for r in records]]  # (N, H)
    return np.concatenate([q, c, q * c, np.abs(q - c)], axis=1)


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
    main = normalize_all(main_answers, NONE)
    helpers = normalize_all(np.asarray(helper_answers, dtype=object).reshape(n, -1), NONE)
    agree = (helpers == main[:, None]).astype(np.float32)  # (N, H)
    all_ans = np.concatenate([main[:, None], helpers], axis=1)
    majority = np.array([max((row == x).sum() for x in row) / len(row) for row in all_ans], np.float32)
    words = np.array([len(m.split()) if m != NONE else 0 for m in main], np.float32)
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


_NUMERIC_Q = re.compile(
    r"\bhow (many|much|long|old|far|large|big|high|tall|often)\b"
    r"|\bwhat (year|percentage|percent|number|amount)\b|\bwhen\b|\bwhich year\b"
)


def extra_features(
    main_answers: np.ndarray, helper_answers: np.ndarray, records: Sequence[QARecord]
) -> np.ndarray:
    """Softer signals about the main agent's answer, (N, H + 12).

    Columns: token F1 with each helper's answer, mean of those, share of distinct answers
    among main + helpers, F1 with the helpers' most common answer and that answer's share,
    main answer inside / around that answer, answer has a digit, question asks for a number
    or date, share of the answer's words that are question words, capitalised share of the
    answer's words, log question length, log context length (words).
    """
    n = len(records)
    main = normalize_all(main_answers, NONE)
    helpers = normalize_all(np.asarray(helper_answers, dtype=object).reshape(n, -1), NONE)
    h = helpers.shape[1]
    out = np.zeros((n, h + 12), np.float32)
    for k, r in enumerate(records):
        m = main[k]
        mw = m.split() if m != NONE else []
        hw = [x.split() if x != NONE else [] for x in helpers[k]]
        f1s = [token_f1(mw, w) for w in hw]
        out[k, :h] = f1s
        out[k, h] = np.mean(f1s) if h else 0.0
        everyone = [m, *helpers[k]]
        out[k, h + 1] = len(set(everyone)) / len(everyone)
        if h:
            top, cnt = Counter(helpers[k]).most_common(1)[0]
            tw = top.split() if top != NONE else []
            out[k, h + 2] = token_f1(mw, tw)
            out[k, h + 3] = cnt / h
            out[k, h + 4] = float(bool(mw) and bool(tw) and m != top and m in top)
            out[k, h + 5] = float(bool(mw) and bool(tw) and m != top and top in m)
        raw = main_answers[k] if isinstance(main_answers[k], str) else ""
        out[k, h + 6] = float(any(c.isdigit() for c in raw))
        out[k, h + 7] = float(bool(_NUMERIC_Q.search(r.question.lower())))
        qw = set(normalize_answer(r.question).split())
        out[k, h + 8] = np.mean([w in qw for w in mw]) if mw else 0.0
        toks = raw.split()
        out[k, h + 9] = np.mean([t[:1].isupper() for t in toks]) if toks else 0.0
        out[k, h + 10] = np.log1p(len(r.question.split()))
        out[k, h + 11] = np.log1p(len(r.context.split()))
    return out
