"""The quick live agent from the dashboard (l2d_core.app_logic.quick_agent): its expected time
from a timed step, its progress read from a running process's log, and how a run ends."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from l2d_core.agents.qa_training import PROFILES
from l2d_core.app_logic import quick_agent as Q


def test_expected_time_is_the_timed_step_times_the_work(real_data, fresh_cache, monkeypatch):
    calls = []

    def timed(**kw):
        calls.append(kw)
        return {"train_step_s": 2.0, "forward_s": 0.5}

    monkeypatch.setattr(Q, "time_training_step", timed)
    quick = Q.expected_seconds("squad11")
    work = Q.workload("squad11")
    assert quick["trained"] == work["trained"] == Q.QUICK.limit  # the limit caps a fold's questions
    assert work["answered"] == Q.QUICK.limit + 2595  # its held-out fold (capped) and every test question
    steps = math.ceil(work["trained"] / Q.QUICK.batch_size) * Q.QUICK.epochs
    assert quick["train_s"] == pytest.approx(steps * 2.0)
    assert quick["answer_s"] == pytest.approx(work["answered"] / Q.QUICK.batch_size * 0.5)
    assert calls == [{"device": "cpu", "batch": Q.QUICK.batch_size}]
    full = Q.expected_seconds("squad11", PROFILES["full"])
    assert full["total_s"] > 5 * quick["total_s"] and full["answered"] == 10570
    assert len(calls) == 1  # measured once, then read from disk


def test_status_reads_the_progress_of_a_running_process_and_how_it_ended(real_data, fresh_cache):
    assert Q.training_status("squad11").state == "idle"
    log = fresh_cache / "models" / "minilm-qa-quick.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(
        "[fold0] fine-tuning on 1200 questions\n"
        "train fold0:   3%|▎         | 2/76 [00:11<07:34,  6.14s/step]\r"
        "train fold0:  21%|██        | 16/76 [00:58<02:23,  2.40s/step, loss=4.512]\r",
        encoding="utf-8",
    )
    # a process whose command line names train_agent.py stands for the run
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "train_agent.py"])
    try:
        (fresh_cache / "models" / "minilm-qa-quick.pid").write_text(str(proc.pid))
        s = Q.training_status("squad11")
        assert (s.state, s.stage, s.done, s.total, s.left_s) == ("running", "fine-tuning", 16, 76, 143.0)
        with log.open("a", encoding="utf-8") as f:
            f.write("\n[fold0] answering 3795 held-out questions\n")
            f.write("answer fold0:  10%|█ | 384/3795 [00:09<01:20, 42q/s]")
        s = Q.training_status("squad11")
        assert (s.stage, s.done, s.total, s.left_s) == ("answering", 384, 3795, 80.0)
    finally:
        proc.kill()
        proc.wait()
    with log.open("a", encoding="utf-8") as f:
        f.write("\nerror: fold0: No space left on device\n")
    s = Q.training_status("squad11")  # ended without registering its pool: failed, with the reason
    assert s.state == "failed" and "No space left" in s.message


def test_single_query_page_offers_the_quick_model_then_shows_its_run(real_data, fresh_cache, monkeypatch):
    """No pool answers new text: the page offers the quick model with this machine's expected
    time; the button starts the run, whose progress the page then shows; a run that stopped says so."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    import dashboard.live_agent as page_module

    monkeypatch.setattr(Q, "time_training_step", lambda **kw: {"train_step_s": 3.0, "forward_s": 0.6})
    procs = []

    def start(dataset):  # stands for the real run: a process named like it, and its log
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "train_agent.py"])
        procs.append(proc)
        (fresh_cache / "models").mkdir(exist_ok=True)
        (fresh_cache / "models" / "minilm-qa-quick.pid").write_text(str(proc.pid))
        (fresh_cache / "models" / "minilm-qa-quick.log").write_text(
            "train fold0:  50%|█████     | 38/76 [01:50<01:50,  2.9s/step]\r", encoding="utf-8"
        )

    monkeypatch.setattr(page_module, "start_training", start)
    page_module._expected.clear()  # an earlier test's figure must not be shown here
    root = Path(__file__).resolve().parent.parent
    at = AppTest.from_file(str(root / "dashboard/single_query.py"), default_timeout=600)
    at.run()
    assert not at.exception, at.exception
    expected = Q.expected_seconds("squad11")
    offer = next(i.value for i in at.info if "quick model" in i.value)
    assert f"about {expected['total_s'] / 60:.0f} min here" in offer and "P3-quick" in offer
    button = next(b for b in at.button if b.label == "Train the quick model")
    try:
        button.click().run()
        assert not at.exception, at.exception
        assert any("Training the quick model" in i.value for i in at.info)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    at.run()
    assert any("The last training run stopped" in e.value for e in at.error)
    assert any(b.label == "Train the quick model" for b in at.button)  # and it can be started again


def test_once_a_pool_answers_new_text_the_page_switches_to_it(real_data, fresh_cache, bert_path):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from l2d_core.agents import AgentSpec, register_agent, register_pool
    from l2d_core.agents.registry import PoolSpec

    spec = AgentSpec(
        id="minilm-qa-quick", dataset="squad11", kind="extractive", gflops=1.0, gflops_source="measured",
        path=str(bert_path), name="tiny", params=1, options={"max_length": 64},
    )  # fmt: skip
    register_agent(spec, replace=True)
    register_pool(PoolSpec("P3-quick", "squad11", spec.id, ("rnet-plus", "bert-ens"), "test"), replace=True)
    assert Q.training_status("squad11").state == "done"
    root = Path(__file__).resolve().parent.parent
    at = AppTest.from_file(str(root / "dashboard/single_query.py"), default_timeout=600)
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="pool").value == "P3"
    assert any("P3-quick" in i.value for i in at.info)
    next(b for b in at.button if b.label == "Switch to P3-quick").click().run()
    assert not at.exception, at.exception
    assert at.selectbox(key="pool").value == "P3-quick"
