"""Where does routing pay for itself? Every router ranked on validation articles (the training
articles, each routed by a head that never saw its article), per pool: its EM above random mixing
of the pool's single agents at the same compute, at the price λ where that is largest — the same
ranking the dashboard draws its default router and cost setting from — and, for the best router,
the same figure on the test articles with a 95% bootstrap interval.

    python scripts/rank_pools.py                      # every pool of squad11 ready here
    python scripts/rank_pools.py --pools P2 P3 --json ranking.json
    python scripts/rank_pools.py --ship               # regenerate the rankings and fits the package ships

``--ship`` computes each built-in pool's default ranking (the routers that read no embeddings, as
the dashboard ranks them) and fits the default router it picks, and writes both where the package
ships them (``l2d_core/routers/shipped``: one ``<key>.npz`` per ranking, one ``<key>/`` folder per
fitted artifact, and ``index.json``: pool → keys, with how they were made). Each key is the content
key of the pool's data and the routers' settings, so a fresh clone opens a built-in pool without
ranking or training first, and a shipped artifact whose data or settings changed is never read
(``tests/test_default_view.py`` recomputes the default pool's and checks that every key is
current). Everything it ships is computed now, never read from a cache or from what was shipped.

The dashboard opens on the pool where this gain is the largest (``pages/ui/defaults.py``;
``tests/test_default_view.py`` checks that it still is and that it holds on the test articles).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import sys

import _bootstrap  # noqa: F401

from l2d_core.agents import get_pool, list_pools
from l2d_core.agents.catalog import builtin_pool_names
from l2d_core.app_logic.default_view import default_ranking_memo, default_router
from l2d_core.app_logic.explorer import router_view
from l2d_core.evaluation.benchmark import embeddings_on_disk, prepare
from l2d_core.evaluation.validation import rank_by_validation
from l2d_core.routers.registry import make_router, router_label
from l2d_core.routers.trained import SHIPPED, cached_fit, npz_bytes, recording, shipped_file
from l2d_core.stores import atomic_write_bytes, atomic_write_text


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="squad11")
    p.add_argument("--pools", nargs="+", help="pools (default: every pool of the dataset)")
    p.add_argument("--embeddings", action="store_true", help="also rank routers that read embeddings, "
                   "computing them where missing (minutes on a CPU)")  # fmt: skip
    p.add_argument("--json", help="write the rankings to this file")
    p.add_argument("--ship", action="store_true", help="compute every built-in pool's default ranking "
                   "(or --pools') and write it into the package's shipped memos")  # fmt: skip
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


def ship_default_fit(bench) -> tuple[str, list[str]]:
    """The pool's default router (read from its ranking, shipped just before), fitted now, and
    every artifact that fit stores copied into the shipped folders. Returns its id and their keys."""
    choice = default_router(bench, rank=False)
    with recording(fresh=True) as keys:
        make_router(choice.router_id).fit(bench)
    for key in keys:
        target = shipped_file(key, "")
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(cached_fit(key), target)
    return choice.router_id, keys


def ship(pools: list[str]) -> None:
    """Compute each pool's default ranking, fit its default router, and write both into the
    shipped artifacts, with the index."""
    index_path = shipped_file("index", ".json")
    index = json.loads(index_path.read_text(encoding="utf-8")) if index_path.is_file() else {"pools": {}}
    for pool in pools:
        spec = get_pool(pool)
        bench = prepare(spec.dataset, pool, features_needed=False)
        key, arrays = default_ranking_memo(bench)
        atomic_write_bytes(shipped_file(key), npz_bytes(arrays))
        default, fits = ship_default_fit(bench)
        made = {
            "command": f"python scripts/rank_pools.py --ship --pools {pool}",
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, 1-min load {os.getloadavg()[0]:.1f}",
        }
        routers = arrays["ids"].tolist()
        index["pools"][pool] = {
            "dataset": spec.dataset, "key": key, "routers": routers, "default": default, "fitted": fits,
            "made": made,
        }  # fmt: skip
        print(f"{pool}: shipped {key} ({', '.join(routers)}); {default} fitted: {', '.join(fits) or '-'}")
    keep = {k for v in index["pools"].values() for k in (v["key"], *v["fitted"])}
    for stale in index_path.parent.iterdir():
        if stale.name != index_path.name and stale.name.removesuffix(".npz") not in keep:
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
    atomic_write_text(index_path, json.dumps(index, indent=1, sort_keys=True) + "\n")
    print(f"index: {index_path} ({SHIPPED})")


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.ship:
        try:
            ship(args.pools or sorted(builtin_pool_names()))
        except (KeyError, ValueError, FileNotFoundError, LookupError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
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
