"""Router comparison: every router of the registry on one benchmark, as cost–EM curves,
AIQ, APGR (two-agent pools) and TDL per β — the ``results.json`` a report is made of.

A *router* is a function ``(bench, seed) -> list of points``; each point is one operating
setting (one β₁ of a sweep, one mixing weight…) evaluated on the test articles with
:func:`~l2d_core.experiment.evaluate_choice` plus its ``beta1`` (``None`` when the router has
no β). Register more with :func:`register_router`; single agents (``agent:<id>``) come with
every pool. Built in:

- ``l2d-sdl``: the paper's rejector, trained with the SDL at each BENCHMARK.md β₁;
- ``l2d-plugin``: the plug-in (reweight) policy at the BENCHMARK.md β₁ and, since it is
  instant, a dense sweep of β₁ over ``DENSE_BETAS`` (points flagged ``dense``);
- ``random``: uniform random allocation (same allocation at every β; its TDL changes);
- ``zero``: the zero router — random mixing of single agents, i.e. their upper convex hull;
  its TDL at a β is the best single agent's (TDL is linear in the mixing weights);
- ``oracle``: per query the cheapest agent of least TDL, at each β₁ (and the dense sweep).

Metrics per router (SPEC §7), over the GFLOPs range ``[lo, hi]`` of the pool's agents:

- ``aiq``: area under the router's non-decreasing upper convex hull of (GFLOPs, EM) points
  divided by the range, the hull extended flat to the right end and **zero left of the
  router's cheapest point**, as RouterBench's ``calc_AIQ`` computes it (a lower bound);
- ``aiq_flat``: the same with the cheapest point also extended flat to the left end (an upper
  bound: a router that never reaches the cheap end is credited there; one dear agent alone
  then scores its own EM over the whole range, so compare routers on ``aiq``);
- ``aiq_beta_points``: ``aiq`` on the BENCHMARK.md β₁ points only, so the plug-in's dense
  sweep gives it no edge over the SDL rejector (trained per β₁, so swept on those points);
- two-agent pools: ``apgr`` (mean PGR over the share of strong calls 0..1), ``cpt50``,
  ``cpt80``, and per point ``share_strong`` and ``pgr``; ``tdl`` per β₁.

Learned routers pay the rejector's GFLOPs on every query.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from . import metrics as M
from .costs import cost_matrix
from .experiment import BETA_POINTS, Benchmark, evaluate_choice, fit_plugin, fit_sdl
from .paths import PROJECT_ROOT
from .policies import oracle_policy, plugin_policy, random_policy
from .training import FAST_CONFIG

__all__ = [
    "SCHEMA_VERSION",
    "DENSE_BETAS",
    "ROUTERS",
    "register_router",
    "router_ids",
    "run_router",
    "run_comparison",
    "save_results",
    "load_results",
    "list_results",
    "reports_dir",
    "points_frame",
    "hull_frame",
    "summary_frame",
    "tdl_frame",
]

SCHEMA_VERSION = 1
DENSE_BETAS: tuple[float, ...] = tuple(float(b) for b in np.linspace(0.0, 2.0, 40))
AGENT_PREFIX = "agent:"

Point = dict
RouterFn = Callable[[Benchmark, int], list[Point]]
ROUTERS: dict[str, RouterFn] = {}


def register_router(name: str) -> Callable[[RouterFn], RouterFn]:
    """Decorator: add a router to the registry under ``name`` (replaces an existing one)."""
    if not name or name.startswith(AGENT_PREFIX):
        raise ValueError(f"router name {name!r} is empty or uses the reserved prefix {AGENT_PREFIX!r}")

    def deco(fn: RouterFn) -> RouterFn:
        ROUTERS[name] = fn
        return fn

    return deco


def router_ids(bench: Benchmark) -> list[str]:
    """Registered routers, then one ``agent:<id>`` per agent of the pool."""
    return [*ROUTERS, *(AGENT_PREFIX + a for a in bench.test.agent_ids)]


def _point(bench: Benchmark, choice: np.ndarray, beta1: float | None, rejector: bool, **extra) -> Point:
    costs = bench.costs(0.05 if beta1 is None else beta1)
    rg = bench.rejector_gflops if rejector else 0.0
    m = evaluate_choice(choice, bench.test, costs, rg)
    m = {k: v for k, v in m.items() if k not in ("n",)}
    return {"beta1": beta1, "gflops": m.pop("gflops_per_query"), **m, **extra}


def _per_beta(bench: Benchmark, choice: np.ndarray, rejector: bool = False) -> list[Point]:
    """A β-independent allocation evaluated at every BENCHMARK.md β₁ (only TDL moves)."""
    return [_point(bench, choice, b, rejector) for b in BETA_POINTS]


@register_router("l2d-sdl")
def _sdl(bench: Benchmark, seed: int) -> list[Point]:
    cfg = FAST_CONFIG.but(seed=seed)
    return [
        _point(bench, fit_sdl(bench, bench.costs(b), cfg).predict(bench.X_test), b, True) for b in BETA_POINTS
    ]


@register_router("l2d-plugin")
def _plugin(bench: Benchmark, seed: int) -> list[Point]:
    p_err = fit_plugin(bench, FAST_CONFIG.but(seed=seed)).error_proba(bench.X_test)
    pts = [_point(bench, plugin_policy(p_err, bench.costs(b)), b, True, dense=False) for b in BETA_POINTS]
    pts += [_point(bench, plugin_policy(p_err, bench.costs(b)), b, True, dense=True) for b in DENSE_BETAS]
    return pts


@register_router("random")
def _random(bench: Benchmark, seed: int) -> list[Point]:
    return _per_beta(bench, random_policy(len(bench.test), bench.test.n_agents, seed))


@register_router("oracle")
def _oracle(bench: Benchmark, seed: int) -> list[Point]:
    """At every β₁ of the benchmark, and of the dense sweep (instant; reaches the cheap end)."""
    test = bench.test
    choice = lambda b: oracle_policy(cost_matrix(test.errors, bench.costs(b)), test.gflops)
    pts = [_point(bench, choice(b), b, False, dense=False) for b in BETA_POINTS]
    return pts + [_point(bench, choice(b), b, False, dense=True) for b in DENSE_BETAS]


@register_router("zero")
def _zero(bench: Benchmark, seed: int) -> list[Point]:
    """Vertices of the single agents' upper hull (any mixture lies on the segments between)."""
    test = bench.test
    g = test.gflops.mean(axis=0)
    em = 100 * test.em.mean(axis=0)
    hc, hq = M.upper_hull(g, em)
    n = len(test)
    pts = []
    for c, q in zip(hc, hq):
        j = int(np.flatnonzero(np.isclose(g, c) & np.isclose(em, q))[0])
        p = _point(bench, np.full(n, j), None, False, agent=test.agent_ids[j])
        p["tdl"] = None
        pts.append(p)
    return pts


def _zero_tdl(bench: Benchmark) -> dict[str, float]:
    test = bench.test
    out = {}
    for b in BETA_POINTS:
        qc = cost_matrix(test.errors, bench.costs(b)).sum(axis=1)  # (N, A)
        out[_key(b)] = float(qc.mean(axis=0).min())
    return out


def run_router(bench: Benchmark, router_id: str, seed: int = 0) -> list[Point]:
    """The points of one router (registered name or ``agent:<id>``) for one seed."""
    if router_id.startswith(AGENT_PREFIX):
        agent = router_id[len(AGENT_PREFIX) :]
        if agent not in bench.test.agent_ids:
            raise KeyError(f"agent {agent!r} is not in pool {bench.pool.name}")
        j = bench.test.agent_ids.index(agent)
        return _per_beta(bench, np.full(len(bench.test), j))
    if router_id not in ROUTERS:
        raise KeyError(f"unknown router {router_id!r}; known: {', '.join(ROUTERS)} and agent:<id>")
    return ROUTERS[router_id](bench, seed)


def _key(beta1: float) -> str:
    return f"{beta1:g}"


def _mean_points(runs: list[list[Point]]) -> list[Point]:
    """Average the numeric fields of the same point over seeds; ``em_std``, ``gflops_std``."""
    if len(runs) == 1:
        return [dict(p, em_std=0.0, gflops_std=0.0) for p in runs[0]]
    out = []
    for pts in zip(*runs):
        p = dict(pts[0])
        for k, v in pts[0].items():
            if isinstance(v, int | float) and not isinstance(v, bool) and k != "beta1":
                p[k] = float(np.mean([q[k] for q in pts]))
            elif isinstance(v, dict):
                p[k] = {a: float(np.mean([q[k][a] for q in pts])) for a in v}
        p["em_std"] = float(np.std([q["em"] for q in pts]))
        p["gflops_std"] = float(np.std([q["gflops"] for q in pts]))
        out.append(p)
    return out


def _summarize(
    bench: Benchmark, points: list[Point], lo: float, hi: float, single_agent: bool = False
) -> dict:
    test = bench.test
    cost = np.array([p["gflops"] for p in points])
    em = np.array([p["em"] for p in points])
    core = [p for p in points if not p.get("dense")]
    out = {
        "aiq": M.aiq(cost, em, lo, hi),
        "aiq_flat": M.aiq(cost, em, lo, hi, left="flat"),
        "aiq_beta_points": M.aiq(
            np.array([p["gflops"] for p in core]), np.array([p["em"] for p in core]), lo, hi
        ),
        "tdl": {_key(p["beta1"]): p["tdl"] for p in core if p["beta1"] is not None and p["tdl"] is not None},
    }
    if test.n_agents == 2 and not single_agent:
        em_agents = 100 * test.em.mean(axis=0)
        weak, strong = float(em_agents[0]), float(em_agents[1])
        share = np.array([p["allocation"][test.agent_ids[1]] for p in points])
        for p, s in zip(points, share):
            p["share_strong"] = float(s)
            p["pgr"] = M.pgr(p["em"], weak, strong)
        out["apgr"] = M.apgr(share, em, weak, strong)
        out["cpt50"] = M.cpt(share, em, weak, strong, 0.5)
        out["cpt80"] = M.cpt(share, em, weak, strong, 0.8)
    return out


def run_comparison(
    bench: Benchmark,
    seeds: Sequence[int] = (0,),
    routers: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Every router (default: :func:`router_ids`) on ``bench``, points averaged over ``seeds``.

    ``progress`` gets one line per router (the dashboard shows it in a status box).
    """
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ValueError("run_comparison needs at least one seed")
    test = bench.test
    g = test.gflops.mean(axis=0)
    lo, hi = float(g.min()), float(g.max())
    results: dict = {
        "schema": SCHEMA_VERSION,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "dataset": bench.dataset.name,
        "pool": bench.pool.name,
        "agents": list(test.agent_ids),
        "agent_gflops": {a: float(v) for a, v in zip(test.agent_ids, g)},
        "agent_em": {a: float(v) for a, v in zip(test.agent_ids, 100 * test.em.mean(axis=0))},
        "n_test": len(test),
        "seeds": list(seeds),
        "encoder": bench.encoder_name,
        "features": bench.features,
        "rejector_gflops": float(bench.rejector_gflops),
        "beta_points": list(BETA_POINTS),
        "dense_betas": list(DENSE_BETAS),
        "gflops_range": [lo, hi],
        "aiq_note": "area under the non-decreasing upper convex hull of (GFLOPs, EM) over the "
        "GFLOPs range of the pool's agents / that range; hull flat to the right end; left of the "
        "router's cheapest point: 0 (aiq, RouterBench) or flat (aiq_flat)",
        "tdl_random": {},
        "routers": {},
    }
    cost_by_beta = {b: cost_matrix(test.errors, bench.costs(b)) for b in BETA_POINTS}
    results["tdl_random"] = {_key(b): M.random_tdl(c, None, seeds)[0] for b, c in cost_by_beta.items()}
    for rid in routers if routers is not None else router_ids(bench):
        if progress:
            progress(f"{rid}: {len(seeds)} seed(s)")
        points = _mean_points([run_router(bench, rid, s) for s in seeds])
        entry = {"points": points, **_summarize(bench, points, lo, hi, rid.startswith(AGENT_PREFIX))}
        if rid == "zero":
            entry["tdl"] = _zero_tdl(bench)
        results["routers"][rid] = entry
    return results


# --- files ---------------------------------------------------------------------------------


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
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("routers"), dict):
        raise ValueError(f"{path} is not a router-comparison results file (no 'routers')")
    return doc


def list_results(root: str | Path | None = None) -> list[Path]:
    """``<root>/*/results.json``, newest first (default root: :func:`reports_dir`)."""
    root = Path(root) if root else reports_dir()
    files = [p for p in root.glob("*/results.json") if p.is_file()] if root.is_dir() else []
    return sorted(files, key=lambda p: p.stat().st_mtime, reverse=True)


# --- tables for plotting ---------------------------------------------------------------------


def points_frame(results: dict):
    """One row per router point: router, beta1, gflops, em, f1, dense, share_strong, pgr."""
    import pandas as pd

    rows = []
    for rid, r in results["routers"].items():
        for p in r["points"]:
            rows.append(
                {
                    "router": rid,
                    "beta1": p.get("beta1"),
                    "gflops": p["gflops"],
                    "em": p["em"],
                    "f1": p.get("f1"),
                    "em_std": p.get("em_std"),
                    "dense": bool(p.get("dense", False)),
                    "share_strong": p.get("share_strong"),
                    "pgr": p.get("pgr"),
                }
            )
    return pd.DataFrame(rows)


def hull_frame(results: dict):
    """Vertices of each router's non-decreasing upper convex hull (the curve AIQ integrates):
    one row per vertex, columns router, gflops, em."""
    import pandas as pd

    rows = []
    for rid, r in results["routers"].items():
        cost = np.array([p["gflops"] for p in r["points"]], dtype=float)
        em = np.array([p["em"] for p in r["points"]], dtype=float)
        hc, hq = M.upper_hull(cost, em)
        rows += [{"router": rid, "gflops": float(c), "em": float(q)} for c, q in zip(hc, hq)]
    return pd.DataFrame(rows)


def summary_frame(results: dict):
    """One row per router: AIQ (all points, β points only), APGR / CPT for two agents, and
    the mean TDL over the β sweep."""
    import pandas as pd

    rows = []
    for rid, r in results["routers"].items():
        tdl = [v for v in (r.get("tdl") or {}).values() if v is not None]
        rows.append(
            {
                "router": rid,
                "AIQ": r.get("aiq"),
                "AIQ (flat left)": r.get("aiq_flat"),
                "AIQ (β points)": r.get("aiq_beta_points"),
                "APGR": r.get("apgr"),
                "CPT(50%)": r.get("cpt50"),
                "CPT(80%)": r.get("cpt80"),
                "mean TDL": float(np.mean(tdl)) if tdl else None,
                "points": len(r["points"]),
            }
        )
    df = pd.DataFrame(rows)
    if df["APGR"].isna().all():
        df = df.drop(columns=["APGR", "CPT(50%)", "CPT(80%)"])
    return df.sort_values("AIQ", ascending=False, ignore_index=True)


def tdl_frame(results: dict):
    """Long table: router, beta1, tdl (the ``random`` router is uniform random allocation)."""
    import pandas as pd

    rows = [
        {"router": rid, "beta1": float(b), "tdl": v}
        for rid, r in results["routers"].items()
        for b, v in (r.get("tdl") or {}).items()
        if v is not None
    ]
    return pd.DataFrame(rows).sort_values(["router", "beta1"], ignore_index=True)
