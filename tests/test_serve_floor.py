"""Issue 36 ("the routing API at its floor"): every accepted connection gets TCP_NODELAY (checked on
the served socket itself, one worker and two); scripts/serve.py says "serving" only once the port
answers, and every startup error is one sentence; a deployed router is prepared once — no agent
store opened, no head copied per request — and decides as it did unprepared."""

from __future__ import annotations

import copy
import ctypes
import http.client
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _serving import cascade_artifact

import l2d_core.agents.cache as agent_cache
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.extractive import ExtractiveAgent
from l2d_core.data import load_dataset
from l2d_core.deploy import deploy, load_router
from l2d_core.method.costs import CostConfig
from l2d_core.routers.registry import make_router
from l2d_core.runtime import limit_threads, on_model_thread

SERVE = Path(__file__).resolve().parent.parent / "scripts" / "serve.py"
CONTEXT = "Moby-Dick is an 1851 novel by American writer Herman Melville about the whale."
Q = {"question": "Who wrote Moby-Dick?", "context": CONTEXT}
LINUX = sys.platform.startswith("linux")


@pytest.fixture(scope="module")
def artifact(live_bench, tmp_path_factory):
    return cascade_artifact(live_bench, tmp_path_factory.mktemp("floor"))


@pytest.fixture(scope="module")
def qids(live_bench):
    """Question ids of the slice whose main answers are in the agent cache (train and test)."""
    return [str(q) for q in [*live_bench.train.qids[:12], *live_bench.test.qids[:12]]]


# --- the accepted socket ------------------------------------------------------------------------


def tcp_inodes(local_port: int, remote_port: int) -> set[str]:
    """Inodes of the TCP sockets from ``local_port`` to ``remote_port`` (/proc/net/tcp, tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for row in f.readlines()[1:]:
                cols = row.split()
                if (
                    int(cols[1].rsplit(":", 1)[1], 16) == local_port
                    and int(cols[2].rsplit(":", 1)[1], 16) == remote_port
                ):
                    found.add(cols[9])
    return found


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    tree, grew = {pid}, True
    while grew:
        below = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= below
        grew = bool(below)
    return sorted(tree)


def served_socket_nodelay(server_pid: int, port: int, client: socket.socket) -> bool:
    """TCP_NODELAY of the socket the server accepted for ``client``: found by its inode in the
    server's processes and duplicated here (pidfd_getfd), so the option is read on the very
    socket the server writes its responses to."""
    inodes = tcp_inodes(port, client.getsockname()[1])
    assert inodes, "the accepted connection is not in /proc/net/tcp"
    libc = ctypes.CDLL(None, use_errno=True)
    for pid in process_tree(server_pid):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                pidfd = os.pidfd_open(pid)
                try:
                    mine = libc.syscall(438, pidfd, int(fd), 0)  # SYS_pidfd_getfd (Linux 5.6+)
                    assert mine >= 0, f"pidfd_getfd failed: {os.strerror(ctypes.get_errno())}"
                finally:
                    os.close(pidfd)
                with socket.socket(fileno=mine) as dup:
                    return bool(dup.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    raise AssertionError(f"no process under {server_pid} holds the accepted socket")


def start_serving(artifact: Path, *flags: str) -> tuple[subprocess.Popen, int, str]:
    """scripts/serve.py on a free port: the process, the port, and its "serving" line (read
    as it is printed)."""
    proc = subprocess.Popen(
        [sys.executable, str(SERVE), "--router", str(artifact), "--port", "0", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stdout:
        if line.startswith("serving"):
            return proc, int(re.search(r":(\d+)/docs", line).group(1)), line
    proc.wait(30)
    raise AssertionError(f"serve.py exited without serving: {proc.stderr.read()[-2000:]}")


@pytest.mark.skipif(not LINUX, reason="reads the server's socket through /proc and pidfd_getfd (Linux)")
@pytest.mark.parametrize("workers", [1, 2])
def test_serving_is_said_once_it_answers_and_accepted_sockets_send_at_once(artifact, workers):
    proc, port, line = start_serving(artifact, "--workers", str(workers), "--log-level", "warning")
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", "/healthz")  # at once, no retry: "serving" means it answers
        first = conn.getresponse()
        assert first.status == 200 and json.loads(first.read())["status"] == "ok"
        for _ in range(2):  # a kept-open connection, as client libraries keep them
            conn.request("POST", "/v1/route", json.dumps(Q), {"content-type": "application/json"})
            resp = conn.getresponse()
            assert resp.status == 200 and json.loads(resp.read())["router"] == "l2d-cascade"
        assert served_socket_nodelay(proc.pid, port, conn.sock)
        conn.close()
    finally:
        proc.terminate()
        proc.wait(60)
    assert f"127.0.0.1:{port}/docs" in line


def test_a_worker_warms_every_shape_up_on_its_share_of_the_threads(artifact, monkeypatch):
    """``serve.py --workers N`` gives each worker cores / N torch threads; a worker warms up every
    input shape on that share once its model is loaded (workers warming up side by side on every
    core's thread each crowded the cores, and took twice as long to serve)."""
    import torch

    seen = []
    real = ExtractiveAgent.warm_up
    monkeypatch.setattr(
        ExtractiveAgent,
        "warm_up",
        lambda agent: seen.append(on_model_thread(torch.get_num_threads)) or real(agent),
    )
    before = torch.get_num_threads()
    try:
        load_router(artifact).warm_up(1)
        assert seen == [1]
        limit_threads(2)
        load_router(artifact).warm_up()  # no share given: the threads as they are
        assert seen == [1, 2]
    finally:
        limit_threads(before)


# --- startup errors: one sentence ----------------------------------------------------------------


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_in_use_is_one_sentence_at_any_log_level(artifact, capsys, workers):
    import serve

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = [
            "--router",
            str(artifact),
            "--port",
            str(port),
            "--log-level",
            "critical",
            "--workers",
            workers,
        ]
        assert serve.main(argv) == 2
    out, errors = capsys.readouterr()
    assert "serving" not in out and "Traceback" not in errors and errors.count("\n") == 1
    assert errors.startswith(f"error: port {port} on 127.0.0.1 is in use") and "--port" in errors


@pytest.mark.parametrize(
    "host, words",
    [
        ("10.255.255.1", "is not an address of this machine"),
        ("no-such-host.invalid", "is not a name or address"),
    ],
)
def test_a_host_that_cannot_be_served_on_is_one_sentence(artifact, capsys, host, words):
    import serve

    assert (
        serve.main(["--router", str(artifact), "--host", host, "--port", "0", "--log-level", "critical"]) == 2
    )
    out, errors = capsys.readouterr()
    assert "serving" not in out and "Traceback" not in errors and errors.count("\n") == 1
    assert errors.startswith("error: ") and words in errors and host in errors


# --- a router prepared once ----------------------------------------------------------------------


def test_a_prepared_router_opens_no_store_per_request_and_decides_the_same(artifact, qids, monkeypatch):
    """After warm-up, routing and answering by qid open no agent store (they opened one per agent
    per request), and give what an unprepared router gives (a new store handle per request)."""
    unprepared = load_router(artifact)
    ds = load_dataset(unprepared.manifest["dataset"])
    queries = [(ds[q].question, ds[q].context) for q in qids]
    before = [unprepared.answer_batch([t], [q])[0] for t, q in zip(queries, qids)]

    router = load_router(artifact).warm_up()
    opened = []
    real = agent_cache.open_disk_cache
    monkeypatch.setattr(agent_cache, "open_disk_cache", lambda *a, **k: opened.append(a[0]) or real(*a, **k))
    after = [router.answer_batch(router.texts([(None, None)], [q]), [q])[0] for q in qids]
    assert opened == []
    keep = ("agent", "deferred", "compared", "chance_wrong", "signals", "gflops", "answer")
    for b, a in zip(before, after):
        a["answer"].pop("latency_ms", None), b["answer"].pop("latency_ms", None)
        assert {k: a[k] for k in keep} == {k: b[k] for k in keep}
    assert any(a["signals"]["main_answer"] for a in after)


def test_a_router_of_recorded_answers_reads_its_estimates_from_a_table_made_at_load(live_bench, tmp_path):
    """A router that routes dataset questions only (it reads an agent known by its prediction
    file) works out its error estimates of every question its agents answered once, at load: a
    query by qid then reads its row and computes no feature, and decides what the per-query path
    decides; a qid sent with text of its own is computed from that text."""
    router = make_router("l2d-posthoc", helpers=("bert-ens",)).fit(live_bench)
    folder = deploy(router, CostConfig((1.0,), (0.3,))).save(tmp_path / "posthoc")
    unprepared = load_router(folder)
    assert not unprepared.routes_new_text()
    ds = load_dataset(unprepared.manifest["dataset"])
    qids = [str(q) for q in [*live_bench.train.qids[:10], *live_bench.test.qids[:10]]]
    queries = [(ds[q].question, ds[q].context) for q in qids]
    before = [unprepared.route_batch([t], [q])[0] for t, q in zip(queries, qids)]

    served = load_router(folder).prepare()
    table = served.router.deployed_.table
    answered = AgentCache().done_ids("squad11", "tiny-live")
    assert table is not None and set(table) == answered  # every question both agents answered
    frozen = served.router
    computed = []
    real = type(frozen).error_estimates
    frozen.error_estimates = lambda signals: computed.append(len(signals.records)) or real(frozen, signals)
    after = [served.route_batch([t], [q])[0] for t, q in zip(queries, qids)]
    assert computed == []  # every row read from the table

    def same(a):
        return {k: v for k, v in a.items() if k != "latency_ms"}

    assert [same(a) for a in after] == [same(b) for b in before]
    other = (queries[0][0] + " In which year?", queries[0][1])
    assert same(served.route_batch([other], qids[:1])[0]) == same(
        unprepared.route_batch([other], qids[:1])[0]
    )
    assert computed == [1]  # text of its own: its estimates computed, not read


def test_a_router_that_reads_recorded_answers_routes_them_without_torch(artifact, qids):
    """Loading an artifact and routing recorded questions by qid imports neither torch nor the
    other routers' modules (a served post-hoc router held torch's ~180 MB for nothing); the
    recorded answers are a snapshot read once."""
    code = (
        "import sys, json\n"
        "from l2d_core.deploy import load_router\n"
        f"r = load_router({str(artifact)!r}).prepare()\n"
        f"qids = {qids!r}\n"
        "out = [r.answer_batch(r.texts([(None, None)], [q]), [q])[0]['agent'] for q in qids]\n"
        "mods = [m for m in ('torch', 'transformers', 'l2d_core.routers.sdl') if m in sys.modules]\n"
        "print(json.dumps([out, mods]))\n"
    )
    # the router index on disk (a process that imported every router module, as this one, writes none)
    index = "from l2d_core.routers.registry import router_ids; router_ids()"
    subprocess.run([sys.executable, "-c", index], check=True, timeout=300)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    routed, imported = json.loads(run.stdout.strip().splitlines()[-1])
    assert imported == []
    assert len(routed) == len(qids) and set(routed) <= set(load_router(artifact).agent_ids)


def test_the_post_hoc_heads_are_arrays_made_once_that_compute_what_the_network_does(live_bench, monkeypatch):
    """A served post-hoc head scores with float64 arrays made once per fitted network, not per
    call; they give the network's own float64 outputs (to 1e-12), the same float32 logits, and a
    query routes alone as it does in a batch."""
    import torch

    from l2d_core.routers import head as head_module
    from l2d_core.routers.registry import make_router

    router = make_router("l2d-cascade").fit(live_bench)
    est = router.estimator_
    X = np.random.default_rng(0).normal(size=(5, est.heads_[0].scaler_.n_features_in_))
    est.predict_proba(X)
    made = []
    real = head_module.HeadArrays.of
    monkeypatch.setattr(head_module.HeadArrays, "of", lambda *a: made.append(1) or real(*a))
    got = [est.predict_proba(X[i : i + 1]) for i in range(len(X))]
    assert made == []
    monkeypatch.undo()
    assert np.array_equal(np.concatenate(got), est.predict_proba(X))
    for head in est.heads_:
        x = torch.from_numpy(head.scaler_.transform(X))
        with torch.no_grad():
            want = copy.deepcopy(head.head_).double().eval()(x).numpy()
        new = head.arrays().forward(X)
        assert np.abs(new - want).max() < 1e-12
        assert np.array_equal(new.astype(np.float32), want.astype(np.float32))


# --- precision -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fast", [True, False])
def test_agents_default_to_bf16_where_the_cpu_computes_it_natively(bert_path, monkeypatch, fast):
    """No ``dtype`` option: bf16 on a CPU with native bf16, fp32 on one without; the option forces
    either (an agent loads its model in that precision and still answers)."""
    import torch

    import l2d_core.agents.base as base
    from l2d_core.agents import AgentSpec, load_agent
    from l2d_core.data.records import QARecord

    monkeypatch.setattr(base, "cpu_has_fast_bf16", lambda: fast)
    cpu = torch.device("cpu")
    assert base.resolve_dtype(None, cpu) == (torch.bfloat16 if fast else torch.float32)
    assert (
        base.resolve_dtype("fp32", cpu) == torch.float32 and base.resolve_dtype("bf16", cpu) == torch.bfloat16
    )
    record = QARecord(qid="q", title="", context=CONTEXT, question=Q["question"], answers=())
    for options, want in [({}, torch.bfloat16 if fast else torch.float32), ({"dtype": "fp32"}, torch.float32),
                          ({"dtype": "bf16"}, torch.bfloat16)]:  # fmt: skip
        agent = load_agent(
            AgentSpec("tiny", "squad11", kind="extractive", path=str(bert_path), options=options), "cpu"
        )
        assert agent.model.dtype == want
        assert isinstance(agent.predict([record])[0].answer, str)


def test_forwards_run_at_a_dozen_padded_lengths_that_warm_up_builds_and_answer_as_unpadded(bert_path):
    """A forward batch is padded (masked) to a multiple of ``pad_to`` — 32 in bf16 on a CPU, 8 in
    fp32 — so a low-precision CPU meets a dozen input shapes instead of one per length; warm-up
    runs each of them once; the answers and confidences are those of forwards at the exact lengths
    (fp32: the masked positions change nothing but rounding)."""
    from l2d_core.agents import AgentSpec, load_agent

    spec = AgentSpec("tiny", "squad11", kind="extractive", path=str(bert_path), options={"dtype": "fp32"})
    agent = load_agent(spec, "cpu")
    assert agent.pad_to == 8
    bf16 = load_agent(
        AgentSpec("tiny", "squad11", kind="extractive", path=str(bert_path), options={"dtype": "bf16"}), "cpu"
    )
    assert bf16.pad_to == 32
    lengths = []
    hook = agent.model.register_forward_pre_hook(
        lambda m, a, kw: lengths.append(kw["input_ids"].shape[1]), with_kwargs=True
    )
    agent.warm_up()
    want = list(range(8, agent.max_length + 1, 8))
    assert lengths == want
    records = [r for r in load_dataset("squad11") if r.title == "Super_Bowl_50"][:40]
    lengths.clear()
    padded = [agent.predict([r])[0] for r in records]
    assert set(lengths) <= set(want) and len(set(lengths)) > 1
    hook.remove()
    agent.pad_to = 1  # every forward at its windows' exact length
    exact = [agent.predict([r])[0] for r in records]
    assert [p.answer for p in padded] == [p.answer for p in exact]
    for p, e in zip(padded, exact):
        assert p.extra["confidence"]["span_prob"] == pytest.approx(
            e.extra["confidence"]["span_prob"], abs=1e-4
        )


def test_every_forward_runs_on_the_one_model_thread_whichever_thread_asks(bert_path):
    """Forwards asked from the API's request threads, or the start-up thread, all run on one model
    thread (one OpenMP team per process: two teams put more threads than cores in it, and libgomp
    then sleeps its threads between parallel regions); its result and its exception come back to
    the caller; ``limit_threads`` sets the model thread's torch threads too."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import torch

    from l2d_core.agents import AgentSpec, load_agent
    from l2d_core.runtime import MODEL_THREAD, limit_threads, on_model_thread

    agent = load_agent(AgentSpec("tiny", "squad11", kind="extractive", path=str(bert_path)), "cpu")
    ran = []
    hook = agent.model.register_forward_pre_hook(lambda m, a: ran.append(threading.current_thread().name))
    records = [r for r in load_dataset("squad11") if r.title == "Super_Bowl_50"][:6]
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda r: agent.predict([r])[0].answer, records))
    agent.predict(records[:1])
    hook.remove()
    assert len(ran) >= 7 and len(set(ran)) == 1 and ran[0].startswith(MODEL_THREAD)  # and its FLOP counts
    assert answers == [p.answer for p in agent.predict(records)]
    assert on_model_thread(lambda: on_model_thread(threading.current_thread)).name.startswith(MODEL_THREAD)
    with pytest.raises(ZeroDivisionError):
        on_model_thread(lambda: 1 / 0)
    before = on_model_thread(torch.get_num_threads)
    try:
        assert limit_threads(1) and on_model_thread(torch.get_num_threads) == 1 == torch.get_num_threads()
    finally:
        limit_threads(before)
