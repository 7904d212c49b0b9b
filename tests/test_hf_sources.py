"""Hugging Face `datasets` sources -> QARecords, on tiny datasets built here (never the network)."""

from __future__ import annotations

import json
import logging

import pytest

datasets = pytest.importorskip("datasets")

from l2d_core.data import DataFormatError, QADataset  # noqa: E402
from l2d_core.data.hf import (  # noqa: E402
    HFDatasetLoadError,
    detect_schema,
    load_hf_dataset,
    load_hf_dataset_with_report,
)
from l2d_core.paths import DataNotFoundError  # noqa: E402


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No network: env vars for subprocesses, and the already-imported config flags."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_cache", raising=False)
    try:
        import huggingface_hub.constants as hub_constants

        monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True, raising=False)
    except ImportError:  # pragma: no cover
        pass


SQUAD_ROWS = {
    "id": ["q1", "q2", "q3"],
    "title": ["Normans", "Normans", "Warsaw"],
    "context": [
        "The Normans were people from Normandy in France.",
        "The Normans were people from Normandy in France.",
        "Warsaw is the capital of Poland.",
    ],
    "question": ["Where is Normandy?", "Who were the Normans?", "What is Warsaw?"],
    "answers": [
        {"text": ["France", "in France"], "answer_start": [41, 38]},
        {"text": ["people from Normandy"], "answer_start": [17]},
        {"text": ["the capital of Poland"], "answer_start": [10]},
    ],
}

SQUAD_V2_ROWS = {
    "id": ["a1", "a2", "a3"],
    "title": ["Kenya", "Kenya", "Kenya"],
    "context": ["Nairobi is the capital of Kenya."] * 3,
    "question": ["What is the capital of Kenya?", "What is the capital of Mars?", "Who is Kenya?"],
    "answers": [
        {"text": ["Nairobi"], "answer_start": [0]},
        {"text": [], "answer_start": []},
        {"text": [], "answer_start": []},
    ],
}


def _trivia_row(qid, question, value, aliases, wiki=(), titles=(), search=()):
    return {
        "question_id": qid,
        "question": question,
        "question_source": "http://example.org",
        "entity_pages": {
            "doc_source": ["TagMe"] * len(wiki),
            "filename": [f"{t}.txt" for t in titles],
            "title": list(titles),
            "wiki_context": list(wiki),
        },
        "search_results": {
            "description": ["d"] * len(search),
            "filename": [f"s{i}.txt" for i in range(len(search))],
            "rank": list(range(len(search))),
            "title": ["t"] * len(search),
            "url": ["http://example.org"] * len(search),
            "search_context": list(search),
        },
        "answer": {
            "aliases": list(aliases),
            "normalized_aliases": [a.lower() for a in aliases],
            "matched_wiki_entity_name": "",
            "normalized_matched_wiki_entity_name": "",
            "normalized_value": value.lower(),
            "type": "WikipediaEntity",
            "value": value,
        },
    }


TRIVIA_ROWS = [
    _trivia_row(
        "tq1",
        "Which city is the capital of France?",
        "Paris",
        ["Paris", "City of Light", "Lutetia", "paris"],
        wiki=["PARIS is the capital of France, once called Lutetia by the Romans.", "second page"],
        titles=["Paris", "Second"],
    ),
    # no wiki page: fall back to the first search context
    _trivia_row(
        "tq2",
        "Who wrote Hamlet?",
        "William Shakespeare",
        ["Shakespeare", "The Bard"],
        search=["Hamlet is a tragedy by Shakespeare.", "other"],
    ),
    # no context at all: skipped
    _trivia_row("tq3", "What is nothing?", "Nothing", ["Void"]),
    # context but the answer never occurs in it: skipped
    _trivia_row("tq4", "Largest planet?", "Jupiter", ["Jove"], wiki=["Saturn has rings."], titles=["Saturn"]),
    # first wiki context blank: the first non-blank one (and its title) is used
    _trivia_row(
        "tq5",
        "Capital of Italy?",
        "Rome",
        ["Roma"],
        wiki=["", "Roma is the capital of Italy."],
        titles=["Empty", "Rome"],
    ),
]


def _rows_to_columns(rows):
    return {k: [r[k] for r in rows] for k in rows[0]}


def _save(tmp_path, name, columns):
    path = tmp_path / name
    datasets.Dataset.from_dict(columns).save_to_disk(str(path))
    return path


def test_squad_v1_from_save_to_disk(tmp_path):
    path = _save(tmp_path, "squad_tiny", SQUAD_ROWS)
    ds = load_hf_dataset(str(path))
    assert isinstance(ds, QADataset)
    assert len(ds) == 3 and ds.v2 is False
    assert ds.qids == ("q1", "q2", "q3")
    assert ds.titles == ("Normans", "Warsaw")
    r = ds["q1"]
    assert r.question == "Where is Normandy?"
    assert r.context.startswith("The Normans")
    assert r.answers == ("France", "in France")
    assert r.answer_starts == (41, 38)
    assert r.is_impossible is False
    for rec in ds:
        for text, start in zip(rec.answers, rec.answer_starts, strict=True):
            assert rec.context[start : start + len(text)] == text
    assert str(path) in ds.source


def test_name_and_limit(tmp_path):
    path = _save(tmp_path, "squad_tiny", SQUAD_ROWS)
    ds = load_hf_dataset(str(path), name="mine", limit=2)
    assert ds.name == "mine"
    assert ds.qids == ("q1", "q2")


def test_squad_v2_dataset_dict_split(tmp_path):
    path = tmp_path / "tiny_dict"
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict(SQUAD_ROWS),
            "validation": datasets.Dataset.from_dict(SQUAD_V2_ROWS),
        }
    ).save_to_disk(str(path))
    ds = load_hf_dataset(str(path))  # split defaults to validation
    assert ds.v2 is True
    assert ds.qids == ("a1", "a2", "a3")
    assert ds["a1"].answers == ("Nairobi",) and ds["a1"].is_impossible is False
    assert ds["a2"].answers == () and ds["a2"].answer_starts == () and ds["a2"].is_impossible is True
    train = load_hf_dataset(str(path), split="train")
    assert train.v2 is False and train.qids == ("q1", "q2", "q3")
    with pytest.raises(HFDatasetLoadError, match=r"no split 'test'.*train.*validation"):
        load_hf_dataset(str(path), split="test")


def test_squad_v2_flag_from_name_when_all_answerable(tmp_path):
    path = _save(tmp_path, "squad_v2", SQUAD_ROWS)
    assert load_hf_dataset(str(path)).v2 is True


def test_jsonl_row_format(tmp_path):
    path = tmp_path / "rows.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for i in range(len(SQUAD_V2_ROWS["id"])):
            fh.write(json.dumps({k: v[i] for k, v in SQUAD_V2_ROWS.items()}) + "\n")
    ds = load_hf_dataset(str(path))
    assert ds.v2 is True
    assert ds.qids == ("a1", "a2", "a3")
    assert ds["a1"].answer_starts == (0,)
    assert ds["a3"].is_impossible is True
    assert ds.name == "hf:rows:validation"


def test_trivia_qa_rc(tmp_path, caplog):
    path = _save(tmp_path, "trivia", _rows_to_columns(TRIVIA_ROWS))
    with caplog.at_level(logging.WARNING, logger="l2d_core.data.hf"):
        ds, report = load_hf_dataset_with_report(str(path), config="rc")
    assert ds.v2 is False
    assert ds.qids == ("tq1", "tq2", "tq5")
    r1 = ds["tq1"]
    assert r1.title == "Paris"
    assert r1.context.startswith("PARIS is the capital")
    # value + aliases found in the context (case-insensitive), deduplicated, in order
    assert r1.answers == ("Paris", "Lutetia")
    assert r1.answer_starts == (None, None)
    assert r1.is_impossible is False
    r2 = ds["tq2"]
    assert r2.title == "search"
    assert r2.context == "Hamlet is a tragedy by Shakespeare."
    assert r2.answers == ("Shakespeare",)
    r5 = ds["tq5"]
    assert r5.title == "Rome" and r5.answers == ("Roma",)
    assert report.schema == "trivia_qa"
    assert report.rows_read == 5 and report.records == 3
    assert report.skipped_no_context == 1
    assert report.skipped_no_answer_in_context == 1
    assert report.skipped == 2
    assert "skipped 2 of 5" in caplog.text
    # the plain function returns just the dataset
    assert load_hf_dataset(str(path), config="rc").qids == ds.qids


def test_unknown_schema(tmp_path):
    path = _save(tmp_path, "weird", {"foo": [1, 2], "bar": ["x", "y"]})
    with pytest.raises(DataFormatError, match=r"unknown .*schema.*\['bar', 'foo'\]"):
        load_hf_dataset(str(path))
    with pytest.raises(DataFormatError, match="columns found"):
        detect_schema(["question", "context"])
    assert detect_schema(SQUAD_ROWS) == "squad"


def test_duplicate_ids_rejected(tmp_path):
    rows = {k: v[:2] for k, v in SQUAD_ROWS.items()}
    rows["id"] = ["same", "same"]
    path = _save(tmp_path, "dups", rows)
    with pytest.raises(DataFormatError, match="duplicate question id 'same'"):
        load_hf_dataset(str(path))


def test_hub_id_offline_gives_clear_error():
    with pytest.raises(HFDatasetLoadError) as info:
        load_hf_dataset("no-such-user-l2d/no-such-dataset", split="validation")
    msg = str(info.value)
    assert "could not load" in msg and "local path" in msg
    assert isinstance(info.value, DataNotFoundError)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_missing_local_path(tmp_path):
    with pytest.raises(HFDatasetLoadError, match="does not exist"):
        load_hf_dataset(str(tmp_path / "nope.jsonl"))
    other = tmp_path / "data.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(HFDatasetLoadError, match="not JSON"):
        load_hf_dataset(str(other))
