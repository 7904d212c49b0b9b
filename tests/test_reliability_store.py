"""Issue 26, "nothing lost, no traceback": the registry and the agent cache agree (racing imports),
a damaged registry stops nothing, a refused import writes nothing, a cache folder that is a file
is one clear line, files are written readable by others, and nothing on disk is ever unpickled."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from l2d_core.agents import AgentSpec, get_agent, get_pool, import_predictions, list_agents, register_agent
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.catalog import user_registry_path
from l2d_core.agents.read_in import ensure_cached
from l2d_core.background import Reporter, job_file, record_duration
from l2d_core.data import DataFormatError, load_dataset
from l2d_core.deploy.artifact import MANIFEST, write_manifest
from l2d_core.paths import CacheDirError, cache_dir
from l2d_core.routers.encoder import embedding_store
from l2d_core.stores import (
    CorruptStoreWarning,
    SafeDisk,
    UnsafeRowError,
    atomic_write_bytes,
    atomic_write_text,
    open_disk_cache,
)

ROOT = Path(__file__).resolve().parent.parent
IMPORT = str(ROOT / "scripts" / "import_predictions.py")


@pytest.fixture(scope="module")
def squad11(real_data):
    return load_dataset("squad11")


@pytest.fixture(scope="module")
def small(squad11):
    return squad11.subset(squad11.qids[:60], name="squad11")


def _files(tmp_path: Path, ds, n: int = 40) -> tuple[Path, Path]:
    """Two prediction files for the same questions: gold answers (a), wrong answers (b)."""
    records = list(ds)[:n]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({r.qid: r.answers[0] for r in records}))
    b.write_text(json.dumps({r.qid: "no such answer anywhere" for r in records}))
    return a, b


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _env(cache: Path) -> dict:
    return {**os.environ, "L2D_CACHE_DIR": str(cache)}


# ------------------------------------------------------------------- 1. racing imports of one id
def test_racing_imports_of_one_new_id_leave_registry_and_cache_agreeing(fresh_cache, tmp_path, small):
    a, b = _files(tmp_path, small)
    for agent in ("r", "s"):  # twice: the race goes either way
        procs = [
            subprocess.Popen(
                [sys.executable, IMPORT, "--file", str(f), "--agent", agent, "--gflops", str(g)],
                cwd=tmp_path,
                env=_env(fresh_cache),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for f, g in ((a, 1), (b, 2))
        ]
        outs = [p.communicate(timeout=300) for p in procs]
        codes = [p.returncode for p in procs]
        assert sorted(codes) == [0, 2], outs
        loser = outs[codes.index(2)][1]
        assert f"you already have an agent '{agent}'" in loser and "Traceback" not in loser
        winner = (a, b)[codes.index(0)]
        spec = get_agent(agent)
        assert Path(spec.path) == winner.resolve() and spec.gflops == (1, 2)[codes.index(0)]
        assert spec.source_sha256 == _sha(winner)
        cache = AgentCache()
        assert cache.meta("squad11", agent)["sha256"] == _sha(winner)
        answers = cache.table("squad11", agent)["answer"].dropna().to_dict()
        assert answers == json.loads(winner.read_text())  # the registered file's answers, not the other's


def test_answers_of_another_file_are_never_used(fresh_cache, tmp_path, small):
    a, b = _files(tmp_path, small)
    spec = AgentSpec("mine", "squad11", gflops=1.0, path=str(a), source_sha256=_sha(a))
    cache = AgentCache()
    import_predictions(spec, small, cache)
    register_agent(spec)
    # the cache ends up holding b's answers (what an unlocked race, or an older version, left)
    import_predictions(AgentSpec("mine", "squad11", gflops=1.0, path=str(b)), small, cache)
    assert cache.meta("squad11", "mine")["sha256"] == _sha(b)
    ensure_cached(small, [get_agent("mine")], cache)  # the registry is checked against the cache
    assert cache.meta("squad11", "mine")["sha256"] == _sha(a)
    assert cache.table("squad11", "mine")["answer"].dropna().to_dict() == json.loads(a.read_text())
    # the registered file changed since: named, and its other answers never used
    a.write_text(b.read_text())
    import_predictions(AgentSpec("mine", "squad11", gflops=1.0, path=str(b)), small, cache)
    with pytest.raises(DataFormatError, match="has changed since the agent was registered"):
        ensure_cached(small, [get_agent("mine")], cache)


# -------------------------------------------------------------------- 2. a damaged user registry
TRUNCATED = (
    '{"agents": [{"id": "kept-1", "dataset": "squad11", "gflops": 1.5}, '
    '{"id": "kept-2", "dataset": "squad11", "gflops": 2.0}, {"id": "lost", "dataset": "squ'
)
DAMAGED = {
    "garbage": (b"this is not json {{{", set(), set()),
    "truncated": (TRUNCATED.encode(), {"kept-1", "kept-2"}, set()),
    "list": (b"[]", set(), set()),
    "binary": (bytes(range(256)) * 4, set(), set()),
    "agents-null": (
        b'{"agents": null, "pools": [{"name": "mine", "dataset": "squad11", "main": "match-lstm", '
        b'"experts": ["bert-ens"]}]}',
        set(),
        {"mine"},
    ),
    # issue 38 item 6: read through the depth bound (a RecursionError traceback before)
    "deep": (b'{"agents": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}", set(), set()),
    "deep-after-valid": (
        b'{"agents": [{"id": "kept-1", "dataset": "squad11", "gflops": 1.5}, '
        + b"[" * 100_000
        + b"]" * 100_000
        + b"]}",
        {"kept-1"},
        set(),
    ),
    "bad-entries": (
        b'{"agents": [{"idx": 1}, {"id": "g", "dataset": "squad11", "gflops": "1"}, '
        b'{"id": "ok", "dataset": "squad11", "gflops": 3}]}',
        {"ok"},
        set(),
    ),
}


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory, real_data):
    """One cache for the damaged-registry runs (the built-in agents are read in once)."""
    return tmp_path_factory.mktemp("damaged_registry")


@pytest.mark.parametrize("case", list(DAMAGED))
def test_damaged_registry_is_set_aside_and_valid_entries_kept(case, fresh_cache):
    raw, agents, pools = DAMAGED[case]
    fresh_cache.mkdir(parents=True, exist_ok=True)
    (fresh_cache / "registry.json").write_bytes(raw)
    with pytest.warns(CorruptStoreWarning, match="your agent registry .*registry.json could not be read"):
        ids = {a.id for a in list_agents()}
    assert {"match-lstm", "bert-ens"} | agents <= ids and "lost" not in ids and "g" not in ids
    assert get_pool("P3").agent_ids == ("match-lstm", "rnet-plus", "bert-ens")
    for name in pools:
        assert get_pool(name).experts == ("bert-ens",)
    moved = list((fresh_cache / "corrupt").iterdir())
    assert len(moved) == 1 and moved[0].read_bytes() == raw  # kept as it was, never deleted
    if agents or pools:
        doc = json.loads((fresh_cache / "registry.json").read_text())
        assert {a["id"] for a in doc["agents"]} == agents and {p["name"] for p in doc["pools"]} == pools
    else:
        assert not (fresh_cache / "registry.json").exists()
    register_agent(AgentSpec("after", "squad11", gflops=1.0))  # registering works again
    assert get_agent("after").gflops == 1.0


@pytest.mark.parametrize("case", list(DAMAGED))
def test_scripts_run_with_a_damaged_registry(case, shared_cache, monkeypatch, capsys):
    import evaluate
    import export_router

    monkeypatch.setenv("L2D_CACHE_DIR", str(shared_cache))
    for parse in (evaluate.parse_args, export_router.parse_args):
        (shared_cache / "registry.json").write_bytes(DAMAGED[case][0])
        with pytest.raises(SystemExit) as exit_:
            parse(["--help"])
        assert exit_.value.code == 0
        assert "P3" in capsys.readouterr().out
        assert (shared_cache / "registry.json").read_bytes() == DAMAGED[case][0], "--help reads no registry"
    with pytest.warns(CorruptStoreWarning):
        assert evaluate.main(["--pool", "P3", "--policy", "random", "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 0 < out["em"] <= 100 and set(out["allocation"]) == {"match-lstm", "rnet-plus", "bert-ens"}


# --------------------------------------------------------- 5. a refused import writes nothing
def test_import_checks_everything_before_writing_and_a_retry_is_idempotent(fresh_cache, tmp_path, small):
    import import_predictions as cli

    a, b = _files(tmp_path, small)
    base = ["--file", str(a), "--agent", "x2", "--gflops", "1"]
    assert cli.main([*base, "--pool", "P3", "--main", "match-lstm"]) == 2  # a built-in pool's name
    assert cli.main([*base, "--pool", "P3b", "--main", "nosuch"]) == 2  # an unknown main agent
    assert cli.main([*base, "--pool", "P3b", "--main", "bidaf-elmo"]) == 2  # another dataset's agent
    assert not user_registry_path().exists() and not AgentCache().has("squad11", "x2")
    assert cli.main([*base, "--pool", "P3b", "--main", "match-lstm"]) == 0
    assert cli.main([*base, "--pool", "P3b", "--main", "match-lstm"]) == 0  # the same retry: no conflict
    doc = json.loads(user_registry_path().read_text())
    assert [e["id"] for e in doc["agents"]] == ["x2"] and [e["name"] for e in doc["pools"]] == ["P3b"]
    assert get_pool("P3b").agent_ids == ("match-lstm", "x2")
    # another file, other GFLOPs or another pool under the same names still need --replace
    assert cli.main(["--file", str(b), "--agent", "x2", "--gflops", "1"]) == 2
    assert cli.main([*base[:-1], "5"]) == 2
    c = tmp_path / "c.json"
    c.write_text(a.read_text())
    assert cli.main(["--file", str(c), "--agent", "x3", "--gflops", "1", "--pool", "P3b"]) == 2
    assert get_agent("x2").source_sha256 == _sha(a) and get_pool("P3b").agent_ids == ("match-lstm", "x2")
    with pytest.raises(KeyError):
        get_agent("x3")  # the pool was refused before the agent was written
    assert not AgentCache().has("squad11", "x3")
    assert cli.main(["--file", str(b), "--agent", "x2", "--gflops", "1", "--replace"]) == 0
    assert AgentCache().meta("squad11", "x2")["sha256"] == _sha(b) == get_agent("x2").source_sha256


# -------------------------------------------------------- 12. the cache folder is a regular file
def test_cache_dir_that_is_a_file_is_one_clear_line(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("L2D_CACHE_DIR", str(blocker))
    with pytest.raises(CacheDirError, match="is a file, not a folder"):
        cache_dir()
    scripts = [
        ["evaluate.py", "--pool", "P3", "--policy", "random", "--quiet"],
        ["import_predictions.py", "--file", str(blocker), "--agent", "q", "--gflops", "1"],
        ["export_router.py", "--pool", "P3", "--out", str(tmp_path / "out")],
        ["train_agent.py", "--profile", "quick"],
    ]
    for args in scripts:
        run = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / args[0]), *args[1:]],
            env=_env(blocker),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 2, (args[0], run.stderr)
        assert "Traceback" not in run.stderr and "FileExistsError" not in run.stderr, args[0]
        lines = [line for line in run.stderr.splitlines() if line.startswith("error:")]
        assert lines == [
            f"error: L2D_CACHE_DIR={blocker} is a file, not a folder: point L2D_CACHE_DIR at a folder"
        ]
    help_run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "evaluate.py"), "--help"],
        env=_env(blocker),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert help_run.returncode == 0 and "--pool" in help_run.stdout


# ------------------------------------------------------------- 13. files readable by others
@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_written_files_are_readable_by_others(fresh_cache, tmp_path, umask_022):
    register_agent(AgentSpec("mine", "squad11", gflops=1.0))
    assert _mode(user_registry_path()) == 0o644
    write_manifest(tmp_path / "art", {"versions": {}})
    assert _mode(tmp_path / "art" / MANIFEST) == 0o644
    atomic_write_bytes(tmp_path / "b.bin", b"\x00\x01")
    atomic_write_text(tmp_path / "t.txt", "text")
    assert _mode(tmp_path / "b.bin") == _mode(tmp_path / "t.txt") == 0o644
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01" and (tmp_path / "t.txt").read_text() == "text"
    atomic_write_text(tmp_path / "secret.txt", "s", mode=0o600)
    assert _mode(tmp_path / "secret.txt") == 0o600
    os.umask(0o077)  # a stricter umask is respected
    atomic_write_text(tmp_path / "private.txt", "p")
    assert _mode(tmp_path / "private.txt") == 0o600


def test_job_progress_and_uploads_are_readable_by_others(fresh_cache, small, umask_022):
    from l2d_core.agents import add_agent_from_upload

    data = json.dumps({r.qid: r.answers[0] for r in list(small)[:10]}).encode()
    add_agent_from_upload("up", small, data, 1.0)
    upload = Path(get_agent("up").path)
    assert upload.read_bytes() == data and _mode(upload) == 0o644
    assert get_agent("up").source_sha256 == hashlib.sha256(data).hexdigest()
    add_agent_from_upload("up", small, data, 1.0)  # the same upload again: no conflict
    with pytest.raises(ValueError, match="already have an agent 'up'"):
        add_agent_from_upload("up", small, data + b" ", 1.0)
    assert not [p for p in upload.parent.iterdir() if p.name.endswith(".part")]
    Reporter("reliability-test").finish("done", "ok")  # a job's progress file
    assert json.loads(job_file("reliability-test").read_text())["state"] == "done"
    assert _mode(job_file("reliability-test")) == 0o644
    record_duration("reliability-test", 1.0, 10)
    assert _mode(job_file("durations")) == 0o644


# ------------------------------------------------------------- 16. nothing is ever unpickled
class _Planted:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "unpickled"))


def _plant(db: Path, marker: Path) -> None:
    """A pickled row, as an older version (or an attacker) would have left it."""
    with sqlite3.connect(db) as con:
        con.execute(
            "INSERT INTO Cache (key, raw, store_time, expire_time, access_time, access_count, tag, size, "
            "mode, filename, value) VALUES ('planted', 1, 0, NULL, 0, 0, NULL, 0, 4, NULL, ?)",
            (pickle.dumps(_Planted(marker)),),
        )
    con.close()


@pytest.mark.parametrize("store", ["embeddings", "meta", "router_scores"])
def test_a_planted_pickled_row_is_never_unpickled(store, fresh_cache, tmp_path):
    marker = tmp_path / "marker"
    folder = cache_dir() / store
    if store == "embeddings":
        c = embedding_store(str(folder))
        c.set("real", b"\x00" * 8)  # an embedding: raw bytes, kept readable as they are
        assert isinstance(c.disk, SafeDisk)
    else:
        c = open_disk_cache(folder, f"the {store} store", "rebuilt")
        c.set("real", {"train": {16: 1.5}, "t": (1, 2)})
        assert c.get("real") == {"train": {16: 1.5}, "t": [1, 2]}  # JSON, int keys kept
    with sqlite3.connect(folder / "cache.db") as con:
        assert con.execute("SELECT count(*) FROM Cache WHERE mode = 4 OR raw = 0").fetchone()[0] == 0
    con.close()
    _plant(folder / "cache.db", marker)
    with pytest.raises(UnsafeRowError, match="never read"):
        c.get("planted")  # an open store refuses the row
    assert not marker.exists()
    with pytest.warns(CorruptStoreWarning, match="holds pickled rows, which are never read"):
        fresh = open_disk_cache(folder, f"the {store} store", "rebuilt")  # reopened: set aside whole
    assert "planted" not in fresh and "real" not in fresh
    fresh.close()
    assert not marker.exists()
    moved = list((cache_dir() / "corrupt").iterdir())
    assert len(moved) == 1 and (moved[0] / "cache.db").is_file()  # kept, not deleted


def test_the_agent_cache_never_unpickles(fresh_cache, tmp_path, small):
    marker = tmp_path / "marker"
    cache = AgentCache()
    import_predictions(
        AgentSpec("m", "squad11", gflops=1.0, path=str(_files(tmp_path, small)[0])), small, cache
    )
    assert cache.has("squad11", "m")
    cache.close()
    _plant(cache.directory / "squad11" / "m" / "cache.db", marker)
    with pytest.warns(CorruptStoreWarning, match="pickled"):
        assert AgentCache().done_ids("squad11", "m") == set()
    assert not marker.exists()
