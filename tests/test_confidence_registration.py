"""Issue 38 item 11: a prediction-file agent's confidence file is checked when it is registered, as
its prediction file is (precompute exited 0 for missing, directory, binary, NaN files and an
unknown rule), and is refused over a size limit instead of being read whole on every use."""

from __future__ import annotations

import json
import os

import pytest

from l2d_core.agents import confidence
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.catalog import AgentSpec
from l2d_core.agents.prediction_file import import_predictions
from l2d_core.data import load_dataset
from l2d_core.data.records import DataFormatError


def bad_files(tmp_path, qids) -> dict:
    """case -> (confidence file path, options beside it, words of the one line)"""
    good = tmp_path / "good.json"
    good.write_text(json.dumps({q: 0.5 for q in qids}))
    nan = tmp_path / "nan.json"
    nan.write_text("{" + ", ".join(f'"{q}": NaN' for q in qids) + "}")
    binary = tmp_path / "binary.json"
    binary.write_bytes(bytes(range(256)) * 8)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"not-a-question": 1.0}))
    return {
        "missing": (tmp_path / "nope.json", {}, "confidence file not found"),
        "directory": (tmp_path, {}, "is not a regular file"),
        "fifo": (fifo, {}, "is not a regular file"),
        "binary": (binary, {}, "not UTF-8 text"),
        "nan": (nan, {}, "values are not finite numbers"),
        "other-dataset": (other, {}, "none of its 1 ids are questions of this dataset"),
        "bogus-rule": (good, {"confidence_rule": "bogus"}, "unknown confidence_rule 'bogus'"),
        "too-big": (good, {"limit": 10}, "the limit is 10"),
    }


CASES = ("missing", "directory", "fifo", "binary", "nan", "other-dataset", "bogus-rule", "too-big")


@pytest.mark.parametrize("case", CASES)
def test_precompute_refuses_a_bad_confidence_file_in_one_line(
    case, real_data, fresh_cache, tmp_path, capsys, monkeypatch
):
    import precompute_cache

    qids = list(load_dataset("squad11").qids)[:5]
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps({q: "Paris" for q in qids}))
    path, options, words = bad_files(tmp_path, qids)[case]
    if "limit" in options:
        monkeypatch.setattr(confidence, "MAX_CONFIDENCE_BYTES", options.pop("limit"))
    entry = {"id": "conf-x", "kind": "prediction_file", "path": str(preds), "gflops": 1.0,
             "confidence_file": str(path), **options}  # fmt: skip
    config = tmp_path / "agents.json"
    config.write_text(json.dumps({"dataset": "squad11", "agents": [entry]}))
    assert precompute_cache.main(["--config", str(config), "--limit", "5", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and words in err, err
    assert case == "bogus-rule" or path.name in err
    assert not AgentCache().has("squad11", "conf-x")


def test_import_checks_the_confidence_file_too(real_data, tmp_path):
    ds = load_dataset("squad11")
    qids = list(ds.qids)[:5]
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps({q: "Paris" for q in qids}))
    path, _, words = bad_files(tmp_path, qids)["nan"]
    spec = AgentSpec("conf-y", "squad11", path=str(preds), gflops=1.0, options={"confidence_file": str(path)})
    with pytest.raises(DataFormatError, match=words):
        import_predictions(spec, ds, AgentCache(tmp_path / "agents"))
    assert not AgentCache(tmp_path / "agents").has("squad11", "conf-y")
