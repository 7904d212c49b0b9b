"""Run agents over a dataset split into the agent cache: resumable, shardable, with a summary.

    python scripts/precompute_cache.py --config my_agents.json [--limit N] [--shard i/N] \\
        [--device cuda:0] [--batch-size 32] [--chunk 64] [--json] [--quiet]
    python scripts/precompute_cache.py --dataset squad11 --agents my-agent   # registered agents

Config file (JSON):

    {"dataset": "squad11",                 # a registered dataset name
     "split": "all",                       # "test" / "train" (BENCHMARK.md articles) or "all"
     "agents": [
        "my-registered-agent",             # an agent id of the registry
        {"id": "albert-base", "kind": "extractive", "path": "/models/albert-base-squad",
         "options": {"max_length": 384, "stride": 128, "max_answer_tokens": 30}},
        {"id": "llama-1b", "kind": "generative", "path": "meta-llama/Llama-3.2-1B",
         "max_new_tokens": 32, "batch_size": 8},
        {"id": "llama-8b-vllm", "kind": "openai_chat", "path": "meta-llama/Llama-3.1-8B-Instruct",
         "gflops": 6000, "base_url": "http://localhost:8000/v1", "api_key_env": "VLLM_API_KEY"},
        {"id": "mine", "kind": "prediction_file", "path": "/x/preds.json", "gflops": 40},
        {"id": "my-log", "kind": "outcome_log", "path": "/x/log.csv", "gflops": 3},
        {"id": "abstain"}]}                 # the built-in agent that always says "no answer"

An inline agent has the fields of an ``AgentSpec`` (id, kind, path, name, params, gflops) and
its options (see ``AGENT_OPTIONS`` in ``l2d_core/agents/runners.py``), nested under
``"options"`` or given beside the fields. ``path`` is a local model directory (absolute, or
relative to the data directory) or a Hugging Face hub id. Prediction files and outcome logs
(kind ``outcome_log``: CSV/JSONL of correct, confidence, latency per question, options ``ids``,
``columns``, ``no_answer``, ``confidence_rule``, ``confidence_signal``) are read into the cache whole,
like ``scripts/import_predictions.py`` does; the abstaining agent (kind ``abstain``) needs no
file: its answers are made. Inline agents are registered in the
user registry, model agents with ``gflops_source: "measured"`` and the GFLOPs of one forward
at 384 tokens, so the dashboard and the benchmark see them.

Resuming: every chunk of ``--chunk`` questions is one cache transaction, and questions already
cached are skipped, so a run killed at any moment (even ``kill -9``) loses at most the chunk in
flight; run the same command again to finish it.

Several processes or GPUs: ``--shard i/N`` runs the i-th of N disjoint parts of the questions
(the split, after ``--limit``, taken every N-th from i); all shards write into the same cache
safely. With a launcher such as torchrun, leave ``--shard`` out: each process reads ``RANK`` and
``WORLD_SIZE`` (its shard) and ``LOCAL_RANK`` (it runs on ``cuda:LOCAL_RANK`` unless ``--device``
says otherwise):

    torchrun --nproc-per-node 4 scripts/precompute_cache.py --config my_agents.json

No process group is opened: the processes never talk to each other. Errors (bad config, unknown
agent, missing model, empty split, bad shard, an endpoint nobody answers at or that refuses the
key or model) exit with code 2 and a one-line message. An endpoint that fails single questions
(past its deadline, an error status, a malformed reply) does not stop the run: those questions are
left out of the cache, one line per agent names how many and the first failure with its endpoint,
and the exit code is 1 (run the same command again to ask them again).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import _bootstrap  # noqa: F401

from l2d_core.agents import AgentSpec, get_agent, register_agent
from l2d_core.agents.cache import AgentCache
from l2d_core.agents.catalog import AGENT_KINDS, check_new_agent
from l2d_core.agents.confidence import check_confidence_file
from l2d_core.agents.endpoint import EndpointError
from l2d_core.agents.measured import agent_gflops
from l2d_core.agents.outcome_log import LOG_KINDS
from l2d_core.agents.read_in import ensure_cached
from l2d_core.agents.runners import (
    AGENT_OPTIONS,
    agent_gflops_at,
    cache_summary,
    load_agent,
    parse_shard,
    run_into_cache,
    shard,
)
from l2d_core.data import (
    DataFormatError,
    EmptySplitError,
    benchmark_split,
    dataset_names,
    load_dataset,
    safe_json,
)

SPLITS = ("all", "test", "train")
SPEC_FIELDS = ("id", "kind", "path", "name", "params", "gflops", "dataset")
# options per kind: the runners' (model agents, prediction files) and the outcome logs'
KIND_OPTIONS = {**AGENT_OPTIONS, "abstain": ()}
READ_IN = ("prediction_file", *LOG_KINDS)  # kinds read into the cache whole: no model runs


class ConfigError(ValueError):
    """A malformed config file or command line."""


def read_config(args) -> dict:
    """The config file (if any) with the command line's --dataset/--split/--agents applied."""
    doc: dict = {}
    if args.config:
        try:
            doc = safe_json.loads(Path(args.config).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file {args.config} not found") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"config {args.config} is not valid JSON: {exc}") from None
        except safe_json.JSONNestingError as exc:
            raise ConfigError(f"config {args.config} holds {exc}") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"config {args.config}: expected a JSON object, got {type(doc).__name__}")
        extra = sorted(set(doc) - {"dataset", "split", "agents"})
        if extra:
            raise ConfigError(f"config {args.config}: unknown keys {extra}; known: dataset, split, agents")
    cfg = {
        "dataset": args.dataset or doc.get("dataset", "squad11"),
        "split": args.split or doc.get("split", "all"),
        "agents": args.agents or doc.get("agents"),
    }
    if cfg["dataset"] not in dataset_names():
        raise ConfigError(f"unknown dataset {cfg['dataset']!r}; known: {', '.join(dataset_names())}")
    if cfg["split"] not in SPLITS:
        raise ConfigError(f"unknown split {cfg['split']!r}; known: {', '.join(SPLITS)}")
    if not isinstance(cfg["agents"], list) or not cfg["agents"]:
        raise ConfigError('no agents: give a non-empty "agents" list in --config, or --agents ID ...')
    return cfg


def agent_specs(entries: list, dataset: str) -> list[tuple[AgentSpec, bool]]:
    """(spec, given inline) for every config entry; unknown ids raise KeyError."""
    out = []
    for e in entries:
        if isinstance(e, str):
            spec = get_agent(e)
            if spec.dataset != dataset:
                raise ConfigError(f"agent {e} answers {spec.dataset}, not {dataset}")
            out.append((spec, False))
            continue
        if not isinstance(e, dict) or not isinstance(e.get("id"), str) or "kind" not in e:
            raise ConfigError(f"agent entry {e!r}: expected an agent id or an object with id and kind")
        if e["kind"] not in AGENT_KINDS:
            raise ConfigError(f"agent {e['id']}: unknown kind {e['kind']!r}; known: {', '.join(AGENT_KINDS)}")
        options = dict(e.get("options") or {})
        if not isinstance(options, dict):
            raise ConfigError(f"agent {e['id']}: options must be an object")
        for k, v in e.items():
            if k in KIND_OPTIONS[e["kind"]]:
                options[k] = v
            elif k not in (*SPEC_FIELDS, "options"):
                raise ConfigError(f"agent {e['id']}: unknown field {k!r}")
        if e.get("dataset", dataset) != dataset:
            raise ConfigError(f"agent {e['id']} is for dataset {e['dataset']}, the config for {dataset}")
        fields = {k: e[k] for k in SPEC_FIELDS if k in e and k != "dataset"}
        source = "declared" if e["kind"] in (*READ_IN, "openai_chat") else "measured"  # endpoint: declared
        try:
            spec = AgentSpec(dataset=dataset, gflops_source=source, options=options, **fields)
            check_new_agent(spec.id, replace=True)  # never a built-in agent's id
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"agent {str(e['id'])[:64]}: {exc}") from None
        out.append((spec, True))
    ids = [s.id for s, _ in out]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"an agent appears twice in {ids}")
    return out


def check_path(spec: AgentSpec) -> None:
    """Fail before any work when a model or file path is plainly missing (a hub id may remain)."""
    if spec.kind in ("abstain", "openai_chat"):  # answers made from no file; a model at an endpoint
        return
    if spec.kind in READ_IN:
        if not spec.path or not spec.resolved_path().is_file():
            what = "prediction file" if spec.kind == "prediction_file" else "outcome log"
            raise FileNotFoundError(f"agent {spec.id}: {what} {spec.resolved_path()} not found")
        if spec.kind == "prediction_file":
            check_confidence_file(spec)  # its confidence file too, as it is registered
        return
    p = spec.path
    if not p:
        raise ConfigError(f"agent {spec.id}: a {spec.kind} agent needs a path (model directory or hub id)")
    looks_local = p.startswith(("/", ".", "~")) or p.count("/") > 1 or "\\" in p
    if looks_local and not spec.resolved_path().exists():
        raise FileNotFoundError(f"agent {spec.id}: model path {p} not found")


def launcher_shard(args) -> tuple[int, int, str | None]:
    """(shard index, shard count, device) from --shard/--device, else torchrun's environment."""
    device = args.device
    if args.shard:
        i, n = parse_shard(args.shard)
        return i, n, device
    try:
        n = int(os.environ.get("WORLD_SIZE", "1"))
        i = int(os.environ.get("RANK", "0"))
        local = os.environ.get("LOCAL_RANK")
    except ValueError:
        raise ConfigError("RANK / WORLD_SIZE must be integers") from None
    i, n = parse_shard(f"{i}/{n}")
    if device is None and local is not None and n > 1:
        import torch

        device = f"cuda:{int(local)}" if torch.cuda.is_available() else None
    return i, n, device


def run_agent(spec, inline, ds, recs, cache, args, device, label) -> dict:
    """Run one agent over ``recs`` into the cache; register it if it was given inline."""
    if spec.kind == "prediction_file":
        check_confidence_file(spec, ds.qids)  # its ids questions of this dataset, before it is registered
    if spec.kind in LOG_KINDS:  # read in whole (checked first; a bad log changes nothing)
        before, qids = cache.done_ids(ds.name, spec.id), {r.qid for r in recs}
        ensure_cached(ds, [spec], cache)
        read = len((cache.done_ids(ds.name, spec.id) - before) & qids)
        if inline:
            register_agent(spec, replace=True)
        return {**cache_summary(cache, ds, spec.id, recs, read), "gflops_384": agent_gflops(spec)}
    todo = len(recs) - len(cache.done_ids(ds.name, spec.id) & {r.qid for r in recs})
    meta = cache.meta(ds.name, spec.id)
    gflops = spec.gflops
    if todo or (inline and spec.kind != "prediction_file" and "gflops" not in meta):
        overrides = {"batch_size": args.batch_size} if spec.kind != "prediction_file" else {}
        agent = load_agent(spec, device=device, **overrides)
        gflops = round(agent_gflops_at(agent, 384), 6)
        extra = {"gflops": gflops} if spec.kind != "prediction_file" else {"gflops": spec.gflops}
        summary = run_into_cache(
            agent, ds, spec.id, recs, cache, args.chunk, not args.quiet, extra, f"{spec.id}{label}"
        )
    else:  # nothing left to do: no model is loaded
        gflops = meta.get("gflops", spec.gflops)
        summary = cache_summary(cache, ds, spec.id, recs)
    if inline:
        register_agent(AgentSpec(**{**spec.__dict__, "gflops": float(gflops)}), replace=True)
    return {**summary, "gflops_384": gflops}


def print_table(rows: list[dict], label: str) -> None:
    head = f"{'agent':20s} {'questions':>9s} {'computed':>8s} {'skipped':>7s} {'EM':>6s} {'F1':>6s}"
    print(f"\nsummary{label}")
    print(head + f" {'GFLOPs/q':>9s} {'@384':>9s} {'ms/q':>8s} {'not found':>9s} {'ambiguous':>9s}")
    for r in rows:
        ms = "-" if r["latency_ms"] is None else f"{r['latency_ms']:.1f}"
        print(
            f"{r['agent']:20s} {r['questions']:9d} {r['computed']:8d} {r['skipped']:7d} {r['em']:6.2f} "
            f"{r['f1']:6.2f} {r['gflops']:9.3f} {r['gflops_384']:9.3f} {ms:>8s} {r['not_found']:9d} "
            f"{r['ambiguous']:9d}"
        )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", type=Path, help="JSON config (dataset, split, agents)")
    p.add_argument("--dataset", help="dataset name (overrides the config's; default squad11)")
    p.add_argument("--split", help="all, test or train (overrides the config's; default all)")
    p.add_argument("--agents", nargs="+", help="registered agent ids (replace the config's agents)")
    p.add_argument("--limit", type=int, help="only the first N questions of the split")
    p.add_argument("--shard", help="i/N: run the i-th of N disjoint parts (default: RANK/WORLD_SIZE or 0/1)")
    p.add_argument(
        "--device", help="cpu, cuda, cuda:1, … (default: cuda:LOCAL_RANK under torchrun, else auto)"
    )
    p.add_argument("--batch-size", type=int, help="windows (extractive) or prompts (generative) per forward")
    p.add_argument("--chunk", type=int, default=64, help="questions per cache transaction (default 64)")
    p.add_argument("--json", action="store_true", help="print the summaries as one JSON list")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    try:
        if args.limit is not None and args.limit < 1:
            raise ConfigError(f"--limit must be >= 1, got {args.limit}")
        if args.chunk < 1 or (args.batch_size is not None and args.batch_size < 1):
            raise ConfigError("--chunk and --batch-size must be >= 1")
        index, count, device = launcher_shard(args)
        cfg = read_config(args)
        specs = agent_specs(cfg["agents"], cfg["dataset"])
        for spec, _ in specs:
            check_path(spec)
        ds = load_dataset(cfg["dataset"])
        if cfg["split"] == "all":
            part = ds
            if not len(ds):
                raise EmptySplitError(f"dataset {ds.name} has no question")
        else:
            part = dict(zip(("train", "test"), benchmark_split(ds)))[cfg["split"]]
        recs = shard(part.records[: args.limit], index, count)
        label = f" [shard {index}/{count}]" if count > 1 else ""
        cache = AgentCache()
        rows = [run_agent(spec, inline, ds, recs, cache, args, device, label) for spec, inline in specs]
    except KeyError as exc:
        return _fail(exc.args[0] if exc.args else str(exc))
    except (DataFormatError, FileNotFoundError, ValueError, EndpointError) as exc:
        return _fail(str(exc))
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print_table(rows, f" — {cfg['dataset']}:{cfg['split']}, {len(recs)} questions{label}")
    return report_failures(rows)


def report_failures(rows: list[dict]) -> int:
    """One line per agent whose endpoint failed questions (they are not cached: running again asks
    them again) or sent answers without log-probabilities; 1 when questions failed, else 0."""
    for r in rows:
        if r.get("without_confidence"):
            print(
                f"note: {r['agent']}: {r['without_confidence']} answers came without log-probabilities, "
                "so without a confidence a cascade can read",
                file=sys.stderr,
            )
        if r.get("failed"):
            first = r["failures"][0]
            print(
                f"warning: {r['agent']}: {r['failed']} of {r['questions']} questions failed and are not "
                f"cached (the first, {first['qid']}: {first['error']}); run the same command again to "
                "ask them again",
                file=sys.stderr,
            )
    return 1 if any(r.get("failed") for r in rows) else 0


def _fail(message: str) -> int:
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
