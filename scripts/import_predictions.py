"""Turn a SQuAD-format prediction file ``{question_id: answer}`` into an agent.

    python scripts/import_predictions.py --file my_preds.json --agent my-model \
        --dataset squad11 --gflops 42 [--name "My model"] [--pool MyPool --main match-lstm]

The agent is registered in the user registry (<cache>/registry.json) with its declared
GFLOPs per query, scored against the dataset (SPEC §2) and written to the agent cache.
With --pool, a pool of the given main agent plus this agent (and --experts) is added.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _bootstrap  # noqa: F401

from l2d_core.agents import AgentSpec, PoolSpec, import_predictions, register_agent, register_pool
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.catalog import agent_lock, check_new_agent, check_new_pool
from l2d_core.agents.prediction_file import file_sha256
from l2d_core.data import DataFormatError, dataset_names, load_dataset


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--file", required=True, type=Path, help="prediction file {question_id: answer}")
    p.add_argument("--agent", required=True, help="agent id to create (--replace to replace yours)")
    p.add_argument("--dataset", default="squad11", choices=dataset_names())
    p.add_argument("--gflops", required=True, type=float, help="declared GFLOPs per query")
    p.add_argument("--name", default="", help="display name")
    p.add_argument("--pool", help="also register a pool of this name")
    p.add_argument("--main", help="main agent of that pool (default: this agent)")
    p.add_argument("--experts", nargs="*", default=[], help="other experts of that pool")
    p.add_argument("--replace", action="store_true", help="replace your agent / pool of the same id")
    args = p.parse_args(argv)
    try:
        spec = AgentSpec(
            id=args.agent,
            dataset=args.dataset,
            kind="prediction_file",
            gflops=args.gflops,
            gflops_source="declared",
            path=str(args.file.resolve()),
            name=args.name or args.agent,
            # the file's sha256: the registry records it, the cache is checked against it on read
            source_sha256=file_sha256(args.file) if args.file.is_file() else "",
        )
        # everything is checked before anything is written (a retry with the same file is no conflict)
        check_new_agent(spec.id, args.replace, spec)
        pool = None
        if args.pool:
            main_agent = args.main or args.agent
            experts = list(dict.fromkeys(a for a in [*args.experts, args.agent] if a != main_agent))
            pool = PoolSpec(args.pool, args.dataset, main_agent, tuple(experts))
            check_new_pool(pool, args.replace, also=(spec,))
        dataset = load_dataset(args.dataset)
        # the agent's answers and its registration: one transaction (no other import of this id
        # can land between them, so the registry never names one file while the cache holds another's)
        with agent_lock(spec.id):
            check_new_agent(spec.id, args.replace, spec)
            report = import_predictions(spec, dataset, AgentCache(), args.file)
            register_agent(spec, replace=args.replace)
        print("\n".join(report.lines()))
        if pool is not None:
            register_pool(pool, replace=args.replace)
            print(f"pool {pool.name}: main {pool.main}; experts {', '.join(pool.experts)}")
    except (DataFormatError, FileNotFoundError, KeyError, ValueError) as exc:
        print(f"error: {exc.args[0] if isinstance(exc, KeyError) and exc.args else exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
