"""Nothing lost, nothing silent: bad files, damaged caches, concurrent registration, and the
built-in agents and pools that user additions never replace."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from l2d_core.agents import (
    AgentSpec,
    PoolSpec,
    add_agent_from_upload,
    get_agent,
    get_pool,
    import_predictions,
    read_prediction_file,
    register_agent,
    register_pool,
)
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.catalog import check_new_agent, user_registry_path
from l2d_core.data import DataFormatError, load_dataset
from l2d_core.stores import CorruptStoreWarning, open_disk_cache

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def small(real_data):
    ds = load_dataset("squad11")
    return ds.by_titles(ds.titles[:2])


def _predictions(ds, n=20) -> dict[str, str]:
    return {r.qid: r.answers[0] for r in list(ds)[:n]}


# ------------------------------------------------------------------------- prediction files
def test_duplicate_ids_are_refused_naming_them(tmp_path, small):
    q = small.qids
    path = tmp_path / "dup.json"
    path.write_text(f'{{"{q[0]}": "a", "{q[1]}": "b", "{q[0]}": "c"}}')
    with pytest.raises(DataFormatError, match=f"gives 1 keys twice: '{q[0]}'"):
        read_prediction_file(path)


def test_byte_order_mark_is_accepted(tmp_path, small):
    preds = _predictions(small)
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(preds).encode())
    assert read_prediction_file(path) == preds


def test_a_dataset_uploaded_by_mistake_gets_one_short_line(fresh_cache, real_data, small):
    data = (real_data / "squad" / "dev-v1.1.json").read_bytes()
    with pytest.raises(DataFormatError) as exc:
        add_agent_from_upload("mine", small, data, 1.0, filename="dev-v1.1.json")
    msg = str(exc.value)
    assert "dev-v1.1.json is a SQuAD dataset, not predictions" in msg
    assert len(msg) < 300 and "tmp" not in msg and ".part" not in msg
    assert not list((fresh_cache / "uploads").glob("*")), "nothing of the refused file is kept"


def test_upload_errors_name_the_users_file(fresh_cache, small):
    with pytest.raises(DataFormatError, match="my preds.json is not valid JSON"):
        add_agent_from_upload("mine", small, b'{"a": "unterminated', 1.0, filename="my preds.json")


def test_json_error_reads_once_at_line(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"a": "unterminated')
    with pytest.raises(DataFormatError) as exc:
        read_prediction_file(path)
    assert "at at" not in str(exc.value) and "at line 1" in str(exc.value)


def test_long_values_are_capped_in_messages(tmp_path, small):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({small.qids[0]: ["x" * 100_000]}))
    with pytest.raises(DataFormatError) as exc:
        read_prediction_file(path)
    assert len(str(exc.value)) < 400


@pytest.mark.parametrize("agent_id", ["x" * 300, "a/b", "../up", "has space", ".hidden"])
def test_bad_agent_ids_are_refused_in_words(agent_id):
    with pytest.raises(ValueError, match="is not allowed") as exc:
        AgentSpec(agent_id, "squad11")
    assert len(str(exc.value)) < 200


# ------------------------------------------------------------------------- built-ins and overrides
def test_builtin_agent_is_never_replaced(fresh_cache, small, tmp_path):
    before = get_agent("bert-ens")
    with pytest.raises(ValueError, match="built-in"):
        register_agent(AgentSpec("bert-ens", "squad11", gflops=1.0), replace=True)
    cache = AgentCache()
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_predictions(small)))
    with pytest.raises(ValueError, match="built-in"):
        add_agent_from_upload("bert-ens", small, path.read_bytes(), 1.0, cache=cache, replace=True)
    assert not cache.has("squad11", "bert-ens"), "the refused upload wrote no answers"
    assert get_agent("bert-ens") == before


def test_builtin_pool_is_never_replaced(fresh_cache):
    with pytest.raises(ValueError, match="built-in"):
        register_pool(PoolSpec("P3", "squad11", "match-lstm", ("bert-ens",)), replace=True)
    assert get_pool("P3").experts == ("rnet-plus", "bert-ens")


def test_old_registry_entries_never_shadow_builtins(fresh_cache):
    user_registry_path().parent.mkdir(parents=True, exist_ok=True)
    user_registry_path().write_text(
        json.dumps({"agents": [{"id": "bert-ens", "dataset": "squad11", "gflops": 1.0}], "pools": []})
    )
    assert get_agent("bert-ens").gflops != 1.0


def test_replacing_a_user_agent_needs_the_flag(fresh_cache):
    register_agent(AgentSpec("mine", "squad11", gflops=1.0))
    with pytest.raises(ValueError, match="already have"):
        check_new_agent("mine")
    check_new_agent("mine", replace=True)


REGISTER = """
import sys
from l2d_core.agents import AgentSpec, register_agent
for i in range(int(sys.argv[2])):
    register_agent(AgentSpec(f"{sys.argv[1]}-{i}", "squad11", gflops=1.0))
"""


def test_processes_registering_at_once_all_land(fresh_cache):
    n, per = 4, 25
    procs = [
        subprocess.Popen([sys.executable, "-c", REGISTER, f"p{k}", str(per)], cwd=ROOT) for k in range(n)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * n
    ids = {a["id"] for a in json.loads(user_registry_path().read_text())["agents"]}
    assert ids == {f"p{k}-{i}" for k in range(n) for i in range(per)}


def test_import_cli_checks_the_pool_before_importing(fresh_cache, tmp_path, small):
    import import_predictions as cli

    path = tmp_path / "p.json"
    path.write_text(json.dumps(_predictions(small)))
    args = ["--file", str(path), "--agent", "mine", "--gflops", "1", "--pool", "X", "--main", "nosuch"]
    assert cli.main(args) == 2
    assert not AgentCache().has("squad11", "mine") and not user_registry_path().is_file()
    assert cli.main(["--file", str(path), "--agent", "bert-ens", "--gflops", "1"]) == 2


# ------------------------------------------------------------------------- damaged caches
def _garbage(db: Path, truncate: bool) -> None:
    raw = db.read_bytes()
    db.write_bytes(raw[: len(raw) // 3] if truncate else b"not a database" * 100)


@pytest.mark.parametrize("truncate", [False, True], ids=["garbage", "truncated"])
def test_damaged_agent_cache_is_set_aside_and_reimported(fresh_cache, small, tmp_path, truncate):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_predictions(small, 200)))
    spec = AgentSpec("mine", "squad11", gflops=1.0, path=str(path))
    import_predictions(spec, small, AgentCache())
    _garbage(fresh_cache / "agents" / "squad11" / "mine" / "cache.db", truncate)
    with pytest.warns(CorruptStoreWarning, match=r"agent mine .*cache.*moved to .*corrupt"):
        fresh = AgentCache()
        fresh.done_ids("squad11", "mine")
    assert list((fresh_cache / "corrupt").iterdir()), "the damaged store is kept aside"
    import_predictions(spec, small, fresh)  # derivable: imported again from its file
    assert len(fresh.done_ids("squad11", "mine")) == len(small)


@pytest.mark.parametrize("what", ["embeddings", "meta", "router_scores"])
def test_damaged_disk_caches_are_rebuilt(fresh_cache, what):
    folder = fresh_cache / what
    with open_disk_cache(folder, f"the {what} cache", "rebuilt") as c:
        for i in range(500):
            c[f"k{i}"] = np.arange(64, dtype=np.float32).tobytes()
    _garbage(folder / "cache.db", truncate=False)
    with pytest.warns(CorruptStoreWarning, match=what):
        c = open_disk_cache(folder, f"the {what} cache", "rebuilt")
    c["k"] = b"new"
    assert c["k"] == b"new" and len(c) == 1
    c.close()


def test_intact_cache_opens_without_warning(fresh_cache):
    with open_disk_cache(fresh_cache / "meta", "m", "r") as c:
        c["a"] = 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with open_disk_cache(fresh_cache / "meta", "m", "r") as c:
            assert c["a"] == 1


def test_reads_make_no_empty_agent_folders(fresh_cache):
    cache = AgentCache()
    assert cache.done_ids("squad11", "hub-model") == set() and cache.meta("squad11", "hub-model") == {}
    assert cache.table("squad11", "hub-model").empty
    assert not (fresh_cache / "agents" / "squad11" / "hub-model").exists()


def test_router_checkpoints_are_written_whole(fresh_cache):
    from l2d_core.routers.head import load_head_state, save_head
    from l2d_core.routers.network import MLPHead

    head = MLPHead(8, (3,), hidden=0)
    d = save_head(fresh_cache / "h", head, {"n": 1})
    assert not list(d.glob("*.part")), "saves leave no temporary files"
    state, _ = load_head_state(d)
    assert all(torch.equal(state[k], v) for k, v in head.state_dict().items())


def test_truncated_trained_router_is_set_aside_and_trained_again(fresh_cache, real_data):
    from _slices import slice_bench

    from l2d_core.routers.registry import make_router

    bench = slice_bench("P2")
    first = make_router("l2d-cascade").fit(bench)
    stored = [p for p in (fresh_cache / "routers").iterdir() if (p / "config.json").is_file()]
    assert stored
    for d in stored:
        for f in d.glob("*.safetensors"):
            f.write_bytes(f.read_bytes()[:20])
    with pytest.warns(CorruptStoreWarning, match="trained router"):
        again = make_router("l2d-cascade").fit(bench)
    costs = bench.costs(0.05)
    assert np.array_equal(first.decide(costs).choice, again.decide(costs).choice)
