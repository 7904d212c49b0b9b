"""Agent imports and embeddings reused across pytest runs, under a content key.

Both are derived from the data files and a few modules alone: a builtin prediction file or log
scored by the scoring code, a text embedded by the encoder (each embedding is stored under the
encoder's fingerprint and the text already). So one folder per key — the sha256 of every data
file and of the modules that make them (:data:`CODE`) — under ``L2D_TEST_SEED_DIR`` (default:
the user's cache folder, never the project's ``cache/``) holds them for every later run:

- ``embeddings/`` is shared live by every session (and every pytest-xdist worker) of that key:
  the encoder encodes into a store under its lock, so a second worker (or a background job of
  one) waits, then finds them stored;
- ``agents/<dataset>/<agent>`` holds builtin agents' imports: a session starts with a copy
  (its own registrations stay its own) and gives back the builtin agents it imported anew.

A changed data file or scoring module is another key: nothing stale is ever read."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from filelock import FileLock

ROOT = Path(__file__).resolve().parent.parent
CODE = (
    "l2d_core/qa",
    "l2d_core/data",
    "l2d_core/agents/builtin.json",
    "l2d_core/agents/cache.py",
    "l2d_core/agents/confidence.py",
    "l2d_core/agents/outcome_log.py",
    "l2d_core/agents/prediction_file.py",
    "l2d_core/routers/encoder.py",
)


def seed_root() -> Path:
    env = os.environ.get("L2D_TEST_SEED_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("l2d-qa-routing")) / "test-seed"


def _files(path: Path):
    if not path.is_dir():
        return [path] if path.is_file() else []
    return sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def content_key(data_root: Path, code_root: Path = ROOT, code=CODE) -> str:
    """The sha256 of every data file and every module of ``code`` (names and bytes), 16 digits."""
    h = hashlib.sha256()
    for base, paths in ((data_root, [data_root]), (code_root, [code_root / c for c in code])):
        for p in (f for path in paths for f in _files(path)):
            h.update(str(p.relative_to(base)).encode() + b"\0")
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:16]


def builtin_agents() -> set[str]:
    """The builtin agents: their answers come from the data files and the scoring code alone."""
    doc = json.loads((ROOT / "l2d_core" / "agents" / "builtin.json").read_text(encoding="utf-8"))
    return {a["id"] for a in doc["agents"]}


def seed(session_cache: Path, folder: Path, run_folder: Path | None = None) -> None:
    """Start ``session_cache`` from the seed ``folder``: its embeddings shared, its agents copied;
    with ``run_folder`` (the pytest-xdist workers' common folder of this run), the router fits
    shared by the workers of this run: a pool one worker fitted, the other loads."""
    (folder / "embeddings").mkdir(parents=True, exist_ok=True)
    (session_cache / "embeddings").symlink_to(folder / "embeddings", target_is_directory=True)
    if run_folder is not None:
        (run_folder / "routers").mkdir(parents=True, exist_ok=True)
        (session_cache / "routers").symlink_to(run_folder / "routers", target_is_directory=True)
    with FileLock(str(folder / "agents.lock"), timeout=600):
        if (folder / "agents").is_dir():
            shutil.copytree(folder / "agents", session_cache / "agents", dirs_exist_ok=True)


# a cache's folders that hold only what data and code derive under content keys (``routers``: one
# folder per fit, each renamed into place whole, so the workers of one run can share it live)
DERIVED = ("routers", "router_scores")


def seed_from(session_cache: Path, path: Path) -> None:
    """Start the cache ``path`` from a session's: its embeddings shared, its builtin agents'
    imports and its :data:`DERIVED` folders copied (registrations, jobs and runs are not)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "embeddings").symlink_to((session_cache / "embeddings").resolve(), target_is_directory=True)
    builtin = builtin_agents()
    for store in sorted((session_cache / "agents").glob("*/*")):
        if store.is_dir() and store.name in builtin:
            shutil.copytree(store, path / "agents" / store.parent.name / store.name)
    for name in DERIVED:  # not the fits being written (``.<key>.*``: renamed into place once whole)
        if (session_cache / name).is_dir():
            shutil.copytree(session_cache / name, path / name, ignore=shutil.ignore_patterns(".*"))


def give_back(path: Path, session_cache: Path) -> None:
    """Give a session's cache what the cache ``path`` (started by :func:`seed_from`) derived
    anew in its :data:`DERIVED` folders: router fits as whole folders, validation scores by key."""
    from diskcache import Cache

    for name in DERIVED:
        if not (path / name).is_dir():
            continue
        if (path / name / "cache.db").is_file():  # a diskcache store: entry by entry
            with Cache(str(path / name)) as mine, Cache(str(session_cache / name)) as theirs:
                for key in mine:
                    if key not in theirs:
                        theirs.set(key, mine[key])
            continue
        for entry in (path / name).iterdir():
            target = session_cache / name / entry.name
            if entry.is_dir() and not entry.name.startswith(".") and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)  # a run without workers has none yet
                part = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=target.parent))
                shutil.copytree(entry, part, dirs_exist_ok=True)
                try:
                    os.replace(part, target)
                except OSError:  # the other worker gave the same fit back first
                    shutil.rmtree(part, ignore_errors=True)


def keep(session_cache: Path, folder: Path) -> list[str]:
    """Give the seed ``folder`` the builtin agents this session imported that it lacks (each
    copied whole, then renamed into place); returns them as ``dataset/agent``."""
    kept, builtin = [], builtin_agents()
    with FileLock(str(folder / "agents.lock"), timeout=600):
        for store in sorted((session_cache / "agents").glob("*/*")):
            target = folder / "agents" / store.parent.name / store.name
            if store.name not in builtin or not store.is_dir() or target.exists():
                continue
            tmp = target.with_name(f".{store.name}.part")
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(store, tmp)
            os.replace(tmp, target)
            kept.append(f"{store.parent.name}/{store.name}")
    return kept
