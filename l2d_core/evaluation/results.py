"""Router-comparison results on disk: the schema of ``results.json`` (typed dicts), and where
results files are written, read and listed."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TypedDict

import numpy as np

from ..data import safe_json
from ..paths import PROJECT_ROOT

__all__ = [
    "num",
    "beta_points",
    "expert_share",
    "SCHEMA_VERSION",
    "Point",
    "RouterEntry",
    "Results",
    "reports_dir",
    "save_results",
    "load_results",
    "list_results",
    "run_key",
]

SCHEMA_VERSION = 2


def num(x) -> float | None:
    """``x`` as a finite float, else None (missing, NaN, bool, text…): results are read defensively.

    >>> num(3), num("3"), num(True), num(float("inf"))
    (3.0, None, None, None)
    """
    if isinstance(x, bool) or not isinstance(x, int | float | np.number):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def expert_share(p: dict, main: str | None) -> float | None:
    """Share of queries a point sends to a non-main agent (``share_strong``, or from its
    allocation and the pool's ``main`` agent), or None.

    >>> expert_share({"allocation": {"a": 0.75, "b": 0.25}}, "a"), expert_share({}, "a")
    (0.25, None)
    """
    s = num(p.get("share_strong"))
    if s is not None:
        return s
    alloc = p.get("allocation")
    if main and isinstance(alloc, dict) and num(alloc.get(main)) is not None:
        return 1.0 - float(alloc[main])
    return None


def run_key(results: dict) -> str:
    """What a run is results of, for targets and siblings: its pool, with ``:answerable`` when
    the run kept the answerable questions only.

    >>> run_key({"pool": "PLLM"}), run_key({"pool": "PLLM", "questions": "answerable"})
    ('PLLM', 'PLLM:answerable')
    """
    q = results.get("questions") or "all"
    return str(results.get("pool")) + ("" if q == "all" else f":{q}")


def beta_points(r: dict) -> list[dict]:
    """A router's points at the β₁ of the sweep (not the dense extras), by β₁."""
    pts = [p for p in r.get("points") or [] if isinstance(p, dict)]
    pts = [p for p in pts if not p.get("dense") and num(p.get("beta1")) is not None]
    return sorted(pts, key=lambda p: float(p["beta1"]))


class Point(TypedDict, total=False):
    """One operating point of a router on the test articles (seed mean in results)."""

    beta1: float | None  # β₁ of the BENCHMARK.md cost setting, None for a point without β
    dense: bool  # a point of the router's own sweep (not a BENCHMARK.md β₁ point)
    gflops: float  # mean GFLOPs per query, overhead included
    em: float  # %
    f1: float  # %
    gflops_per_em: float
    allocation: dict[str, float]  # share of questions per agent
    tpr: float
    fpr: float
    tdl: float | None
    tdl_random: float | None
    tdl_random_std: float | None
    tdl_random_matched: float | None
    share_strong: float  # share of questions sent to a non-main agent
    pgr: float


class RouterEntry(TypedDict, total=False):
    """One router's results: its points and summaries (see ``comparison``'s docstring)."""

    points: list[Point]
    aiq: float
    aiq_std: float
    aiq_seeds: list[float]
    aiq_flat: float
    aiq_beta_points: float
    apgr: float
    apgr_std: float
    apgr_seeds: list[float]
    cpt50: float
    cpt80: float
    tdl: dict[str, float]  # β₁ key → mean TDL
    tdl_std: dict[str, float]
    aiq_ci: list[float]
    apgr_ci: list[float]
    tdl_diff: dict[str, float]
    tdl_diff_ci: dict[str, list[float]]
    tdl_below_random_95: dict[str, bool]
    pareto: list[int]


class Results(TypedDict, total=False):
    """A whole ``results.json``."""

    schema: int
    created: str
    dataset: str
    pool: str
    agents: list[str]
    agent_gflops: dict[str, float]
    agent_em: dict[str, float]
    n_test: int
    seeds: list[int]
    encoder: str
    features: str
    rejector_gflops: float
    beta_points: list[float]
    dense_betas: list[float]
    target_shares: list[float]
    gflops_range: list[float]
    aiq_cost: str  # what AIQ integrates over: GFLOPs, or dollars per 1,000 questions
    aiq_range: list[float]
    pgr_weak: str
    pgr_strong: str
    bootstrap: dict
    tdl_random: dict[str, float]
    routers: dict[str, RouterEntry]
    pareto_front: list[dict]
    paper_table: dict
    run: dict


def reports_dir() -> Path:
    """``L2D_REPORTS_DIR``, default ``reports/`` in the project (git-ignored)."""
    env = os.environ.get("L2D_REPORTS_DIR")
    return Path(env).expanduser().resolve() if env else PROJECT_ROOT / "reports"


def _clean(obj):
    """JSON-safe: NaN/inf → None, numpy scalars → Python numbers, tuples → lists."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def save_results(results: dict, out_dir: str | Path) -> Path:
    """Write ``<out_dir>/results.json`` (atomically) and return its path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(_clean(results), indent=1, allow_nan=False), encoding="utf-8")
    os.replace(tmp, path)
    return path


def load_results(path: str | Path) -> dict:
    """Read a ``results.json``; ValueError when it is not one."""
    path = Path(path)
    try:
        doc = safe_json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, safe_json.JSONNestingError) as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("routers"), dict):
        raise ValueError(f"{path} is not a router-comparison results file (no 'routers')")
    return doc


def list_results(root: str | Path | None = None) -> list[Path]:
    """``<root>/*/results.json``, newest first (default root: :func:`reports_dir`)."""
    root = Path(root) if root else reports_dir()
    files = [p for p in root.glob("*/results.json") if p.is_file()] if root.is_dir() else []
    return sorted(files, key=lambda p: p.stat().st_mtime, reverse=True)
