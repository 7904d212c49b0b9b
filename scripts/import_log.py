"""Turn a per-question outcome log (CSV or JSONL) into an agent.

    python scripts/import_log.py --file run.csv --agent my-llm --dataset squad20 --gflops 2200 \
        [--ids row_to_id.csv] [--no-answer "NO ANSWER"] [--pool MyPool --main bert-tiny]

A row says whether the agent was right on one question (or gives its answer text), optionally
with its confidence, its latency in seconds and its price in dollars (``cost_usd``, or token
counts ``tokens_in``/``tokens_out`` priced by ``--usd-per-1m-input``/``--usd-per-1m-output``;
``--usd-per-question`` prices every answer alike); columns are found by name (see
``l2d_core.agents.outcome_log.COLUMNS``). Without answer text, F1 and both endpoints follow EM.
The agent is registered in the user registry (<cache>/registry.json) with its declared GFLOPs per
query once the log has been checked and read into the agent cache.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _bootstrap  # noqa: F401

from l2d_core.agents import AgentSpec, PoolSpec, register_agent, register_pool
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.catalog import agent_lock, check_new_agent, check_new_pool
from l2d_core.agents.outcome_log import import_log
from l2d_core.agents.prices import TokenPrices, flat_usd
from l2d_core.data import DataFormatError, dataset_names, load_dataset


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--file", required=True, type=Path, help="outcome log, .csv or .jsonl")
    p.add_argument("--agent", required=True, help="agent id to create (--replace to replace yours)")
    p.add_argument("--dataset", default="squad20", choices=dataset_names())
    p.add_argument("--gflops", required=True, type=float, help="declared GFLOPs per query")
    p.add_argument("--ids", type=Path, help="CSV mapping the log's row key (first column) to 'id'")
    p.add_argument("--no-answer", default="", help="the answer text that means 'no answer'")
    p.add_argument(
        "--usd-per-1m-input", type=float, help="dollars per million tokens read (with a token column)"
    )
    p.add_argument("--usd-per-1m-output", type=float, help="dollars per million tokens written")
    p.add_argument("--usd-per-question", type=float, help="one price in dollars for every answer (0: free)")
    p.add_argument("--name", default="", help="display name")
    p.add_argument("--pool", help="also register a pool of this name")
    p.add_argument("--main", help="main agent of that pool (default: this agent)")
    p.add_argument("--replace", action="store_true", help="replace your agent / pool of the same id")
    args = p.parse_args(argv)
    try:
        check_new_agent(args.agent, args.replace)
        options = {"ids": str(args.ids.resolve())} if args.ids else {}
        if args.no_answer:
            options["no_answer"] = args.no_answer
        for key in ("usd_per_1m_input", "usd_per_1m_output", "usd_per_question"):  # the money rule's prices
            if getattr(args, key) is not None:
                options[key] = getattr(args, key)
        (
            TokenPrices.of(options, f"agent {args.agent}"),
            flat_usd(options, f"agent {args.agent}"),
        )  # checked now
        spec = AgentSpec(
            id=args.agent,
            dataset=args.dataset,
            kind="outcome_log",
            gflops=args.gflops,
            path=str(args.file.resolve()),
            name=args.name or args.agent,
            options=options,
            description=f"known by its outcome log {args.file.name}",
        )
        pool = None
        if args.pool:
            main_agent = args.main or args.agent
            experts = (args.agent,) if main_agent != args.agent else ()
            if not experts:
                raise ValueError(f"pool {args.pool}: give --main, another agent in front of {args.agent}")
            pool = PoolSpec(args.pool, args.dataset, main_agent, experts)
        if pool is not None:  # everything checked before anything is written
            check_new_pool(pool, args.replace, also=(spec,))
        with agent_lock(spec.id):  # answers and registration: one transaction per agent id
            check_new_agent(spec.id, args.replace)
            report = import_log(spec, load_dataset(args.dataset), AgentCache())
            register_agent(spec, replace=args.replace)  # only once the log has been read and checked
        print("\n".join(report.lines()))
        if pool is not None:
            register_pool(pool, replace=args.replace)
            print(f"pool {pool.name}: main {pool.main}; experts {', '.join(pool.experts)}")
    except (DataFormatError, FileNotFoundError, KeyError, ValueError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {msg}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
