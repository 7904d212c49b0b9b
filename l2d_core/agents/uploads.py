"""An agent from a file a user uploads (the Overview page): a prediction file (JSON) or an outcome
log (CSV or JSONL), told apart by the file's extension, each with the checks of its command-line
import (``scripts/import_predictions.py``, ``scripts/import_log.py``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..data.records import DataFormatError, QADataset
from ..stores import atomic_path
from .cache import AgentCache
from .outcome_log import LogReport, import_log
from .prediction_file import MAX_PREDICTION_BYTES, ImportReport, add_agent_from_upload
from .registry import AgentSpec, agent_lock, check_new_agent, register_agent

__all__ = ["UPLOAD_TYPES", "add_log_from_upload", "add_upload"]

UPLOAD_TYPES = ("json", "csv", "jsonl")  # prediction file; outcome logs


def add_log_from_upload(
    agent_id: str,
    dataset: QADataset,
    data: bytes,
    gflops: float,
    name: str = "",
    cache: AgentCache | None = None,
    filename: str = "uploaded.csv",
    replace: bool = False,
) -> LogReport:
    """Make an agent from an uploaded outcome log: keep a copy under ``<cache>/uploads``, check
    it and read it into the agent cache, then register it — under the agent's lock, in that order,
    so a bad log changes nothing. A built-in agent's id is refused, a user agent's unless
    ``replace`` or the same log again (a retry)."""
    from ..paths import cache_dir

    suffix = Path(filename).suffix.lower()
    if suffix not in (".csv", ".jsonl"):
        raise DataFormatError(f"{filename}: an outcome log is a .csv or .jsonl file")
    if len(data) > MAX_PREDICTION_BYTES:
        raise DataFormatError(
            f"{filename} is {len(data):,} bytes; the limit is {MAX_PREDICTION_BYTES:,} bytes"
        )
    agent_id = agent_id.strip()
    final = cache_dir() / "uploads" / f"{dataset.name}-{agent_id}{suffix}"
    spec = AgentSpec(
        id=agent_id,
        dataset=dataset.name,
        kind="outcome_log",
        gflops=gflops,
        name=name or agent_id,
        path=str(final),
        description=f"known by its outcome log {Path(filename).name}",
        source_sha256=hashlib.sha256(data).hexdigest(),
    )
    check_new_agent(spec.id, replace, spec)  # before anything is written
    with agent_lock(spec.id):
        check_new_agent(spec.id, replace, spec)
        with atomic_path(final) as tmp:  # kept only once the log is in the cache
            tmp.write_bytes(data)
            report = import_log(spec, dataset, cache or AgentCache(), tmp)
        register_agent(spec, replace=replace)
    return report


def add_upload(
    agent_id: str, dataset: QADataset, data: bytes, gflops: float, filename: str, replace: bool = False
) -> ImportReport | LogReport:
    """An uploaded file becomes an agent: ``.json`` a prediction file, ``.csv``/``.jsonl`` an
    outcome log."""
    if Path(filename).suffix.lower() == ".json":
        return add_agent_from_upload(agent_id, dataset, data, gflops, filename=filename, replace=replace)
    return add_log_from_upload(agent_id, dataset, data, gflops, filename=filename, replace=replace)
