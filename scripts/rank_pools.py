"""Where does routing pay for itself? Every router ranked on validation articles (the training
articles, each routed by a head that never saw its article), per pool: its EM above random mixing
of the pool's single agents at the same compute, at the price λ where that is largest — the same
ranking the dashboard draws its default router and cost setting from — and, for the best router,
the same figure on the test articles with a 95% bootstrap interval.

    python scripts/rank_pools.py                      # every pool of squad11 ready here
    python scripts/rank_pools.py --pools P2 P3 --json ranking.json

The dashboard opens on the pool where this gain is the largest (``pages/ui/defaults.py``;
``tests/test_default_view.py`` checks that it still is and that it holds on the test articles).
"""

from __future__ import annotations

import argparse
import json
import sys

import _bootstrap  # noqa: F401

from l2d_core.agents import get_pool, list_pools
from l2d_core.app_logic.explorer import router_view
from l2d_core.evaluation.benchmark import embeddings_on_disk, prepare
from l2d_core.evaluation.validation import rank_by_validation
from l2d_core.routers.registry import make_router, router_label


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="squad11")
    p.add_argument("--pools", nargs="+", help="pools (default: every pool of the dataset)")
    p.add_argument("--embeddings", action="store_true", help="also rank routers that read embeddings, "
                   "computing them where missing (minutes on a CPU)")  # fmt: skip
    p.add_argument("--json", help="write the rankings to this file")
    return p.parse_args(argv)


def pool_ranking(pool: str, embeddings: bool) -> dict:
    """The validation ranking of one pool and its best router's gain on the test articles."""
    spec = get_pool(pool)
    bench = prepare(spec.dataset, pool, features_needed=embeddings or embeddings_on_disk(spec.dataset))
    ranking = rank_by_validation(bench)
    best = ranking[0]
    view = router_view(bench, make_router(best.router_id).fit(bench), bench.price_costs(best.price))
    return {
        "pool": pool,
        "ranking": [r._asdict() for r in ranking],
        "best": best.router_id,
        "price": best.price,
        "validation_gain": best.gain,
        "test_gain": view.metrics["gain"],
        "test_gain_ci": list(view.metrics["gain_ci"]),
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    pools = args.pools or [p.name for p in list_pools(args.dataset)]
    out = []
    try:
        for pool in pools:
            r = pool_ranking(pool, args.embeddings)
            out.append(r)
            lo, hi = r["test_gain_ci"]
            print(f"{pool}: best {router_label(r['best'])} at λ = {r['price']:g} errors per TFLOP")
            for x in r["ranking"]:
                print(
                    f"    {x['router_id']:<12} {x['gain']:+6.2f} EM above random mixing at λ = {x['price']:g}"
                )
            print(f"    on the test articles: {r['test_gain']:+.2f} EM (95% interval {lo:+.2f} to {hi:+.2f})")
    except (KeyError, ValueError, FileNotFoundError, LookupError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if out:
        top = max(out, key=lambda r: r["validation_gain"])
        print(f"routing pays the most on {top['pool']}: {top['validation_gain']:+.2f} EM on validation")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
