"""scripts/precompute_cache.py: end to end on real SQuAD questions, kill -9 and resume, shards,
the torchrun environment, and the one-line errors (exit code 2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import precompute_cache
import pytest
from _tiny_models import one_thread

from l2d_core.agents import get_agent
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.runners import ExtractiveAgent, agent_gflops_at, parse_shard, shard

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "precompute_cache.py"


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    with one_thread():
        yield


def config(tmp_path, agents, dataset="squad11", split="test", name="cfg.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"dataset": dataset, "split": split, "agents": agents}))
    return str(path)


def run(argv, capsys) -> tuple[int, str, str]:
    rc = precompute_cache.main([*argv, "--quiet"])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_end_to_end_on_real_questions(real_data, fresh_cache, bert_path, tmp_path, capsys):
    cfg = config(tmp_path, [{"id": "tiny-qa", "kind": "extractive", "path": str(bert_path)}, "match-lstm"])
    rc, out, err = run(["--config", cfg, "--limit", "5"], capsys)
    assert rc == 0, err
    assert "summary" in out and "tiny-qa" in out and "match-lstm" in out
    cache = AgentCache()
    for agent in ("tiny-qa", "match-lstm"):
        t = cache.table("squad11", agent)
        assert len(t) == 5 and t["status"].notna().all()
    t = cache.table("squad11", "tiny-qa")
    assert (t["gflops"] > 0).all() and (t["latency_ms"] > 0).all()
    spec = get_agent("tiny-qa")  # registered, with its measured GFLOPs at 384 tokens
    assert spec.kind == "extractive" and spec.gflops_source == "measured"
    assert spec.gflops == pytest.approx(agent_gflops_at(ExtractiveAgent(str(bert_path)), 384), rel=1e-3)
    # a rerun has nothing to do: everything is skipped, no model is needed
    rc, out, _ = run(["--config", cfg, "--limit", "5", "--json"], capsys)
    rows = json.loads(out)
    assert rc == 0 and [(r["computed"], r["skipped"]) for r in rows] == [(0, 5), (0, 5)]
    assert rows[1]["em"] == pytest.approx(100 * cache.table("squad11", "match-lstm")["em"].mean())


def test_killed_with_sigkill_then_resumed(real_data, fresh_cache, bert_path, tmp_path, capsys):
    """kill -9 mid-run loses no finished question, and the resumed run recomputes none."""
    n = 40
    cfg = config(tmp_path, [{"id": "tiny-qa", "kind": "extractive", "path": str(bert_path)}], split="all")
    argv = ["--config", cfg, "--limit", str(n)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(SCRIPT), *argv, "--chunk", "1", "--quiet"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    cache = AgentCache()
    deadline = time.monotonic() + 240
    while len(cache.done_ids("squad11", "tiny-qa")) < 3 and proc.poll() is None:
        assert time.monotonic() < deadline, "the precompute never wrote a record"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    before = {q: cache.get("squad11", "tiny-qa", q) for q in cache.done_ids("squad11", "tiny-qa")}
    assert 3 <= len(before) < n, "killed too late to test a resume"
    assert all(r is not None and r["gflops"] > 0 for r in before.values())  # whole records only

    rc, out, err = run([*argv, "--json"], capsys)  # the same command, resumed (in process)
    assert rc == 0, err
    (row,) = json.loads(out)
    assert (row["questions"], row["skipped"], row["computed"]) == (n, len(before), n - len(before))
    assert len(cache.done_ids("squad11", "tiny-qa")) == n
    assert all(cache.get("squad11", "tiny-qa", q) == r for q, r in before.items())  # not recomputed


def test_shards_cover_every_question_once(real_data, fresh_cache, bert_path, tmp_path, capsys, monkeypatch):
    for count in (1, 2, 3, 7):
        parts = [shard(list(range(20)), i, count) for i in range(count)]
        assert sorted(x for p in parts for x in p) == list(range(20))
    assert parse_shard("2/3") == (2, 3)
    cfg = config(tmp_path, [{"id": "tiny-qa", "kind": "extractive", "path": str(bert_path)}])
    rows = []
    for i in range(3):
        rc, out, err = run(["--config", cfg, "--limit", "8", "--shard", f"{i}/3", "--json"], capsys)
        assert rc == 0, err
        rows += json.loads(out)
    assert [r["computed"] for r in rows] == [3, 3, 2] and [r["skipped"] for r in rows] == [0, 0, 0]
    done = AgentCache().done_ids("squad11", "tiny-qa")
    from l2d_core.data import benchmark_split, load_dataset

    assert done == {r.qid for r in benchmark_split(load_dataset("squad11"))[1].records[:8]}
    # torchrun's environment picks the shard when --shard is not given (and the device, on CUDA)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    rc, out, _ = run(["--config", cfg, "--limit", "8", "--json"], capsys)
    (row,) = json.loads(out)
    assert rc == 0 and (row["questions"], row["skipped"]) == (3, 3)


def test_generative_agents_run_through_the_script(fresh_cache, llama_path, tmp_path, capsys, monkeypatch):
    data = tmp_path / "data"
    (data / "squad").mkdir(parents=True)
    paras = [{"context": "The whale is big.", "qas": [{"id": f"g{i}", "question": f"What {i}?",
              "answers": [{"text": "whale", "answer_start": 4}]} for i in range(3)]}]  # fmt: skip
    squad = {"version": "1.1", "data": [{"title": "Whales", "paragraphs": paras}]}
    (data / "squad" / "dev-v1.1.json").write_text(json.dumps(squad))
    monkeypatch.setenv("L2D_DATA_DIR", str(data))
    monkeypatch.setenv("L2D_ACCEPT_MODIFIED_DATA", "1")  # a made-up squad11, used knowingly
    agent = {"id": "tiny-lm", "kind": "generative", "path": str(llama_path), "max_new_tokens": 3}
    rc, out, err = run(["--config", config(tmp_path, [agent], split="all"), "--json"], capsys)
    (row,) = json.loads(out)
    assert rc == 0 and row["computed"] == 3 and row["gflops"] > 0 and row["latency_ms"] > 0
    statuses = AgentCache().table("squad11", "tiny-lm")["status"]
    assert row["not_found"] == int((statuses == "not_found").sum())
    assert get_agent("tiny-lm").gflops_source == "measured" and get_agent("tiny-lm").gflops > 0
    # no test article in this dataset: the test split is empty
    rc, _, err = run(["--config", config(tmp_path, [agent], split="test", name="t.json")], capsys)
    assert rc == 2 and "empty" in err and err.count("\n") == 1


BAD = [
    ("missing model", {"agents": [{"id": "x", "kind": "extractive", "path": "/no/such/model"}]}, "not found"),
    ("unknown agent", {"agents": ["no-such-agent"]}, "unknown agent"),
    ("not an object", ["match-lstm"], "JSON object"),
    ("no agents", {"dataset": "squad11", "agents": []}, "no agents"),
    ("bad entry", {"agents": [{"id": "x"}]}, "id and kind"),
    ("bad kind", {"agents": [{"id": "x", "kind": "magic", "path": "m"}]}, "unknown kind"),
    ("bad field", {"agents": [{"id": "x", "kind": "extractive", "path": "m", "strid": 1}]}, "unknown field"),
    ("bad split", {"split": "dev", "agents": ["match-lstm"]}, "unknown split"),
    ("bad dataset", {"dataset": "squad3", "agents": ["match-lstm"]}, "unknown dataset"),
    ("wrong dataset", {"dataset": "squad20", "agents": ["match-lstm"]}, "answers squad11"),
]


@pytest.mark.parametrize("doc, message", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_configs_exit_2_with_one_line(doc, message, fresh_cache, tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    rc, _, err = run(["--config", str(path)], capsys)
    assert rc == 2 and message in err and err.startswith("error: ") and err.count("\n") == 1


@pytest.mark.parametrize("argv, message", [
    (["--shard", "2/2"], "bad shard"),
    (["--shard", "x"], "bad shard"),
    (["--shard", "0/0"], "bad shard"),
    (["--limit", "0"], "--limit"),
    (["--config", "/no/such.json"], "not found"),
])  # fmt: skip
def test_bad_command_lines_exit_2(argv, message, tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{not json")
    rc, _, err = run(["--agents", "match-lstm", *argv], capsys)
    assert rc == 2 and message in err and err.count("\n") == 1
    rc, _, err = run(["--config", str(tmp_path / "bad.json")], capsys)
    assert rc == 2 and "not valid JSON" in err
