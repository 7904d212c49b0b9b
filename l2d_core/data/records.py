"""The one record type every data source is turned into, and a dataset of them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

__all__ = ["QARecord", "QADataset", "DataFormatError", "QUESTION_TYPES", "question_type"]

QUESTION_TYPES = ("what", "which", "who", "whom", "whose", "when", "where", "why", "how")


def question_type(question: str) -> str:
    """The first wh-word of a question, else ``other``.

    >>> question_type("In what year did Tesla die?"), question_type("Is it red?")
    ('what', 'other')
    """
    for w in re.findall(r"[a-z]+", question.lower()):
        if w in QUESTION_TYPES:
            return w
    return "other"


class DataFormatError(ValueError):
    """A data or prediction file is malformed; the message says where."""


@dataclass(frozen=True, slots=True)
class QARecord:
    """One extractive-QA query ``x = (question, context)`` with its gold answers.

    ``answer_starts`` holds the character offset of each gold answer, or ``None`` where
    the source has none (the derived SQuAD v2.0 file, TriviaQA). An empty ``answers``
    tuple means the question is unanswerable (SQuAD v2.0).
    """

    qid: str
    title: str
    context: str
    question: str
    answers: tuple[str, ...]
    answer_starts: tuple[int | None, ...] = ()
    is_impossible: bool = False


@dataclass(frozen=True, eq=False)  # identity hash: cheap to memoize on
class QADataset:
    """An ordered collection of records with a name; ``v2`` selects SQuAD v2.0 scoring."""

    name: str
    records: tuple[QARecord, ...]
    v2: bool = False
    source: str = ""
    _index: dict = field(default=None, repr=False, compare=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        index: dict[str, int] = {}
        for i, r in enumerate(self.records):
            if r.qid in index:
                raise DataFormatError(f"{self.name}: duplicate question id {r.qid!r}")
            index[r.qid] = i
        object.__setattr__(self, "_index", index)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    def __contains__(self, qid: object) -> bool:
        return qid in self._index

    def __getitem__(self, qid: str) -> QARecord:
        try:
            return self.records[self._index[qid]]
        except KeyError:
            raise KeyError(f"unknown question id {qid!r} in dataset {self.name!r}") from None

    @cached_property
    def qids(self) -> tuple[str, ...]:
        return tuple(r.qid for r in self.records)

    @cached_property
    def titles(self) -> tuple[str, ...]:
        """Article titles in first-appearance order."""
        return tuple(dict.fromkeys(r.title for r in self.records))

    def subset(self, qids: Iterable[str], name: str | None = None) -> QADataset:
        recs = tuple(self[q] for q in qids)
        return QADataset(name or self.name, recs, self.v2, self.source)

    def by_titles(self, titles: Sequence[str], name: str | None = None) -> QADataset:
        keep = set(titles)
        recs = tuple(r for r in self.records if r.title in keep)
        return QADataset(name or self.name, recs, self.v2, self.source)
