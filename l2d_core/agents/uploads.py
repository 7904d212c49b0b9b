"""An agent from a file a user uploads (the Overview page): a prediction file (JSON) or an outcome
log (CSV or JSONL), told apart by the file's extension, each with the checks of its command-line
import (``scripts/import_predictions.py``, ``scripts/import_log.py``)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from ..data.records import DataFormatError, QADataset
from ..stores import atomic_path
from .cache import AgentCache
from .catalog import AgentSpec, agent_lock, check_new_agent, register_agent
from .outcome_log import LogReport, import_log
from .prediction_file import MAX_PREDICTION_BYTES, ImportReport, import_predictions
from .prices import PRICE_OPTIONS, TokenPrices, flat_usd

__all__ = ["UPLOAD_TYPES", "MAX_UPLOAD_BYTES", "add_agent_from_upload", "add_log_from_upload", "add_upload"]

UPLOAD_TYPES = ("json", "csv", "jsonl")  # prediction file; outcome logs
MAX_UPLOAD_BYTES = MAX_PREDICTION_BYTES  # as for a file read from disk (a 10k-row log: ~0.5 MB)


def _upload_spec(agent_id: str, dataset: QADataset, data: bytes, suffix: str, **fields) -> AgentSpec:
    from ..paths import cache_dir

    agent_id = agent_id.strip()
    final = cache_dir() / "uploads" / f"{dataset.name}-{agent_id}{suffix}"
    fields["name"] = fields.get("name") or agent_id
    return AgentSpec(
        id=agent_id,
        dataset=dataset.name,
        path=str(final),
        source_sha256=hashlib.sha256(data).hexdigest(),
        **fields,
    )


def _add(spec: AgentSpec, data: bytes, filename: str, replace: bool, read_in: Callable[[Path], object]):
    """Keep a copy of ``data`` at ``spec.path``, read it in (``read_in(copy)``: checks it and fills
    the agent cache), then register ``spec`` — in that order, so a bad file changes nothing — all
    under the agent's lock (one transaction: the registry names the file whose answers the cache
    holds). A built-in agent's id is refused, a user agent's unless ``replace`` or the same file
    again (a retry)."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise DataFormatError(f"{filename} is {len(data):,} bytes; the limit is {MAX_UPLOAD_BYTES:,} bytes")
    check_new_agent(spec.id, replace, spec)  # before anything is written
    with agent_lock(spec.id):
        check_new_agent(spec.id, replace, spec)  # again, now that no other process can register it
        with atomic_path(spec.path) as tmp:  # kept only once its answers are in the cache
            tmp.write_bytes(data)
            report = read_in(tmp)
        register_agent(spec, replace=replace)
    return report


def add_agent_from_upload(
    agent_id: str,
    dataset: QADataset,
    data: bytes,
    gflops: float,
    name: str = "",
    cache: AgentCache | None = None,
    filename: str = "uploaded file",
    replace: bool = False,
    prices: dict | None = None,
) -> ImportReport:
    """Make an agent from an uploaded prediction file {question id: answer} (see :func:`_add`);
    ``prices``: its options of :mod:`.prices`."""
    spec = _upload_spec(agent_id, dataset, data, ".json", gflops=gflops, name=name, options=_priced(prices))
    read_in = lambda tmp: import_predictions(spec, dataset, cache or AgentCache(), tmp, label=filename)  # noqa: E731
    return _add(spec, data, filename, replace, read_in)


def add_log_from_upload(
    agent_id: str,
    dataset: QADataset,
    data: bytes,
    gflops: float,
    name: str = "",
    cache: AgentCache | None = None,
    filename: str = "uploaded.csv",
    replace: bool = False,
    prices: dict | None = None,
) -> LogReport:
    """Make an agent from an uploaded outcome log, CSV or JSONL (see :func:`_add`); ``prices``:
    its options of :mod:`.prices` (a log's own price column comes first)."""
    suffix = Path(filename).suffix.lower()
    if suffix not in (".csv", ".jsonl"):
        raise DataFormatError(f"{filename}: an outcome log is a .csv or .jsonl file")
    description = f"known by its outcome log {Path(filename).name}"
    fields = {"kind": "outcome_log", "gflops": gflops, "name": name, "description": description}
    spec = _upload_spec(agent_id, dataset, data, suffix, options=_priced(prices), **fields)
    return _add(
        spec,
        data,
        filename,
        replace,
        lambda tmp: import_log(spec, dataset, cache or AgentCache(), tmp, label=filename),
    )


def _priced(prices: dict | None) -> dict:
    """The price options given (None values left out), checked: one line for a bad price."""
    options = {k: float(v) for k, v in (prices or {}).items() if v is not None}
    if unknown := set(options) - {*PRICE_OPTIONS, "usd_per_question"}:
        raise ValueError(f"unknown price option(s) {sorted(unknown)}")
    TokenPrices.of(options, "the agent's prices"), flat_usd(options, "the agent's price")
    return options


def add_wide_log_from_upload(data: bytes, filename: str, dataset: str, group: str | None = None):
    """An uploaded log of prompts with one column per model (RouterBench's layout) becomes a
    dataset, its agents and a pool (:func:`~.wide_log.import_wide_log`); returns its report."""
    from ..paths import cache_dir
    from .wide_log import import_wide_log

    if len(data) > MAX_UPLOAD_BYTES:
        raise DataFormatError(f"{filename} is {len(data):,} bytes; the limit is {MAX_UPLOAD_BYTES:,} bytes")
    with atomic_path(cache_dir() / "uploads" / f"wide-{Path(filename).name}") as tmp:
        tmp.write_bytes(data)
        return import_wide_log(tmp, dataset, group=group or None, label=filename, replace=True)


def add_upload(
    agent_id: str,
    dataset: QADataset,
    data: bytes,
    gflops: float,
    filename: str,
    replace: bool = False,
    prices: dict | None = None,
) -> ImportReport | LogReport:
    """An uploaded file becomes an agent: ``.json`` a prediction file, ``.csv``/``.jsonl`` an
    outcome log; ``prices``: dollars per answer or per 1M tokens (:mod:`.prices`)."""
    add = add_agent_from_upload if Path(filename).suffix.lower() == ".json" else add_log_from_upload
    return add(agent_id, dataset, data, gflops, filename=filename, replace=replace, prices=prices)
