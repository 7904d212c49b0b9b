"""Evaluate one router of the registry on the BENCHMARK.md split.

    python scripts/evaluate.py --dataset squad11 --pool P3 --beta1 0.05 --policy sdl
    python scripts/evaluate.py --dataset squad11 --pool P2 --policy plugin --sweep --json
    python scripts/evaluate.py --pool P3 --policy l2d-posthoc --sweep

--policy takes any router id of the registry (``l2d-sdl``, ``l2d-plugin``, ``l2d-posthoc``,
``oracle``, ``random``, ``r-prob``, ``knn``, …, or ``agent:<id>``); ``l2d-`` may be left out.
``l2d-sdl-full`` is the paper's rejector with its encoder fine-tuned at the paper's budget (CUDA
when present, hours on a CPU).
Costs: α_j (one value for every expert, or one per expert) and β_j from β₁ by the GFLOPs
rule of SPEC §3, or every β given with --beta. Prints a table, or JSON with --json.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import _bootstrap  # noqa: F401

from l2d_core.agents.catalog import builtin_pool_names
from l2d_core.cli import add_cost_arguments, checked_budget, cost_rule, costs_from_arguments, rule_value
from l2d_core.data import dataset_names
from l2d_core.routers.registry import make_router, router_ids


def budget_line(b: dict) -> str:
    """The budget's target, where it started on the training articles and what the test articles
    realised (with the 95% interval), and why it was not met when it was not."""
    share = b["kind"] == "share"
    unit = "share of questions on which an expert is called" if share else "GFLOPs per query"
    got, ci = (b["test_share"], b["test_share_ci"]) if share else (b["test_gflops"], b["test_gflops_ci"])
    train = b["training_share"] if share else b["training_gflops"]
    line = (
        f"budget: {unit} {b['target']:g}; training articles at the start {train:.4g}; followed query by "
        f"query on the test articles: {got:.4g} (95% interval {ci[0]:.4g} – {ci[1]:.4g})"
    )
    return line + (f"\nnote: {b['note']}" if b["note"] else "")


JSON_KEYS = (
    "em",
    "f1",
    "gflops_per_query",
    "gflops_per_em",
    "allocation",
    "tpr",
    "fpr",
    "tdl",
    "tdl_random",
    "tdl_random_matched",
)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="squad11", choices=dataset_names())
    # the help names the built-in pools only: the user registry is read when a pool is used
    pools = ", ".join(sorted(builtin_pool_names()))
    p.add_argument("--pool", default="P3", help=f"pool name: {pools}, or one of yours")
    p.add_argument(
        "--policy",
        default="sdl",
        help="router id: " + ", ".join(router_ids(on_request=True)) + ", agent:<id> (default: sdl)",
    )
    add_cost_arguments(p)
    p.add_argument("--sweep", action="store_true", help="run the BENCHMARK.md points of the cost rule")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--features", default="separate", choices=["separate", "pair"])
    p.add_argument("--encoder", default="minilm", help="HF encoder id or path (default: packaged MiniLM)")
    p.add_argument(
        "--val-fraction",
        type=float,
        default=0.0,
        help="validation articles carved from the training articles (best epoch kept)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (a list with --sweep)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p.parse_args(argv)


def fmt(x) -> str:
    return (
        "nan" if isinstance(x, float) and math.isnan(x) else (f"{x:.3f}" if isinstance(x, float) else str(x))
    )


def table(rows: list[dict], agents, setting: str = "β₁") -> str:
    head = [
        setting,
        "EM",
        "F1",
        "GFLOPs/q",
        "GFLOPs/EM",
        "TPR",
        "FPR",
        "TDL",
        "TDL rand",
        *(["$/1k q"] if "usd_per_1k" in rows[0] else []),
        *[f"→{a}" for a in agents],
    ]
    lines = ["  ".join(f"{h:>10}" for h in head)]
    for r in rows:
        vals = [
            r.get("beta1", r["beta"][0]),
            r["em"],
            r["f1"],
            r["gflops_per_query"],
            r["gflops_per_em"],
            r["tpr"],
            r["fpr"],
            r["tdl"],
            r["tdl_random"],
            *([r["usd_per_1k"]] if "usd_per_1k" in r else []),
            *r["allocation"].values(),
        ]
        lines.append("  ".join(f"{fmt(v):>10}" for v in vals))
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    # imported once the arguments are read: --help loads neither torch nor the data
    from l2d_core.evaluation.benchmark import BETA_POINTS, PRICE_POINTS, prepare
    from l2d_core.evaluation.comparison import evaluate_router
    from l2d_core.evaluation.validation import LATENCY_GRID

    try:
        budget = checked_budget(args)
        if args.sweep and args.beta:
            raise ValueError("--sweep runs the BENCHMARK.md points of a rule: leave out --beta (or --sweep)")
        if budget is not None and args.sweep:
            raise ValueError("a budget is one operating point: leave out --sweep")
        router = make_router(args.policy)
        bench = prepare(
            args.dataset,
            args.pool,
            args.encoder,
            args.features,
            args.val_fraction,
            args.seed,
            progress=not args.quiet,
            features_needed=router.reads_embeddings,
        )
        router.fit(bench, args.seed)
        rule = cost_rule(args)
        one = rule_value(args, rule)
        points = {"price": PRICE_POINTS, "latency": LATENCY_GRID, "gflops": BETA_POINTS}.get(rule)
        if rule == "money":  # the pool's own log scale of prices
            bench.money_costs(0.0)  # a pool without prices: one clear line
            points = bench.money_prices or (0.0,)
        settings = points if args.sweep else [one]
        rows = []
        for b in settings:
            costs = costs_from_arguments(args, bench, b, by_hand=not args.sweep)
            rows.append({**evaluate_router(bench, router, costs, budget=budget), "beta1": b})
    except (KeyError, ValueError, FileNotFoundError, LookupError) as exc:
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) and exc.args else exc}", file=sys.stderr)
        return 2
    if args.json:
        keep = ("beta", "alpha", "budget", "latency_s", "usd_per_1k")
        out = [{k: r[k] for k in JSON_KEYS} | {k: r[k] for k in keep if k in r} for r in rows]
        print(json.dumps(out if args.sweep else out[0], indent=1))
    else:
        print(
            f"{router.id} on {args.dataset} pool {args.pool} ({len(bench.test)} test questions; "
            f"paid on every query besides the chosen agent: {rows[0]['overhead_gflops']:.2f} GFLOPs)"
        )
        print(
            table(
                rows,
                bench.pool.agent_ids,
                {"price": "λ", "latency": "λs", "money": "λ$", "gflops": "β₁"}[rule],
            )
        )
        if "budget" in rows[0]:
            print(budget_line(rows[0]["budget"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
