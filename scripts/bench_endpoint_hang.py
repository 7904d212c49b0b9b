"""Issue 38's serving target, measured: behind ``scripts/serve.py``, with the LLM endpoint of the
main agent hanging, ``/v1/answer`` gets 504 within the endpoint's deadline + 1 s, and concurrent
``/v1/route`` requests for dataset questions (by qid: they never ask the endpoint) stay near their
idle latency.

    python scripts/bench_endpoint_hang.py [--deadline 2] [--requests 200] [--hangers 4] [--rounds 3] [--json]

It builds, in a temporary cache: an ``openai_chat`` agent at a local fake endpoint (answers
recorded for three articles of SQuAD 1.1), a pool with bert-ens as the expert, a conf-threshold
router exported as an artifact; then serves it with ``scripts/serve.py`` in a subprocess and
measures, in ``--rounds`` interleaved phases, (1) the p50 of ``/v1/route`` by qid alone, (2) the
same while ``--hangers`` clients keep asking ``/v1/answer`` for new text with the endpoint hanging.
The test suite's helpers (``tests/_openai_server.py``, ``tests/_slices.py``) build the fake
endpoint and the benchmark.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import _bootstrap  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
TRAIN = ("Intergovernmental_Panel_on_Climate_Change", "1973_oil_crisis")
TEST = "Jacksonville,_Florida"
QUERY = {"question": "Who wrote Moby-Dick?", "context": "Moby-Dick is a novel by Herman Melville."}


def post(port: int, path: str, body, timeout: float = 60.0) -> tuple[int, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    t0 = time.perf_counter()
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp.status, time.perf_counter() - t0


def build(url: str, deadline: float, folder: Path) -> tuple[Path, list[str]]:
    """The artifact of a conf-threshold router whose main agent is the endpoint at ``url``."""
    from _slices import bow_bench

    from l2d_core.agents import AgentSpec, PoolSpec, load_agent, register_agent, register_pool
    from l2d_core.agents.cache import AgentCache
    from l2d_core.agents.runners import run_into_cache
    from l2d_core.data import load_dataset
    from l2d_core.deploy import deploy
    from l2d_core.routers.registry import make_router

    options = {"base_url": url, "retries": 0, "timeout": deadline, "batch_size": 8}
    spec = register_agent(AgentSpec("fake-chat", "squad11", "openai_chat", 3.0, path="fake", options=options))
    sub = load_dataset("squad11").by_titles([*TRAIN, TEST])
    run_into_cache(load_agent(spec), sub, spec.id, cache=AgentCache(), progress=False)
    pool = register_pool(PoolSpec("Fake-chat", "squad11", "fake-chat", ("bert-ens",)))
    bench = bow_bench(sub, pool, [TEST])
    router = make_router("conf-threshold").fit(bench)
    return deploy(router, bench.costs(0.05)).save(folder / "router"), list(bench.test.qids)


def route_seconds(port: int, qids: list[str], n: int, statuses: list[int] | None = None) -> list[float]:
    """The wall time of ``n`` ``/v1/route`` requests by qid, one after the other."""
    seconds = []
    for k in range(n):
        status, s = post(port, "/v1/route", {"qid": qids[k % len(qids)]})
        seconds.append(s)
        if statuses is not None:
            statuses.append(status)
    return seconds


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--deadline", type=float, default=2.0, help="the endpoint's deadline, seconds")
    p.add_argument("--requests", type=int, default=200, help="/v1/route requests per phase")
    p.add_argument("--hangers", type=int, default=4, help="clients asking /v1/answer while it hangs")
    p.add_argument("--rounds", type=int, default=3, help="idle and hanging phases, interleaved")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    from _openai_server import free_port, serve_fake

    with tempfile.TemporaryDirectory() as tmp, serve_fake() as (url, fake):
        os.environ["L2D_CACHE_DIR"] = str(Path(tmp) / "cache")
        folder, qids = build(url, args.deadline, Path(tmp))
        port = free_port()
        serve = str(ROOT / "scripts" / "serve.py")
        cmd = [sys.executable, serve, "--router", str(folder), "--port", str(port), "--log-level", "warning"]
        server = subprocess.Popen(cmd, env=os.environ.copy(), stdout=subprocess.DEVNULL)
        try:
            end = time.monotonic() + 120
            while True:
                try:
                    if post(port, "/v1/route", {"qid": qids[0]})[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > end or server.poll() is not None:
                    raise SystemExit("error: serve.py did not start")
                time.sleep(0.5)
            route_seconds(port, qids, 20)  # warm
            idle, busy, statuses, answers = [], [], [], []
            for _ in range(args.rounds):  # idle and hanging phases interleaved: the load drifts
                idle += route_seconds(port, qids, args.requests, statuses)
                fake.mode, stop = "hang", threading.Event()

                def hang(stop=stop):
                    while not stop.is_set():
                        answers.append(post(port, "/v1/answer", QUERY))

                threads = [threading.Thread(target=hang) for _ in range(args.hangers)]
                for t in threads:
                    t.start()
                time.sleep(0.5)  # the answer requests now wait on the endpoint
                busy += route_seconds(port, qids, args.requests, statuses)
                stop.set()
                for t in threads:
                    t.join()
                fake.mode = "ok"
            fake.mode = "ok"
        finally:
            fake.release.set()
            server.terminate()
            server.wait(30)
    idle, busy = statistics.median(idle), statistics.median(busy)
    out = {
        "deadline_s": args.deadline,
        "route_p50_idle_ms": round(1000 * idle, 2),
        "route_p50_while_hanging_ms": round(1000 * busy, 2),
        "ratio": round(busy / idle, 3),
        "route_statuses": sorted(set(statuses)),
        "answers": len(answers),
        "answer_statuses": sorted({s for s, _ in answers}),
        "answer_max_s": round(max(s for _, s in answers), 3),
        "within_deadline_plus_1s": all(s < args.deadline + 1.0 for _, s in answers),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:28s} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
