"""The agent cache: every agent's answer to every question, scored, on disk (diskcache).

Layout: one diskcache ``Cache`` per (dataset, agent) under ``<cache>/agents/<dataset>/<agent>``,
keyed by question id, values JSON (``JSONDisk``: no pickle). Each record holds the answer,
its SPEC §2 positions, start/end correctness, EM, F1, GFLOPs and where it came from.
Writes are transactions, so a killed writer loses at most the batch in flight and never
corrupts what is already there; readers in other processes see only whole batches.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

import diskcache
import pandas as pd

from ..paths import cache_dir
from ..stores import open_disk_cache

__all__ = ["AgentCache", "RECORD_FIELDS"]

RECORD_FIELDS = (
    "answer",
    "start",
    "end",
    "status",
    "start_ok",
    "end_ok",
    "em",
    "f1",
    "gflops",
    "latency_ms",
    "source",
    "confidence",  # the agent's own confidence signals (model agents; None for prediction files)
)
_META = "\x00meta"
_TABLE = "\x00table"
_GEN = "\x00generation"
_DONE: dict[str, tuple] = {}  # store folder → ((file inode, generation), question ids)


def _check_name(kind: str, name: str) -> str:
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"invalid {kind} name {name!r}")
    return name


def _packed(generation: int, qids: list[str], rows: list[dict]) -> dict:
    """The packed table of one agent: its question ids and one list per record field."""
    return {
        "generation": generation,
        "qids": qids,
        "columns": {f: [r.get(f) for r in rows] for f in RECORD_FIELDS},
    }


class AgentCache:
    """Per dataset × agent × question records. Safe to share across processes and sessions."""

    def __init__(self, directory: str | Path | None = None):
        self.directory = Path(directory) if directory else cache_dir() / "agents"
        self._open: dict[tuple[str, str], diskcache.Cache] = {}

    def _cache(self, dataset: str, agent: str, create: bool = True) -> diskcache.Cache | None:
        """The agent's store (a damaged one is set aside and rebuilt, see ``l2d_core.stores``);
        ``create=False``: None when the agent has nothing on disk (reads never make folders)."""
        key = (_check_name("dataset", dataset), _check_name("agent", agent))
        if key not in self._open:
            path = self.directory / dataset / agent
            if not create and not (path / "cache.db").is_file():
                return None
            self._open[key] = open_disk_cache(
                path,
                f"the answers of agent {agent} on {dataset}",
                "they will be imported again from the agent's prediction file, or answered again "
                "(scripts/precompute_cache.py, scripts/train_agent.py)",
                disk=diskcache.JSONDisk,
                timeout=60,
            )
        return self._open[key]

    def close(self) -> None:
        for c in self._open.values():
            c.close()
        self._open.clear()

    # --- writing -------------------------------------------------------------------------
    def put_many(
        self, dataset: str, agent: str, records: Mapping[str, dict], meta: dict | None = None
    ) -> int:
        """Write ``{qid: record}`` (and optional agent metadata) in one transaction. The first
        write of an empty store (an import) also packs its table (see :meth:`table`), so the
        first read costs one read instead of one per question."""
        c = self._cache(dataset, agent)
        with c.transact():
            gen = int(c.get(_GEN, default=0))
            rows = {qid: {k: rec.get(k) for k in RECORD_FIELDS} for qid, rec in records.items()}
            for qid, row in rows.items():
                c.set(qid, row)
            if meta is not None:
                c.set(_META, {**(c.get(_META) or {}), **meta})
            c.set(_GEN, gen + 1)  # JSONDisk: incr() cannot add to JSON
            if gen == 0:  # nothing was written before: the records are the whole table
                qids = sorted(rows)
                c.set(_TABLE, _packed(gen + 1, qids, [rows[q] for q in qids]))
        return len(records)

    def set_meta(self, dataset: str, agent: str, **meta) -> None:
        c = self._cache(dataset, agent)
        with c.transact():
            c.set(_META, {**(c.get(_META) or {}), **meta})

    def delete(self, dataset: str, agent: str) -> None:
        """Remove one agent's records (explicit user action only)."""
        _check_name("dataset", dataset), _check_name("agent", agent)
        c = self._open.pop((dataset, agent), None)
        if c is not None:
            c.close()
        _DONE.pop(str(self.directory / dataset / agent), None)
        shutil.rmtree(self.directory / dataset / agent, ignore_errors=True)

    # --- reading -------------------------------------------------------------------------
    def has(self, dataset: str, agent: str) -> bool:
        _check_name("dataset", dataset), _check_name("agent", agent)
        return (self.directory / dataset / agent / "cache.db").is_file() and bool(
            self.done_ids(dataset, agent)
        )

    def agents(self, dataset: str) -> list[str]:
        root = self.directory / _check_name("dataset", dataset)
        return sorted(p.name for p in root.iterdir() if (p / "cache.db").is_file()) if root.is_dir() else []

    def meta(self, dataset: str, agent: str) -> dict:
        c = self._cache(dataset, agent, create=False)
        return dict(c.get(_META) or {}) if c is not None else {}

    def get(self, dataset: str, agent: str, qid: str) -> dict | None:
        c = self._cache(dataset, agent, create=False)
        return c.get(qid) if c is not None else None

    def done_ids(self, dataset: str, agent: str) -> set[str]:
        """Question ids already cached (what a resumed precompute skips).

        Remembered per process for the store's file and its current generation of writes (a
        write by any process moves it on), so asking again costs one small read, not one per
        question.
        """
        c = self._cache(dataset, agent, create=False)
        if c is None:
            return set()
        folder = self.directory / dataset / agent
        stamp = ((folder / "cache.db").stat().st_ino, int(c.get(_GEN, default=0)))
        if _DONE.get(str(folder), (None,))[0] != stamp:
            packed = c.get(_TABLE)
            if packed is not None and packed.get("generation") == stamp[1]:
                ids = frozenset(packed["qids"])
            else:
                ids = frozenset(k for k in c.iterkeys() if not k.startswith("\x00"))
            _DONE[str(folder)] = (stamp, ids)
        return set(_DONE[str(folder)][1])

    def ids_with(self, dataset: str, agent: str, field: str) -> set[str]:
        """Question ids whose record has ``field`` set (e.g. answers recorded with confidence)."""
        t = self.table(dataset, agent)
        return set(t.index[t[field].notna()]) if field in t else set()

    def table(self, dataset: str, agent: str) -> pd.DataFrame:
        """All records of one agent as a DataFrame indexed by question id.

        Packed once per generation of writes and stored beside the records, so re-opening
        the cache costs one read instead of one per question.
        """
        c = self._cache(dataset, agent, create=False)
        if c is None:
            return pd.DataFrame(columns=list(RECORD_FIELDS), index=pd.Index([], name="qid"))
        gen = c.get(_GEN, default=0)
        packed = c.get(_TABLE)
        if packed is None or packed.get("generation") != gen:
            qids = sorted(self.done_ids(dataset, agent))
            packed = _packed(gen, qids, [c.get(q) for q in qids])
            c.set(_TABLE, packed)
        df = pd.DataFrame(packed["columns"], index=pd.Index(packed["qids"], name="qid"))
        return df

    def summary(self, dataset: str, agents: Iterable[str] | None = None) -> pd.DataFrame:
        """One row per cached agent: questions, EM, F1 (percent over cached questions), GFLOPs."""
        rows = []
        for a in agents if agents is not None else self.agents(dataset):
            t = self.table(dataset, a)
            m = self.meta(dataset, a)
            rows.append(
                {
                    "agent": a,
                    "questions": len(t),
                    "em": 100 * t["em"].mean(),
                    "f1": 100 * t["f1"].mean(),
                    "gflops": t["gflops"].astype(float).mean(),
                    "gflops_source": m.get("gflops_source", ""),
                    "missing": int((t["status"] == "missing").sum()),
                    "source": Path(m.get("source", "")).name,
                }
            )
        return pd.DataFrame(rows)
