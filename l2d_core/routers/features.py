"""Features a router reads, as pure functions over texts and answers.

- :func:`featurize`: the ex-ante rejector's view of a query ``(question, context)`` — frozen
  encoder embeddings from the on-disk cache (SPEC §6, fast mode). ``separate`` (default)
  encodes question and context apart, ``[q, c, q·c, |q−c|]``, each context once however many
  questions it has; ``pair`` encodes ``question [SEP] context`` jointly as in the paper.
- :func:`answer_features`, :func:`extra_features`: the post-hoc router's view of the main
  agent's answer (SPEC §5): its agreement with cheap helper agents, its length, where it
  occurs in the context, the question type, and softer overlap signals;
- :func:`confidence_features`: the main agent's own confidence in its answer, as model agents
  record it (span probability, logit margins, null-score margin; token log-probabilities).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from ..data.records import QUESTION_TYPES, QARecord, question_type
from ..qa.squad_eval import counts_f1, normalize_all, normalize_answer
from .encoder import Encoder

__all__ = [
    "FEATURE_KINDS",
    "CONFIDENCE_COLUMNS",
    "featurize",
    "feature_texts",
    "answer_features",
    "extra_features",
    "question_overlap",
    "reads_answer_context",
    "answer_context",
    "confidence_features",
    "POSTHOC_FEATURE_SETS",
    "posthoc_matrix",
]

FEATURE_KINDS = ("separate", "pair")
NONE = "\x00none"  # a missing answer, normalized: equal to itself, to no text


def featurize(
    encoder: Encoder,
    records: Sequence[QARecord],
    kind: str = "separate",
    progress: bool = False,
    cached: bool = True,
) -> np.ndarray:
    """Fast-mode features of each query, (N, d); embeddings come from the on-disk cache
    (``cached=False``: computed now and kept nowhere)."""
    embed = (lambda texts: encoder.embed(texts, progress=progress)) if cached else encoder.encode
    if kind == "pair":
        return embed([f"{r.question}{encoder.tokenizer.sep_token}{r.context}" for r in records])
    if kind != "separate":
        raise ValueError(f"unknown feature kind {kind!r}; known: {FEATURE_KINDS}")
    contexts = list(dict.fromkeys(r.context for r in records))
    c_vec = embed(contexts)
    c_of = {c: i for i, c in enumerate(contexts)}
    q = embed([r.question for r in records])  # (N, H)
    c = c_vec[[c_of[r.context] for r in records]]  # (N, H)
    return np.concatenate([q, c, q * c, np.abs(q - c)], axis=1)


def feature_texts(encoder: Encoder, records: Sequence[QARecord], kind: str = "separate") -> list[str]:
    """The texts :func:`featurize` embeds for ``records`` (each context once), so that a caller
    can embed them first with a progress callback (:meth:`Encoder.embed`'s ``step``)."""
    if kind == "pair":
        return [f"{r.question}{encoder.tokenizer.sep_token}{r.context}" for r in records]
    if kind != "separate":
        raise ValueError(f"unknown feature kind {kind!r}; known: {FEATURE_KINDS}")
    return [*dict.fromkeys(r.context for r in records), *dict.fromkeys(r.question for r in records)]


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
    majority = np.array([max(Counter(row).values()) / len(row) for row in all_ans.tolist()], np.float32)
    words = np.array([len(m.split()) if m != NONE else 0 for m in main], np.float32)
    occ, pos = np.zeros(n, np.float32), np.ones(n, np.float32)
    for i, (r, a) in enumerate(zip(records, main_answers)):
        if isinstance(a, str) and a.strip():
            ctx = r.context.lower()
            occ[i] = ctx.count(a.lower())
            at = ctx.find(a.lower())
            pos[i] = at / max(1, len(ctx)) if at >= 0 else 1.0
    types = [question_type(r.question) for r in records]
    qt = np.array([[q == t for t in (*QUESTION_TYPES, "other")] for q in types], np.float32)
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
    """Softer signals about the main agent's answer, (N, H + 14).

    Columns: token F1 with each helper's answer, mean of those, share of distinct answers
    among main + helpers, F1 with the helpers' most common answer and that answer's share,
    main answer inside / around that answer, answer has a digit, question asks for a number
    or date, share of the answer's words that are question words, capitalised share of the
    answer's words, log question length, log context length (words), and the two
    :func:`question_overlap` shares.
    """
    n = len(records)
    main = normalize_all(main_answers, NONE)
    helpers = normalize_all(np.asarray(helper_answers, dtype=object).reshape(n, -1), NONE)
    h = helpers.shape[1]
    made: dict[str, tuple[int, Counter]] = {}
    pairs: dict[tuple[str, str], float] = {}

    def counted(answer: str) -> tuple[int, Counter]:  # once per distinct answer (read only)
        if answer not in made:
            words = answer.split() if answer != NONE else []
            made[answer] = (len(words), Counter(words))
        return made[answer]

    def pair_f1(m: str, x: str) -> float:  # once per distinct pair of answers
        if (m, x) not in pairs:
            pairs[m, x] = counts_f1(*counted(m), *counted(x))
        return pairs[m, x]

    rows = []
    helper_rows, main = helpers.tolist(), main.tolist()
    for k, r in enumerate(records):  # plain Python per row: numpy calls on a few numbers cost more
        m, others = main[k], helper_rows[k]
        mw = m.split() if m != NONE else []
        f1s = [pair_f1(m, x) for x in others]
        everyone = [m, *others]
        row = [*f1s, sum(f1s) / h if h else 0.0, len(set(everyone)) / len(everyone)]
        if h:
            top, cnt = Counter(others).most_common(1)[0]
            inside = bool(mw) and counted(top)[0] > 0 and m != top
            row += [pair_f1(m, top), cnt / h]
            row += [float(inside and m in top), float(inside and top in m)]
        else:
            row += [0.0] * 4
        raw = main_answers[k] if isinstance(main_answers[k], str) else ""
        toks = raw.split()
        numeric, question_length = _question_signals(r.question)
        row += [
            float(any(c.isdigit() for c in raw)),
            numeric,
            _share_in_question(mw, r.question) if mw else 0.0,
            sum(t[:1].isupper() for t in toks) / len(toks) if toks else 0.0,
            question_length,
            _context_length(r.context),
            *question_overlap(raw, r.question, r.context),
        ]
        rows.append(row)
    return np.array(rows, np.float32).reshape(n, h + 14)


@lru_cache(maxsize=65536)
def _question_words(question: str) -> frozenset[str]:
    return frozenset(normalize_answer(question).split())


@lru_cache(maxsize=65536)
def _question_signals(question: str) -> tuple[float, float]:
    """Whether ``question`` asks for a number or date, and its log length in words."""
    return float(bool(_NUMERIC_Q.search(question.lower()))), math.log1p(len(question.split()))


def _share_in_question(words: list[str], question: str) -> float:
    """The share of ``words`` (not empty) that are words of ``question``."""
    qw = _question_words(question)
    return sum(w in qw for w in words) / len(words)


@lru_cache(maxsize=4096)
def _context_length(context: str) -> float:
    return math.log1p(len(context.split()))


_WORD = re.compile(r"\w+")
# function words only: scikit-learn's ENGLISH_STOP_WORDS also drops words a question is about
# ("first", "name", "system", "amount"); with it the validation AIQ below was 0.03 lower
STOP_WORDS = frozenset(
    "a an the of in on at to for by with from and or is are was were be been what which who whom "
    "whose when where why how did do does that this these those it its as into than then there "
    "their they he she his her i you we not no".split()
)
OVERLAP_WINDOW = 10  # words either side of the answer
OVERLAP_OCCURRENCES = 5  # occurrences of the answer in the context looked at, from the first


@lru_cache(maxsize=4096)
def _context_words(context: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """A context's words and where each starts (a context serves several questions)."""
    spans = [m.span() for m in _WORD.finditer(context)]
    return tuple(context[a:b] for a, b in spans), tuple(a for a, _ in spans)


@lru_cache(maxsize=65536)  # the post-hoc, cascade and two-stage routers read the same main answers
def question_overlap(answer: str, question: str, context: str) -> tuple[float, float]:
    """Does the context around the answer speak of what the question asks? The share of the
    question's content words (not :data:`STOP_WORDS`, not in the answer) found within
    :data:`OVERLAP_WINDOW` words of the answer, and in the answer's sentence; the best over its
    first occurrences in the context. (0, 0) where the answer is empty or not in the context.
    A span that answers the question usually sits among the question's words: the sliding-window
    baseline of the SQuAD paper rests on it. (Checked on validation articles, SPEC §5: P3-albert's
    two-stage cascade's out-of-fold AIQ 84.399 → 84.489, higher for every one of 5 seeds.)

    >>> question_overlap("1858", "When was the treaty signed?", "The treaty was signed in 1858. Rain fell.")
    (1.0, 1.0)
    >>> question_overlap("Rain", "When was the treaty signed?", "The treaty was signed in 1858. Rain fell.")
    (1.0, 0.0)
    >>> question_overlap("snow", "When was the treaty signed?", "The treaty was signed in 1858.")
    (0.0, 0.0)
    """
    ans, ctx = answer.lower().strip(), context.lower()
    words = {w for w in _WORD.findall(question.lower()) if w not in STOP_WORDS}
    words -= set(_WORD.findall(ans))
    if not ans or not words:
        return 0.0, 0.0
    said, starts = _context_words(ctx)
    window = sentence = 0.0
    at = ctx.find(ans)
    for _ in range(OVERLAP_OCCURRENCES):
        if at < 0:
            break
        end = at + len(ans)
        i, j = bisect_left(starts, at), bisect_left(starts, end)  # words before it, from its end on
        first, last = ctx.rfind(". ", 0, at) + 1, ctx.find(". ", end)
        s0, s1 = bisect_left(starts, first), bisect_left(starts, len(ctx) if last < 0 else last)
        near = said[max(0, i - OVERLAP_WINDOW) : i] + said[j : j + OVERLAP_WINDOW]
        window = max(window, len(words.intersection(near)) / len(words))
        sentence = max(sentence, len(words.intersection(said[s0:s1])) / len(words))
        at = ctx.find(ans, at + 1)
    return window, sentence


def reads_answer_context(router) -> bool:
    """Whether ``router`` reads :func:`question_overlap` of the main agent's answer: a fitted
    router that reads answers with the ``extra`` features, or a frozen one's config (its ``set``)."""
    if isinstance(router, dict):
        return "extra" in str(router.get("set", ""))
    return bool(getattr(router, "reads_answers", False)) and "extra" in str(getattr(router, "features", ""))


def answer_context(answer, question: str, context: str) -> dict[str, float] | None:
    """:func:`question_overlap` of an answer as a router's signals name it (the routing API and
    the pages); None where there is no answer text to place in the context.

    >>> answer_context("1858", "When was the treaty signed?", "The treaty was signed in 1858.")
    {'question_words_near_answer': 1.0, 'question_words_in_answer_sentence': 1.0}
    """
    if not isinstance(answer, str) or not answer.strip():
        return None
    near, sentence = question_overlap(answer, question, context)
    return {"question_words_near_answer": near, "question_words_in_answer_sentence": sentence}


# The confidence signals a model agent records (extractive, then generative), as feature columns.
CONFIDENCE_COLUMNS = (
    "log span_prob",
    "span_prob",
    "start_logit",
    "end_logit",
    "log margin",
    "log windows",
    "null_margin",
    "mean_logprob",
    "min_logprob",
    "abstained",
)


def confidence_features(confidence) -> np.ndarray:
    """The main agent's confidence signals per query, (N, len(CONFIDENCE_COLUMNS)) float32; a
    signal the agent does not give (or a query without a record) is 0.

    >>> confidence_features([{"span_prob": 0.5, "margin": 0.0, "windows": 1}, None]).round(3)[:, :6]
    array([[-0.693,  0.5  ,  0.   ,  0.   ,  0.   ,  0.   ],
           [ 0.   ,  0.   ,  0.   ,  0.   ,  0.   ,  0.   ]], dtype=float32)
    """
    out = np.zeros((len(confidence), len(CONFIDENCE_COLUMNS)), np.float32)
    for n, c in enumerate(confidence):
        if not isinstance(c, dict):
            continue
        v = {k: float(c.get(k) or 0.0) for k in c}
        p = v.get("span_prob", 0.0)
        out[n] = (
            np.log(max(p, 1e-6)) if "span_prob" in c else 0.0,
            p,
            v.get("start_logit", 0.0),
            v.get("end_logit", 0.0),
            np.log1p(max(min(v.get("margin", 0.0), 1e4), 0.0)),
            np.log(max(v.get("windows", 1.0), 1.0)),
            v.get("null_margin", 0.0),
            v.get("mean_logprob", 0.0),
            v.get("min_logprob", 0.0),
            v.get("abstained", 0.0),
        )
    return out


# ``answer``: answer_features; ``answer+extra``: also extra_features; ``…+emb``: also the ex-ante
# question/context embeddings (the encoder is then paid too); ``confidence``: the main agent's
# confidence signals alone (what a post-hoc router reads where the main agent gives no answer text).
POSTHOC_FEATURE_SETS = ("answer", "answer+extra", "answer+emb", "answer+extra+emb", "confidence")


def posthoc_matrix(
    main_answers,
    helper_answers,
    records: Sequence[QARecord],
    features: str = "answer+extra",
    confidence=None,
    embeddings: np.ndarray | None = None,
    asked: bool = False,
) -> np.ndarray:
    """The post-hoc router's input, (N, d): the features of ``features`` of the main agent's
    answers (N,) and the helpers' (N, H), then the main agent's ``confidence`` records (N,)
    when given (None: the router reads no confidence). ``asked``: the last helper is an expert
    that was asked (a two-stage cascade's second stage), and its answer is described as the
    main agent's is (against the main agent and the other helpers), appended last."""
    if features not in POSTHOC_FEATURE_SETS:
        raise ValueError(f"unknown post-hoc features {features!r}; known: {POSTHOC_FEATURE_SETS}")
    if features == "confidence":
        if confidence is None:
            raise ValueError("post-hoc features 'confidence' need the main agent's confidence")
        return confidence_features(confidence)
    main = np.asarray(main_answers, dtype=object)
    helpers = np.asarray(helper_answers, dtype=object).reshape(len(records), -1)
    parts = [answer_features(main, helpers, records)]
    if "extra" in features:
        parts.append(extra_features(main, helpers, records))
    if features.endswith("+emb"):
        if embeddings is None or embeddings.shape[1] == 0:
            raise ValueError(f"features {features!r} need the question/context embeddings")
        parts.append(embeddings)
    if confidence is not None:
        parts.append(confidence_features(confidence))
    if asked:
        if helpers.shape[1] == 0:
            raise ValueError("features of an asked expert's answer need that answer (the last helper)")
        others = np.concatenate([main[:, None], helpers[:, :-1]], axis=1)
        parts.append(answer_features(helpers[:, -1], others, records))
        if "extra" in features:
            parts.append(extra_features(helpers[:, -1], others, records))
    return np.concatenate(parts, axis=1).astype(np.float32)
