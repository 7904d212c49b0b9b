"""Save a router of the registry at one cost setting (or budget) as an artifact folder that
``scripts/serve.py`` and ``l2d_core.deploy.load_router`` read (safetensors + JSON, no pickle).

    python scripts/export_router.py --pool P3-live --out cache/exports/p3live        # best router, λ = 0.1
    python scripts/export_router.py --pool P3-live --router l2d-cascade --price 0.2 --out …
    python scripts/export_router.py --pool P2 --router l2d-plugin --beta1 0.05 --out …
    python scripts/export_router.py --pool P3-live --budget-share 0.2 --out …   # ≤ 20% to experts

The router is fitted on the BENCHMARK.md training articles (stored heads are reused). Costs: the
per-TFLOP price rule at λ (default 0.1, the dashboard's default), β₁ by the GFLOPs rule, or every
β by hand; a budget's threshold is calibrated on out-of-fold training articles.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import _bootstrap  # noqa: F401

from l2d_core.agents import get_pool
from l2d_core.agents.catalog import builtin_pool_names
from l2d_core.app_logic.default_view import default_router
from l2d_core.app_logic.live import new_text_advice
from l2d_core.cli import add_cost_arguments, checked_budget, costs_from_arguments
from l2d_core.deploy import ArtifactError, deploy, serve_commands
from l2d_core.evaluation.benchmark import prepare
from l2d_core.method.costs import RULE_FIELDS
from l2d_core.routers.registry import make_router, router_class, router_ids


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # the help names the built-in pools only: the user registry is read when the pool is used
    pools = ", ".join(sorted(builtin_pool_names()))
    p.add_argument("--pool", required=True, help=f"pool name: {pools}, or one of yours")
    p.add_argument(
        "--router",
        help="router id (default: the best by validation on the training articles): "
        + ", ".join(router_ids()),
    )
    p.add_argument("--out", required=True, type=Path, help="artifact folder to write")
    add_cost_arguments(p, beta1_default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p.parse_args(argv)


def cost_given(args) -> bool:
    """Whether the flags set the costs: β by hand, β₁, or a price of one of the rules."""
    return bool(args.beta) or any(
        getattr(args, k) is not None for k in ("beta1", "price", "latency_price", "money_price")
    )


def export(args):
    """The deployed router of the flags, saved to ``args.out``."""
    budget = checked_budget(args)
    pool = get_pool(args.pool)
    router_id = args.router
    if router_id is None:
        best = default_router(prepare(pool.dataset, pool, features_needed=False))
        router_id = best.router_id
        if not cost_given(args):
            # where it is the furthest above random mixing on validation, by the pool's default rule
            setattr(args, RULE_FIELDS[best.rule], best.price)  # the flag of that rule: --price, …
    cls = router_class(router_id)
    embeddings = cls is not None and cls.reads_embeddings
    bench = prepare(pool.dataset, pool, progress=not args.quiet, features_needed=embeddings)
    if not cost_given(args):
        args.price = 0.1
    costs = costs_from_arguments(args, bench)
    deployed = deploy(make_router(router_id).fit(bench, args.seed), costs, budget)
    deployed.save(args.out)
    args.example_qid = bench.test_records[0].qid
    return deployed


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        deployed = export(args)
    except (ArtifactError, KeyError, ValueError, FileNotFoundError, LookupError) as exc:
        print(f"error: {str(exc).strip(chr(39))}", file=sys.stderr)
        return 2
    d = deployed.describe()
    print(f"saved {d['router']['id']} ({d['router']['label']}) for pool {d['pool']} to {args.out}")
    print(
        f"costs: {json.dumps(d['costs'])}"
        + (f"; budget: {d['budget']['kind']} {d['budget']['target']:g}" if d["budget"] else "")
    )
    qid = None
    if not d["routes_new_text"]:
        print(
            "note: this router reads agents known only by their prediction files: it routes the dataset's "
            "questions by id, not new text. " + new_text_advice(d["dataset"])
        )
        qid = args.example_qid  # a question of the test articles
    print("serve it and send it a query:\n" + serve_commands(args.out, qid=qid))
    return 0


if __name__ == "__main__":
    sys.exit(main())
