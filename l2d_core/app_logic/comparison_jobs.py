"""The router-comparison page without UI: run every router on a pool and keep the results —
in the page's process (:func:`run_and_save`) or as a background job that saves its results
whatever the browser does (:func:`start_comparison`, :func:`comparison_status`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .. import background as jobs
from ..evaluation.benchmark import Benchmark, prepare
from ..evaluation.comparison import ComparisonPlan, ComparisonProgress, run_comparison
from ..evaluation.results import reports_dir, save_results
from ..routers.registry import router_ids
from .embedding_job import embedding_step

__all__ = [
    "run_and_save",
    "comparison_key",
    "work_shares",
    "comparison_job",
    "start_comparison",
    "comparison_status",
]


def run_and_save(
    bench: Benchmark,
    progress: Callable[[str], None] | None = None,
    step: Callable[[int, int, str], None] | None = None,
) -> Path:
    """Every router of the registry on ``bench`` with one seed (interactive; the benchmark script
    runs five), saved as ``<reports>/<dataset>-<pool>/results.json``; returns its path.
    ``step(k, n, router id)`` as each router is done."""
    results = run_comparison(bench, ComparisonPlan(seeds=(0,)), ComparisonProgress(progress, step))
    return save_results(results, reports_dir() / f"{bench.dataset.name}-{bench.pool.name}")


def comparison_key(dataset: str, pool: str) -> str:
    return jobs.job_key("comparison", dataset, pool)


def work_shares(expected: list[float | None]) -> np.ndarray | None:
    """The share of a run's work done after each router, from each one's expected time (None
    when one of them was never timed here).

    >>> work_shares([3.0, 1.0]).tolist(), work_shares([3.0, None])
    ([0.75, 1.0], None)
    """
    if not expected or any(t is None for t in expected) or sum(expected) <= 0:
        return None
    return np.cumsum(expected) / sum(expected)


def comparison_job(report: jobs.Reporter, dataset: str, pool: str) -> str:
    """The job: the benchmark with its embeddings (embedded now where missing, counted), then
    every router, one by one (counted); returns the saved results file. Each router's time is
    kept: the next run's time left weighs the routers still to come by their last times here
    (the first router alone can take a fifth of a run), else counts them as equal."""
    report.stage(f"Loading the questions and every agent's answers of {dataset} {pool}")
    bench = prepare(dataset, pool, features_needed=True, embed_progress=embedding_step(report))
    ids, n = router_ids(bench), len(bench.train)
    before = [jobs.expected_duration(f"compare|{rid}", n) for rid in ids]
    weights = work_shares(before)
    report.stage(f"Comparing the routers on {dataset} {pool}", "routers", len(ids))
    last = [time.perf_counter()]

    def step(k: int, total: int, rid: str) -> None:
        now = time.perf_counter()
        jobs.record_duration(f"compare|{rid}", now - last[0], n)
        last[0] = now
        report(k, total, rid, work=None if weights is None else float(weights[k - 1]))

    return str(run_and_save(bench, step=step))


def start_comparison(dataset: str, pool: str) -> jobs.JobStatus:
    """Start the comparison of ``pool`` as a background job (or attach to the one running)."""
    return jobs.start(
        comparison_key(dataset, pool),
        f"{__name__}:comparison_job",
        {"dataset": dataset, "pool": pool},
        title=f"Router comparison on {dataset} {pool}",
    )


def comparison_status(dataset: str, pool: str) -> jobs.JobStatus:
    return jobs.status(comparison_key(dataset, pool))
