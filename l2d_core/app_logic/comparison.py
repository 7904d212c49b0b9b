"""The router-comparison page without UI: run every router on a pool and keep the results."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..evaluation.benchmark import Benchmark
from ..evaluation.comparison import run_comparison
from ..evaluation.results import reports_dir, save_results

__all__ = ["run_and_save"]


def run_and_save(bench: Benchmark, progress: Callable[[str], None] | None = None) -> Path:
    """Every router of the registry on ``bench`` with one seed (interactive; the benchmark script
    runs five), saved as ``<reports>/<dataset>-<pool>/results.json``; returns its path."""
    results = run_comparison(bench, seeds=(0,), progress=progress)
    return save_results(results, reports_dir() / f"{bench.dataset.name}-{bench.pool.name}")
