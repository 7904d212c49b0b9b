"""Hugging Face ``datasets`` sources turned into :class:`QARecord` datasets.

Two row schemas are understood, detected from the column names:

- **SQuAD** (``squad``, ``squad_v2``): ``id, title, context, question,
  answers={text: [...], answer_start: [...]}``. An empty answer list means the question
  is unanswerable (``is_impossible=True``); the dataset counts as v2.0 when any row has
  one, or when the source name says ``squad_v2``.
- **TriviaQA** (``trivia_qa``, config ``rc``): ``question_id, question,
  answer={value, aliases, ...}, entity_pages={title, wiki_context, ...},
  search_results={search_context, ...}``. One record per question; its context is the
  first Wikipedia context (else the first search context), its gold answers are the
  answer value and aliases that occur in that context (case-insensitive). Questions with
  no context, or whose answers never occur in the context, are skipped and counted.

``path`` may be a hub id, a directory written by ``Dataset.save_to_disk`` /
``DatasetDict.save_to_disk``, another local dataset directory, or a JSON / JSON-lines
file in Hugging Face row format.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..paths import DataNotFoundError
from .records import DataFormatError, QADataset, QARecord

__all__ = [
    "HFDatasetLoadError",
    "HFLoadReport",
    "load_hf_dataset",
    "load_hf_dataset_with_report",
    "detect_schema",
]

log = logging.getLogger(__name__)

SQUAD_COLUMNS = frozenset({"id", "context", "question", "answers"})
TRIVIA_COLUMNS = frozenset({"question_id", "question", "answer"})
_JSON_SUFFIXES = (".json", ".jsonl", ".jsonl.gz", ".json.gz", ".ndjson")


class HFDatasetLoadError(DataNotFoundError):
    """A Hugging Face dataset could not be loaded (no network, bad path, bad split...)."""


@dataclass(frozen=True)
class HFLoadReport:
    """What the conversion did: rows read, records made, questions skipped and why."""

    schema: str
    rows_read: int
    records: int
    skipped_no_context: int = 0
    skipped_no_answer_in_context: int = 0

    @property
    def skipped(self) -> int:
        return self.skipped_no_context + self.skipped_no_answer_in_context


# --------------------------------------------------------------------------- loading


def _import_datasets():
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - datasets is a hard requirement
        raise HFDatasetLoadError(
            f"the `datasets` package is needed to load Hugging Face sources ({exc}); "
            "install it with `pip install datasets`"
        ) from None
    return datasets


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _is_json_file(p: Path) -> bool:
    return p.is_file() and p.name.lower().endswith(_JSON_SUFFIXES)


def _pick_split(obj: Any, split: str, where: str):
    """A ``Dataset`` from whatever ``datasets`` returned (``Dataset`` or ``DatasetDict``)."""
    datasets = _import_datasets()
    if isinstance(obj, datasets.DatasetDict | dict):
        if split in obj:
            return obj[split]
        raise HFDatasetLoadError(
            f"{where} has no split {split!r}; available splits: {', '.join(map(str, obj)) or '(none)'}"
        )
    return obj


def _load_raw(path: str, config: str | None, split: str):
    """Load ``path`` with ``datasets`` and return one split as a ``Dataset``."""
    datasets = _import_datasets()
    local = Path(path).expanduser()
    try:
        if local.is_dir():
            if (local / "state.json").is_file() or (local / "dataset_dict.json").is_file():
                return _pick_split(datasets.load_from_disk(str(local)), split, f"dataset directory {local}")
            # a folder of data files (parquet/json/csv): let the packaged builders read it
            return _pick_split(
                datasets.load_dataset(str(local), config, split=split), split, f"data directory {local}"
            )
        if local.is_file():
            if not _is_json_file(local):
                raise HFDatasetLoadError(
                    f"{local} is a file but not JSON / JSON-lines; expected a Hugging Face dataset "
                    f"directory (save_to_disk), a .json/.jsonl file in row format, or a hub id"
                )
            return datasets.load_dataset("json", data_files=str(local), split="train")
        if local.is_absolute() or path.startswith((".", "~")) or local.suffix in (".json", ".jsonl"):
            raise HFDatasetLoadError(f"dataset path {local} does not exist")
        # anything else: a hub id
        return datasets.load_dataset(path, config, split=split)
    except (HFDatasetLoadError, DataFormatError):
        raise
    except Exception as exc:  # noqa: BLE001 - any failure inside datasets becomes one clear error
        what = f"{path!r}" + (f" (config {config!r})" if config else "") + f", split {split!r}"
        hint = (
            "Check the path and split."
            if local.exists()
            else "If this machine has no network access, download the dataset elsewhere, save it "
            "with `Dataset.save_to_disk(DIR)` (or export JSON lines) and pass that local path instead."
        )
        raise HFDatasetLoadError(
            f"could not load the Hugging Face dataset {what}: {_short(exc)}. {hint}"
        ) from None


# --------------------------------------------------------------------------- schemas


def detect_schema(columns: Iterable[str]) -> str:
    """``"squad"`` or ``"trivia_qa"`` from a column list; ``DataFormatError`` otherwise."""
    cols = set(columns)
    if SQUAD_COLUMNS <= cols:
        return "squad"
    if TRIVIA_COLUMNS <= cols and ({"entity_pages", "search_results"} & cols):
        return "trivia_qa"
    hint = ""
    if {"data", "version"} <= cols:
        hint = " This looks like a SQuAD-format JSON file: load it with load_squad_json instead."
    raise DataFormatError(
        f"unknown Hugging Face dataset schema; columns found: {sorted(cols)}. Expected SQuAD columns "
        f"{sorted(SQUAD_COLUMNS)} (+ optional 'title') or TriviaQA rc columns "
        f"{sorted(TRIVIA_COLUMNS)} + 'entity_pages'/'search_results'.{hint}"
    )


def _squad_answers(raw: Any, where: str) -> tuple[tuple[str, ...], tuple[int | None, ...]]:
    if isinstance(raw, Mapping):
        texts = list(raw.get("text") or [])
        starts = list(raw.get("answer_start") or [])
    elif isinstance(raw, list):  # list of {"text", "answer_start"} objects
        texts = [a["text"] for a in raw]
        starts = [a.get("answer_start") for a in raw]
    elif raw is None:
        texts, starts = [], []
    else:
        raise DataFormatError(f"{where}: 'answers' must be a dict of lists, got {type(raw).__name__}")
    if starts and len(starts) != len(texts):
        raise DataFormatError(f"{where}: {len(texts)} answer texts but {len(starts)} answer_start values")
    if not starts:
        starts = [None] * len(texts)
    return tuple(str(t) for t in texts), tuple(None if s is None else int(s) for s in starts)


def _squad_records(rows: Iterable[Mapping], limit: int | None):
    read = 0
    out: list[QARecord] = []
    for row in rows:
        if limit is not None and len(out) >= limit:
            break
        read += 1
        where = f"row {read - 1} (id {row.get('id')!r})"
        answers, starts = _squad_answers(row.get("answers"), where)
        out.append(
            QARecord(
                qid=str(row["id"]),
                title=str(row.get("title") or ""),
                context=str(row["context"]),
                question=str(row["question"]),
                answers=answers,
                answer_starts=starts,
                is_impossible=not answers,
            )
        )
    return out, HFLoadReport("squad", read, len(out))


def _first_text(values: Any) -> tuple[int, str] | None:
    """Index and text of the first non-blank string in a list-like field."""
    for i, v in enumerate(values or []):
        if isinstance(v, str) and v.strip():
            return i, v
    return None


def _trivia_answers(answer: Mapping, context: str) -> tuple[str, ...]:
    candidates = [answer.get("value")] + list(answer.get("aliases") or [])
    low = context.casefold()
    seen: set[str] = set()
    found: list[str] = []
    for cand in candidates:
        if not isinstance(cand, str) or not cand.strip():
            continue
        key = cand.strip().casefold()
        if key in seen:
            continue
        seen.add(key)
        if key in low:
            found.append(cand.strip())
    return tuple(found)


def _trivia_records(rows: Iterable[Mapping], limit: int | None):
    read = no_ctx = no_ans = 0
    out: list[QARecord] = []
    for row in rows:
        if limit is not None and len(out) >= limit:
            break
        read += 1
        pages = row.get("entity_pages") or {}
        search = row.get("search_results") or {}
        hit = _first_text(pages.get("wiki_context"))
        if hit is not None:
            i, context = hit
            titles = list(pages.get("title") or [])
            title = str(titles[i]) if i < len(titles) and titles[i] else "wikipedia"
        else:
            hit = _first_text(search.get("search_context"))
            if hit is None:
                no_ctx += 1
                continue
            context, title = hit[1], "search"
        answers = _trivia_answers(row.get("answer") or {}, context)
        if not answers:
            # an empty answer tuple means "unanswerable" (SQuAD v2.0) in QARecord; TriviaQA is
            # scored as v1.1, so a question whose answer is not in the context is dropped
            no_ans += 1
            continue
        out.append(
            QARecord(
                qid=str(row["question_id"]),
                title=title,
                context=context,
                question=str(row["question"]),
                answers=answers,
                answer_starts=(None,) * len(answers),
                is_impossible=False,
            )
        )
    return out, HFLoadReport("trivia_qa", read, len(out), no_ctx, no_ans)


# --------------------------------------------------------------------------- public API


def _default_name(path: str, config: str | None, split: str) -> str:
    p = Path(path)
    base = p.name if p.exists() else path
    for suf in _JSON_SUFFIXES:
        if base.lower().endswith(suf):
            base = base[: -len(suf)]
            break
    return f"hf:{base}" + (f"/{config}" if config else "") + f":{split}"


def load_hf_dataset_with_report(
    path: str,
    config: str | None = None,
    split: str = "validation",
    name: str | None = None,
    limit: int | None = None,
) -> tuple[QADataset, HFLoadReport]:
    """Like :func:`load_hf_dataset`, also returning what was read and skipped."""
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    ds = _load_raw(str(path), config, split)
    columns = list(getattr(ds, "column_names", None) or [])
    schema = detect_schema(columns)
    name = name or _default_name(str(path), config, split)
    source = f"hf:{path}" + (f"/{config}" if config else "") + f":{split}"
    try:
        if schema == "squad":
            records, report = _squad_records(ds, limit)
            hint = f"{Path(str(path)).name} {name}".lower().replace("-", "_")
            v2 = any(r.is_impossible for r in records) or "squad_v2" in hint or "squad2" in hint
        else:
            records, report = _trivia_records(ds, limit)
            v2 = False
    except DataFormatError as exc:
        raise DataFormatError(f"{source}: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise DataFormatError(f"{source}: malformed {schema} row ({_short(exc)})") from None
    if report.skipped:
        log.warning(
            "%s: skipped %d of %d questions (%d without any context, %d whose answer does not occur "
            "in the context)",
            source,
            report.skipped,
            report.rows_read,
            report.skipped_no_context,
            report.skipped_no_answer_in_context,
        )
    if not records:
        raise DataFormatError(f"{source} yielded no questions ({report})")
    return QADataset(name, tuple(records), v2=v2, source=source), report


def load_hf_dataset(
    path: str,
    config: str | None = None,
    split: str = "validation",
    name: str | None = None,
    limit: int | None = None,
) -> QADataset:
    """Load a Hugging Face ``datasets`` source as a :class:`QADataset`.

    ``path``: a hub id (``"squad"``, ``"squad_v2"``, ``"trivia_qa"`` with ``config="rc"``),
    a ``save_to_disk`` directory (``split`` picks from a ``DatasetDict``), or a JSON /
    JSON-lines file in row format. ``limit`` caps the number of records. Skipped TriviaQA
    questions are logged (see :func:`load_hf_dataset_with_report` for the counts).

    Raises :class:`HFDatasetLoadError` when the source cannot be loaded and
    :class:`DataFormatError` when its columns match no known schema.
    """
    return load_hf_dataset_with_report(path, config, split, name, limit)[0]
