"""An outcome log's table (CSV or JSONL), read with its bounds checked before it is parsed: a
regular file, a size limit, a column cap and a cell budget, so a file of 100,000 empty columns is a
one-line refusal instead of minutes and gigabytes (a routing log has a handful of columns).

The format follows the name the user gave the file (``suffix``), not the path it is read from (an
upload is read from a temporary copy); every error names the user's file (``name``) and the row.
"""

from __future__ import annotations

import csv
import io
import json
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from ..data import safe_json
from ..data.records import DataFormatError

if TYPE_CHECKING:
    import pandas as pd


__all__ = ["MAX_LOG_BYTES", "MAX_LOG_COLUMNS", "MAX_LOG_CELLS", "JSONL_SUFFIXES", "read_table"]

MAX_LOG_BYTES = 200 * 1024 * 1024
MAX_LOG_COLUMNS = 256
MAX_LOG_CELLS = 5_000_000  # rows × columns: 1M rows of 5 columns
MAX_HEADER_BYTES = 1 << 20
JSONL_SUFFIXES = (".jsonl", ".ndjson")


def _regular(path: Path, name: str) -> int:
    """The size of ``path``, a regular file (a FIFO or a device would block or never end)."""
    try:
        st = path.stat()
    except OSError:
        raise FileNotFoundError(f"outcome log not found: {name}") from None
    if not stat.S_ISREG(st.st_mode):
        raise DataFormatError(f"outcome log {name} is not a regular file")
    if st.st_size > MAX_LOG_BYTES:
        raise DataFormatError(f"outcome log {name} is {st.st_size:,} bytes; the limit is {MAX_LOG_BYTES:,}")
    return st.st_size


def _too_many(name: str, where: str, n: int) -> DataFormatError:
    return DataFormatError(
        f"outcome log {name}: {where} has {n:,} columns; the limit is {MAX_LOG_COLUMNS} "
        "(a log has one row per question: id, correct or answer, confidence, latency)"
    )


def _over_budget(name: str, cells: int) -> DataFormatError:
    return DataFormatError(
        f"outcome log {name} holds about {cells:,} cells (rows × columns); the limit is {MAX_LOG_CELLS:,}"
    )


def _csv(path: Path, name: str) -> pd.DataFrame:
    import pandas as pd

    with open(path, "rb") as f:
        head = f.read(MAX_HEADER_BYTES)
    first = head.split(b"\n", 1)[0]
    if len(first) >= MAX_HEADER_BYTES:
        raise DataFormatError(f"outcome log {name}: its header line is over {MAX_HEADER_BYTES:,} bytes")
    try:
        header = next(csv.reader(io.StringIO(first.decode("utf-8-sig"))), [])
    except csv.Error:
        header = first.split(b",")
    if len(header) > MAX_LOG_COLUMNS:
        raise _too_many(name, "its header", len(header))
    rows = 0
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            rows += block.count(b"\n")
    if (rows + 1) * max(len(header), 1) > MAX_LOG_CELLS:
        raise _over_budget(name, (rows + 1) * len(header))
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    if len(table.columns) > MAX_LOG_COLUMNS:
        raise _too_many(name, "it", len(table.columns))
    return table


def _jsonl(path: Path, name: str) -> pd.DataFrame:
    import pandas as pd

    rows, cells = [], 0
    for n, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = safe_json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataFormatError(f"outcome log {name}: line {n} is not JSON ({exc.msg})") from None
        except ValueError as exc:  # nested past the bound, or a number of thousands of digits
            said = " ".join(str(exc).split())[:100]
            raise DataFormatError(f"outcome log {name}: line {n} cannot be read ({said})") from None
        if not isinstance(row, dict):
            raise DataFormatError(f"outcome log {name}: line {n} is not a JSON object")
        if len(row) > MAX_LOG_COLUMNS:
            raise _too_many(name, f"line {n}", len(row))
        cells += len(row)
        if cells > MAX_LOG_CELLS:
            raise _over_budget(name, cells)
        rows.append(row)
    return pd.DataFrame(rows, dtype=object)


def read_table(path: str | Path, name: str, suffix: str | None = None) -> pd.DataFrame:
    """The rows of a log at ``path`` as strings (CSV) or JSON values (JSONL: ``suffix`` ``.jsonl``
    or ``.ndjson``, default ``path``'s); every problem one :class:`DataFormatError` naming ``name``."""
    import pandas as pd  # here, not at the top: the first view's tiles import no pandas

    path = Path(path)
    _regular(path, name)
    suffix = (suffix if suffix is not None else path.suffix).lower()
    try:
        return _jsonl(path, name) if suffix in JSONL_SUFFIXES else _csv(path, name)
    except UnicodeDecodeError:
        raise DataFormatError(f"outcome log {name} is not UTF-8 text (a binary file?)") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, csv.Error) as exc:
        raise DataFormatError(f"outcome log {name} is not a readable CSV: {str(exc).strip()[:120]}") from None
