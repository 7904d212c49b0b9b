"""SPEC §2: answer spans as start/end indices in the normalized word sequence of the context.

Every agent is compared in one tokenizer-free space. A text answer is located in the
context (first occurrence of its normalized word sequence, or the occurrence nearest to
a known character offset); no answer is the null position ``(-1, -1)``; an answer that
cannot be found is ``(-2, -2)``, which is never correct.

>>> idx = ContextIndex.build("The Denver Broncos beat the Carolina Panthers.")
>>> idx.words
('denver', 'broncos', 'beat', 'carolina', 'panthers')
>>> locate("Carolina Panthers", idx)
Location(start=3, end=4, status='exact')
>>> locate("", idx), locate("?", idx)[:2]
(Location(start=-1, end=-1, status='null'), (-1, -1))
>>> locate("Seattle", idx).status
'not_found'
>>> endpoint_correct(Location(3, 4, "exact"), [(3, 4), (0, 1)])
(True, True)
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from itertools import islice, takewhile
from typing import NamedTuple

from .squad_eval import normalized_words

__all__ = [
    "NULL_POS",
    "NOT_FOUND_POS",
    "ContextIndex",
    "Location",
    "locate",
    "gold_positions",
    "endpoint_correct",
    "is_no_answer",
]

NULL_POS = -1
NOT_FOUND_POS = -2


class Location(NamedTuple):
    start: int
    end: int
    status: str  # exact | ambiguous | offset | substring | null | not_found


_TOKEN_WORDS: dict[str, tuple[str, ...]] = {}  # a context token → its normalized words (memo)


@dataclass(frozen=True)
class ContextIndex:
    """Normalized words of a context and the character span of the token each came from."""

    words: tuple[str, ...]
    tok_bounds: tuple[tuple[int, int, int, int], ...]  # (char_start, char_end, first_word, last_word)

    @classmethod
    def build(cls, context: str) -> ContextIndex:
        words: list[str] = []
        bounds = []
        pos = 0
        for raw in context.split():
            start = context.index(raw, pos)
            pos = start + len(raw)
            toks = _TOKEN_WORDS.get(raw)
            if toks is None:
                if len(_TOKEN_WORDS) > 1 << 17:  # a few tens of MB at most
                    _TOKEN_WORDS.clear()
                toks = _TOKEN_WORDS[raw] = tuple(normalized_words(raw))
            if toks:
                bounds.append((start, pos, len(words), len(words) + len(toks) - 1))
                words.extend(toks)
        return cls(tuple(words), tuple(bounds))

    @cached_property
    def _token_ends(self) -> list[int]:
        return [b[1] for b in self.tok_bounds]  # increasing: the tokens are in text order

    @cached_property
    def _where(self) -> dict[str, list[int]]:
        where: dict[str, list[int]] = {}
        for i, w in enumerate(self.words):
            where.setdefault(w, []).append(i)
        return where

    def char_span_to_words(self, char_start: int, char_end: int) -> tuple[int, int] | None:
        """Word indices of the first and last tokens overlapping ``[char_start, char_end)``."""
        k = bisect_right(self._token_ends, char_start)  # the first token ending after char_start
        hits = list(takewhile(lambda b: b[0] < char_end, islice(self.tok_bounds, k, None)))
        if not hits:
            return None
        return hits[0][2], hits[-1][3]

    def occurrences(self, seq: list[str]) -> list[int]:
        """Start indices, in order, where the words ``seq`` occur."""
        m, target = len(seq), tuple(seq)
        return [i for i in self._where.get(seq[0], ()) if self.words[i : i + m] == target]


def is_no_answer(answer: str | None) -> bool:
    """Empty answer, or the few-shot LLM's ``?``."""
    return answer is None or answer.strip() in ("", "?")


def locate(
    answer: str | None, index: ContextIndex, char_start: int | None = None, context: str | None = None
) -> Location:
    """Position of ``answer`` in the context behind ``index``.

    With ``char_start`` (a gold offset) the occurrence nearest to it wins; otherwise the
    first. When the normalized words do not occur (an answer cut inside a token), a
    case-insensitive substring match in ``context`` is mapped to the tokens it touches.
    """
    if is_no_answer(answer):
        return Location(NULL_POS, NULL_POS, "null")
    assert answer is not None
    anchor = None
    if char_start is not None and char_start >= 0:
        span = index.char_span_to_words(char_start, char_start + len(answer))
        anchor = span[0] if span else None
    seq = normalized_words(answer)
    occ = index.occurrences(seq) if seq else []
    if occ:
        start = occ[0] if anchor is None else min(occ, key=lambda i: (abs(i - anchor), i))
        status = "exact" if len(occ) == 1 else ("offset" if anchor is not None else "ambiguous")
        return Location(start, start + len(seq) - 1, status)
    # A case-insensitive match of a literal is as long as the literal: an answer longer than the
    # context cannot occur in it (and compiling a pattern of megabytes takes seconds).
    if context is not None and 0 < len(answer.strip()) <= len(context):
        pattern = re.compile(re.escape(answer.strip()), re.IGNORECASE)
        m = pattern.match(context, char_start) if char_start is not None and char_start >= 0 else None
        m = m or pattern.search(context)
        if m:
            span = index.char_span_to_words(m.start(), m.end())
            if span:
                return Location(span[0], span[1], "substring")
    return Location(NOT_FOUND_POS, NOT_FOUND_POS, "not_found")


def gold_positions(
    answers: Iterable[str], starts: Iterable[int | None] | None, index: ContextIndex, context: str
) -> list[tuple[int, int]]:
    """Positions of every gold answer; ``[(-1, -1)]`` for an unanswerable question.

    >>> ctx = "Tesla moved to Paris; later Paris honoured Tesla."
    >>> gold_positions(["Paris"], [28], ContextIndex.build(ctx), ctx)
    [(3, 3), (5, 5)]
    """
    answers = list(answers)
    if not answers:
        return [(NULL_POS, NULL_POS)]
    starts = list(starts) if starts is not None else [None] * len(answers)
    out = []
    for text, st in dict.fromkeys(zip(answers, starts)):  # annotators often agree: each pair once
        # The occurrence at the gold offset, and the first occurrence: a text-only agent is
        # located by first occurrence (SPEC §2), so the same text counts as the same span.
        for anchor in {st, None}:
            loc = locate(text, index, anchor, context)
            if loc.status != "not_found":
                out.append((loc.start, loc.end))
    return sorted(set(out))


def endpoint_correct(loc: Location | tuple[int, int], golds: list[tuple[int, int]]) -> tuple[bool, bool]:
    """Per-endpoint correctness against any gold answer (SPEC §2)."""
    start, end = loc[0], loc[1]
    if start == NOT_FOUND_POS:
        return False, False
    return any(start == g[0] for g in golds), any(end == g[1] for g in golds)
