"""SQuAD-format JSON files: the official v1.1/v2.0 dev sets and the derived v2.0 file."""

from __future__ import annotations

import json
from pathlib import Path

from .records import DataFormatError, QADataset, QARecord
from .safe_json import JSONNestingError, loads

__all__ = ["load_squad_json", "read_json"]


def _unique_pairs(pairs: list[tuple[str, object]]) -> dict:
    doc = dict(pairs)
    if len(doc) != len(pairs):
        seen: set[str] = set()
        twice = list(dict.fromkeys(k for k, _ in pairs if k in seen or seen.add(k)))
        raise _DuplicateKeys(twice)
    return doc


class _DuplicateKeys(ValueError):
    def __init__(self, keys: list[str]) -> None:
        super().__init__(keys)
        self.keys = keys


def read_json(path: str | Path, what: str = "JSON file", label: str | None = None, unique_keys: bool = False):
    """Parse a JSON file (a UTF-8 byte-order mark is accepted), turning every failure into a
    short message that names the file (``label``: the name the user knows it by). With
    ``unique_keys`` an object that gives a key twice is refused, naming the keys. Arrays or
    objects nested deeper than :data:`~l2d_core.data.safe_json.MAX_DEPTH` are refused before
    parsing (no ``RecursionError``)."""
    path = Path(path)
    name = label or str(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} not found: {name}")
    try:
        return loads(path.read_bytes(), object_pairs_hook=_unique_pairs if unique_keys else None)
    except JSONNestingError as exc:
        raise DataFormatError(f"{what} {name} holds {exc} (not a {what})") from None
    except _DuplicateKeys as exc:
        shown = ", ".join(repr(k) for k in exc.keys[:5])
        more = f" and {len(exc.keys) - 5} more" if len(exc.keys) > 5 else ""
        raise DataFormatError(f"{what} {name} gives {len(exc.keys)} keys twice: {shown}{more}") from None
    except json.JSONDecodeError as exc:
        raise DataFormatError(
            f"{what} {name} is not valid JSON (truncated or corrupt?): {exc.msg.removesuffix(' at')} "
            f"at line {exc.lineno}, column {exc.colno}"
        ) from None
    except UnicodeDecodeError:
        raise DataFormatError(f"{what} {name} is not UTF-8 text (a binary file?)") from None


def load_squad_json(path: str | Path, name: str | None = None, label: str | None = None) -> QADataset:
    """Load a SQuAD v1.1 or v2.0 file (``answer_start`` optional, as in the derived file);
    ``label`` names the file in messages (default: its path).

    The dataset counts as v2.0 when its version string starts with ``v2`` or any question
    carries ``is_impossible``.
    """
    path = Path(path)
    shown = label or str(path)
    doc = read_json(path, "SQuAD file", label=shown)
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise DataFormatError(f"SQuAD file {shown}: expected an object with a 'data' list")
    version = str(doc.get("version", ""))
    v2 = version.lower().lstrip("v").startswith("2")
    records: list[QARecord] = []
    for a_i, article in enumerate(doc["data"]):
        try:
            title = article["title"]
            for paragraph in article["paragraphs"]:
                context = paragraph["context"]
                for qa in paragraph["qas"]:
                    impossible = bool(qa.get("is_impossible", False))
                    v2 = v2 or "is_impossible" in qa
                    answers = [] if impossible else qa.get("answers", [])
                    records.append(
                        QARecord(
                            qid=str(qa["id"]),
                            title=title,
                            context=context,
                            question=qa["question"],
                            answers=tuple(a["text"] for a in answers),
                            answer_starts=tuple(a.get("answer_start") for a in answers),
                            is_impossible=impossible,
                        )
                    )
        except (KeyError, TypeError) as exc:
            raise DataFormatError(f"SQuAD file {shown}: article #{a_i} is missing field {exc}") from None
    if not records:
        raise DataFormatError(f"SQuAD file {shown} holds no questions")
    return QADataset(name or path.stem, tuple(records), v2=v2, source=str(path))
