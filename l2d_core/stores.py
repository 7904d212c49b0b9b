"""On-disk stores that survive corruption: a damaged cache is named, set aside and rebuilt.

Every cache under ``<cache>/`` is derivable (agent answers from their prediction file or by
running the agent again, embeddings by the encoder, router heads by training), so a store that
cannot be read is moved to ``<cache>/corrupt/`` — never deleted, never silently mixed with new
data — with a warning that names the file, and an empty store takes its place.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import tempfile
import time
import warnings
from pathlib import Path

import diskcache

from .paths import cache_dir

__all__ = ["CorruptStoreWarning", "open_disk_cache", "set_aside", "atomic_save_file", "model_fingerprint"]


class CorruptStoreWarning(UserWarning):
    """A cache file could not be read and was set aside (it is rebuilt from its sources)."""


def set_aside(path: str | Path, what: str, why: str, rebuild: str) -> Path:
    """Move a damaged file or folder to ``<cache>/corrupt/`` and warn, naming both places."""
    path = Path(path)
    target_root = cache_dir() / "corrupt"
    target_root.mkdir(parents=True, exist_ok=True)
    target = target_root / f"{path.name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    shutil.move(str(path), str(target))
    warnings.warn(
        f"{what} {path} could not be read ({why}); it was moved to {target} and {rebuild}",
        CorruptStoreWarning,
        stacklevel=3,
    )
    return target


def open_disk_cache(directory: str | Path, what: str, rebuild: str, **kwargs) -> diskcache.Cache:
    """A ``diskcache.Cache`` at ``directory``; a garbage or truncated ``cache.db`` is set aside
    (see :func:`set_aside`) and a fresh, empty cache opened in its place. Nothing is ever
    evicted (every store here holds results, not a bounded memo): without an eviction policy
    diskcache also writes and reads about twice as fast."""
    kwargs.setdefault("eviction_policy", "none")
    directory = Path(directory)
    db = directory / "cache.db"
    try:
        if db.is_file():  # sqlite's own quick check: milliseconds on a warm cache of this size
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
                verdict = con.execute("PRAGMA quick_check").fetchone()[0]
            con.close()
            if verdict != "ok":
                raise sqlite3.DatabaseError(verdict)
        return diskcache.Cache(str(directory), **kwargs)
    except sqlite3.DatabaseError as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        set_aside(directory, what, why, rebuild)
        return diskcache.Cache(str(directory), **kwargs)


def atomic_save_file(tensors: dict, path: str | Path) -> None:
    """``safetensors`` save through a temporary file and a rename: a killed writer never leaves
    a truncated checkpoint under the final name."""
    from safetensors.torch import save_file

    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    os.close(fd)
    try:
        save_file(tensors, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def model_fingerprint(path: str) -> str:
    """A content fingerprint of a model folder that survives copying it elsewhere: its
    ``config.json`` and the names and sizes of its weight and tokenizer files (a hub id or a
    missing path: the id itself).

    >>> model_fingerprint("no/such/model") == model_fingerprint("no/such/model")
    True
    """
    p = Path(path).expanduser()
    h = hashlib.sha256()
    if p.is_dir():
        for f in sorted(p.iterdir()):
            if f.is_file() and f.suffix in (".json", ".safetensors", ".bin", ".txt", ".model"):
                h.update(f"{f.name}:{f.stat().st_size}\n".encode())
                if f.name == "config.json":
                    h.update(f.read_bytes())
    else:
        h.update(str(path).encode())
    return h.hexdigest()[:16]
