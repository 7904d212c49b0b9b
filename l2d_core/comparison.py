"""Router comparison: every router of the registry on one benchmark, as cost–EM curves,
AIQ, APGR and TDL per β — the ``results.json`` a report is made of.

A *router* is a function ``(bench, seed) -> list of points``; each point is one operating
setting (one β₁ of a sweep, one threshold, one λ…) evaluated on the test articles by
:func:`make_point` (:func:`~l2d_core.experiment.evaluate_choice` plus per-question vectors
under ``_q``, used for the bootstrap and dropped from the results) and its ``beta1``
(``None`` when the setting has no β; its TDL fields are then ``None``). Register more with
:func:`register_router`; single agents (``agent:<id>``) come with every pool. Stable ids:

- ``l2d-sdl``: the paper's rejector, trained with the SDL at each BENCHMARK.md β₁;
- ``l2d-plugin``: the plug-in (reweight) policy at the BENCHMARK.md β₁ and, since it is
  instant, a dense sweep of β₁ over ``DENSE_BETAS`` (points flagged ``dense``);
- ``l2d-posthoc``: the post-hoc rejector, ``posthoc_points(bench, seed)`` of
  :mod:`l2d_core.posthoc` (imported when the router runs);
- ``random``: uniform random allocation (same allocation at every β; its TDL changes); every
  point also carries ``tdl_random_matched``, random allocation with the point's own shares;
- ``zero``: the zero router — random mixing of single agents, i.e. their upper convex hull;
  its TDL at a β is the best single agent's (TDL is linear in the mixing weights);
- ``oracle``: per query the cheapest agent of least TDL, at each β₁ (and the dense sweep);
- ``r-det``, ``r-prob``, ``r-trans``: Hybrid LLM routers (:class:`~l2d_core.baselines.HybridRouter`)
  between the main agent and the expert of best training EM; dense points at the thresholds
  calibrated on the training scores for ``TARGET_SHARES`` of expert calls (RouteLLM), and at
  each β₁ the threshold 1 − β_L (defer when the estimated P[S worse than L] exceeds the
  expert's per-endpoint consultation cost);
- ``knn``, ``mlp``: RouterBench routers (predicted EM of every agent); dense points over the
  willingness to pay λ (argmax λ·EM̂ − GFLOPs), and at each β₁ the plug-in rule of SPEC §5
  with 1 − EM̂ as the error probability;
- ``ensemble``: majority vote of every agent (one operating point; EM re-scored from the
  voted text; GFLOPs = all agents; TDL = the voted answer's endpoint errors + every expert's β).

Learned routers (everything that reads the query features) pay the rejector's GFLOPs on
every query. Trained heads of the SDL / plug-in rejectors are cached by
:mod:`~l2d_core.experiment`; the baselines' scores are memoized on disk here.

Metrics per router (SPEC §7), over the GFLOPs range ``[lo, hi]`` of the pool's agents,
computed per seed and reported as mean (``x``) and std over seeds (``x_std``):

- ``aiq``: area under the router's non-decreasing upper convex hull of (GFLOPs, EM) points
  divided by the range, the hull extended flat to the right end and **zero left of the
  router's cheapest point**, as RouterBench's ``calc_AIQ`` computes it (a lower bound);
- ``aiq_flat``: the same with the cheapest point also extended flat to the left end (an upper
  bound: a router that never reaches the cheap end is credited there; one dear agent alone
  then scores its own EM over the whole range, so compare routers on ``aiq``);
- ``aiq_beta_points``: ``aiq`` on the β₁ points only (no dense sweep);
- ``apgr``, ``cpt50``, ``cpt80`` and per point ``share_strong`` and ``pgr``. Two-agent pools
  are RouteLLM's case (share of strong calls; PGR between the weak and the strong agent).
  **J + 1 agents:** ``share_strong`` is the share of queries sent to any non-main agent
  (the ensemble: 1), weak = the main agent's EM, strong = the best single agent's EM (test);
  the PGR curve is anchored at (0, 0) — the main agent alone — and, where a router's points
  stop short of share 1, at (1, 1) — mixing with the best agent alone reaches it; of points at
  the same share the best counts (:func:`~l2d_core.metrics.pgr_curve`);
- ``tdl`` per β₁ (and ``tdl_std``);
- bootstrap over test questions (``n_boot`` resamples, the same for every router: paired),
  percentile 95% intervals of the seed-averaged router: ``aiq_ci``, ``apgr_ci``, and per β₁
  the mean paired difference ``tdl_diff`` = TDL(router) − TDL(uniform random allocation, in
  expectation per question), its interval ``tdl_diff_ci`` and ``tdl_below_random_95``
  (interval entirely below 0);
- ``pareto``: indices of the router's non-dominated (GFLOPs, EM) points; the results'
  ``pareto_front`` lists the non-dominated points over every router but the oracle.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, fields, is_dataclass
from pathlib import Path

import diskcache
import numpy as np

from . import metrics as M
from .baselines import (
    EnsembleRouter,
    HybridRouter,
    KNNRouter,
    MLPRouter,
    calibrate_threshold,
    cost_aware_choice,
    lambda_grid,
    rescore,
    utility_choice,
)
from .costs import cost_matrix, query_costs
from .experiment import BETA_POINTS, Benchmark, evaluate_choice, fit_plugin, fit_sdl
from .paths import PROJECT_ROOT, cache_dir
from .policies import oracle_policy, plugin_policy, random_policy
from .routing_data import RoutingData
from .training import FAST_CONFIG

__all__ = [
    "SCHEMA_VERSION",
    "BENCHMARK_SEEDS",
    "DENSE_BETAS",
    "TARGET_SHARES",
    "ROUTERS",
    "register_router",
    "router_ids",
    "make_point",
    "baseline_key",
    "run_router",
    "run_comparison",
    "save_results",
    "load_results",
    "list_results",
    "reports_dir",
    "summary_frame",
]

SCHEMA_VERSION = 2
BENCHMARK_SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)  # BENCHMARK.md: 5 training seeds
DENSE_BETAS: tuple[float, ...] = tuple(float(b) for b in np.linspace(0.0, 2.0, 40))
TARGET_SHARES: tuple[float, ...] = tuple(float(s) for s in np.linspace(0.0, 1.0, 21))
N_BOOT = 1000  # bootstrap resamples of the test questions
BASELINE_FORMAT = 1  # part of every memoized baseline key: bump when a baseline's fit changes
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


_TDL_FIELDS = ("tdl", "tdl_random", "tdl_random_std", "tdl_random_matched")


def make_point(
    bench: Benchmark,
    choice: np.ndarray,
    beta1: float | None,
    overhead_gflops: float = 0.0,
    data: RoutingData | None = None,
    per_query: dict[str, np.ndarray] | None = None,
    **extra,
) -> Point:
    """One operating point of a router on the test articles.

    ``choice`` (N,) is the agent each question went to; ``overhead_gflops`` is paid on every
    question (a rejector, or agents that always run); ``data`` replaces ``bench.test`` (e.g.
    with edited GFLOPs). ``per_query`` overrides per-question vectors the choice implies:
    ``em``, ``f1`` (0/1, [0, 1]), ``gflops``, ``tdl``, ``share`` (1 = a non-main agent was
    called). ``extra`` fields are copied into the point.
    """
    data = bench.test if data is None else data
    choice = np.asarray(choice, dtype=int)
    ar = np.arange(len(choice))
    costs = bench.costs(0.05 if beta1 is None else beta1)
    m = evaluate_choice(choice, data, costs, overhead_gflops)
    m.pop("n")
    q = {
        "em": data.em[ar, choice].astype(float),
        "f1": data.f1[ar, choice].astype(float),
        "gflops": overhead_gflops + data.gflops[ar, choice].astype(float),
        "tdl": query_costs(cost_matrix(data.errors, costs))[ar, choice],
        "share": (choice != 0).astype(float),
        **(per_query or {}),
    }
    gq = float(q["gflops"].mean())
    m.update(em=100 * float(q["em"].mean()), f1=100 * float(q["f1"].mean()), gflops_per_query=gq)
    m["gflops_per_em"] = M.gflops_per_em(gq, m["em"])
    m["tdl"] = float(q["tdl"].mean())
    if beta1 is None:
        m.update(dict.fromkeys(_TDL_FIELDS))
        del q["tdl"]
    return {
        "beta1": beta1,
        "gflops": m.pop("gflops_per_query"),
        **m,
        "share_strong": float(q["share"].mean()),
        **extra,
        "_q": q,
    }


def _per_beta(bench: Benchmark, choice: np.ndarray, overhead: float = 0.0, **extra) -> list[Point]:
    """A β-independent allocation evaluated at every BENCHMARK.md β₁ (only TDL moves)."""
    return [make_point(bench, choice, b, overhead, **extra) for b in BETA_POINTS]


@register_router("l2d-sdl")
def _sdl(bench: Benchmark, seed: int) -> list[Point]:
    cfg = FAST_CONFIG.but(seed=seed)
    rg = bench.rejector_gflops
    return [
        make_point(bench, fit_sdl(bench, bench.costs(b), cfg).predict(bench.X_test), b, rg)
        for b in BETA_POINTS
    ]


@register_router("l2d-plugin")
def _plugin(bench: Benchmark, seed: int) -> list[Point]:
    p_err = fit_plugin(bench, FAST_CONFIG.but(seed=seed)).error_proba(bench.X_test)
    rg = bench.rejector_gflops
    pts = [make_point(bench, plugin_policy(p_err, bench.costs(b)), b, rg, dense=False) for b in BETA_POINTS]
    pts += [make_point(bench, plugin_policy(p_err, bench.costs(b)), b, rg, dense=True) for b in DENSE_BETAS]
    return pts


@register_router("l2d-posthoc")
def _posthoc(bench: Benchmark, seed: int) -> list[Point]:
    """Owned by :mod:`l2d_core.posthoc` (``posthoc_points``); registered here for its stable id."""
    from .posthoc import posthoc_points

    return posthoc_points(bench, seed)


@register_router("random")
def _random(bench: Benchmark, seed: int) -> list[Point]:
    return _per_beta(bench, random_policy(len(bench.test), bench.test.n_agents, seed))


@register_router("oracle")
def _oracle(bench: Benchmark, seed: int) -> list[Point]:
    """At every β₁ of the benchmark, and of the dense sweep (instant; reaches the cheap end)."""
    test = bench.test
    choice = lambda b: oracle_policy(cost_matrix(test.errors, bench.costs(b)), test.gflops)
    pts = [make_point(bench, choice(b), b, dense=False) for b in BETA_POINTS]
    return pts + [make_point(bench, choice(b), b, dense=True) for b in DENSE_BETAS]


@register_router("zero")
def _zero(bench: Benchmark, seed: int) -> list[Point]:
    """Vertices of the single agents' upper hull (any mixture lies on the segments between)."""
    test = bench.test
    g = test.gflops.mean(axis=0)
    em = 100 * test.em.mean(axis=0)
    hc, hq = M.upper_hull(g, em)
    pts = []
    for c, q in zip(hc, hq):
        j = int(np.flatnonzero(np.isclose(g, c) & np.isclose(em, q))[0])
        pts.append(make_point(bench, np.full(len(test), j), None, agent=test.agent_ids[j]))
    return pts


def _zero_tdl_q(bench: Benchmark) -> dict[str, np.ndarray]:
    """Per β₁ the per-question TDL of the best single agent (the zero router's TDL)."""
    out = {}
    for b in BETA_POINTS:
        qc = query_costs(cost_matrix(bench.test.errors, bench.costs(b)))  # (N, A)
        out[_key(b)] = qc[:, int(qc.mean(axis=0).argmin())]
    return out


# --- baselines (l2d_core.baselines) ------------------------------------------------------------


def _params(est) -> dict:
    """The constructor arguments of an estimator, JSON-ready (nested dataclasses as dicts)."""
    out = {}
    for f in fields(est):
        if f.init:
            v = getattr(est, f.name)
            out[f.name] = asdict(v) if is_dataclass(v) else v
    return out


def baseline_key(bench: Benchmark, est) -> str:
    """Disk-cache key of a baseline's scores: estimator, its arguments, training data, test features."""
    h = hashlib.sha256()
    h.update(json.dumps([BASELINE_FORMAT, type(est).__name__, _params(est), bench.fingerprint()]).encode())
    h.update(np.ascontiguousarray(bench.X_test[:50]).tobytes())
    h.update(str(len(bench.test)).encode())
    return h.hexdigest()[:24]


def _memo(bench: Benchmark, est, compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """``compute()`` (arrays from fitting ``est``) memoized on disk; stored as ``.npz`` bytes."""
    key = baseline_key(bench, est)
    with diskcache.Cache(str(cache_dir() / "baselines")) as cache:
        blob = cache.get(key)
        if blob is None:
            arrays = compute()
            buf = io.BytesIO()
            np.savez(buf, **arrays)
            cache[key] = buf.getvalue()
            return arrays
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _hybrid_points(bench: Benchmark, seed: int, kind: str) -> list[Point]:
    est = HybridRouter(config=FAST_CONFIG.but(seed=seed), kind=kind)

    def compute():
        est.fit(bench.X_train, bench.train)
        return {
            "train": est.score(bench.X_train),
            "test": est.score(bench.X_test),
            "strong": np.array(est.strong_),
            "t": np.array(est.t_),
        }

    s = _memo(bench, est, compute)
    strong, rg = int(s["strong"]), bench.rejector_gflops
    route = lambda thr: np.where(s["test"] >= thr, 0, strong)
    pts = []
    for b in BETA_POINTS:
        thr = 1.0 - bench.costs(b).beta[strong - 1]
        pts.append(make_point(bench, route(thr), b, rg, dense=False, threshold=thr, t=float(s["t"])))
    for share, thr in zip(TARGET_SHARES, calibrate_threshold(s["train"], np.array(TARGET_SHARES))):
        pts.append(
            make_point(bench, route(thr), None, rg, dense=True, threshold=float(thr), target_share=share)
        )
    return pts


for _kind in ("det", "prob", "trans"):
    register_router(f"r-{_kind}")(lambda bench, seed, _k=_kind: _hybrid_points(bench, seed, _k))


def _quality_points(bench: Benchmark, est, seed: int) -> list[Point]:
    """RouterBench routers: β₁ points by the plug-in rule, dense points over λ."""
    q = _memo(bench, est, lambda: {"test": est.fit(bench.X_train, bench.train).score(bench.X_test)})["test"]
    rg, cost = bench.rejector_gflops, bench.train.agent_gflops
    pts = [make_point(bench, cost_aware_choice(q, bench.costs(b)), b, rg, dense=False) for b in BETA_POINTS]
    for lam in lambda_grid(cost):
        pts.append(make_point(bench, utility_choice(q, lam, cost), None, rg, dense=True, lam=float(lam)))
    return pts


@register_router("knn")
def _knn(bench: Benchmark, seed: int) -> list[Point]:
    """Deterministic: the seed changes nothing."""
    return _quality_points(bench, KNNRouter(), seed)


@register_router("mlp")
def _mlp(bench: Benchmark, seed: int) -> list[Point]:
    return _quality_points(bench, MLPRouter(config=FAST_CONFIG.but(seed=seed)), seed)


@register_router("ensemble")
def _ensemble(bench: Benchmark, seed: int) -> list[Point]:
    test = bench.test
    ar = np.arange(len(test))
    win = EnsembleRouter().fit(bench.X_train, bench.train).predict(test.answers)
    em, f1 = rescore(test.answers[ar, win], [r.answers for r in bench.test_records], bench.dataset.v2)
    err = test.errors[ar, :, win].sum(axis=1)  # (N,) wrong endpoints of the voted answer
    n_all = np.ones(len(test))
    pts = []
    for b in BETA_POINTS:
        pq = {
            "em": em,
            "f1": f1,
            "gflops": test.gflops.sum(axis=1),
            "tdl": err + 2 * sum(bench.costs(b).beta),
            "share": n_all,
        }
        p = make_point(bench, win, b, per_query=pq)
        p["allocation"] = dict.fromkeys(test.agent_ids, 1.0)  # every agent answers every query
        pts.append(p)
    return pts


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


def _is_num(v) -> bool:
    return isinstance(v, int | float | np.number) and not isinstance(v, bool)


def _mean_points(runs: list[list[Point]]) -> list[Point]:
    """Average the numeric fields (and ``_q`` vectors) of the same point over seeds;
    ``em_std``, ``gflops_std``."""
    if len({len(r) for r in runs}) != 1:
        raise ValueError("a router returned a different number of points for different seeds")
    out = []
    for pts in zip(*runs):
        p = dict(pts[0])
        for k, v in pts[0].items():
            if _is_num(v) and k != "beta1":
                p[k] = float(np.mean([q[k] for q in pts]))
            elif k == "_q":
                p[k] = {a: np.mean([q[k][a] for q in pts], axis=0) for a in v}
            elif isinstance(v, dict):
                p[k] = {a: float(np.mean([q[k][a] for q in pts])) for a in v}
        p["em_std"] = float(np.std([q["em"] for q in pts]))
        p["gflops_std"] = float(np.std([q["gflops"] for q in pts]))
        out.append(p)
    return out


def _pgr_refs(bench: Benchmark) -> tuple[int, int]:
    """Indices of the weak (main) and strong (best test EM) agents of the PGR metrics."""
    return 0, int(np.argmax(bench.test.em.mean(axis=0)))


def _share(p: Point, main: str) -> float:
    s = p.get("share_strong")
    return float(s) if s is not None else 1.0 - float(p["allocation"][main])


def _curve_summary(bench: Benchmark, points: list[Point], lo: float, hi: float) -> dict:
    """AIQ (three ways), APGR, CPT(50%), CPT(80%) of one set of points."""
    cost = np.array([p["gflops"] for p in points], float)
    em = np.array([p["em"] for p in points], float)
    core = np.array([not p.get("dense") for p in points])
    out = {
        "aiq": M.aiq(cost, em, lo, hi),
        "aiq_flat": M.aiq(cost, em, lo, hi, left="flat"),
        "aiq_beta_points": M.aiq(cost[core], em[core], lo, hi) if core.any() else float("nan"),
    }
    weak_j, strong_j = _pgr_refs(bench)
    em_agents = 100 * bench.test.em.mean(axis=0)
    weak, strong = float(em_agents[weak_j]), float(em_agents[strong_j])
    if strong > weak:
        share = np.array([_share(p, bench.test.agent_ids[0]) for p in points])
        out["apgr"] = M.apgr(share, em, weak, strong)
        out["cpt50"] = M.cpt(share, em, weak, strong, 0.5)
        out["cpt80"] = M.cpt(share, em, weak, strong, 0.8)
    return out


def _bootstrap(
    bench: Benchmark,
    points: list[Point],
    tdl_q: dict[str, np.ndarray],
    ref_q: dict[str, np.ndarray],
    weights: np.ndarray,
    lo: float,
    hi: float,
    level: float = 0.95,
) -> dict:
    """Paired bootstrap of one router's seed-averaged points (``_q`` vectors needed)."""
    if not points or any("_q" not in p for p in points):
        return {}
    cost = M.resample_means(np.stack([p["_q"]["gflops"] for p in points]), weights)  # (P, B)
    em = 100 * M.resample_means(np.stack([p["_q"]["em"] for p in points]), weights)
    share = M.resample_means(np.stack([p["_q"]["share"] for p in points]), weights)
    n_boot = weights.shape[0]
    aiq = [M.aiq(cost[:, b], em[:, b], lo, hi) for b in range(n_boot)]
    out: dict = {"aiq_ci": list(M.percentile_interval(np.array(aiq), level))}
    weak_j, strong_j = _pgr_refs(bench)
    ref = 100 * M.resample_means(bench.test.em[:, [weak_j, strong_j]].T.astype(float), weights)  # (2, B)
    if weak_j != strong_j:
        apgr = [
            M.apgr(share[:, b], em[:, b], ref[0, b], ref[1, b]) if ref[1, b] > ref[0, b] else np.nan
            for b in range(n_boot)
        ]
        out["apgr_ci"] = list(M.percentile_interval(np.array(apgr), level))
    diff, ci, below = {}, {}, {}
    for k, v in tdl_q.items():
        d = v - ref_q[k]
        diff[k] = float(d.mean())
        ci[k] = list(M.percentile_interval(M.resample_means(d, weights), level))
        below[k] = bool(ci[k][1] < 0)
    out.update(tdl_diff=diff, tdl_diff_ci=ci, tdl_below_random_95=below)
    return out


def _pareto_all(routers: dict) -> list[dict]:
    """Non-dominated (GFLOPs, EM) points over every router but the oracle (a bound, not a router)."""
    rows = [
        (rid, i, p["gflops"], p["em"])
        for rid, r in routers.items()
        if rid != "oracle"
        for i, p in enumerate(r["points"])
    ]
    if not rows:
        return []
    front = M.pareto_front(np.array([r[2] for r in rows]), np.array([r[3] for r in rows]))
    return [
        {"router": rows[i][0], "point": rows[i][1], "gflops": rows[i][2], "em": rows[i][3]} for i in front
    ]


def run_comparison(
    bench: Benchmark,
    seeds: Sequence[int] = BENCHMARK_SEEDS,
    routers: Sequence[str] | None = None,
    progress: Callable[[str], None] | None = None,
    n_boot: int = N_BOOT,
    boot_seed: int = 0,
) -> dict:
    """Every router (default: :func:`router_ids`) on ``bench``: summaries per seed, then mean and
    std over ``seeds``; points averaged over seeds; paired bootstrap intervals over the test
    questions (``n_boot`` resamples; 0 skips them).

    ``progress`` gets one line per router (the dashboard shows it in a status box).
    """
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ValueError("run_comparison needs at least one seed")
    test = bench.test
    g = test.gflops.mean(axis=0)
    lo, hi = float(g.min()), float(g.max())
    weak_j, strong_j = _pgr_refs(bench)
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
        "target_shares": list(TARGET_SHARES),
        "gflops_range": [lo, hi],
        "aiq_note": "area under the non-decreasing upper convex hull of (GFLOPs, EM) over the "
        "GFLOPs range of the pool's agents / that range; hull flat to the right end; left of the "
        "router's cheapest point: 0 (aiq, RouterBench) or flat (aiq_flat)",
        "pgr_weak": test.agent_ids[weak_j],
        "pgr_strong": test.agent_ids[strong_j],
        "pgr_note": "share_strong = share of queries sent to a non-main agent; PGR between the main "
        "agent's EM (pgr_weak) and the best single agent's (pgr_strong); two agents: RouteLLM's APGR",
        "bootstrap": {
            "n_boot": int(n_boot),
            "seed": int(boot_seed),
            "level": 0.95,
            "paired": True,
            "unit": "test questions",
            "tdl_reference": "uniform random allocation, expected TDL per question",
        },
        "tdl_random": {},
        "routers": {},
    }
    cost_by_beta = {b: cost_matrix(test.errors, bench.costs(b)) for b in BETA_POINTS}
    results["tdl_random"] = {_key(b): M.random_tdl(c, None, seeds)[0] for b, c in cost_by_beta.items()}
    ref_q = {_key(b): query_costs(c).mean(axis=1) for b, c in cost_by_beta.items()}  # (N,) each
    weights = M.bootstrap_weights(len(test), n_boot, boot_seed) if n_boot > 0 else None
    for rid in routers if routers is not None else router_ids(bench):
        if progress:
            progress(f"{rid}: {len(seeds)} seed(s)")
        runs = [run_router(bench, rid, s) for s in seeds]
        per_seed = [_curve_summary(bench, pts, lo, hi) for pts in runs]
        points = _mean_points(runs)
        entry: dict = {"points": points}
        for k in per_seed[0]:
            vals = np.array([s[k] for s in per_seed], float)
            entry[k] = float(np.nanmean(vals)) if np.isfinite(vals).any() else float("nan")
            if k in ("aiq", "apgr"):
                entry[f"{k}_std"] = float(np.nanstd(vals)) if np.isfinite(vals).any() else float("nan")
                entry[f"{k}_seeds"] = vals.tolist()
        main = test.agent_ids[0]
        em_agents = 100 * test.em.mean(axis=0)
        for p in points:
            p["share_strong"] = _share(p, main)
            if em_agents[strong_j] > em_agents[weak_j]:
                p["pgr"] = M.pgr(p["em"], float(em_agents[weak_j]), float(em_agents[strong_j]))
        core = [i for i, p in enumerate(points) if not p.get("dense") and p["beta1"] is not None]
        core = [i for i in core if points[i]["tdl"] is not None]
        entry["tdl"] = {_key(points[i]["beta1"]): points[i]["tdl"] for i in core}
        entry["tdl_std"] = {
            _key(points[i]["beta1"]): float(np.std([r[i]["tdl"] for r in runs])) for i in core
        }
        tdl_q = {_key(points[i]["beta1"]): points[i]["_q"]["tdl"] for i in core if "_q" in points[i]}
        if rid == "zero":
            tdl_q = _zero_tdl_q(bench)
            entry["tdl"] = {k: float(v.mean()) for k, v in tdl_q.items()}
            entry["tdl_std"] = dict.fromkeys(tdl_q, 0.0)
        if weights is not None:
            entry.update(_bootstrap(bench, points, tdl_q, ref_q, weights, lo, hi))
        entry["pareto"] = M.pareto_front(
            np.array([p["gflops"] for p in points]), np.array([p["em"] for p in points])
        ).tolist()
        for p in points:
            p.pop("_q", None)
        results["routers"][rid] = entry
    results["pareto_front"] = _pareto_all(results["routers"])
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


# --- the summary table -----------------------------------------------------------------------


def summary_frame(results: dict):
    """One row per router: AIQ (all points, β points only) with its std over seeds and bootstrap
    95% interval, APGR / CPT likewise, and the mean TDL over the β sweep."""
    import pandas as pd

    def ci(r: dict, name: str, i: int):
        v = r.get(name)
        return v[i] if isinstance(v, list | tuple) and len(v) == 2 else None

    rows = []
    for rid, r in results["routers"].items():
        tdl = [v for v in (r.get("tdl") or {}).values() if v is not None]
        below = r.get("tdl_below_random_95") or {}
        rows.append(
            {
                "router": rid,
                "AIQ": r.get("aiq"),
                "AIQ std": r.get("aiq_std"),
                "AIQ 95% lo": ci(r, "aiq_ci", 0),
                "AIQ 95% hi": ci(r, "aiq_ci", 1),
                "AIQ (flat left)": r.get("aiq_flat"),
                "AIQ (β points)": r.get("aiq_beta_points"),
                "APGR": r.get("apgr"),
                "APGR std": r.get("apgr_std"),
                "APGR 95% lo": ci(r, "apgr_ci", 0),
                "APGR 95% hi": ci(r, "apgr_ci", 1),
                "CPT(50%)": r.get("cpt50"),
                "CPT(80%)": r.get("cpt80"),
                "mean TDL": float(np.mean(tdl)) if tdl else None,
                "β₁ with TDL < random (95%)": sum(bool(v) for v in below.values()) if below else None,
                "points": len(r["points"]),
            }
        )
    df = pd.DataFrame(rows)
    if df["APGR"].isna().all():
        df = df.drop(columns=[c for c in df.columns if c.startswith(("APGR", "CPT"))])
    return df.sort_values("AIQ", ascending=False, ignore_index=True)
