"""Load-test the routing API on loopback: a fixed number of requests from N concurrent clients.

    python scripts/bench_serve.py --router cache/exports/p3live-cascade --router cache/exports/p3-plugin
    python scripts/bench_serve.py --router PATH --requests 200 --clients 4 --batch 1 8 --json out.json

For each artifact, ``scripts/serve.py`` is started as its own process on a free port; each client
keeps one HTTP connection and sends real test questions of the router's dataset (new text to
the router: nothing is read from a cache), one per request or ``--batch`` per request. After a
warm-up, it reports latency percentiles p50/p95/p99 (ms per request), requests/s and
queries/s, for each endpoint and batch size, as a table (and JSON with ``--json``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import _bootstrap  # noqa: F401
import numpy as np

from l2d_core.data import BENCHMARK_TEST_ARTICLES, load_dataset
from l2d_core.deploy import load_router

SERVE = Path(__file__).resolve().parent / "serve.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(artifact: Path, port: int, workers: int) -> subprocess.Popen:
    cmd = [
        sys.executable,
        str(SERVE),
        "--router",
        str(artifact),
        "--port",
        str(port),
        "--workers",
        str(workers),
    ]
    proc = subprocess.Popen(
        cmd + ["--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"serve.py exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("serve.py did not answer /healthz within 300 s")


def client(port: int, path: str, bodies: list[bytes]) -> list[float]:
    """One client on one keep-alive connection: the latency (ms) of each request."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    out = []
    for body in bodies:
        t0 = time.perf_counter()
        conn.request("POST", path, body, {"content-type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{path} answered {resp.status}")
        out.append(1000.0 * (time.perf_counter() - t0))
    conn.close()
    return out


def load(port: int, path: str, queries: list[dict], requests: int, clients: int, batch: int) -> dict:
    """``requests`` requests of ``batch`` queries each, from ``clients`` concurrent clients."""
    bodies = []
    for i in range(requests):
        qs = [queries[(i * batch + k) % len(queries)] for k in range(batch)]
        bodies.append(json.dumps(qs if batch > 1 else qs[0]).encode())
    client(port, path, bodies[: min(4, len(bodies))])  # warm-up: models loaded, first-call costs paid
    shares = [bodies[c::clients] for c in range(clients)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        lat = np.concatenate([np.asarray(x) for x in pool.map(lambda b: client(port, path, b), shares)])
    wall = time.perf_counter() - t0
    return {
        "endpoint": path,
        "batch": batch,
        "clients": clients,
        "requests": requests,
        "p50_ms": float(np.percentile(lat, 50)),
        "p95_ms": float(np.percentile(lat, 95)),
        "p99_ms": float(np.percentile(lat, 99)),
        "requests_per_s": requests / wall,
        "queries_per_s": requests * batch / wall,
    }


def line(row: dict) -> str:
    head = f"{row['router']:>12} {row['pool']:>8} {row['endpoint']:>10} batch {row['batch']:>3}"
    lat = "  ".join(f"{k} {row[k + '_ms']:7.1f}" for k in ("p50", "p95", "p99"))
    return f"{head}: {lat} ms  {row['requests_per_s']:6.1f} req/s  {row['queries_per_s']:6.1f} queries/s"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--router", type=Path, action="append", required=True, help="artifact folder (repeatable)")
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8], help="queries per request")
    p.add_argument("--endpoint", nargs="+", default=["/v1/route"], choices=["/v1/route", "/v1/answer"])
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = p.parse_args(argv)
    rows = []
    for artifact in args.router:
        router = load_router(artifact)  # refused here, with its message, before any server starts
        ds = load_dataset(router.manifest["dataset"])
        queries = [
            {"question": r.question, "context": r.context}
            for r in ds.by_titles(sorted(BENCHMARK_TEST_ARTICLES))
        ]
        port = free_port()
        proc = start(artifact, port, args.workers)
        try:
            for path in args.endpoint:
                for b in args.batch:
                    n = max(args.clients, args.requests // b)
                    row = {
                        "router": router.router_id,
                        "pool": router.pool.name,
                        **load(port, path, queries, n, args.clients, b),
                    }
                    rows.append(row)
                    print(line(row), flush=True)
        finally:
            proc.terminate()
            proc.wait(30)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
