"""The agent cache's packed layout: one segment per write, latest write wins, older stores read."""

from __future__ import annotations

import diskcache
import pandas as pd

from l2d_core.agents.cache import RECORD_FIELDS, AgentCache


def _rec(i: int, answer: str | None = None) -> dict:
    return {f: None for f in RECORD_FIELDS} | {"answer": answer or f"a{i}", "em": float(i % 2), "gflops": 1.0}


def test_a_question_written_again_is_answered_by_its_latest_write(tmp_path):
    cache = AgentCache(tmp_path)
    cache.put_many("d", "a", {f"q{i}": _rec(i) for i in range(3)})
    cache.put_many("d", "a", {"q1": _rec(1, "again"), "q3": _rec(3)})
    assert cache.get("d", "a", "q1")["answer"] == "again"
    assert cache.done_ids("d", "a") == {"q0", "q1", "q2", "q3"}
    other = AgentCache(tmp_path)  # what another process reads
    t = other.table("d", "a")
    assert list(t.index) == ["q0", "q1", "q2", "q3"]
    assert list(t["answer"]) == ["a0", "again", "a2", "a3"]


def test_an_import_is_one_write_not_one_per_question(tmp_path):
    cache = AgentCache(tmp_path)
    cache.put_many("d", "a", {f"q{i}": _rec(i) for i in range(500)}, meta={"kind": "file"})
    with diskcache.Cache(str(tmp_path / "d" / "a"), disk=diskcache.JSONDisk) as raw:
        assert len(list(raw.iterkeys())) == 3  # one segment, the metadata, the generation


def test_a_store_written_per_question_by_an_earlier_version_is_read_then_packed(tmp_path):
    folder = tmp_path / "d" / "a"
    with diskcache.Cache(str(folder), disk=diskcache.JSONDisk) as raw:
        for i in range(4):
            raw.set(f"q{i}", _rec(i))
        raw.set("\x00meta", {"kind": "file"})
        raw.set("\x00generation", 1)
        raw.set("\x00table", {"generation": 1, "qids": ["q0"], "columns": {}})  # the old packed copy
    cache = AgentCache(tmp_path)
    expected = pd.DataFrame(
        [_rec(i) for i in range(4)], index=pd.Index([f"q{i}" for i in range(4)], name="qid")
    )
    pd.testing.assert_frame_equal(cache.table("d", "a"), expected[list(RECORD_FIELDS)])
    assert cache.get("d", "a", "q2") == _rec(2) and cache.meta("d", "a") == {"kind": "file"}
    cache.put_many("d", "a", {"q2": _rec(2, "newer")})
    assert AgentCache(tmp_path).get("d", "a", "q2")["answer"] == "newer"
    cache.close()
    with diskcache.Cache(str(folder), disk=diskcache.JSONDisk) as raw:
        assert not [k for k in raw.iterkeys() if not k.startswith("\x00")]  # no per-question keys left


def test_a_snapshot_reads_each_agent_once_and_ignores_later_writes(tmp_path, monkeypatch):
    """A served router's answers (``snapshot=True``) are read once: no store access per question,
    and what another process writes later is not seen; a plain cache sees it."""
    AgentCache(tmp_path).put_many("squad11", "a", {"q1": {"answer": "one"}})
    held, plain = AgentCache(tmp_path, snapshot=True), AgentCache(tmp_path)
    assert held.get("squad11", "a", "q1")["answer"] == "one" == plain.get("squad11", "a", "q1")["answer"]
    AgentCache(tmp_path).put_many("squad11", "a", {"q1": {"answer": "two"}, "q2": {"answer": "new"}})
    reads = []
    real = diskcache.Cache.get
    monkeypatch.setattr(diskcache.Cache, "get", lambda *a, **k: reads.append(a[1]) or real(*a, **k))
    assert held.get("squad11", "a", "q1")["answer"] == "one" and held.get("squad11", "a", "q2") is None
    assert reads == []
    assert (
        plain.get("squad11", "a", "q1")["answer"] == "two"
        and plain.get("squad11", "a", "q2")["answer"] == "new"
    )


def test_a_replacing_write_drops_the_questions_it_no_longer_holds(tmp_path):
    cache = AgentCache(tmp_path)
    cache.put_many("d", "a", {f"q{i}": _rec(i) for i in range(3)})
    cache.put_many("d", "a", {"q1": _rec(1, "again")}, replace=True)
    assert cache.done_ids("d", "a") == {"q1"} and cache.get("d", "a", "q1")["answer"] == "again"
    assert AgentCache(tmp_path).done_ids("d", "a") == {"q1"}  # on disk, for another process too
