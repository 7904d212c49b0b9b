"""Issue 38 items 7, 9, 10: an uploaded log is parsed as the user's file name says and its errors
name that file and the row; a log's columns and cells are bounded before it is parsed; numbers are
bounded where read; a right/wrong column that disagrees with the answer text is said, naming rows."""

from __future__ import annotations

import json

import pytest

from l2d_core.agents import log_table
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.catalog import AgentSpec, get_agent
from l2d_core.agents.outcome_log import import_log
from l2d_core.agents.uploads import add_upload
from l2d_core.data import load_dataset
from l2d_core.data.records import DataFormatError, QADataset, QARecord

CTX = "Paris is the capital of France. Berlin is the capital of Germany."


def tiny() -> QADataset:
    recs = (
        QARecord("q1", "T", CTX, "Capital of France?", ("Paris",)),
        QARecord("q2", "T", CTX, "Capital of Germany?", ("Berlin",)),
        QARecord("q3", "T", CTX, "Capital of Mars?", (), is_impossible=True),
    )
    return QADataset("tiny", recs, v2=True)


def spec(path) -> AgentSpec:
    return AgentSpec(id="logged", dataset="tiny", kind="outcome_log", gflops=3.0, path=str(path))


def refused(tmp_path, name: str, data: bytes, message: str) -> str:
    log = tmp_path / name
    log.write_bytes(data)
    with pytest.raises(DataFormatError, match=message) as err:
        import_log(spec(log), tiny(), AgentCache(tmp_path / "agents"))
    assert "\n" not in str(err.value) and name in str(err.value)
    assert not AgentCache(tmp_path / "agents").has("tiny", "logged")
    return str(err.value)


def test_an_uploaded_jsonl_log_is_read_as_jsonl_and_errors_name_the_users_file(real_data, fresh_cache):
    squad = load_dataset("squad11")
    qids = list(squad.qids)[:10]
    rows = "\n".join(
        json.dumps({"id": q, "correct": i % 2 == 0, "latency_s": 0.5}) for i, q in enumerate(qids)
    )
    report = add_upload("my-jsonl", squad, rows.encode(), 1.0, filename="run.jsonl")
    assert (report.questions, report.em, report.has_latency) == (10, 50.0, True)
    assert get_agent("my-jsonl").path.endswith(".jsonl")
    bad = rows + '\n{"id": "x", "correct": tru}\n'
    with pytest.raises(DataFormatError) as err:
        add_upload("bad-jsonl", squad, bad.encode(), 1.0, filename="mine.jsonl")
    msg = str(err.value)
    assert msg.startswith("outcome log mine.jsonl: line 11 is not JSON") and ".part" not in msg, msg
    with pytest.raises(
        DataFormatError, match=r"^outcome log mine.csv: row 1, column correct must be true/false"
    ):
        add_upload("bad-csv", squad, f"id,correct\n{qids[0]},maybe\n".encode(), 1.0, filename="mine.csv")


def test_a_log_of_thousands_of_columns_is_refused_before_it_is_parsed(tmp_path):
    wide = "id,correct," + ",".join(f"c{k}" for k in range(1000)) + "\n"
    wide += "".join(f"q{i},true" + "," * 1000 + "\n" for i in (1, 2))
    msg = refused(tmp_path, "wide.csv", wide.encode(), "has 1,002 columns; the limit is 256")
    assert "its header" in msg
    row = {"id": "q1", "correct": True, **{f"c{k}": "" for k in range(300)}}
    refused(tmp_path, "wide.jsonl", json.dumps(row).encode(), "line 1 has 302 columns")


def test_the_cell_budget_is_checked_before_parsing(tmp_path, monkeypatch):
    monkeypatch.setattr(log_table, "MAX_LOG_CELLS", 100)
    rows = "id,correct\n" + "".join(f"x{i},true\n" for i in range(60))
    refused(
        tmp_path, "long.csv", rows.encode(), r"holds about 124 cells \(rows × columns\); the limit is 100"
    )


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        (
            "huge.csv",
            b"id,correct,latency_s\nq1,True,1e308\n",
            r"row 1, column latency_s must be .* <= 86400",
        ),
        ("inf.csv", b"id,correct,latency_s\nq1,True,1e400\n", "row 1, column latency_s must be a finite"),
        (
            "digits.jsonl",
            b'{"id": "q1", "correct": true, "latency_s": ' + b"9" * 5000 + b"}\n",
            "line 1 cannot be read",
        ),
        (
            "conf.csv",
            b"id,correct,confidence\nq1,True," + b"9" * 5000 + b"\n",
            "column confidence must be a finite",
        ),
    ],
)
def test_numbers_are_bounded_where_read(tmp_path, name, data, message):
    refused(tmp_path, name, data, message)


def test_a_right_wrong_column_that_disagrees_with_the_text_is_said_naming_the_rows(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("id,correct,answer\nq1,True,Paris\nq2,True,Munich\nq3,False,\n")
    report = import_log(spec(log), tiny(), AgentCache(tmp_path / "agents"))
    assert report.disagree_rows == [2, 3]  # Munich is wrong; no answer to the impossible q3 is right
    warning = report.lines()[-1]
    assert warning.startswith("  warning: on 2 rows") and "(rows 2, 3)" in warning
