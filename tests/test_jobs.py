"""Background jobs (l2d_core.background): a job in a process of its own writes its progress
file, a second start attaches to it, a killed job is reported as stopped, a job whose parent is
gone still writes its result; and the encoder's progress callback (counts up, each batch kept).

The job functions below run in the job's own process (``tests.test_jobs:counting``), so this
module imports nothing at top level that only pytest's path provides."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from l2d_core import background as jobs
from l2d_core.app_logic.job_words import describe, left_words

ROOT = Path(__file__).resolve().parent.parent
FIELDS = {"state", "done", "total", "unit", "current", "elapsed_s", "left_s", "result", "error", "pid"}


def counting(report, n: int, dt: float, out: str, stage: str = "Counting", unit: str = "items", fail=False):
    """A job: ``n`` items of ``dt`` seconds each, then ``out`` written (its result)."""
    report.stage(stage, unit, n)
    for k in range(1, n + 1):
        time.sleep(dt)
        report(k, n, f"item {k}")
    if fail:
        raise ValueError("the input was bad\nsecond line of the message")
    Path(out).write_text(json.dumps({"items": n}))
    return out


def wait(key: str, until, timeout: float = 120.0) -> jobs.JobStatus:
    """Poll the job's status until ``until(status)`` holds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        s = jobs.status(key)
        if until(s):
            return s
        time.sleep(0.05)
    pytest.fail(f"job {key} never got there: {jobs.status(key)}")


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    end = time.monotonic() + 30
    while jobs._alive(pid, None) and time.monotonic() < end:
        jobs.status("reap")  # reaps this process's own children
        time.sleep(0.05)


def test_a_job_writes_its_progress_file_and_its_result(fresh_cache, tmp_path):
    out = tmp_path / "result.json"
    first = jobs.start("count", "tests.test_jobs:counting", {"n": 6, "dt": 0.3, "out": str(out)}, "Count")
    assert first.running and first.pid and first.title == "Count"
    seen = []
    while (s := jobs.status("count")).running:
        seen.append(s)
        time.sleep(0.1)
    assert s.state == "done" and s.result == str(out) and json.loads(out.read_text()) == {"items": 6}
    assert (s.done, s.total, s.unit, s.current, s.error) == (6, 6, "items", "item 6", "")
    counted = [x for x in seen if x.total == 6]
    assert counted and [x.done for x in counted] == sorted(x.done for x in counted)
    timed = [x for x in counted if x.done]  # time left: elapsed over the share done
    assert timed and all(0.0 <= x.left_s <= 10.0 for x in timed)
    said = describe(timed[-1])
    assert re.fullmatch(r"Counting: item (\d) done \(\1 of 6 items\); about \d+ s left", said), said
    doc = json.loads(jobs.job_file("count").read_text())
    assert FIELDS <= set(doc) and doc["pid"] == first.pid and doc["updated_at"] >= doc["started_at"]
    assert not list(jobs.job_file("count").parent.glob("*.part"))  # written whole, renamed


def test_a_second_start_attaches_and_a_killed_job_is_stopped(fresh_cache, tmp_path):
    kwargs = {"n": 200, "dt": 0.2, "out": str(tmp_path / "never.json")}
    first = jobs.start("slow", "tests.test_jobs:counting", kwargs)
    wait("slow", lambda s: s.done >= 1)
    again = jobs.start("slow", "tests.test_jobs:counting", kwargs)
    assert again.running and again.pid == first.pid and again.done >= 1  # the same job, not a second
    kill(first.pid)
    gone = jobs.status("slow")
    assert (gone.state, gone.error, gone.left_s) == ("failed", "stopped", None)
    assert json.loads(jobs.job_file("slow").read_text())["state"] == "running"  # as it was left
    restarted = jobs.start("slow", "tests.test_jobs:counting", kwargs)  # a stopped job starts anew
    assert restarted.running and restarted.pid != first.pid
    kill(restarted.pid)


def test_a_failing_job_says_why_in_one_line(fresh_cache, tmp_path):
    kwargs = {"n": 1, "dt": 0.0, "out": str(tmp_path / "x.json"), "fail": True}
    jobs.start("bad", "tests.test_jobs:counting", kwargs)
    s = wait("bad", lambda s: not s.running)
    assert s.state == "failed" and s.error == "the input was bad second line of the message"
    assert "Traceback" in jobs.job_file("bad").with_suffix(".log").read_text()  # for people to read
    with pytest.raises(ValueError, match="bad job key"):
        jobs.status("../elsewhere")


def test_result_waits_for_the_job_and_cancel_stops_it(fresh_cache, tmp_path):
    """result() waits and returns what the job returned (or raises its one-line error); cancel()
    ends the job's process and records why, and result() then says it was cancelled."""
    out = str(tmp_path / "r.json")
    jobs.start("quick", "tests.test_jobs:counting", {"n": 2, "dt": 0.05, "out": out})
    assert jobs.result("quick", timeout=120) == out
    jobs.start("bad", "tests.test_jobs:counting", {"n": 1, "dt": 0.0, "out": out, "fail": True})
    with pytest.raises(jobs.JobFailedError, match="the input was bad"):
        jobs.result("bad", timeout=120)
    with pytest.raises(LookupError):
        jobs.result("never-started")
    first = jobs.start("long", "tests.test_jobs:counting", {"n": 200, "dt": 0.2, "out": out})
    wait("long", lambda s: s.done >= 1)
    with pytest.raises(TimeoutError):
        jobs.result("long", timeout=0.2)
    gone = jobs.cancel("long")
    assert (gone.state, gone.error) == ("failed", "cancelled") and not jobs._alive(first.pid, first.pid_start)
    with pytest.raises(jobs.JobFailedError, match="cancelled"):
        jobs.result("long")
    assert jobs.cancel("long").error == "cancelled"  # cancelling an ended job changes nothing


def test_cancel_stops_a_run_that_reports_without_start(fresh_cache):
    """A command line's run reports as a job (its Reporter) without start(): it is one process in
    its starter's process group, and cancel() stops that process alone."""
    code = "from l2d_core.background import Reporter; import time; Reporter('cli')(1, 9); time.sleep(120)"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    try:
        wait("cli", lambda s: s.done == 1)
        assert jobs.cancel("cli").error == "cancelled"
        assert proc.wait(timeout=30) == -signal.SIGTERM  # and this process, in the same group, lives on
    finally:
        proc.kill()
        proc.wait()


def test_a_job_whose_parent_is_gone_still_saves_its_result(fresh_cache, tmp_path):
    out = tmp_path / "orphan.json"
    starter = (
        "from l2d_core import background as jobs; import sys; "
        f"s = jobs.start('orphan', 'tests.test_jobs:counting', {{'n': 8, 'dt': 0.25, 'out': {str(out)!r}}}); "
        "print(s.pid)"
    )
    parent = subprocess.run(
        [sys.executable, "-c", starter], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    )
    pid = int(parent.stdout.split()[-1])
    assert jobs.status("orphan").running and not out.exists()  # its starter has exited; it runs on
    s = wait("orphan", lambda s: not s.running)
    assert s.state == "done" and s.pid == pid and json.loads(out.read_text()) == {"items": 8}


# --- the encoder's progress callback ------------------------------------------------------------


@pytest.fixture
def tiny_encoder(bert_path, fresh_cache):
    from l2d_core.routers.encoder import load_encoder

    return load_encoder(str(bert_path), device="cpu")


def texts_of(n: int, seed: int) -> list[str]:
    from _tiny_models import WORDS

    rng = np.random.default_rng(seed)
    return [f"{i} " + " ".join(rng.choice(WORDS, rng.integers(2, 60))) for i in range(n)]


def test_embedding_progress_counts_up_and_each_batch_is_kept(tiny_encoder):
    from _tiny_models import one_thread

    from l2d_core.routers.encoder import embedding_store

    texts = texts_of(100, 0)
    calls = []
    with one_thread():
        vecs = tiny_encoder.embed(texts + texts[:10], batch_size=16, step=lambda *a: calls.append(a))
    assert calls[0] == (0, 100, 0.0) and calls[-1][:2] == (100, 100)  # duplicates counted once
    done, work = [c[0] for c in calls], [c[2] for c in calls]
    assert done == [0, *range(16, 100, 16), 100] and {c[1] for c in calls} == {100}
    assert work == sorted(work) and work[-1] == pytest.approx(1.0)
    # longest texts first: the first batch is more than its share of the work
    assert work[1] > 16 / 100
    assert np.array_equal(vecs[100:], vecs[:10])
    calls.clear()
    with one_thread():
        again = tiny_encoder.embed(texts, step=lambda *a: calls.append(a))
    assert not calls and np.array_equal(again, vecs[:100])  # all cached: nothing to count

    # a run stopped after two batches keeps them; the next run counts and encodes only the rest
    more = texts_of(80, 1)

    def stop_after_two(done, total, work):
        if done >= 32:
            raise KeyboardInterrupt

    with one_thread(), pytest.raises(KeyboardInterrupt):
        tiny_encoder.embed(more, batch_size=16, step=stop_after_two)
    store = embedding_store()
    kept = [k in store for k in tiny_encoder.keys(more)]
    assert sum(kept) == 32
    calls.clear()
    with one_thread():
        rest = tiny_encoder.embed(more, batch_size=16, step=lambda *a: calls.append(a))
        fresh = tiny_encoder.encode(more)
    assert calls[0][:2] == (0, 48) and calls[-1][:2] == (48, 48)
    np.testing.assert_allclose(rest, fresh.astype(np.float16), atol=1e-3)


def test_feature_texts_are_what_featurize_embeds(tiny_encoder):
    from _tiny_models import one_thread

    from l2d_core.data.records import QARecord
    from l2d_core.routers.encoder import embedding_store
    from l2d_core.routers.features import feature_texts, featurize

    recs = [
        QARecord(f"q{i}", "t", f"the city {i % 3} of melville", f"who wrote {i}", ("melville",), (0,))
        for i in range(7)
    ]
    texts = feature_texts(tiny_encoder, recs)
    assert len(texts) == 3 + 7  # each context once
    with one_thread():
        tiny_encoder.embed(texts)
        n = len(embedding_store())
        featurize(tiny_encoder, recs)
    assert len(embedding_store()) == n  # nothing left for featurize to embed


# --- work that counts nothing (fitting one router): a bar timed by its last run here -------------


def test_a_duration_measured_here_times_the_next_run(fresh_cache):
    assert jobs.expected_duration("fit|l2d-plugin", 8000) is None  # never timed on this machine
    jobs.record_duration("fit|l2d-plugin", 6.0, 4000)
    assert jobs.expected_duration("fit|l2d-plugin", 8000) == pytest.approx(12.0)  # scaled by size
    jobs.record_duration("fit|l2d-plugin", 2.0, 4000)  # the latest measurement counts
    assert jobs.expected_duration("fit|l2d-plugin", 4000) == pytest.approx(2.0)
    assert jobs.expected_duration("fit|r-prob", 4000) is None


class _Slot:
    def __init__(self, drawn):
        self.drawn = drawn

    def progress(self, share, text):
        self.drawn.append((share, text))

    def empty(self):
        self.drawn.append(None)


def test_the_fit_bar_counts_down_from_the_time_measured_before(monkeypatch):
    from types import SimpleNamespace

    from pages.ui import progress

    drawn = []
    monkeypatch.setattr(progress, "st", SimpleNamespace(empty=lambda: _Slot(drawn)))
    task = progress.Background(lambda: time.sleep(1.6) or "fitted")
    assert progress.timed_bar(task, "Fitting it", expected_s=2.0, after_s=0.2) == "fitted"
    bars, cleared = drawn[:-1], drawn[-1]
    assert cleared is None and len(bars) >= 2  # drawn while it ran, gone when it was done
    shares = [b[0] for b in bars]
    assert shares == sorted(shares) and 0.0 < shares[0] < shares[-1] < 1.0
    lefts = [
        int(re.fullmatch(r"Fitting it: about (\d) s left \(timed here before\)", t).group(1)) for _, t in bars
    ]
    assert lefts == sorted(lefts, reverse=True) and lefts[0] >= 1

    drawn.clear()  # never timed here: the time so far, no share made up
    task = progress.Background(lambda: time.sleep(0.8))
    progress.timed_bar(task, "Fitting it", expected_s=None, after_s=0.2)
    share, text = drawn[0]  # drawn after about 0.2 s (a loaded machine may say 1 s)
    assert share == 0.0 and re.fullmatch(r"Fitting it: [01] s so far \(not timed on this machine yet\)", text)

    drawn.clear()  # a quick load draws nothing; an error reaches the page
    assert progress.timed_bar(progress.Background(lambda: 7), "Fitting it", 5.0) == 7 and not drawn
    with pytest.raises(ValueError, match="no training questions"):
        progress.timed_bar(progress.Background(lambda: int("no training questions")), "Fitting it", 5.0)


def test_run_comparison_counts_the_routers_done(real_data):
    from _slices import slice_bench

    from l2d_core.evaluation.comparison import ComparisonPlan, ComparisonProgress, run_comparison

    lines, steps = [], []
    ids = ["zero", "random", "agent:bert-ens"]
    heard = ComparisonProgress(started=lines.append, done=lambda *a: steps.append(a))
    res = run_comparison(slice_bench("P2"), ComparisonPlan(seeds=(0,), routers=ids, n_boot=0), heard)
    assert steps == [(1, 3, "zero"), (2, 3, "random"), (3, 3, "agent:bert-ens")]
    assert lines == [f"{r}: 1 seed(s)" for r in ids]  # the script's text progress, as before
    assert list(res["routers"]) == ids


def test_time_left_is_not_extrapolated_from_items_read_back():
    """A router fitted already is read back in a fraction of a second: the bar said "about 0 s
    left" with half the routers still to fit (seen in the browser). Such items time nothing."""
    assert left_words(0.3, 1, 2) == "timing the next"
    assert left_words(0.0, 0, 3) == "timing the next"
    assert left_words(20.0, 1, 2) == "about 20 s left"
    assert left_words(240.0, 2, 3) == "about 2 min 0 s left"
