"""The agent cache: every agent's answer to every question, scored, on disk (diskcache).

Layout: one diskcache ``Cache`` per (dataset, agent) under ``<cache>/agents/<dataset>/<agent>``,
values JSON (``JSONDisk``: no pickle). Each record holds the answer, its SPEC §2 positions,
start/end correctness, EM, F1, GFLOPs and where it came from.

Records are written in packed segments, one per write (a column per record field), so an
import of a whole prediction file is one write and reading an agent back is one read per
segment, not one per question. Each write is a transaction, so a killed writer loses at most
the batch in flight and never corrupts what is already there; readers in other processes see
only whole batches. Stores written per question by earlier versions are read and packed once.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import diskcache

from ..paths import cache_dir
from ..stores import open_disk_cache

if TYPE_CHECKING:
    import pandas as pd

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
    "usd",  # the answer's price in dollars, where its log or its token prices give one (else None)
    "tokens",  # [prompt, reply] tokens as an LLM endpoint counted them (else None)
)
_META = "\x00meta"
_GEN = "\x00generation"
_SEG = "\x00segment:"  # + the write's generation, zero-padded: segments sort in write order
_LEGACY_TABLE = "\x00table"  # the packed copy earlier versions kept beside per-question records


@dataclass
class _Records:
    """What :meth:`AgentCache._read` read from one store, for its (file inode, generation)
    ``stamp``: the question ids, one list per record field, each id's row; the DataFrame of
    :meth:`AgentCache.table` is built on first use (the routing data reads the lists)."""

    stamp: tuple
    qids: list[str]
    columns: dict[str, list]
    at: dict[str, int]
    _frame: pd.DataFrame | None = None

    def frame(self) -> pd.DataFrame:
        if self._frame is None:
            import pandas as pd  # here, not at the top: the first view's tiles import no pandas

            index = pd.Index(self.qids, name="qid")
            self._frame = pd.DataFrame(self.columns, index=index, columns=list(RECORD_FIELDS)).sort_index()
        return self._frame


# store folder → what :meth:`AgentCache._read` read there
_READ: dict[str, _Records] = {}


def _check_name(kind: str, name: str) -> str:
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"invalid {kind} name {name!r}")
    return name


def _packed(rows: Mapping[str, Mapping]) -> dict:
    """Records ``{qid: record}`` packed as their question ids and one list per record field."""
    qids = list(rows)
    return {"qids": qids, "columns": {f: [rows[q].get(f) for q in qids] for f in RECORD_FIELDS}}


def _unpacked(packed: Mapping) -> dict[str, dict]:
    cols = [packed["columns"].get(f) or [None] * len(packed["qids"]) for f in RECORD_FIELDS]
    return {q: dict(zip(RECORD_FIELDS, values)) for q, *values in zip(packed["qids"], *cols)}


class AgentCache:
    """Per dataset × agent × question records. Safe to share across processes and sessions.

    ``snapshot=True``: each agent's records are read once and later writes are not looked for
    (a served router reads the answers recorded when it started, with no disk access per query).
    """

    def __init__(self, directory: str | Path | None = None, snapshot: bool = False):
        self.directory = Path(directory) if directory else cache_dir() / "agents"
        self._open: dict[tuple[str, str], diskcache.Cache] = {}
        self._held: dict[tuple[str, str], _Records] | None = {} if snapshot else None

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
        self,
        dataset: str,
        agent: str,
        records: Mapping[str, dict],
        meta: dict | None = None,
        replace: bool = False,
    ) -> int:
        """Write ``{qid: record}`` (and optional agent metadata) as one packed segment, in one
        transaction; a question written again is answered by its latest write. ``replace``: these
        records are all the agent's (a whole log read in again): earlier ones go in the same
        transaction, so a question the log no longer holds is not kept."""
        c = self._cache(dataset, agent)
        with c.transact():
            if replace:
                for key in [k for k in c.iterkeys() if k.startswith(_SEG)]:
                    c.delete(key)
            gen = int(c.get(_GEN, default=0)) + 1  # JSONDisk: incr() cannot add to JSON
            if records:
                c.set(f"{_SEG}{gen:010d}", _packed(records))
            if meta is not None:
                c.set(_META, {**(c.get(_META) or {}), **meta})
            c.set(_GEN, gen)
        return len(records)

    def set_meta(self, dataset: str, agent: str, **meta) -> None:
        c = self._cache(dataset, agent)
        with c.transact():
            c.set(_META, {**(c.get(_META) or {}), **meta})

    def delete(self, dataset: str, agent: str) -> None:
        """Remove one agent's records (a user's explicit action, or a training run whose answers
        were made at another no-answer threshold than its agent's)."""
        _check_name("dataset", dataset), _check_name("agent", agent)
        c = self._open.pop((dataset, agent), None)
        if c is not None:
            c.close()
        _READ.pop(str(self.directory / dataset / agent), None)
        shutil.rmtree(self.directory / dataset / agent, ignore_errors=True)

    # --- reading -------------------------------------------------------------------------
    def _read(self, dataset: str, agent: str) -> _Records | None:
        """Every record, read once per generation of writes (a write by any process moves it
        on), or once at all for a snapshot; None when the agent has nothing on disk."""
        if self._held is None:
            return self._read_current(dataset, agent)
        if (dataset, agent) not in self._held:
            hit = self._read_current(dataset, agent)
            if hit is None:
                return None
            self._held[(dataset, agent)] = hit
        return self._held[(dataset, agent)]

    def _read_current(self, dataset: str, agent: str) -> _Records | None:
        c = self._cache(dataset, agent, create=False)
        if c is None:
            return None
        folder = self.directory / dataset / agent
        stamp = ((folder / "cache.db").stat().st_ino, int(c.get(_GEN, default=0)))
        hit = _READ.get(str(folder))
        if hit is not None and hit.stamp == stamp:
            return hit
        keys = list(c.iterkeys())
        if any(not k.startswith("\x00") for k in keys):
            keys = _pack_legacy(c)
            stamp = (stamp[0], int(c.get(_GEN, default=0)))
        segments = sorted(k for k in keys if k.startswith(_SEG))
        qids: list[str] = []
        columns: dict[str, list] = {f: [] for f in RECORD_FIELDS}
        at: dict[str, int] = {}
        for key in segments:
            seg = c.get(key) or {"qids": [], "columns": {}}
            if not qids:  # the first segment (most agents have one): its columns as they are
                n = len(seg["qids"])
                qids = list(seg["qids"])
                columns = {f: list(seg["columns"].get(f) or [None] * n) for f in RECORD_FIELDS}
                at = {q: i for i, q in enumerate(qids)}
                continue
            for q, row in _unpacked(seg).items():
                if q in at:
                    for f in RECORD_FIELDS:
                        columns[f][at[q]] = row[f]
                else:
                    at[q] = len(qids)
                    qids.append(q)
                    for f in RECORD_FIELDS:
                        columns[f].append(row[f])
        _READ[str(folder)] = hit = _Records(stamp, qids, columns, at)
        return hit

    def has(self, dataset: str, agent: str) -> bool:
        """Whether the agent has any answer on disk (its answers are not read)."""
        c = self._cache(dataset, agent, create=False)
        return c is not None and any(k not in (_META, _GEN) for k in c.iterkeys())

    def agents(self, dataset: str) -> list[str]:
        root = self.directory / _check_name("dataset", dataset)
        return sorted(p.name for p in root.iterdir() if (p / "cache.db").is_file()) if root.is_dir() else []

    def meta(self, dataset: str, agent: str) -> dict:
        c = self._cache(dataset, agent, create=False)
        return dict(c.get(_META) or {}) if c is not None else {}

    def get(self, dataset: str, agent: str, qid: str) -> dict | None:
        read = self._read(dataset, agent)
        if read is None or qid not in read.at:
            return None
        i = read.at[qid]
        return {f: read.columns[f][i] for f in RECORD_FIELDS}

    def done_ids(self, dataset: str, agent: str) -> set[str]:
        """Question ids already cached (what a resumed precompute skips)."""
        read = self._read(dataset, agent)
        return set(read.qids) if read is not None else set()

    def ids_with(self, dataset: str, agent: str, field: str) -> set[str]:
        """Question ids whose record has ``field`` set (e.g. answers recorded with confidence)."""
        t = self.table(dataset, agent)
        return set(t.index[t[field].notna()]) if field in t else set()

    def table(self, dataset: str, agent: str) -> pd.DataFrame:
        """All records of one agent as a DataFrame indexed by question id (sorted)."""
        read = self._read(dataset, agent)
        if read is None:
            import pandas as pd

            return pd.DataFrame(columns=list(RECORD_FIELDS), index=pd.Index([], name="qid"))
        return read.frame().copy()

    def rows(
        self, dataset: str, agent: str, qids: Sequence[str], fields: Sequence[str] = RECORD_FIELDS
    ) -> tuple[list[bool], dict[str, list]]:
        """The records of ``qids`` in their order, without a DataFrame: whether the agent has
        each one, and the values of each of ``fields`` (None where it has none)."""
        read = self._read(dataset, agent)
        if read is None:
            return [False] * len(qids), {f: [None] * len(qids) for f in fields}
        if read.qids == list(qids):  # in the dataset's order already (a whole file read in)
            return [True] * len(qids), {f: read.columns[f] for f in fields}
        rows = [read.at.get(q) for q in qids]
        pick = lambda col: [None if i is None else col[i] for i in rows]  # noqa: E731
        return [i is not None for i in rows], {f: pick(read.columns[f]) for f in fields}

    def summary(self, dataset: str, agents: Iterable[str] | None = None) -> pd.DataFrame:
        """One row per cached agent: questions, EM, F1 (percent over cached questions), GFLOPs."""
        import pandas as pd

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


def _pack_legacy(c: diskcache.Cache) -> list[str]:
    """Pack a store written one key per question (earlier versions) into one segment, in one
    transaction; returns the store's keys after."""
    with c.transact():
        legacy = [k for k in c.iterkeys() if not k.startswith("\x00")]
        if legacy:
            gen = int(c.get(_GEN, default=0))
            c.set(f"{_SEG}{0:010d}", _packed({q: c.get(q) or {} for q in sorted(legacy)}))
            for k in (*legacy, _LEGACY_TABLE):
                c.delete(k)
            c.set(_GEN, gen + 1)
        return list(c.iterkeys())
