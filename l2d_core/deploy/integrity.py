"""Checks of a router artifact beyond each field's own range (issue 38): the facts written twice
agree — the API would say one, the decisions follow the other —, what the routing reads is there,
and every file read is a regular file under a size cap (a FIFO in place of the weights must not
hang a server at startup)."""

from __future__ import annotations

import math
import stat
from pathlib import Path

__all__ = ["MAX_ARTIFACT_FILE_BYTES", "copies_disagree", "check_files", "regular_file_problem"]

MAX_ARTIFACT_FILE_BYTES = 512 * 1024 * 1024  # a fast-mode head is a few MB


def _same(a, b) -> bool:
    return len(a) == len(b) and all(
        math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-12) for x, y in zip(a, b)
    )


def copies_disagree(m, raw: dict, pool) -> str | None:
    """The first disagreement in a validated manifest ``m`` (``raw``: the same as read), else None."""
    from ..data import dataset_names

    config = raw["config"]
    if m.dataset not in dataset_names():
        return f"dataset: {m.dataset[:60]!r} is not a dataset of this installation"
    named = [("pool.dataset", pool.dataset)] + [
        (f"agents.{k}.dataset", a.dataset) for k, a in m.agents.items()
    ]
    for where, dataset in named:
        if dataset != m.dataset:
            return f"{where}: {dataset[:60]!r}, but the router routes dataset {m.dataset[:60]!r}"
    if m.needs.answers and m.needs.answers[0] != pool.main:
        return (
            f"needs.answers: it reads {m.needs.answers[0]!r} first, not the pool's main agent {pool.main!r}"
        )
    saved = config.get("costs")
    if isinstance(saved, dict) and not all(_same(saved[k], getattr(m.costs, k)) for k in ("alpha", "beta")):
        return f"config.costs {saved} and costs {raw['costs']} disagree (the decisions follow config.costs)"
    follower = config.get("follower")
    if (
        m.budget is not None
        and isinstance(follower, dict)
        and not _same([follower["target"]], [m.budget.target])
    ):
        return f"config.follower.target {follower['target']} and budget.target {m.budget.target} disagree"
    if m.needs.embeddings and not isinstance(config.get("encoder"), dict):
        return "config.encoder: missing, but needs.embeddings is true (the router reads its embeddings)"
    if config.get("set") is not None and not config.get("main_fingerprint"):
        return (
            "config.main_fingerprint: missing; it identifies the main agent whose answers and confidence "
            "the router was trained on, and is checked on load"
        )
    return None


def regular_file_problem(path: Path, limit: int | None = None) -> str | None:
    """Why ``path`` must not be read (not a regular file, or over ``limit`` bytes), else None;
    a link is followed to what it names."""
    try:
        st = path.stat()
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    limit = MAX_ARTIFACT_FILE_BYTES if limit is None else limit
    if st.st_size > limit:
        return f"it is {st.st_size:,} bytes; the limit is {limit:,}"
    return None


def check_files(folder: Path) -> tuple[str, str] | None:
    """``(file, problem)`` for the first entry under ``folder`` that is not a regular file under the
    size cap (a folder is walked, not read), else None."""
    for path in sorted(folder.rglob("*")):
        if path.is_dir() and not path.is_symlink():
            continue
        problem = regular_file_problem(path)
        if problem:
            return path.as_posix(), problem
    return None
