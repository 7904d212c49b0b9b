"""The quick live agent from the dashboard (l2d_core.app_logic.quick_agent): its expected time
from several timed steps (measured in a background job: the page never waits), its progress read
from the run's background-job progress file (l2d_core.background), and how a run ends."""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _pages import open_page

from l2d_core import background
from l2d_core.agents import qa_training
from l2d_core.agents.profiles import PROFILES
from l2d_core.agents.train_cli import train_key
from l2d_core.app_logic import quick_agent as Q

ROOT = Path(__file__).resolve().parent.parent
SLEEPING = {"n": 600, "dt": 0.1, "out": os.devnull}  # a job of tests.test_jobs that runs a minute
# five timed steps each, one far off (the machine was busy for a moment): the median ignores it
TIMING = {
    "load_s": 0.5,
    "train_step_s": [2.0, 9.0, 2.2, 1.8, 2.1],
    "optimizer_s": [0.2, 0.3, 0.2, 0.1, 0.2],
    "forward_s": [1.5, 1.4, 6.0, 1.6, 1.5],
}


@pytest.fixture
def timed(monkeypatch):
    """time_training_step replaced by TIMING at the shapes asked for; the calls are recorded."""
    calls = []

    def fake(config, device, **kw):
        calls.append(kw)
        return {**TIMING, **kw, "forward_s": TIMING["forward_s"] if kw["forward_batch"] else []}

    monkeypatch.setattr(Q, "time_training_step", fake)
    monkeypatch.setattr(Q, "_MEASURING", set())
    return calls


def test_the_estimate_is_the_median_timed_step_times_the_runs_own_steps_and_tokens(
    real_data, fresh_cache, timed
):
    record = Q.measure("squad11")
    quick_kw, full_kw = timed  # the quick profile's batch first (with the answering's forward passes)
    assert quick_kw["batch"] == Q.QUICK.batch_size and quick_kw["forward_batch"] == 32  # the agent's batch
    assert full_kw["batch"] == PROFILES["full"].batch_size and full_kw["forward_batch"] == 0
    for kw in timed:  # the mean padded window of each run: realistic lengths
        assert kw["tokens"] % 32 == 0 and 96 <= kw["tokens"] <= 384
    assert 96 <= quick_kw["forward_tokens"] <= 384

    quick = Q.estimate(record, Q.QUICK)
    work = record["work"]["quick"]
    # the run's own plan: 1,200 questions (the limit) in at least as many windows, batches of 4
    assert quick["trained"] == Q.QUICK.limit and quick["answered"] == Q.QUICK.limit + 2595
    assert quick["windows"] >= quick["trained"] and quick["steps"] == math.ceil(quick["windows"] / 4)
    assert 4 * 384 * quick["steps"] >= work["step_tokens"] >= 32 * quick["windows"]
    step_median, opt_median = statistics.median([1.8, 8.7, 2.0, 1.7, 1.9]), 0.2  # steps less AdamW
    per_token = step_median / (4 * quick_kw["tokens"])
    assert quick["train_s"] == pytest.approx(quick["steps"] * opt_median + work["step_tokens"] * per_token)
    per_window_token = 1.5 / (32 * quick_kw["forward_tokens"])
    assert quick["answer_s"] == pytest.approx(work["forward_tokens"] * per_window_token)
    assert quick["load_s"] == pytest.approx(3 * 0.5)  # train, answer, register
    assert quick["total_s"] == pytest.approx(quick["train_s"] + quick["answer_s"] + quick["load_s"])
    assert quick["timed_steps"] == quick["timed_forwards"] == 5

    full = Q.estimate(record, PROFILES["full"])  # its own batch size's timed steps, its own work
    fw = record["work"]["full"]
    assert (full["models"], full["answered"]) == (3, 10570)
    assert full["steps"] == fw["steps"] == sum(math.ceil(n / 32) for n in fw["job_windows"]) * 2
    per_token = step_median / (32 * full_kw["tokens"])
    assert full["train_s"] == pytest.approx(fw["steps"] * opt_median + fw["step_tokens"] * per_token)
    assert full["answer_s"] == pytest.approx(fw["forward_tokens"] * per_window_token)
    assert full["load_s"] == pytest.approx(7 * 0.5)

    assert Q.expected_seconds("squad11") == quick and len(timed) == 2  # kept on disk, not re-measured


def test_a_stale_measurement_is_taken_again(real_data, fresh_cache, timed, monkeypatch):
    Q.measure("squad11")
    assert Q.stored_measurement("squad11") is not None
    threads = Q.torch.get_num_threads()
    with monkeypatch.context() as m:
        m.setattr(Q.torch, "get_num_threads", lambda: threads + 1)  # torch's threads changed
        assert Q.stored_measurement("squad11") is None
    assert Q.stored_measurement("squad11") is not None
    monkeypatch.setattr(Q, "STALE_AFTER_S", 0.0)  # older than allowed
    assert Q.stored_measurement("squad11") is None
    Q.expected_seconds("squad11")
    assert len(timed) == 4


def test_timing_takes_several_steps_after_a_warm_up(bert_path, monkeypatch):
    """time_training_step on a tiny model with a clock whose k-th reading is k²: every interval
    is known, so the lists show which steps were timed (five, not the warm-up)."""
    from transformers import AutoModelForQuestionAnswering

    ticks = iter(range(1000))
    monkeypatch.setattr(qa_training, "_clock", lambda: next(ticks) ** 2)
    calls = []
    real = AutoModelForQuestionAnswering.from_pretrained

    def load(*args, **kwargs):
        model = real(*args, **kwargs)
        model.register_forward_hook(lambda m, i, o: calls.append((m.training, i)))
        return model

    monkeypatch.setattr(AutoModelForQuestionAnswering, "from_pretrained", load)
    t = qa_training.time_training_step(
        qa_training.QATrainConfig(base=str(bert_path)), "cpu", batch=4, tokens=64, forward_batch=8
    )
    sq = [k * k for k in range(1000)]
    assert t["load_s"] == sq[1] - sq[0]
    # readings 2-4: the warm-up step; then three per step (start, after backward, after AdamW)
    assert t["train_step_s"] == [sq[k + 2] - sq[k] for k in range(5, 20, 3)]
    assert t["optimizer_s"] == [sq[k + 2] - sq[k + 1] for k in range(5, 20, 3)]
    # readings 20-21: the warm-up forward; then two per forward pass
    assert t["forward_s"] == [sq[k + 1] - sq[k] for k in range(22, 32, 2)]
    assert [training for training, _ in calls] == [True] * 6 + [False] * 6  # warm-ups + 5 each


def _progress_file(agent_id: str, **fields) -> Path:
    """The run's progress file (the background job's) as a run would leave it."""
    path = background.job_file(train_key(agent_id))
    path.parent.mkdir(parents=True, exist_ok=True)
    base = {"state": "running", "pid": os.getpid(), "updated_at": time.time(), "error": ""}
    path.write_text(json.dumps(base | fields), encoding="utf-8")
    return path


def test_status_reads_the_progress_file_and_a_dead_pid_means_stopped(real_data, fresh_cache, monkeypatch):
    assert Q.training_status("squad11").state == "idle"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # stands for the run
    try:
        _progress_file("minilm-qa-quick", pid=proc.pid, stage="fine-tuning", done=16, total=302, left_s=143.5)
        s = Q.training_status("squad11")
        assert (s.state, s.stage, s.done, s.total) == ("running", "fine-tuning", 16, 302)
        assert s.left_s == pytest.approx(143.5, abs=5)  # brought up to now from when it was written
        _progress_file("minilm-qa-quick", pid=proc.pid, stage="answering", done=384, total=3795, left_s=80)
        s = Q.training_status("squad11")
        assert (s.stage, s.done, s.total) == ("answering", 384, 3795) and s.left_s == pytest.approx(80, abs=5)
        # a file whose pid is someone else's now (another process start time than the run's)
        _progress_file("minilm-qa-quick", pid=proc.pid, pid_start=1, stage="answering", done=1, total=9)
        assert Q.training_status("squad11").state == "failed"
        _progress_file("minilm-qa-quick", pid=proc.pid, stage="answering", done=384, total=3795, left_s=None)
        assert Q.training_status("squad11").left_s is None
    finally:
        proc.kill()
        proc.wait()
    # the process is gone and the file never finished: stopped, and the log says why
    s = Q.training_status("squad11")
    assert s.state == "failed" and f"process {proc.pid} ended during answering" in s.message
    log = background.job_file(train_key("minilm-qa-quick")).with_suffix(".log")
    log.write_text(
        "answer fold0:  10%|█ | 384/3795\r\nerror: fold0: No space left on device\n", encoding="utf-8"
    )
    assert Q.training_status("squad11").message == "error: fold0: No space left on device"
    _progress_file("minilm-qa-quick", state="failed", stage="answering", error="MemoryError: out of memory")
    assert Q.training_status("squad11").message == "MemoryError: out of memory"  # the run said so itself
    _progress_file("minilm-qa-quick", state="done", stage="registering", pid=proc.pid)
    assert Q.training_status("squad11").state == "idle"  # finished, but its pool is not this dataset's


def test_each_dataset_has_its_own_quick_run_and_pool(real_data, fresh_cache, monkeypatch):
    """A run on squad11 is not squad20's (their agents differ), and the offer on squad20 names its
    own pool and experts (it once named squad11's, and the run it started failed after training)."""
    import pages.ui.live_agent as page_module

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # stands for the run
    try:
        _progress_file("minilm-qa-quick", pid=proc.pid, stage="fine-tuning", done=1, total=9, left_s=5.0)
        assert Q.training_status("squad11").state == "running"
        assert Q.training_status("squad20").state == "idle"
    finally:
        proc.kill()
        proc.wait()
    assert Q.quick_pool("squad20") == ("P3v2-quick", ("nlnet", "bert-single"))
    offer = page_module._offer_text("squad20", Q.Measurement("none"))
    assert "The new pool P3v2-quick routes between it, nlnet and bert-single." in offer
    assert "`python scripts/train_agent.py --dataset squad20`, which trains" in offer
    eleven = page_module._offer_text("squad11", Q.Measurement("none"))  # every pool the run makes
    assert (
        "P3-quick routes between it, rnet-plus and bert-ens; Plocal-quick, between it, smollm2-135m" in eleven
    )
    assert Q.quick_pool("hf-squad") is None and Q.QUICK.datasets() == ["squad11", "squad20"]


def test_the_run_starts_as_a_background_job_and_its_pid_is_watched(real_data, fresh_cache, monkeypatch):
    measuring = background.start(Q.timing_key("squad11"), "tests.test_jobs:counting", SLEEPING)
    monkeypatch.setattr(Q, "_MEASURING", {"squad11"})
    real = background.subprocess.Popen
    started = []

    def popen(cmd, **kw):
        started.append((cmd, kw))
        return real([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)

    monkeypatch.setattr(background.subprocess, "Popen", popen)
    _progress_file("minilm-qa-quick", state="failed", stage="answering", error="an older run")
    Q.start_training("squad11")
    ((cmd, kw),) = started
    key = train_key("minilm-qa-quick")
    assert cmd[:5] == [
        sys.executable,
        "-m",
        "l2d_core.background",
        key,
        "l2d_core.agents.train_cli:train_job",
    ]
    assert json.loads(cmd[5]) == {"argv": ["--dataset", "squad11", "--profile", "quick"]}
    assert kw["cwd"] == background.PROJECT_ROOT and kw["env"]["L2D_CACHE_DIR"] == str(fresh_cache)
    # the measurement under way was stopped: it would slow the run
    assert background.status(measuring.key).error == "cancelled"
    run = background.status(key)
    try:
        assert Q.training_status("squad11") == Q.TrainingStatus("running", "starting")  # not the older run
        Q.start_training("squad11")
        assert len(started) == 1  # one run at a time
    finally:
        os.killpg(run.pid, 9)
        background._PROCS.pop(key).wait()
    stopped = Q.training_status("squad11")  # it ended before writing anything
    assert stopped.state == "failed" and f"process {run.pid} ended during starting" in stopped.message


def test_single_query_page_draws_at_once_then_fills_in_the_time_and_shows_the_run(
    real_data, seeded_cache, timed, monkeypatch
):
    """No pool answers new text: opening the page starts no measurement (it says the time is not
    measured yet); asked, the time is measured in a background process, never waited for, then
    shown at the machine's load now; the button starts the run, whose progress the page then
    shows; a run that stopped says so."""

    import pages.ui.live_agent as page_module

    monkeypatch.setattr(Q.os, "getloadavg", lambda: (0.5, 0.5, 0.5))  # idle, then as now
    # torch's thread count is per OS thread: an earlier test that set the main thread's would make
    # the page's script thread see a measurement taken here as stale
    monkeypatch.setattr(Q.torch, "get_num_threads", lambda: 2)
    spawned = []

    real_start = background.start  # other jobs (the page reads the default's agents in) run for real

    def pending(key, target, kwargs=None, title=""):  # a measurement job that has not finished
        if not target.endswith(":measure_job"):
            return real_start(key, target, kwargs, title)
        spawned.append((key, target, kwargs))
        path = background.job_file(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"state": "running", "pid": os.getpid(), "updated_at": time.time()}))

    monkeypatch.setattr(background, "start", pending)
    at = open_page("single_query")
    at.run()
    assert not at.exception, at.exception
    assert timed == [] and spawned == []  # opening the page measured nothing and started nothing
    offer = next(i.value for i in at.info if "quick model" in i.value)
    assert "not measured yet" in offer and "about" not in offer and "P3-quick" in offer
    at.run()
    assert spawned == []
    measure = next(b for b in at.button if b.label.startswith("Measure this machine's time"))
    measure.click().run()
    assert not at.exception, at.exception
    # the page drew without waiting: nothing was timed in its process, the measurement was handed to
    # a background process (still running: Pending) — how fast the page draws is measured by
    # scripts/bench_dashboard.py, not asserted here
    assert timed == []
    assert spawned == [
        ("timing-squad11", "l2d_core.app_logic.quick_agent:measure_job", {"dataset": "squad11"})
    ]
    offer = next(i.value for i in at.info if "quick model" in i.value)
    assert "being measured now" in offer and "about" not in offer
    assert any("Measuring the time" in c.value for c in at.caption)
    at.run()
    assert len(spawned) == 1  # one measurement at a time

    # what the background process does: the quick profile's timing is kept first (here the
    # full profile's batch size then fails): the page shows it and goes on waiting for the rest
    fake = Q.time_training_step

    def quick_only(config, device, **kw):
        if kw["batch"] != Q.QUICK.batch_size:
            raise RuntimeError("stopped")
        return fake(config, device, **kw)

    monkeypatch.setattr(Q, "time_training_step", quick_only)
    with pytest.raises(RuntimeError):
        Q.measure("squad11")
    at.run()
    assert not at.exception, at.exception
    quick = Q.expected_seconds("squad11")
    offer = next(i.value for i in at.info if "quick model" in i.value)
    assert f"about {quick['total_s'] / 60:.0f} min on this machine at its load now (0.5)" in offer
    assert "in all (being measured now)" in offer
    assert any("Measuring the time" in c.value for c in at.caption)

    monkeypatch.setattr(Q, "time_training_step", fake)
    record = Q.measure("squad11")
    at.run()
    assert not at.exception, at.exception
    quick, full = Q.estimate(record, Q.QUICK), Q.estimate(record, PROFILES["full"])
    offer = next(i.value for i in at.info if "quick model" in i.value)
    assert f"about {quick['total_s'] / 60:.0f} min on this machine at its load now (0.5)" in offer
    assert f"about {page_module._minutes(full['total_s'])} on this machine now" in offer
    ago = re.search(r"measured (\d+) s ago at load 0\.5 on", offer)  # the page's run takes its own time
    assert ago and int(ago.group(1)) <= time.time() - record["measured_at"] + 0.5
    assert f"{quick['steps']:,} steps" in offer and "trains 3 models" in offer
    assert not any("Measuring the time" in c.value for c in at.caption)

    procs = []

    def start(dataset):  # stands for the real run: a live process and the progress file it writes
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        procs.append(proc)
        _progress_file("minilm-qa-quick", pid=proc.pid, stage="fine-tuning", done=38, total=302, left_s=330.0)

    monkeypatch.setattr(page_module, "start_training", start)
    button = next(b for b in at.button if b.label == "Train the quick model")
    try:
        button.click().run()
        assert not at.exception, at.exception
        assert any("Training the quick model" in i.value for i in at.info)
        left = (330.0 + quick["answer_s"]) / 60
        assert any(
            "38 of 302 steps" in p.proto.text and f"{left:.0f} min left in all" in p.proto.text
            for p in at.get("progress")
        )
    finally:
        for p in procs:
            p.kill()
            p.wait()
    at.run()
    assert any("The last training run stopped" in e.value for e in at.error)
    assert any(b.label == "Train the quick model" for b in at.button)  # and it can be started again


def test_once_a_pool_answers_new_text_the_page_switches_to_it(real_data, seeded_cache, bert_path):

    from l2d_core.agents import AgentSpec, register_agent, register_pool
    from l2d_core.agents.catalog import PoolSpec

    spec = AgentSpec(
        id="minilm-qa-quick", dataset="squad11", kind="extractive", gflops=1.0, gflops_source="measured",
        path=str(bert_path), name="tiny", params=1, options={"max_length": 64},
    )  # fmt: skip
    register_agent(spec, replace=True)
    register_pool(PoolSpec("P3-quick", "squad11", spec.id, ("rnet-plus", "bert-ens"), "test"), replace=True)
    assert Q.training_status("squad11").state == "done"
    at = open_page("single_query")
    at.session_state["pool"] = "P3"
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="pool").value == "P3"
    assert any("P3-quick" in i.value for i in at.info)
    next(b for b in at.button if b.label == "Switch to P3-quick").click().run()
    assert not at.exception, at.exception
    assert at.selectbox(key="pool").value == "P3-quick"


def test_a_measurement_taken_under_load_is_scaled_to_the_load_now():
    from l2d_core.runtime import at_load_now

    """A time measured with the cores shared (load 3 on 2 cores: half a core's share each) is
    about half as long on an idle machine, and as measured at the same load."""
    record = {"load": 3.0}
    assert at_load_now(100.0, record, load_now=3.0) == pytest.approx(100.0)
    cores = os.cpu_count()
    idle = at_load_now(100.0, record, load_now=0.0)
    assert idle == pytest.approx(100.0 * min(1.0, cores / 4.0))
    assert at_load_now(100.0, {}, load_now=9.0) == 100.0  # an older record without its load
