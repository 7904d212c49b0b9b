"""The known dataset files are checked against their sha256 when loaded: an edited gold answer or
``version`` in ``squad/dev-v1.1.json`` is a one-line refusal, not numbers quietly off.

The official files' checksums are those ``scripts/download_data.py`` verifies
(``download_manifest.json``); the derived v2.0 stand-in's is recorded here. A file is hashed
once per process for each (path, size, modification time), so the dashboard does not hash again
on every rerun (about 10 ms for the 4.9 MB v1.1 file). Setting ``L2D_ACCEPT_MODIFIED_DATA=1``
accepts a modified copy knowingly.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .records import DataFormatError

__all__ = [
    "ACCEPT_ENV",
    "KnownFile",
    "DatasetChecksumError",
    "known_files",
    "file_sha256",
    "verify_dataset_file",
]

ACCEPT_ENV = "L2D_ACCEPT_MODIFIED_DATA"
MANIFEST = Path(__file__).with_name("download_manifest.json")
DERIVED_V2 = "squad/derived/dev-v2.0.explorer-derived.json"  # not downloadable: no URL in the manifest
_HASHED: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) → sha256
_LOCK = threading.Lock()


@dataclass(frozen=True)
class KnownFile:
    rel: str  # path under the data dir (POSIX)
    sha256: str
    bytes: int
    description: str


class DatasetChecksumError(DataFormatError):
    """A known dataset file whose bytes are not the known ones."""


@lru_cache(maxsize=1)
def known_files() -> dict[str, KnownFile]:
    """The dataset files whose checksums are known, by path under the data dir."""
    doc = json.loads(MANIFEST.read_text(encoding="utf-8"))
    known = {
        e["dest"]: KnownFile(e["dest"], e["sha256"], int(e["bytes"]), e.get("description", e["dest"]))
        for e in doc["files"]
        if e.get("kind") == "dataset"
    }
    known[DERIVED_V2] = KnownFile(
        DERIVED_V2,
        "a0bc7496954af97bbd76bf5e23bdc306bce98812dbcd0a012a2b20f0fdfe2685",
        3470780,
        "SQuAD v2.0 dev rebuild from the SQuAD-explorer pages",
    )
    return known


def file_sha256(path: str | Path) -> str:
    """sha256 of a file, computed once per process for each (path, size, modification time)."""
    st = os.stat(path)
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
    with _LOCK:
        done = _HASHED.get(key)
    if done is None:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        done = h.hexdigest()
        with _LOCK:
            _HASHED[key] = done
    return done


def _fix(rel: str) -> str:
    if rel == DERIVED_V2:
        return (
            "restore it from the data bundle, or fetch the official file with "
            "`python scripts/download_data.py --only squad/dev-v2.0.json`"
        )
    return f"restore it with `python scripts/download_data.py --only {rel}`"


def verify_dataset_file(path: str | Path, rel: str, dataset: str) -> None:
    """Raise :class:`DatasetChecksumError` when ``path`` (known as ``rel`` under the data dir) is a
    known file with other bytes, unless ``L2D_ACCEPT_MODIFIED_DATA`` is set; other files pass."""
    known = known_files().get(rel)
    if known is None or os.environ.get(ACCEPT_ENV, "").strip() not in ("", "0"):
        return
    size = os.stat(path).st_size
    got = None if size != known.bytes else file_sha256(path)
    if got == known.sha256:
        return
    if got is None:
        what = f"{size:,} bytes, expected {known.bytes:,}"
    else:
        what = f"sha256 {got[:12]}…, expected {known.sha256[:12]}…"
    raise DatasetChecksumError(
        f"dataset {dataset}: {rel} in the data directory is not the known {known.description}: "
        f"{what}; {_fix(rel)}, or set {ACCEPT_ENV}=1 to use a modified copy knowingly"
    )
