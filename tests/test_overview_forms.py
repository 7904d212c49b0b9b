"""Overview page: custom pools and agents added from an uploaded prediction file."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from l2d_core.agents import add_agent_from_upload, get_agent, list_pools, uploads
from l2d_core.agents.catalog import user_registry_path
from l2d_core.data import DataFormatError, load_dataset

ROOT = Path(__file__).resolve().parent.parent


def test_custom_pool_form_validates_and_saves(real_data, fresh_cache):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    assert not at.exception
    at.text_input(key="custom_pool_name").set_value("Mine").run()
    at.button(key="custom_pool_save").click().run()
    assert any("at least one expert" in e.value for e in at.error)
    assert "Mine" not in [p.name for p in list_pools("squad11")]
    at.selectbox(key="custom_pool_main").set_value("rnet").run()
    at.multiselect(key="custom_pool_experts").set_value(["slqa-plus"]).run()
    at.button(key="custom_pool_save").click().run()
    assert not at.exception and at.success
    pool = next(p for p in list_pools("squad11") if p.name == "Mine")
    assert pool.agent_ids == ("rnet", "slqa-plus")


def test_upload_makes_an_agent_and_bad_files_change_nothing(real_data, fresh_cache, monkeypatch):
    ds = load_dataset("squad11")
    good = (real_data / "predictions/squad-v1.1/dynamic-chunk-reader-ibm.json").read_bytes()
    report = add_agent_from_upload("up", ds, good, 2.5)
    assert round(report.em, 2) == 62.52 and report.missing == 0
    assert get_agent("up").gflops == 2.5 and Path(get_agent("up").path).is_file()
    registry_before = user_registry_path().read_text()
    for bad in (good[: len(good) // 2], b"[1, 2]", json.dumps({"x": "y"}).encode()):
        with pytest.raises(DataFormatError):
            add_agent_from_upload("bad", ds, bad, 1.0)
    monkeypatch.setattr(uploads, "MAX_UPLOAD_BYTES", 1000)
    with pytest.raises(DataFormatError, match="limit"):
        add_agent_from_upload("bad", ds, good, 1.0)
    assert user_registry_path().read_text() == registry_before  # nothing registered
    assert not list((fresh_cache / "uploads").glob("*.part"))
    with pytest.raises(KeyError):
        get_agent("bad")
