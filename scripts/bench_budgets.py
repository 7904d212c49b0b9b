"""Do budgets land on their targets? Every budget router of the registry on the BENCHMARK.md test
articles, at shares of expert calls and at GFLOPs budgets: target, where the follower started on
the training articles, what the test articles realised (95% bootstrap interval) and whether it is
within the tolerance (share ±0.02; GFLOPs ±5%, or the router says it cannot meet the budget).

    python scripts/bench_budgets.py                           # P2, P3 (and P3-quick / P3-live when trained)
    python scripts/bench_budgets.py --pools P3 --shares 0.3 --gflops 350 --json out.json

Routers that read the question/context embeddings are left out unless they are on disk already
(``--embeddings`` computes them: minutes on a CPU).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import _bootstrap  # noqa: F401

from l2d_core.agents import get_pool, list_pools
from l2d_core.cli import budget_gflops, budget_share
from l2d_core.evaluation.benchmark import embeddings_on_disk, prepare
from l2d_core.evaluation.budget_results import budget_decision
from l2d_core.routers.base import supports_budget
from l2d_core.routers.registry import make_router, routers

SHARE_TOLERANCE = 0.02  # the realised share within this of the target
GFLOPS_TOLERANCE = 0.05  # the realised GFLOPs within this fraction of the target


def default_pools() -> list[str]:
    names = {p.name for p in list_pools("squad11")}
    return [p for p in ("P2", "P3", "P3-quick", "P3-live") if p in names]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--pools", nargs="+", default=None, help="pools (default: P2, P3 and the live pools trained)"
    )
    p.add_argument("--shares", nargs="+", type=budget_share, default=[0.1, 0.2, 0.3])
    p.add_argument(
        "--gflops",
        nargs="+",
        type=budget_gflops,
        default=[],
        help="GFLOPs budgets (default: 25%% and 50%% of the way from the main agent to the dearest expert)",
    )
    p.add_argument(
        "--price", type=float, default=0.1, help="λ of the cost setting (α = 1; orders the experts)"
    )
    p.add_argument("--embeddings", action="store_true", help="also routers that read embeddings (computed)")
    p.add_argument("--json", help="write the rows to this file")
    return p.parse_args(argv)


def rows_for(pool: str, args) -> list[dict]:
    spec = get_pool(pool)
    embeddings = args.embeddings or embeddings_on_disk(spec.dataset)
    bench = prepare(spec.dataset, pool, features_needed=embeddings)
    costs = bench.price_costs(args.price)
    g = bench.test.agent_gflops
    spends = args.gflops or [float(g[0] + f * (g.max() - g[0])) for f in (0.25, 0.5)]
    rows = []
    for rid, cls in routers().items():
        if not supports_budget(cls) or (cls.reads_embeddings and not embeddings) or cls.unavailable(bench):
            continue
        router = make_router(rid).fit(bench)
        for kind, targets in (("share", args.shares), ("gflops", spends)):
            for target in targets:
                t0 = time.perf_counter()
                _, b = budget_decision(router, costs, kind, target)
                ms = 1000 * (time.perf_counter() - t0)
                miss = b.realised - target
                ok = abs(miss) <= (SHARE_TOLERANCE if kind == "share" else GFLOPS_TOLERANCE * target)
                rows.append(
                    {
                        "pool": pool,
                        "router": rid,
                        "kind": kind,
                        "target": target,
                        "training": b.training_share if kind == "share" else b.training_gflops,
                        "test": b.realised,
                        "ci": list(b.interval),
                        "met": bool(ok),
                        "says_why": b.note,
                        "ms": ms,
                    }
                )
    return rows


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        rows = [r for pool in (args.pools or default_pools()) for r in rows_for(pool, args)]
    except (KeyError, ValueError, FileNotFoundError, LookupError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cols = f"{'pool':<9} {'router':<12} {'kind':<6} {'target':>8} {'train':>8} {'test':>8}"
    print(f"{cols} {'95% interval':>20}  met")
    for r in rows:
        lo, hi = r["ci"]
        verdict = "yes" if r["met"] else ("says why" if r["says_why"] else "NO")
        print(
            f"{r['pool']:<9} {r['router']:<12} {r['kind']:<6} {r['target']:>8.4g} {r['training']:>8.4g} "
            f"{r['test']:>8.4g} {f'{lo:.4g} – {hi:.4g}':>20}  {verdict}"
        )
    missed = [r for r in rows if not r["met"] and not r["says_why"]]
    print(f"{len(rows) - len(missed)} of {len(rows)} budgets met (or the router said why not)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
