"""Benchmark every router and policy on one pool and write a report (issue 4).

    python scripts/benchmark_routers.py --dataset squad11 --pool P3 --out reports/squad11-P3/
    python scripts/benchmark_routers.py --pool P2 --quick --out /tmp/p2-quick   # reduced run
    python scripts/benchmark_routers.py --out reports/squad11-P3/ --report-only  # re-render only

Writes into --out (default ``reports/<dataset>-<pool>/``):

- ``results.json``: per router its curve points, AIQ, APGR, CPT, TDL per β₁ and bootstrap
  intervals (l2d_core.evaluation.comparison.run_comparison), plus ``paper_table`` (the β₁ ∈ {0, 0.25, 0.5}
  rows of the paper's Tables 1–2) and ``run`` (command, timings);
- ``report.md``: targets, agents, routers, TDL per β₁, Fig. 3 numbers, Tables 1–2, plots
  (l2d_core.report.figures);
- ``plots/*.html`` (Altair charts; the Vega scripts written once beside them as
  ``vega-embed.js``, so they work offline) and ``plots/*.png``.

PNG export uses vl-convert (in-process, no browser). If it fails the JSON, the markdown and the
HTML plots are still written and a message says why; the exit status is then 0, unless --png was
given (3). Exit status 2: bad arguments or data.

Paper table (β₁ = 0.25 is not a BENCHMARK.md point): each router is run at the missing β₁ (the
points are kept apart, so AIQ and the figures stay on the benchmark's points). The r_* baselines
appear twice: at each β₁ by their own cost rule (threshold 1 − β of the expert), and at the
*matched share*: the threshold point whose share of expert calls is nearest to l2d-sdl's at that
β₁ (an equal-budget comparison that uses no test labels).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

import _bootstrap  # noqa: F401

from l2d_core import report as R
from l2d_core.agents import get_pool, list_pools
from l2d_core.data import dataset_names
from l2d_core.evaluation import comparison as C
from l2d_core.evaluation import results as store
from l2d_core.evaluation.benchmark import QUESTION_SETS, prepare
from l2d_core.evaluation.paper import paper_table
from l2d_core.evaluation.results import run_key
from l2d_core.report.readme_figures import figures_markdown, replace_block
from l2d_core.routers.registry import AGENT_PREFIX, router_class, router_ids

QUICK_SEEDS = (0,)
QUICK_LIMIT_TRAIN = 1500
QUICK_N_BOOT = 200
QUICK_ROUTERS = ("l2d-plugin", "r-prob", "random", "zero", "oracle")  # + the pool's agents
PNG_SCALE = 2.0  # PNG pixels per chart pixel


class UsageError(Exception):
    """A bad argument or input; printed as ``error: …`` with exit status 2."""


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="squad11", choices=dataset_names())
    p.add_argument("--pool", default="P3", help="pool name: " + ", ".join(x.name for x in list_pools()))
    p.add_argument("--out", type=Path, help="output folder (default: reports/<dataset>-<pool>/)")
    p.add_argument("--seeds", type=int, nargs="+", help="training seeds (default 0 1 2 3 4; --quick: 0)")
    p.add_argument(
        "--routers",
        nargs="+",
        help="router ids to run (default: every registered router but those run only where named, "
        "such as l2d-sdl-full, the paper's rejector with its encoder fine-tuned; and agent:<id>; --quick: "
        + ", ".join(QUICK_ROUTERS)
        + " and the agents)",
    )
    p.add_argument(
        "--prices",
        type=float,
        nargs="*",
        help="per-TFLOP prices λ evaluated besides the β₁ points (default: BENCHMARK.md's)",
    )
    p.add_argument(
        "--questions",
        choices=list(QUESTION_SETS),
        default="all",
        help="questions kept: all, or the answerable ones (in every split: routers train, "
        "are validated and are scored on them, as the anchor does; "
        "default out: reports/<dataset>-<pool>-answerable/)",
    )
    p.add_argument("--limit-train", type=int, metavar="N", help="sub-sample N training questions (seed 0)")
    p.add_argument("--n-boot", type=int, help="bootstrap resamples (default: the engine's; --quick: 200)")
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"reduced run for tests: seed 0, {QUICK_LIMIT_TRAIN} training questions, fewer routers",
    )
    png = p.add_mutually_exclusive_group()
    png.add_argument("--png", action="store_true", default=None, help="PNG plots required (fail: exit 3)")
    png.add_argument("--no-png", dest="png", action="store_false", help="HTML plots only")
    p.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite report.md and the plots from <out>/results.json (nothing recomputed)",
    )
    p.add_argument(
        "--readme",
        type=Path,
        metavar="PATH",
        help="rewrite the generated figures block of this README from every results.json beside --out "
        "(also with --report-only)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p.parse_args(argv)


def _log(args, msg: str) -> None:
    if not args.quiet:
        print(msg, file=sys.stderr, flush=True)


# --- inputs ------------------------------------------------------------------------------------


def check_inputs(args) -> None:
    """Fail early (before minutes of work) on a bad pool, router id, seed list or output path."""
    try:
        pool = get_pool(args.pool)
    except KeyError as exc:
        raise UsageError(exc.args[0]) from None
    if pool.dataset != args.dataset:
        raise UsageError(f"pool {pool.name} is for dataset {pool.dataset}, not {args.dataset}")
    known = [*router_ids(on_request=True), *(AGENT_PREFIX + a for a in (pool.main, *pool.experts))]
    bad = [r for r in args.routers or () if r not in known]
    if bad:
        raise UsageError(
            f"unknown router(s) {', '.join(bad)} for pool {pool.name}; known: {', '.join(known)}"
        )
    if args.seeds is not None and not args.seeds:
        raise UsageError("--seeds needs at least one seed")
    if args.limit_train is not None and args.limit_train < 10:
        raise UsageError(f"--limit-train must be at least 10, got {args.limit_train}")
    if any(not (x >= 0 and x < float("inf")) for x in args.prices or ()):
        raise UsageError(f"--prices must be finite and >= 0, got {args.prices}")
    if args.n_boot is not None and args.n_boot < 0:
        raise UsageError(f"--n-boot must be >= 0, got {args.n_boot}")
    out = args.out
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a folder")
    for name in ("results.json", "report.md", "plots"):
        if (out / name).exists() and (out / name).is_dir() != (name == "plots"):
            raise UsageError(f"{out / name} is in the way (a {'file' if name == 'plots' else 'folder'})")
    try:
        (out / "plots").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {out / 'plots'}: {exc.strerror or exc}") from None


def reads_embeddings(routers) -> bool:
    """Whether any of ``routers`` (None: every registered router) reads the question/context
    embeddings, so that the benchmark must compute them."""
    ids = router_ids() if routers is None else routers
    return any(cls is not None and cls.reads_embeddings for cls in map(router_class, ids))


def check_available(bench, routers) -> None:
    """Fail with each reason when a chosen router cannot run on the pool (e.g. ``conf-threshold``
    on a pool whose main agent gives no confidence)."""
    why = [
        reason
        for cls in map(router_class, routers or ())
        if cls is not None and (reason := cls.unavailable(bench)) is not None
    ]
    if why:
        raise UsageError("; ".join(why))


# --- outputs -----------------------------------------------------------------------------------


def find_siblings(out: Path, results: dict) -> dict:
    """Other pools' results beside ``out`` (newest per pool and question set, keyed by
    :func:`~l2d_core.evaluation.results.run_key`), for the targets on other pools."""
    found = {}
    for path in store.list_results(out.resolve().parent):
        if path.parent.resolve() == out.resolve():
            continue
        try:
            doc = store.load_results(path)
        except (ValueError, OSError):
            continue
        key = store.run_key(doc)
        if key != store.run_key(results) and key not in found:
            found[key] = {"path": str(path), "results": doc}
    return found


def write_plots(figs: dict, plots: Path, png: bool | None, log) -> tuple[list[str], str | None]:
    """HTML always (the Vega scripts written once beside the pages: they work offline); PNG
    unless ``png`` is False. Returns the written files (relative to the report) and the PNG
    error message, if any."""
    (plots / R.VEGA_SCRIPT).write_text(R.vega_script(), encoding="utf-8")
    written = []
    for name, fig in figs.items():
        (plots / f"{name}.html").write_text(R.figure_html(fig, name), encoding="utf-8")
        written.append(f"plots/{name}.html")
        (plots / f"{name}.png").unlink(missing_ok=True)  # never leave a PNG of an earlier run
    if png is False:
        return written, None
    t0 = time.perf_counter()
    try:
        for name, fig in figs.items():
            (plots / f"{name}.png").write_bytes(R.figure_png(fig, PNG_SCALE))
            written.append(f"plots/{name}.png")
    except Exception as exc:  # vl-convert missing or failing: the HTML is already written
        for name in figs:
            (plots / f"{name}.png").unlink(missing_ok=True)  # all the PNGs or none
        why = " ".join(str(exc).split())[:300]  # one line
        return [p for p in written if p.endswith(".html")], (
            f"PNG export failed ({type(exc).__name__}: {why}). PNG needs `pip install vl-convert-python` "
            "(requirements.txt). The HTML plots, results.json and report.md are written."
        )
    log(f"PNG: {len(figs)} plots in {time.perf_counter() - t0:.1f} s")
    return written, None


def main(argv=None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()
    log = lambda m: _log(args, m)
    if args.quick:
        args.seeds = args.seeds or list(QUICK_SEEDS)
        args.limit_train = args.limit_train or QUICK_LIMIT_TRAIN
        args.n_boot = QUICK_N_BOOT if args.n_boot is None else args.n_boot
    args.seeds = args.seeds if args.seeds is not None else list(C.BENCHMARK_SEEDS)
    suffix = "" if args.questions == "all" else f"-{args.questions}"
    args.out = args.out or store.reports_dir() / f"{args.dataset}-{args.pool}{suffix}"
    timings: dict[str, float] = {}
    if args.report_only:
        path = args.out / "results.json"
        try:
            (args.out / "plots").mkdir(exist_ok=True)
            store.load_results(path)
        except (OSError, ValueError) as exc:
            print(f"error: --report-only needs a results file: {exc}", file=sys.stderr)
            return 2
        return write_report(args, path, log)
    try:
        check_inputs(args)
        log(f"[{time.perf_counter() - t_start:6.1f}s] loading {args.dataset} {args.pool}…")
        t0 = time.perf_counter()
        routers = args.routers
        if routers is None and args.quick:
            routers = [r for r in QUICK_ROUTERS if r in router_ids()]
            routers += [AGENT_PREFIX + a for a in get_pool(args.pool).agent_ids]
        embeddings = reads_embeddings(routers)  # minutes of encoding, only when a router reads them
        bench = prepare(
            args.dataset,
            args.pool,
            progress=not args.quiet,
            limit_train=args.limit_train,
            features_needed=embeddings,
            questions=args.questions,
        )
        timings["prepare"] = time.perf_counter() - t0
        check_available(bench, routers)
        kw = {} if args.n_boot is None else {"n_boot": args.n_boot}
        if args.prices is not None:
            kw["prices"] = args.prices
        last = {"t": time.perf_counter(), "rid": None}

        def progress(line: str) -> None:
            now = time.perf_counter()
            if last["rid"] is not None:
                timings[f"router:{last['rid']}"] = now - last["t"]
            last.update(t=now, rid=line.rsplit(": ", 1)[0])  # "<router id>: <n> seed(s)"
            log(f"[{now - t_start:6.1f}s] {line}")

        log(
            f"[{time.perf_counter() - t_start:6.1f}s] {len(bench.train)} training / {len(bench.test)} test "
            f"questions; seeds {args.seeds}"
        )
        plan = C.ComparisonPlan(args.seeds, routers, **kw)
        results = C.run_comparison(bench, plan, C.ComparisonProgress(started=progress))
        if last["rid"] is not None:
            timings[f"router:{last['rid']}"] = time.perf_counter() - last["t"]
        t0 = time.perf_counter()
        results["paper_table"] = paper_table(bench, results, args.seeds, log)
        timings["paper_table"] = time.perf_counter() - t0
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (KeyError, ValueError, FileNotFoundError, LookupError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {msg}", file=sys.stderr)
        return 2
    reduced = (["--quick"] if args.quick else []) + (
        [f"{len(bench.train)} training questions"] if args.limit_train else []
    )
    results["run"] = {
        "command": "python scripts/benchmark_routers.py "
        + shlex.join(sys.argv[1:] if argv is None else argv),
        "reduced": ", ".join(reduced) or None,
        "n_train": len(bench.train),
        "timings_s": timings,
        "compute_s": time.perf_counter() - t_start,  # data, routers and the paper table
        "load_avg": list(os.getloadavg()),  # the machine's load as it ended (1, 5, 15 minutes)
    }
    path = store.save_results(results, args.out)
    return write_report(args, path, log)


def write_report(args, path: Path, log) -> int:
    """Plots and report.md from a saved results.json (the report reads exactly what was written)."""
    out = args.out
    results = store.load_results(path)
    t0 = time.perf_counter()
    plots, png_error = write_plots(R.figures(results), out / "plots", args.png, log)
    html = [p for p in plots if p.endswith(".html")]
    pngs = [p for p in plots if p.endswith(".png")]
    siblings = find_siblings(out, results)
    report = R.report_markdown(results, siblings, html + pngs)
    if png_error:
        report += f"\n> PNG plots missing: {png_error}\n"
    (out / "report.md").write_text(report, encoding="utf-8")
    log(f"plots and report in {time.perf_counter() - t0:.1f} s")
    print(f"wrote {path}, {out / 'report.md'} and {len(plots)} plot files under {out / 'plots'}")
    for t in R.evaluate_targets(results, siblings):
        print(f"  target {t['target']}: {t['status']} — {t['detail']}")
    if args.readme is not None:
        try:
            write_readme(args.readme, {**siblings, run_key(results): {"path": path, "results": results}})
        except (OSError, ValueError) as exc:
            print(f"error: --readme: {exc}", file=sys.stderr)
            return 2
    if png_error:
        print(f"warning: {png_error}", file=sys.stderr)
        return 3 if args.png else 0
    return 0


def write_readme(readme: Path, runs: dict) -> None:
    """The README's generated figures block from ``runs`` (paths relative to the README)."""
    here = readme.resolve().parent
    rel = {k: {**v, "path": os.path.relpath(Path(v["path"]).resolve(), here)} for k, v in runs.items()}
    text = replace_block(readme.read_text(encoding="utf-8"), figures_markdown(rel))
    readme.write_text(text, encoding="utf-8")
    print(f"wrote the figures of {len(runs)} run(s) into {readme}")


if __name__ == "__main__":
    sys.exit(main())
