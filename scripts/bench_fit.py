"""Fit-and-decide time of every registry router on the built-in pools (2 CPU cores): CPU seconds
for one seed at every BENCHMARK.md operating point (β₁ points, per-TFLOP prices, latency prices
where logged, the comparison's budget), from an empty router cache; the embeddings are computed
first and reported apart. Apart too: a router's score on validation articles, which the reports
choose by (out-of-fold heads for some; once per router, whatever the seeds). Medians over
``--runs``; JSON beside the table.

    python scripts/bench_fit.py [--pools P2 P3 PLLM] [--routers l2d-cascade ...] [--runs 3]
    python scripts/bench_fit.py --pools PLLM --routers l2d-staged --seeds 5
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import _bootstrap  # noqa: F401

DEFAULT_POOLS = ("P2", "P3", "P10", "P3-albert", "PLLM", "PLLM-abstain")
SEEDS = (0, 1, 2, 3, 4)  # BENCHMARK.md's training seeds
TARGET_S = 5.0  # CPU seconds per router and pool, one seed (the fast issue's target)


def load_now() -> float:
    return os.getloadavg()[0]


def cold(cache: Path) -> None:
    """Forget every fitted router and the features' projections (the embeddings and the agents'
    answers stay)."""
    from l2d_core.routers.scaling import forget_projections

    forget_projections()
    for kind in ("routers", "router_scores"):
        shutil.rmtree(cache / kind, ignore_errors=True)


def cpu_and_wall(fn) -> tuple[float, float]:
    c, w = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c, time.perf_counter() - w


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pools", nargs="+", default=list(DEFAULT_POOLS))
    p.add_argument("--routers", nargs="+", default=None, help="router ids (default: every one the pool runs)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--seeds", type=int, default=1, help="seeds per fit (the benchmark uses 5)")
    p.add_argument("--embeddings", action="store_true", help="compute the embeddings first if missing")
    p.add_argument("--json", default="reports/bench_fit.json")
    args = p.parse_args(argv)

    from l2d_core.agents.catalog import get_pool
    from l2d_core.evaluation.benchmark import embeddings_on_disk, prepare
    from l2d_core.evaluation.comparison import ComparisonPlan, run_comparison
    from l2d_core.evaluation.validation import validation_score
    from l2d_core.paths import cache_dir
    from l2d_core.routers.base import validated
    from l2d_core.routers.registry import make_router, router_ids

    cache = cache_dir()
    rows = []
    print(
        f"{'pool':<13} {'router':<16} {'CPU s':>7} {'wall s':>7} {'valid. CPU s':>12} {'load':>5}"
        f"  target ≤ {TARGET_S:g} s CPU a seed (validation apart)"
    )
    for pool in args.pools:
        dataset = get_pool(pool).dataset
        emb = args.embeddings or embeddings_on_disk(dataset)  # else the routers that read none
        cpu, wall = cpu_and_wall(lambda d=dataset, q=pool, e=emb: prepare(d, q, features_needed=e))
        bench = prepare(dataset, pool, features_needed=emb)
        print(f"{pool:<13} {'(data + embeddings)':<16} {cpu:7.1f} {wall:7.1f} {'':>12} {load_now():5.1f}")
        rows.append({"pool": pool, "router": None, "cpu_s": cpu, "wall_s": wall, "load": load_now()})
        runs_here = router_ids(bench, embeddings=bench.has_embeddings)
        ids = [r for r in (args.routers or runs_here) if r in runs_here]
        for rid in ids:
            cpus, walls, valid, loads = [], [], [], []
            for _ in range(args.runs):
                cold(cache)
                loads.append(load_now())
                plan = ComparisonPlan(SEEDS[: args.seeds], [rid], n_boot=0, validate=False)
                c, w = cpu_and_wall(lambda b=bench, p=plan: run_comparison(b, p))
                cpus.append(c)
                walls.append(w)
                router = make_router(rid).fit(bench, SEEDS[0])  # its fit stored above: read back
                if validated(router):
                    valid.append(cpu_and_wall(lambda r=router: validation_score(r))[0])
            row = {
                "pool": pool,
                "router": rid,
                "seeds": args.seeds,
                "cpu_s": statistics.median(cpus),
                "wall_s": statistics.median(walls),
                "cpu_runs": cpus,
                "validation_cpu_s": statistics.median(valid) if valid else None,
                "load": statistics.median(loads),
            }
            rows.append(row)
            flag = "" if row["cpu_s"] <= TARGET_S * args.seeds else "  over"
            v = f"{row['validation_cpu_s']:12.2f}" if valid else f"{'-':>12}"
            cols = f"{row['cpu_s']:7.2f} {row['wall_s']:7.2f} {v} {row['load']:5.1f}"
            print(f"{pool:<13} {rid:<16} {cols}{flag}")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"cores": os.cpu_count(), "runs": args.runs, "rows": rows}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
