"""The recording of the shipped local-LLM logs (``scripts/record_local_llms.py``): its asking
order on the real splits, and a real run through llama-server that keeps what a log held, adds
what it asked, goes on where it stopped and refuses a log it did not write in one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from l2d_core.agents.llm_server import LLMServerUnsupported, LocalLLMServer
from l2d_core.data.records import QARecord

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import record_local_llms as rec  # noqa: E402


def test_the_plan_asks_the_test_articles_first_spread_evenly_never_one_paragraph_twice_in_a_row():
    """llama-server keeps the last prompt: a question right after another of its paragraph would
    find the paragraph read already, and its latency would not be a new user's. A recording
    stopped early must hold questions of every part of the test split."""
    _, train, test = rec.questions(10**6)  # every question of both splits, in the dataset's order
    recs = train + test
    blocks = rec.asking_plan(train, test, 64)
    order = [r for b in blocks for r in b]
    assert sorted(r.qid for r in order) == sorted(r.qid for r in recs)
    assert {r.qid for r in order[: len(test)]} == {r.qid for r in test}
    assert sum(a.context == b.context for a, b in zip(recs, recs[1:])) > len(recs) // 2
    assert not any(a.context == b.context for a, b in zip(order, order[1:]))  # across blocks too
    tenth = order[: len(test) // 10]
    assert len({r.title for r in tenth}) == len({r.title for r in test})  # every test article
    alone = [QARecord(f"q{i}", "t", "one paragraph", "?", ()) for i in range(3)]
    assert [r.qid for r in rec.asking_order(alone)] == ["q0", "q1", "q2"]  # no other paragraph to ask


def test_a_recording_keeps_its_log_adds_what_it_asked_and_goes_on_where_it_stopped(
    tmp_path, fresh_cache, monkeypatch, capsys
):
    _, train, test = rec.questions(2)
    out = tmp_path / "recorded"
    out.mkdir()
    kept = test[0].qid  # answered by an earlier run: never asked again, kept as it was
    row = {"id": kept, "answer": "kept", "confidence": 0.5, "latency_s": 9.9, "prompt_tokens": 1}
    pd.DataFrame([{**dict.fromkeys(["id", *rec.COLUMNS]), **row}]).to_csv(
        out / "smollm2-135m.csv", index=False
    )
    args = ["--models", "smollm2-135m", "--per-split", "2", "--block", "1", "--out", str(out), "--quiet"]
    try:  # skips where the packaged server cannot run and none was built (the test above says so)
        LocalLLMServer("smollm2-135m").start().stop()
    except LLMServerUnsupported as err:
        pytest.skip(str(err))
    assert rec.main(args) == 0
    log = pd.read_csv(out / "smollm2-135m.csv", dtype={"id": str}, keep_default_na=False)
    assert list(log["id"]) == [r.qid for r in train + test]  # the dataset's order
    mine = log.set_index("id").loc[kept]
    assert mine["answer"] == "kept" and mine["latency_s"] == 9.9
    asked = log[log["id"] != kept]
    assert (asked["latency_s"] > 0).all() and asked["confidence"].between(0, 1, inclusive="right").all()
    prov = json.loads((out / "smollm2-135m.json").read_text())
    assert prov["questions"] == {"dataset": "squad11", "answered": 4, "train": 2, "test": 2}
    (run,) = prov["runs"]
    assert run["added"] == 3 and run["machine"]["parallel"] == 1

    def refuse(*_):
        raise AssertionError("a question of the log was asked again")

    monkeypatch.setattr(rec, "start_agent", refuse)
    assert rec.main(args) == 0  # everything answered: no server started
    assert len(json.loads((out / "smollm2-135m.json").read_text())["runs"]) == 1  # asked nothing: no run
    capsys.readouterr()
    (out / "smollm2-135m.csv").write_text("question,reply\nq1,x\n")
    assert rec.main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "is not a log this script wrote" in err and "answer" in err
