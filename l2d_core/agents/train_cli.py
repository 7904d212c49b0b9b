"""Train the project's own live agent (default ``minilm-qa``) and cache its answers, cross-fitted.

    python scripts/train_agent.py                         # minilm-qa on squad11, 2 folds
    python scripts/train_agent.py --folds 5 --epochs 3    # more folds / epochs
    python scripts/train_agent.py --device cuda           # on a GPU (default: CUDA when present)
    python scripts/train_agent.py --profile quick         # minutes: one small model, pool P3-quick
    python scripts/train_agent.py --dataset squad20       # minilm-qa-squad20 (answers "no answer" too)

SQuAD v1.1 dev is all the labelled data there is, so the answers are *cross-fitted*: the
BENCHMARK.md training articles are cut into k folds; for each fold a model is fine-tuned on
the other folds' articles and answers that fold's questions; a model fine-tuned on all
training articles answers the test articles and is the one registered for live use. No cached
answer comes from a model that saw its article. Then the agent is registered (kind
``extractive``, GFLOPs measured with torch's FLOP counter at 384 tokens) with the pools of
BENCHMARK.md: ``P3-live`` = {the agent (main), rnet-plus, bert-ens} and ``P2-live`` = {the agent,
bert-ens}; on SQuAD v2.0 (``--dataset squad20``: agent ``minilm-qa-squad20``) ``P3v2-live`` and
``P2v2-live``, with the experts of P3v2 and P2v2. Every answer is recorded with the model's
confidence in it (span probability, logit margins); answers cached without it are answered again
from the saved checkpoints. On SQuAD v2.0 the models let "no answer" compete, at the threshold
(best span score minus null score) that gives the highest EM on the training questions they
answer held out (``<cache>/models/<agent>/null_threshold.json``; see ``agents.null_threshold``).

The quick profile (``--profile quick``: agent ``minilm-qa-quick``, pool ``P3-quick``; on
squad20 ``minilm-qa-quick-squad20``, pool ``P3v2-quick``) answers
your own text within minutes of a fresh clone: one model fine-tuned for one epoch on 1,200
questions of one fold of the training articles answers 1,200 of the other fold's questions (what
a cascade router learns from: a subset, on purpose) and every test question. Its EM is far below
the full profile's.

Weights are build artefacts under ``<cache>/models/<agent>/`` (git-ignored; re-created by this
script). Resumable: a finished checkpoint (``l2d_training.json`` present) is not retrained and
cached answers are not recomputed. Ends with the agent's EM/F1/GFLOPs and the training times.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .. import background
from ..data import benchmark_split, load_dataset
from ..data.records import QARecord
from ..paths import CacheDirError, cache_dir
from ..stores import atomic_write_text
from .cache import AgentCache
from .catalog import AgentSpec, PoolSpec, register_agent, register_pool
from .profiles import PROFILES, parse_pool
from .qa_training import MARKER, QATrainConfig, crossfit_folds, is_trained, train_qa_model

__all__ = ["main", "parse_args", "plan_jobs", "train_key", "read_progress", "train_job", "Progress"]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="squad11", help="a dataset with the BENCHMARK.md split")
    p.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="full",
        help="full: cross-fitted models, every question answered (the benchmark's minilm-qa); quick: "
        "one small model in minutes that answers new text (agent minilm-qa-quick, pool P3-quick; on "
        "squad20 minilm-qa-quick-squad20, pool P3v2-quick)",
    )
    p.add_argument(
        "--agent-id",
        default=None,
        help="default: the profile's (minilm-qa, minilm-qa-quick; on a dataset other than squad11, with its "
        "name appended)",
    )
    p.add_argument("--base", default="", help="HF encoder path or id (default: packaged all-MiniLM-L6-v2)")
    p.add_argument("--folds", type=int, default=2, help="cross-fitting folds over the training articles")
    p.add_argument("--epochs", type=int, default=None, help="default: the profile's")
    p.add_argument("--batch-size", type=int, default=None, help="default: the profile's")
    p.add_argument("--lr", type=float, default=None, help="default: the profile's")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--precision",
        choices=["auto", "bf16", "fp32"],
        default="auto",
        help="auto: bf16 autocast on CUDA and on CPUs with native bf16, else fp32",
    )
    p.add_argument("--device", default=None, help="cuda, cuda:1, cpu (default: CUDA when present)")
    p.add_argument(
        "--limit",
        type=int,
        default=None,
        help="at most N questions per training/answering step (quick profile: training and the "
        "held-out fold only; default: the profile's)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument(
        "--pools",
        nargs="*",
        default=None,
        metavar="NAME=EXPERT,…",
        help="pools to register with the agent as main (default: the profile's for the dataset; full on "
        "squad11: BENCHMARK.md's live pools)",
    )
    args = p.parse_args(argv)
    profile = PROFILES[args.profile]
    for k in ("epochs", "batch_size", "lr", "limit"):
        if getattr(args, k) is None:
            setattr(args, k, getattr(profile, k))
    if args.agent_id is None:
        args.agent_id = profile.agent_for(args.dataset)
    if args.pools is None:
        args.pools = list(profile.pools_for(args.dataset))
    return args


def plan_jobs(
    train: Sequence[QARecord],
    test: Sequence[QARecord],
    folds: int,
    seed: int,
    limit: int | None,
    crossfit: bool,
) -> list[tuple[str, list[QARecord], list[QARecord]]]:
    """The models of a run as (name, training records, records it answers): k cross-fitted fold
    models, then the full model (the last one is registered for live use: it trained on no test
    article); without ``crossfit`` one fold model that answers its held-out fold and every test
    question. ``limit`` caps each list (the test questions of a single model excepted)."""
    lim = (lambda rs: list(rs)[:limit]) if limit else list
    jobs = [
        (f"fold{f}", lim(r for r in train if r.title not in held), lim(r for r in train if r.title in held))
        for f, held in enumerate(crossfit_folds([r.title for r in train], folds, seed))
    ]
    if not crossfit:
        return [(jobs[0][0], jobs[0][1], jobs[0][2] + list(test))]
    return [*jobs, ("full", lim(train), lim(test))]


# --- progress: a background job's progress file the dashboard reads (the tqdm bars are for the terminal)
def train_key(agent_id: str) -> str:
    """The background job of a run of ``agent_id`` (its progress file, whoever started it: the
    dashboard's button or this command line)."""
    return background.job_key("train", agent_id)


def read_progress(agent_id: str) -> background.JobStatus:
    """Where the last run of ``agent_id`` stands (``state`` idle: none ever reported here)."""
    return background.status(train_key(agent_id))


def train_job(report: background.Reporter, argv: list[str]) -> None:
    """The background job of the dashboard's button: this command line, reporting to ``report``."""
    if main(argv, report) != 0:
        raise RuntimeError(report.doc.get("error") or "the run failed")


class Progress:
    """A run's progress, as the stages of its background job (:mod:`l2d_core.background`; one
    started here by the command line has a progress file all the same): ``stage`` (starting,
    fine-tuning, calibrating (SQuAD v2.0), answering, registering), ``current`` (the model),
    ``done`` / ``total`` (steps or questions of the stage), ``left_s`` from its rate so far, and
    the ``error`` a failed run ends with."""

    def __init__(self, agent_id: str, report: background.Reporter | None = None):
        self.model = ""
        self.report = report or background.Reporter(train_key(agent_id), first_stage="starting")
        if report is not None:
            self.stage("starting")

    def stage(self, stage: str, total: int = 0, model: str = "") -> None:
        self.model = model
        self.report.stage(stage, "steps" if stage == "fine-tuning" else "questions", total, model)

    def update(self, done: int, total: int | None = None) -> None:
        self.report(done, self.report.doc.get("total", 0) if total is None else total, self.model)

    def finish(self, state: str, message: str = "") -> None:
        self.report.finish(state, error=message)


class _Counted:
    """An agent whose ``predict`` reports how many questions it has answered so far."""

    def __init__(self, agent, report):
        self._agent, self._report, self._done = agent, report, 0

    def __getattr__(self, name):
        return getattr(self._agent, name)

    def predict(self, records, *args, **kwargs):
        preds = self._agent.predict(records, *args, **kwargs)
        self._done += len(records)
        self._report(self._done)
        return preds


def main(argv=None, report: background.Reporter | None = None) -> int:
    """``scripts/train_agent.py``: 0 when the agent is trained, answered and registered; 2 on a
    clear error (printed as ``error: …``). ``report``: the background job it runs in, if any."""
    args = parse_args(argv)
    try:
        progress = Progress(args.agent_id, report)
    except CacheDirError as exc:  # L2D_CACHE_DIR is a file, or cannot be made: one line, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def fail(msg: str) -> int:
        print(f"error: {msg}", file=sys.stderr)
        progress.finish("failed", msg)
        return 2

    try:
        return _run(args, progress, fail)
    except BaseException as exc:  # a crash or Ctrl-C: the file says so (a kill -9 leaves a dead pid)
        progress.finish("failed", f"{type(exc).__name__}: {exc}"[:300])
        raise


def _run(args, progress: Progress, fail) -> int:
    try:
        ds = load_dataset(args.dataset)
        train, test = benchmark_split(ds)
        pools = [parse_pool(text) for text in args.pools]
    except (KeyError, ValueError, FileNotFoundError) as exc:
        return fail(str(exc))
    cfg = QATrainConfig(
        base=args.base, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
        bf16={"auto": None, "bf16": True, "fp32": False}[args.precision], seed=args.seed,
    )  # fmt: skip
    root = cache_dir() / "models" / args.agent_id
    crossfit = PROFILES[args.profile].crossfit
    jobs = plan_jobs(train, test, args.folds, args.seed, args.limit, crossfit)
    live = jobs[-1][0]  # the model registered for live use: trained on no test article
    plan = {
        "config": cfg.but(base=cfg.base_path()).__dict__,
        "limit": args.limit,
        "profile": args.profile,
        "models": {
            name: {"trained_on": sorted({r.title for r in fit}), "answers": sorted({r.title for r in ans})}
            for name, fit, ans in jobs
        },
    }
    plan_file = root / "crossfit.json"
    if plan_file.is_file() and json.loads(plan_file.read_text(encoding="utf-8")) != plan:
        return fail(
            f"{root} holds models trained with other settings (folds, epochs, base, limit…): "
            "delete that folder or pass another --agent-id"
        )
    root.mkdir(parents=True, exist_ok=True)
    plan_file.write_text(json.dumps(plan, indent=1), encoding="utf-8")

    stats = {}
    for name, fit_recs, _ in jobs:  # 1. fine-tune every model (skips finished ones)
        out = root / name
        if not is_trained(out):
            (root / NULL_FILE).unlink(missing_ok=True)  # calibrated on models that are being replaced
            print(f"[{name}] fine-tuning on {len(fit_recs)} questions → {out}", flush=True)
            progress.stage("fine-tuning", model=name)

            try:
                train_qa_model(
                    fit_recs, out, cfg, args.device, progress=not args.quiet, on_step=progress.update
                )
            except (OSError, ValueError) as exc:
                return fail(f"{name}: {exc}")
        stats[name] = json.loads((out / MARKER).read_text(encoding="utf-8"))

    from .null_threshold import AnsweredBefore
    from .runners import ExtractiveAgent, agent_gflops_at, run_into_cache

    cache = AgentCache()
    null = ds.v2
    models = {
        name: ExtractiveAgent(str(root / name), device=args.device, null_answer=null) for name, _, _ in jobs
    }  # loaded once: calibrating and answering share them
    tau, held = 0.0, {}
    if null:  # 2. SQuAD v2.0: the no-answer threshold, from the held-out training questions
        tau, held = _null_threshold(root, jobs, test, models, progress)
        if cache.meta(ds.name, args.agent_id).get("null_threshold") != tau:
            cache.delete(ds.name, args.agent_id)  # answers made at another threshold are not this agent's
            cache.set_meta(ds.name, args.agent_id, null_threshold=tau)
    for name, _, answer_recs in jobs:  # 3. each model answers its held-out questions
        models[name].null_threshold = tau
        cached = cache.ids_with(ds.name, args.agent_id, "confidence")
        progress.stage("answering", sum(r.qid not in cached for r in answer_recs), name)
        agent = _Counted(AnsweredBefore(models[name], held, tau), progress.update)
        print(f"[{name}] answering {len(answer_recs)} held-out questions", flush=True)
        run_into_cache(
            agent, ds, args.agent_id, answer_recs, cache, progress=not args.quiet, desc=f"answer {name}"
        )

    progress.stage("registering", model=live)
    full = ExtractiveAgent(str(root / live), device=args.device, null_answer=null, null_threshold=tau)
    spec = AgentSpec(
        id=args.agent_id,
        dataset=ds.name,
        kind="extractive",
        gflops=round(agent_gflops_at(full, 384), 2),
        gflops_source="measured",
        path=str(root / live),
        name=f"{args.base or 'all-MiniLM-L6-v2'} fine-tuned for extractive QA "
        + ("(quick profile)" if args.profile == "quick" else "(cross-fitted)"),
        params=sum(p.numel() for p in full.model.parameters()),
        options={"max_length": 384, "stride": 128, "max_answer_tokens": 30, "null_answer": null}
        | ({"null_threshold": tau} if null else {}),
    )
    register_agent(spec, replace=True)  # a later run of this script replaces its own agent
    again = "python scripts/train_agent.py " + shlex.join(
        ["--dataset", ds.name, "--profile", args.profile, "--agent-id", args.agent_id]
    )
    cache.set_meta(
        ds.name,
        args.agent_id,
        gflops_source="measured",
        training=stats,
        answered_by=again,
        partial=not crossfit,  # answered a subset on purpose: pools route on it
    )
    for pool_name, experts in pools:
        register_pool(
            PoolSpec(pool_name, ds.name, args.agent_id, experts, "live agent as main"), replace=True
        )
    progress.finish("done")
    _report(args, ds, test, spec, stats, pools, cache)
    return 0


NULL_FILE = "null_threshold.json"  # beside the models: the threshold they were calibrated to


def _null_threshold(root: Path, jobs, test, models: dict, progress: Progress) -> tuple[float, dict]:
    """``(τ, predictions by question id)``: the no-answer threshold
    (:mod:`~l2d_core.agents.null_threshold`) for the highest EM on the training questions the
    models answer held out (never a test question), and those answers (none when a resumed run
    reads τ back: they are cached already)."""
    from .null_threshold import best_null_threshold, held_out_outcomes

    saved = root / NULL_FILE  # a resumed run keeps it (step 1 deletes it when a model is retrained)
    if saved.is_file():
        return float(json.loads(saved.read_text(encoding="utf-8"))["threshold"]), {}
    test_ids = {r.qid for r in test}
    parts, held = [], {}
    for name, _, answer_recs in jobs:
        recs = [r for r in answer_recs if r.qid not in test_ids]
        if recs:
            progress.stage("calibrating", len(recs), name)
            print(f"[{name}] calibrating 'no answer' on {len(recs)} held-out questions", flush=True)
            preds = _Counted(models[name], progress.update).predict(recs)
            parts.append(held_out_outcomes(preds, recs))
            held.update((p.qid, p) for p in preds)
    margin, span_em, null_em = (np.concatenate(x) for x in zip(*parts))
    tau, em = best_null_threshold(margin, span_em, null_em)
    untuned = 100 * float(np.where(margin >= 0, span_em, null_em).mean())
    print(f"  no-answer threshold {tau:+.3f}: held-out EM {untuned:.2f} -> {100 * em:.2f}", flush=True)
    record = {"threshold": tau, "held_out": len(margin), "em": 100 * em, "em_untuned": untuned}
    atomic_write_text(saved, json.dumps(record, indent=1))
    return tau, held


def _report(args, ds, test, spec, stats, pools, cache: AgentCache) -> None:
    t = cache.table(ds.name, args.agent_id)
    test_ids = {r.qid for r in test}
    on_test = t[t.index.isin(test_ids)]
    print(f"\n{args.agent_id}: {len(t)} of {len(ds)} questions cached")
    print(f"  all     EM {100 * t['em'].mean():6.2f}  F1 {100 * t['f1'].mean():6.2f}")
    print(f"  test    EM {100 * on_test['em'].mean():6.2f}  F1 {100 * on_test['f1'].mean():6.2f}")
    gq = t["gflops"].astype(float).mean()
    print(f"  GFLOPs/query {gq:.2f} (windows at their own length); one 384-token window: {spec.gflops}")
    print(f"  latency {t['latency_ms'].astype(float).mean():.1f} ms/query")
    for name, s in stats.items():
        q, w, sec, dev = s["questions"], s["windows"], s["seconds"], s["device"]
        print(f"  {name:6s} trained on {q:5d} q ({w} windows) in {sec:7.1f} s on {dev}")
    total = sum(s["seconds"] for s in stats.values())
    print(f"  training total {total / 60:.1f} min; pools {', '.join(n for n, _ in pools) or '-'} registered")


if __name__ == "__main__":
    sys.exit(main())
