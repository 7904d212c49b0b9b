"""Load-test the routing API on loopback, against its floor: the main agent answering alone.

    python scripts/bench_serve.py --router cache/exports/quick --router cache/exports/p2
    python scripts/bench_serve.py --router PATH --clients 1 8 --connection keep-alive new --workers 1 2
    python scripts/bench_serve.py --router cache/exports/quick --precision    # EM/F1 and speed, bf16 vs fp32

For each artifact and ``--workers`` count, ``scripts/serve.py`` is started as its own process on a
free port. Clients send the test articles' questions: as new text to a router that routes new text,
by ``qid`` to one that cannot (it reads agents known only by their prediction files; ``--qid``
forces either). A ``keep-alive`` client keeps one connection open, as every HTTP client library
does; a ``new`` one opens a connection per request. Each (connection, clients) pair reports latency
p50/p95/p99 (ms per request), requests/s, the server's CPU time per request (its processes' user +
system time over the run, from /proc) and its resident memory after the run (all its processes).

The floor: for a router that runs its main agent on new text, that agent answering the same
questions alone, one at a time, in this process (same precision and threads as one server worker),
in turns of 20 questions with the server at one keep-alive client — so both see the same questions
first and the machine in the same minute (a VM's speed drifts by tens of percent over minutes),
and neither runs while the other's idle threads still spin;
the router's p50 at one keep-alive client is shown as a multiple of the floor's p50.

``--precision``: the main agent of each router answers every test-article question in fp32 and in
bf16 (its ``dtype`` option forced), EM/F1 of both and the time per question at batch 1 and 8;
bf16 measured on CUDA and on a CPU for which ``runtime.cpu_has_fast_bf16()`` is true,
else said to be n/a.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import _bootstrap  # noqa: F401
import numpy as np
import torch

from l2d_core.agents.runners import load_agent
from l2d_core.data import BENCHMARK_TEST_ARTICLES, load_dataset
from l2d_core.deploy import load_router
from l2d_core.deploy.signals import runs
from l2d_core.qa.squad_eval import exact_match, f1
from l2d_core.runtime import cpu_has_fast_bf16, pick_device

SERVE = Path(__file__).resolve().parent / "serve.py"
TICKS = os.sysconf("SC_CLK_TCK")
FLOOR_BLOCK = 20  # questions the server answers, then the floor answers, in turn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(artifact: Path, port: int, workers: int) -> subprocess.Popen:
    """serve.py on ``port``, once ``GET /healthz`` answers (its log goes to a temporary file, read
    back when it fails to start)."""
    cmd = [sys.executable, str(SERVE), "--router", str(artifact), "--port", str(port)]
    log = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(
        [*cmd, "--workers", str(workers), "--log-level", "warning"], stdout=log, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"serve.py exited: {log.read()[-2000:]}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("serve.py did not answer /healthz within 900 s")


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the worker processes)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, grew = {pid}, True
    while grew:
        below = {p for p, parent in parents.items() if parent in out} - out
        out |= below
        grew = bool(below)
    return sorted(out)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the server's processes."""
    total = 0
    for p in tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICKS


def rss_mb(pid: int) -> float:
    """Resident memory of the server's processes, MB."""
    kb = 0
    for p in tree(pid):
        try:
            status = Path(f"/proc/{p}/status").read_text().splitlines()
            line = next(x for x in status if x.startswith("VmRSS"))
        except (OSError, StopIteration):
            continue
        kb += int(line.split()[1])
    return kb / 1024


def client(port: int, path: str, bodies: list[bytes], keep_alive: bool, conn=None) -> list[float]:
    """One client: the latency (ms) of each request, on one kept-open connection (``conn``: one
    already open, left open) or a new one each."""
    given = conn is not None
    conn = conn if given else http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    out = []
    for body in bodies:
        t0 = time.perf_counter()
        conn.request("POST", path, body, {"content-type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{path} answered {resp.status}")
        if not keep_alive:
            conn.close()
        out.append(1000.0 * (time.perf_counter() - t0))
    if not given:
        conn.close()
    return out


def load(proc, port: int, path: str, bodies: list[bytes], clients: int, keep_alive: bool, floor=None) -> dict:
    """Every body once, shared among ``clients`` concurrent clients; ``floor`` (one client): called
    with each body's index after its block of ``FLOOR_BLOCK`` was answered, returns its ms."""
    client(port, path, bodies[:4], keep_alive)  # warm-up: first-call costs paid
    shares = [bodies[c::clients] for c in range(clients)]
    cpu0, t0 = cpu_seconds(proc.pid), time.perf_counter()
    if floor is not None:
        assert clients == 1, "the floor is measured beside one client"
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        lat, alone, beside_cpu, floor_wall = [], [], 0.0, 0.0
        for start in range(0, len(bodies), FLOOR_BLOCK):
            lat += client(port, path, bodies[start : start + FLOOR_BLOCK], keep_alive, conn)
            c, f = cpu_seconds(proc.pid), time.perf_counter()
            alone += [floor(i) for i in range(start, min(start + FLOOR_BLOCK, len(bodies)))]
            beside_cpu += cpu_seconds(proc.pid) - c  # the server's own while the floor ran (≈ 0)
            floor_wall += time.perf_counter() - f
        conn.close()
        lat = np.asarray(lat)
        wall = time.perf_counter() - t0 - floor_wall
        cpu = cpu_seconds(proc.pid) - cpu0 - beside_cpu
        floor_row = {
            "floor_p50_ms": float(np.percentile(alone, 50)),
            "server_cpu_ms_per_floor_question": 1000.0 * beside_cpu / len(bodies),
        }
    else:
        with ThreadPoolExecutor(clients) as pool:
            got = pool.map(lambda b: client(port, path, b, keep_alive), shares)
            lat = np.concatenate([np.asarray(x) for x in got])
        wall, cpu = time.perf_counter() - t0, cpu_seconds(proc.pid) - cpu0
        floor_row = {}
    return {
        **floor_row,
        "connection": "keep-alive" if keep_alive else "new",
        "clients": clients,
        "requests": len(bodies),
        "p50_ms": float(np.percentile(lat, 50)),
        "p95_ms": float(np.percentile(lat, 95)),
        "p99_ms": float(np.percentile(lat, 99)),
        "requests_per_s": len(bodies) / wall,
        "server_cpu_ms_per_request": 1000.0 * cpu / len(bodies),
        "server_rss_mb": rss_mb(proc.pid),
    }


def test_records(router):
    ds = load_dataset(router.manifest["dataset"])
    return ds, list(ds.by_titles(sorted(BENCHMARK_TEST_ARTICLES)))


def floor_of(router, records, threads: int):
    """``floor(i)``: ms of the main agent answering ``records[i]`` alone, in this process (None: it
    does not run here)."""
    main = router.specs[router.pool.main]
    if not router.needs.answers or not runs(main):
        return None
    torch.set_num_threads(threads)
    agent = load_agent(main)
    agent.predict(records[:4])  # warm-up, as the server's (DeployedRouter.warm_up)
    if hasattr(agent, "warm_up"):
        agent.warm_up()

    def floor(i: int) -> float:
        t0 = time.perf_counter()
        agent.predict([records[i % len(records)]])
        return 1000.0 * (time.perf_counter() - t0)

    return floor


def precision(router, threads: int) -> list[dict]:
    """EM/F1 and time per question of the main agent in fp32 and bf16 on the test articles."""
    main = router.specs[router.pool.main]
    if not runs(main):
        return [{"agent": main.id, "note": "known only by its prediction file: nothing to run"}]
    device = pick_device(None)
    if device.type == "cpu" and not cpu_has_fast_bf16():
        return [{"agent": main.id, "note": "n/a: this CPU has no native bf16 (cpu_has_fast_bf16() is false)"}]
    torch.set_num_threads(threads)
    ds, records = test_records(router)
    rows = []
    for dtype in ("fp32", "bf16"):
        agent = load_agent(replace(main, options={**(main.options or {}), "dtype": dtype}))
        agent.predict(records[:8])  # warm-up
        t0 = time.perf_counter()
        preds = agent.predict(records)
        batched = 1000.0 * (time.perf_counter() - t0) / len(records)
        alone = []
        for r in records[:100]:
            t1 = time.perf_counter()
            agent.predict([r])
            alone.append(1000.0 * (time.perf_counter() - t1))
        golds = [list(r.answers) for r in records]
        said = [p.answer or "" for p in preds]
        rows.append(
            {
                "agent": main.id,
                "dtype": dtype,
                "device": device.type,
                "questions": len(records),
                "em": 100.0 * float(np.mean([exact_match(a, g, ds.v2) for a, g in zip(said, golds)])),
                "f1": 100.0 * float(np.mean([f1(a, g, ds.v2) for a, g in zip(said, golds)])),
                "ms_per_question_batch1_p50": float(np.percentile(alone, 50)),
                f"ms_per_question_batch{agent.batch_size}": batched,
                "answers": [p.answer for p in preds],
            }
        )
    same = np.mean([a == b for a, b in zip(rows[0].pop("answers"), rows[1].pop("answers"))])
    rows[1]["answers_unchanged_pct"] = 100.0 * float(same)
    rows[1]["speedup_batch1"] = rows[0]["ms_per_question_batch1_p50"] / rows[1]["ms_per_question_batch1_p50"]
    return rows


def queries(router, records, qid: str) -> tuple[list[dict], bool]:
    by_qid = qid == "always" or (qid == "auto" and not router.routes_new_text())
    if by_qid:
        return [{"qid": r.qid} for r in records], True
    return [{"question": r.question, "context": r.context} for r in records], False


def line(row: dict) -> str:
    head = f"{row['router']:>12} {row['pool']:>8} w{row['workers']} {row['connection']:>10} x{row['clients']}"
    lat = "  ".join(f"{k} {row[k + '_ms']:7.2f}" for k in ("p50", "p95", "p99"))
    floor = (
        f"  = {row['p50_over_floor']:.2f}x floor ({row['floor_p50_ms']:.2f} ms)"
        if "floor_p50_ms" in row
        else ""
    )
    cpu, rss = row["server_cpu_ms_per_request"], row["server_rss_mb"]
    return (
        f"{head} ({'qid' if row['by_qid'] else 'text'}): {lat} ms  {row['requests_per_s']:7.1f} req/s  "
        f"server CPU {cpu:6.2f} ms/req  RSS {rss:5.0f} MB{floor}"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--router", type=Path, action="append", required=True, help="artifact folder (repeatable)")
    p.add_argument("--requests", type=int, default=400, help="requests per (connection, clients) run")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    p.add_argument("--connection", nargs="+", default=["keep-alive", "new"], choices=["keep-alive", "new"])
    p.add_argument("--endpoint", default="/v1/route", choices=["/v1/route", "/v1/answer"])
    p.add_argument("--workers", type=int, nargs="+", default=[1])
    p.add_argument("--qid", default="auto", choices=["auto", "always", "never"], help="auto: where needed")
    p.add_argument("--precision", action="store_true", help="also EM/F1 and speed of fp32 vs bf16")
    p.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = p.parse_args(argv)
    rows = []
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs", flush=True)
    for artifact in args.router:
        router = load_router(artifact)  # refused here, with its message, before any server starts
        _, records = test_records(router)
        sent, by_qid = queries(router, records, args.qid)
        bodies = [json.dumps(sent[i % len(sent)]).encode() for i in range(args.requests)]
        floor = floor_of(router, records, os.cpu_count() or 1)
        for workers in args.workers:
            port = free_port()
            proc = start(artifact, port, workers)
            try:
                for connection in args.connection:
                    for clients in args.clients:
                        beside = floor if (workers, clients, connection) == (1, 1, "keep-alive") else None
                        row = load(
                            proc, port, args.endpoint, bodies, clients, connection == "keep-alive", beside
                        )
                        row.update(router=router.router_id, pool=router.pool.name, workers=workers)
                        row["by_qid"] = by_qid
                        if "floor_p50_ms" in row:
                            row["p50_over_floor"] = row["p50_ms"] / row["floor_p50_ms"]
                        rows.append(row)
                        print(line(row), flush=True)
            finally:
                proc.terminate()
                proc.wait(60)
        if args.precision:
            for r in precision(router, os.cpu_count() or 1):
                rows.append({"router": router.router_id, "pool": router.pool.name, "precision": r})
                print(json.dumps(r), flush=True)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
