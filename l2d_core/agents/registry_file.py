"""The user registry file (``<cache>/registry.json``): read lazily, validated, repaired, locked.

A registry that cannot be read whole — not JSON (garbage, truncated, binary bytes), not an object,
a section that is not a list, an entry that does not fit its schema — never stops anything: its
valid entries are kept (complete entries are recovered from a truncated file), the file itself is
set aside to ``<cache>/corrupt/`` with a warning that names it (:func:`l2d_core.stores.set_aside`),
and a repaired file holding the kept entries takes its place. The benchmark's built-in agents and
pools (``builtin.json``) are never read from here.

The schema of an entry is its dataclass's (``AgentSpec``, ``PoolSpec``): every field, with its
type checked strictly (a number is not text, text is not a number), then the dataclass's own
checks. Unknown keys are dropped.

Locks: :func:`registry_lock` around every change of the file (two processes registering at once
both land); :func:`agent_lock` around everything written for one agent id (its answers in the
agent cache and its registry entry: one transaction, so the registry never names one source while
the cache holds another's answers). Both are reentrant within a thread.
"""

from __future__ import annotations

import dataclasses
import json
import re
import typing
import warnings
from functools import cache
from pathlib import Path

from filelock import FileLock
from pydantic import ConfigDict, Field, ValidationError, create_model

from ..data import safe_json
from ..paths import cache_dir
from ..stores import CorruptStoreWarning, atomic_write_text, set_aside

__all__ = [
    "SECTIONS",
    "empty_registry",
    "parse_registry",
    "read_user_registry",
    "write_registry",
    "registry_lock",
    "agent_lock",
    "salvage",
]

SECTIONS = ("agents", "pools")
LOCK_TIMEOUT_S = 120  # importing a large prediction file under an agent's lock takes seconds
_LOCKS: dict[str, FileLock] = {}
_READ: dict[str, tuple] = {}  # registry path → (its stat stamp, the entries read there)


def empty_registry() -> dict:
    return {s: [] for s in SECTIONS}


def _lock(path: Path) -> FileLock:
    key = str(path)
    if key not in _LOCKS:  # one instance per file: nested use in one thread is reentrant
        path.parent.mkdir(parents=True, exist_ok=True)
        _LOCKS[key] = FileLock(key, timeout=LOCK_TIMEOUT_S)
    return _LOCKS[key]


def registry_lock(path: Path) -> FileLock:
    """The lock every change of the registry at ``path`` holds."""
    return _lock(path.with_name(path.name + ".lock"))


def agent_lock(agent_id: str) -> FileLock:
    """The lock held while anything is written for agent ``agent_id`` (answers and registration)."""
    return _lock(cache_dir() / "locks" / f"agent-{agent_id}.lock")


@cache
def _schema(cls):
    """A strict pydantic model of dataclass ``cls``'s fields (unknown keys ignored)."""
    hints = typing.get_type_hints(cls)
    fields = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            fields[f.name] = (hints[f.name], f.default)
        elif f.default_factory is not dataclasses.MISSING:
            fields[f.name] = (hints[f.name], Field(default_factory=f.default_factory))
        else:
            fields[f.name] = (hints[f.name], ...)
    config = ConfigDict(strict=True, extra="ignore")
    return create_model(f"{cls.__name__}Entry", __config__=config, **fields)


def _json_kind(value) -> str:
    return {dict: "an object", list: "a list", str: "text", type(None): "null", bool: "true/false"}.get(
        type(value), "a number"
    )


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "entry"
        return f"{where}: {err['msg']}"
    text = str(exc.args[0]) if len(exc.args) == 1 else str(exc)
    return text if len(text) <= 120 else text[:120] + "…"


def salvage(text: str) -> dict:
    """The complete entries of each section of a registry that is not whole JSON (a truncated or
    partly garbled file): each ``"section": [ {…}, {…}, …`` read up to its first unreadable entry."""
    decoder, out = json.JSONDecoder(), empty_registry()
    for section in SECTIONS:
        m = re.search(rf'"{section}"\s*:\s*\[', text)
        i = m.end() if m else len(text)
        while i < len(text):
            while i < len(text) and text[i] in " \t\r\n,":
                i += 1
            if i >= len(text) or text[i] == "]":
                break
            try:
                entry, i = decoder.raw_decode(text, i)
            except (ValueError, RecursionError):  # a garbled or absurdly nested entry ends the section
                break
            out[section].append(entry)
    return out


def parse_registry(raw: bytes, classes: tuple[type, type]) -> tuple[dict, list[str]]:
    """``({"agents": [...], "pools": [...]}, problems)``: the valid entries (as dicts of their
    dataclass's fields) and what was wrong with the rest, in words."""
    problems: list[str] = []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "replace")
        problems.append("it is not UTF-8 text")
    try:
        doc = safe_json.loads(text)
    except safe_json.JSONNestingError as exc:  # read through the depth bound: never a RecursionError
        problems.append(f"it is not a registry: {exc}")
        doc = salvage(text)
    except json.JSONDecodeError as exc:
        if not problems:
            problems.append(f"it is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
        doc = salvage(text)
    if not isinstance(doc, dict):
        problems.append(f"it holds {_json_kind(doc)}, not an object of agents and pools")
        doc = {}
    out = empty_registry()
    for section, cls in zip(SECTIONS, classes):
        entries = doc.get(section, [])
        if not isinstance(entries, list):
            problems.append(f"its {section} are {_json_kind(entries)}, not a list")
            continue
        for k, entry in enumerate(entries, start=1):
            try:
                model = _schema(cls).model_validate_json(json.dumps(entry), strict=True)
                values = model.model_dump()
                cls(**values)  # the dataclass's own checks
            except (ValidationError, ValueError, TypeError) as exc:
                problems.append(f"{section[:-1]} entry {k} is not valid ({_short(exc)})")
                continue
            out[section].append(values)
    return out, problems


def write_registry(path: Path, doc: dict) -> None:
    """The whole registry, through a temporary file and a rename (readable by others)."""
    atomic_write_text(path, json.dumps({s: doc.get(s, []) for s in SECTIONS}, indent=1))


def _repair(path: Path, classes: tuple[type, type]) -> dict:
    """Set a damaged registry aside and keep its valid entries (under the registry's lock)."""
    with registry_lock(path):
        if path.is_dir():
            doc, problems = empty_registry(), ["it is a folder"]
        else:
            try:
                doc, problems = parse_registry(path.read_bytes(), classes)
            except FileNotFoundError:
                return empty_registry()
        if not problems:  # repaired meanwhile by another process
            return doc
        kept = sum(len(v) for v in doc.values())
        why = "; ".join(problems[:3]) + (
            f" (and {len(problems) - 3} more problems)" if len(problems) > 3 else ""
        )
        rebuild = (
            (
                f"the {kept} entries that could be read were kept"
                if kept > 1
                else "its one valid entry was kept"
            )
            if kept
            else "a new one is started (the benchmark's built-in agents and pools are unaffected)"
        )
        try:
            set_aside(path, "your agent registry", why, rebuild)
            if kept:
                write_registry(path, doc)
        except OSError as exc:  # a read-only cache folder: use what could be read, change nothing
            warnings.warn(
                f"your agent registry {path} could not be read ({why}) nor set aside "
                f"({exc.strerror or exc}); {kept} entries that could be read are used",
                CorruptStoreWarning,
                stacklevel=2,
            )
        return doc


def read_user_registry(path: Path, classes: tuple[type, type]) -> dict:
    """The valid entries of the user registry at ``path`` (none when it does not exist); a damaged
    file is set aside and repaired (see the module's docstring). Read again only when it changed."""
    try:
        st = path.stat()
    except OSError:  # no registry yet (or no cache folder: nothing registered there)
        return empty_registry()
    stamp = (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
    hit = _READ.get(str(path))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    if path.is_dir():
        return _repair(path, classes)
    try:
        raw = path.read_bytes()
    except OSError:
        return empty_registry()
    doc, problems = parse_registry(raw, classes)
    if problems:
        return _repair(path, classes)
    _READ[str(path)] = (stamp, doc)
    return doc
