"""Datasets registered from a user's own log (a log of prompts without passages or SQuAD ids,
such as RouterBench's): each is a SQuAD-format file under ``<cache>/datasets/`` — one question per
prompt, its group (a task, or the prompt itself) as its article, no passage and no gold answer
(its agents' logs say right or wrong) — loaded by name like the built-in ones."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from ..paths import cache_dir
from ..stores import atomic_path
from .records import DataFormatError, QARecord

__all__ = [
    "USER_VERSION",
    "save_user_dataset",
    "user_dataset_path",
    "user_dataset_names",
    "check_dataset_name",
]

USER_VERSION = "user-log"  # the ``version`` of a registered file: a v1-style set without gold answers
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")


def check_dataset_name(name: str, builtin: Sequence[str]) -> str:
    """A new dataset's name: lowercase letters, digits, ``-`` and ``_``, at most 40, none built in.

    >>> check_dataset_name("routerbench", ["squad11"])
    'routerbench'
    """
    if not _NAME.fullmatch(name or ""):
        raise DataFormatError(f"dataset name {name!r}: use lowercase letters, digits, - and _ (at most 40)")
    if name in builtin:
        raise DataFormatError(f"dataset name {name!r} is built in; choose another")
    return name


def _folder(create: bool = False) -> Path:
    return cache_dir(create=create) / "datasets"


def user_dataset_path(name: str) -> Path | None:
    """The registered file of dataset ``name``, or None."""
    path = _folder() / f"{name}.json"
    return path if _NAME.fullmatch(name) and path.is_file() else None


def user_dataset_names() -> list[str]:
    """The registered datasets, by name."""
    folder = _folder()
    return sorted(p.stem for p in folder.glob("*.json") if _NAME.fullmatch(p.stem)) if folder.is_dir() else []


def save_user_dataset(name: str, records: Sequence[QARecord], description: str) -> Path:
    """Write ``records`` (no passages or gold answers needed) as dataset ``name``, one article per
    title, in one atomic write; returns its path."""
    articles: dict[str, list[dict]] = {}
    for r in records:
        articles.setdefault(r.title, []).append({"id": r.qid, "question": r.question, "answers": []})
    doc = {
        "version": USER_VERSION,
        "description": description,
        "data": [{"title": t, "paragraphs": [{"context": "", "qas": qas}]} for t, qas in articles.items()],
    }
    path = _folder(create=True) / f"{name}.json"
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(doc, ensure_ascii=False))
    return path
