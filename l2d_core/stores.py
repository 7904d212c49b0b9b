"""On-disk stores that survive corruption: a damaged cache is named, set aside and rebuilt.

Every cache under ``<cache>/`` is derivable (agent answers from their prediction file or by
running the agent again, embeddings by the encoder, router heads by training), so a store that
cannot be read is moved to ``<cache>/corrupt/`` — never deleted, never silently mixed with new
data — with a warning that names the file, and an empty store takes its place.

Nothing read from disk is ever unpickled: every store's rows are raw bytes, numbers, text or
JSON (:class:`SafeDisk`, :class:`SafeJSONDisk`); a store holding pickled rows (an older format,
or planted) is set aside whole. Files are written through a temporary file and a rename
(:func:`atomic_write_bytes`, :func:`atomic_write_text`, :func:`atomic_file`, :func:`atomic_path`),
readable by others (``0o644`` less the umask) unless asked otherwise.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import sqlite3
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import diskcache
from diskcache.core import MODE_PICKLE, UNKNOWN

from .paths import cache_dir

__all__ = [
    "CorruptStoreWarning",
    "UnsafeRowError",
    "SafeDisk",
    "SafeJSONDisk",
    "open_disk_cache",
    "set_aside",
    "atomic_save_file",
    "atomic_path",
    "atomic_file",
    "atomic_write_bytes",
    "atomic_write_text",
    "model_fingerprint",
]

FILE_MODE = 0o644  # what files are written with (less the umask): readable by others, like `cp` makes
MODE_JSON = 5  # SafeDisk's own row mode (diskcache's are 0-4): a JSON value, UTF-8 bytes


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


class UnsafeRowError(ValueError):
    """A store row that would have to be unpickled to be read: it is never read."""


_ITEMS = "\x00items"  # a JSON object standing for a dict whose keys are not all strings


def _to_json(value):
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: _to_json(v) for k, v in value.items()}
        return {_ITEMS: [[k, _to_json(v)] for k, v in value.items()]}
    if isinstance(value, list | tuple):
        return [_to_json(v) for v in value]
    return value


def _from_json(obj: dict):
    return {k: v for k, v in obj[_ITEMS]} if obj.keys() == {_ITEMS} else obj


class _NoUnpickle:
    """Refuses to read a row (key or value) that only ``pickle`` could read."""

    def get(self, key, raw):
        if not raw:
            raise UnsafeRowError(f"a cache row under {self._directory} has a pickled key; it is never read")
        return super().get(key, raw)

    def fetch(self, mode, filename, value, read):
        if mode == MODE_PICKLE:
            raise UnsafeRowError(f"a cache row under {self._directory} is pickled; it is never read")
        return super().fetch(mode, filename, value, read)


class SafeDisk(_NoUnpickle, diskcache.Disk):
    """diskcache's ``Disk`` without pickle: bytes, text and numbers are stored as they are (as
    ``Disk`` does), anything else as JSON (its own row mode; a dict with other than string keys
    keeps them, tuples come back as lists); keys must be bytes, text or numbers."""

    def put(self, key):
        if type(key) not in (bytes, str, int, float):
            raise TypeError(f"cache keys are bytes, text or numbers, not {type(key).__name__}")
        return super().put(key)

    def store(self, value, read, key=UNKNOWN):
        if read or type(value) in (bytes, str, float) or (type(value) is int and abs(value) < 2**63):
            return super().store(value, read, key=key)
        data = json.dumps(_to_json(value), allow_nan=True).encode("utf-8")
        if len(data) < self.min_file_size:
            return 0, MODE_JSON, None, sqlite3.Binary(data)
        filename, full_path = self.filename(key, value)
        self._write(full_path, io.BytesIO(data), "xb")
        return len(data), MODE_JSON, filename, None

    def fetch(self, mode, filename, value, read):
        if mode != MODE_JSON:
            return super().fetch(mode, filename, value, read)
        data = bytes(value) if value is not None else Path(self._directory, filename).read_bytes()
        return json.loads(data.decode("utf-8"), object_hook=_from_json)


class SafeJSONDisk(_NoUnpickle, diskcache.JSONDisk):
    """diskcache's ``JSONDisk`` (keys and values JSON, compressed) that never unpickles a row."""


def _pickled_rows(con: sqlite3.Connection) -> bool:
    """Whether a diskcache database holds a row only ``pickle`` could read."""
    if con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'Cache'").fetchone() is None:
        return False
    return (
        con.execute(f"SELECT 1 FROM Cache WHERE raw = 0 OR mode = {MODE_PICKLE} LIMIT 1").fetchone()
        is not None
    )


def open_disk_cache(directory: str | Path, what: str, rebuild: str, **kwargs) -> diskcache.Cache:
    """A ``diskcache.Cache`` at ``directory`` that never unpickles (``disk``: :class:`SafeDisk`,
    or ``diskcache.JSONDisk`` for :class:`SafeJSONDisk`); a garbage or truncated ``cache.db``, or
    one holding pickled rows, is set aside (see :func:`set_aside`) and a fresh, empty cache opened
    in its place. Nothing is ever evicted (every store here holds results, not a bounded memo):
    without an eviction policy diskcache also writes and reads about twice as fast."""
    kwargs.setdefault("eviction_policy", "none")
    disk = kwargs.pop("disk", SafeDisk)
    kwargs["disk"] = SafeJSONDisk if disk is diskcache.JSONDisk else disk
    if not issubclass(kwargs["disk"], _NoUnpickle):
        raise TypeError("a store's disk must never unpickle: use SafeDisk or diskcache.JSONDisk")
    directory = Path(directory)
    db = directory / "cache.db"
    try:
        if db.is_file():  # sqlite's own quick check: milliseconds on a warm cache of this size
            with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
                verdict = con.execute("PRAGMA quick_check").fetchone()[0]
                if verdict == "ok" and _pickled_rows(con):
                    verdict = "it holds pickled rows, which are never read"
            if verdict != "ok":
                raise sqlite3.DatabaseError(verdict)
        return diskcache.Cache(str(directory), **kwargs)
    except sqlite3.DatabaseError as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        set_aside(directory, what, why, rebuild)
        return diskcache.Cache(str(directory), **kwargs)


def _umask() -> int:
    try:  # Linux: read it without changing it (os.umask sets it, racing other threads)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | Path, mode: int = FILE_MODE) -> Iterator[Path]:
    """A temporary path beside ``path`` to write; renamed onto ``path`` (permissions ``mode``
    less the umask) when the block ends, removed when it raises: a killed or failed writer never
    leaves a truncated file under the final name."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_file(path: str | Path, binary: bool = False, mode: int = FILE_MODE) -> Iterator:
    """An open file (text UTF-8, or ``binary``) that replaces ``path`` atomically when the block
    ends (see :func:`atomic_path`)."""
    with atomic_path(path, mode) as tmp:
        with open(tmp, "wb") if binary else open(tmp, "w", encoding="utf-8") as fh:
            yield fh


def atomic_write_bytes(path: str | Path, data: bytes, mode: int = FILE_MODE) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_path`)."""
    with atomic_file(path, binary=True, mode=mode) as fh:
        fh.write(data)


def atomic_write_text(path: str | Path, text: str, mode: int = FILE_MODE) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (see :func:`atomic_path`)."""
    atomic_write_bytes(path, text.encode("utf-8"), mode)


def atomic_save_file(tensors: dict, path: str | Path) -> None:
    """``safetensors`` save through a temporary file and a rename: a killed writer never leaves
    a truncated checkpoint under the final name. Torch tensors, or NumPy arrays (saved without
    importing torch; the file is the same format)."""
    if all(type(v).__module__ == "numpy" for v in tensors.values()):
        from safetensors.numpy import save_file
    else:
        from safetensors.torch import save_file

    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp))


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
