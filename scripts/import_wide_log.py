"""Turn a log of prompts with one column per model into a dataset, its agents and a pool.

    python scripts/import_wide_log.py --file reference_data.csv --dataset routerbench [--pool RB] \
        [--group eval_name]

The log's layout is RouterBench's: ``sample_id``, ``prompt``, then for each model a 0/1 column
``<model>`` (right or wrong) and ``<model>|total_cost`` (dollars for that answer). There are no
passages and no SQuAD ids: the prompts become dataset ``--dataset`` (each prompt its own article,
or ``--group``'s value), each model an agent known by its log with its price per answer, and the
pool's main agent the cheapest model. Routers then run on it as on any pool, the money rule
first (``evaluate.py --dataset routerbench --pool routerbench --money-price …``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _bootstrap  # noqa: F401

from l2d_core.agents.wide_log import import_wide_log
from l2d_core.data import DataFormatError


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--file", required=True, type=Path, help="the log, CSV")
    p.add_argument("--dataset", required=True, help="name of the dataset to register (lowercase)")
    p.add_argument("--pool", help="name of the pool (default: the dataset's)")
    p.add_argument("--group", help="column whose value is a prompt's article (default: each its own)")
    p.add_argument("--gflops", type=float, default=1.0, help="declared GFLOPs per query of every model")
    p.add_argument("--replace", action="store_true", help="replace your pool of the same name")
    args = p.parse_args(argv)
    try:
        report = import_wide_log(
            args.file,
            args.dataset,
            args.pool,
            args.group,
            args.gflops,
            label=str(args.file),
            replace=args.replace,
        )
    except (DataFormatError, FileNotFoundError, KeyError, ValueError) as exc:
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) and exc.args else exc}", file=sys.stderr)
        return 2
    print("\n".join(report.lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
