"""Router comparison: every router of the registry on one benchmark, as cost–EM curves, AIQ,
APGR and TDL per β₁ — the ``results.json`` a report is made of (schema:
:mod:`~l2d_core.evaluation.results`).

Each router is fitted per seed and evaluated at the BENCHMARK.md β₁ points and its own sweep
(:func:`~l2d_core.evaluation.points.router_points`). Metrics per router (SPEC §7), over the
cost range ``[lo, hi]`` of the pool's agents (GFLOPs; dollars per 1,000 questions on a pool whose
answers all have prices: :func:`~l2d_core.evaluation.curve_summary.aiq_cost`), are computed per
seed and reported as mean (``x``) and std over seeds (``x_std``):

- ``aiq``: area under the router's non-decreasing upper convex hull of (GFLOPs, EM) points
  divided by the range, the hull extended flat to the right end and **zero left of the
  router's cheapest point**, as RouterBench's ``calc_AIQ`` computes it (a lower bound);
- ``aiq_flat``: the same with the cheapest point also extended flat to the left end (an upper
  bound: a router that never reaches the cheap end is credited there; compare routers on
  ``aiq``);
- ``aiq_beta_points``: ``aiq`` on the β₁ points only (no dense sweep);
- ``apgr``, ``cpt50``, ``cpt80`` and per point ``share_strong`` and ``pgr``. Two-agent pools
  are RouteLLM's case. **J + 1 agents:** ``share_strong`` is the share of queries sent to any
  non-main agent (the ensemble: 1), weak = the main agent's EM, strong = the best single
  agent's EM (test); the PGR curve is anchored at (0, 0) and, where a router's points stop
  short of share 1, at (1, 1) (:func:`~l2d_core.evaluation.metrics.pgr_curve`);
- ``tdl`` per β₁ (and ``tdl_std``);
- bootstrap over test questions (``n_boot`` resamples, the same for every router: paired),
  percentile 95% intervals of the seed-averaged router: ``aiq_ci``, ``apgr_ci``, and per β₁
  the mean paired difference ``tdl_diff`` = TDL(router) − TDL(uniform random allocation, in
  expectation per question), its interval ``tdl_diff_ci`` and ``tdl_below_random_95``;
- ``pareto``: indices of the router's non-dominated (GFLOPs, EM) points; the results'
  ``pareto_front`` lists the non-dominated points over every router but the oracle.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from ..method.costs import LATENCY_POINTS, CostConfig, cost_matrix, query_costs
from ..routers.base import DENSE_BETAS, TARGET_SHARES, Router, supports_budget, validated
from ..routers.registry import make_router, router_ids, router_role
from . import metrics as M
from .benchmark import BETA_POINTS, PRICE_POINTS, Benchmark
from .budget_results import BUDGET_POINTS, budget_decision, budget_rows
from .curve_summary import aiq_cost, bootstrap_summary, curve_summary, pgr_refs
from .paired import paired_differences, seed_mean_samples
from .points import beta_key, decision_metrics, router_points
from .results import SCHEMA_VERSION, Point, Results, expert_share
from .validation import validation_score

__all__ = [
    "BENCHMARK_SEEDS",
    "N_BOOT",
    "evaluate_router",
    "run_router",
    "ComparisonPlan",
    "ComparisonProgress",
    "run_comparison",
]

BENCHMARK_SEEDS: tuple[int, ...] = (0, 1, 2, 3, 4)  # BENCHMARK.md: 5 training seeds
N_BOOT = 1000  # bootstrap resamples of the test questions


def evaluate_router(
    bench: Benchmark,
    router: str | Router,
    costs: CostConfig,
    seed: int = 0,
    budget: tuple[str, float] | None = None,
) -> dict:
    """Every SPEC §7 metric of one router (an id, or a router already fitted on ``bench``) at
    ``costs`` on the test articles — or under ``budget`` = (``share`` | ``gflops``, target),
    calibrated on validation articles — with the costs and the GFLOPs paid on every query."""
    if isinstance(router, str):
        router = make_router(router).fit(bench, seed)
    extra = {}
    if budget is not None:
        d, result = budget_decision(router, costs, *budget)
        extra = {"budget": asdict(result)}
    else:
        d = router.decide(costs)
    out, _ = decision_metrics(bench, d, costs)
    out.update(
        router=router.id, alpha=list(costs.alpha), beta=list(costs.beta), overhead_gflops=d.overhead_gflops
    )
    return {**out, **extra}


def run_router(bench: Benchmark, router_id: str, seed: int = 0, betas=BETA_POINTS) -> list[Point]:
    """The points of one router (registered id or ``agent:<id>``) for one seed, at ``betas``."""
    return router_points(make_router(router_id).fit(bench, seed), betas)


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


def _pareto_all(routers: dict) -> list[dict]:
    """Non-dominated (GFLOPs, EM) points over every router but the oracle (a bound, not a router)."""
    rows = [
        (rid, i, p["gflops"], p["em"])
        for rid, r in routers.items()
        if router_role(rid) != "bound"
        for i, p in enumerate(r["points"])
    ]
    if not rows:
        return []
    front = M.pareto_front(np.array([r[2] for r in rows]), np.array([r[3] for r in rows]))
    return [
        {"router": rows[i][0], "point": rows[i][1], "gflops": rows[i][2], "em": rows[i][3]} for i in front
    ]


def _price_tdl(
    bench: Benchmark, points: list[Point], tdl_q: dict[str, np.ndarray], weights, level: float = 0.95
) -> dict:
    """TDL per per-TFLOP price λ against random allocation — uniform, and with the router's own
    shares at that λ (allocation-matched, in expectation per question) — with paired bootstrap
    intervals of TDL(router) − TDL(matched random)."""
    out: dict = {"tdl_price": {}, "tdl_price_uniform": {}, "tdl_price_matched": {}}
    diffs: dict = {}
    for p in points:
        if p.get("price") is None:
            continue
        key = beta_key(p["price"])
        qc = query_costs(cost_matrix(bench.test.errors, bench.price_costs(p["price"])))  # (N, A)
        share = np.array([p["allocation"].get(a, 0.0) for a in bench.test.agent_ids], float)
        matched = qc @ (share / share.sum())  # (N,) expected TDL of random allocation, same shares
        router_q = tdl_q.get(key, p["_q"]["tdl"])
        out["tdl_price"][key] = float(router_q.mean())
        out["tdl_price_uniform"][key] = float(qc.mean())
        out["tdl_price_matched"][key] = float(matched.mean())
        diffs[key] = router_q - matched
    if weights is not None and diffs:
        ci = {k: list(M.percentile_interval(M.resample_means(d, weights), level)) for k, d in diffs.items()}
        out["tdl_price_diff_ci"] = ci
        out["tdl_price_below_matched_95"] = {k: bool(v[1] < 0) for k, v in ci.items()}
    return out


@dataclass(frozen=True)
class ComparisonPlan:
    """What a comparison runs: every router of ``routers`` (default: :func:`router_ids`) fitted
    with each of ``seeds`` (constructor ``params`` per router id); ``n_boot`` bootstrap resamples
    of the test questions (0: none; drawn from ``boot_seed``); besides the BENCHMARK.md β₁ points,
    the per-TFLOP ``prices`` and the latency prices λ_s ``latencies`` (errors per second; default:
    LATENCY_POINTS when every agent's latency is logged; the money prices λ$ of the pool's scale
    where every answer has its price); the (kind, target) ``budgets`` each
    router that follows budgets is put under (its first seed, at ``BUDGET_PRICE``); ``validate``:
    each router ranked on validation articles is scored there (its first seed), as the reports
    choose by (``scripts/bench_fit.py`` times fits without it)."""

    seeds: Sequence[int] = BENCHMARK_SEEDS
    routers: Sequence[str] | None = None
    n_boot: int = N_BOOT
    boot_seed: int = 0
    prices: Sequence[float] = PRICE_POINTS
    params: Mapping[str, dict] = field(default_factory=dict)
    latencies: Sequence[float] | None = None
    budgets: Sequence[tuple[str, float]] = BUDGET_POINTS
    validate: bool = True


@dataclass(frozen=True)
class ComparisonProgress:
    """Who hears how a comparison goes: ``started(line)`` once per router as it starts (the
    benchmark script prints it), ``done(k, n, router id)`` as each is done, ``k`` of ``n`` (a
    progress bar)."""

    started: Callable[[str], None] | None = None
    done: Callable[[int, int, str], None] | None = None


def run_comparison(
    bench: Benchmark, plan: ComparisonPlan | None = None, progress: ComparisonProgress | None = None
) -> Results:
    """Every router of ``plan`` (:class:`ComparisonPlan`) on ``bench``: summaries per seed, then
    mean and std over the seeds; points averaged over seeds; paired bootstrap intervals over the
    test questions. Besides each router's own intervals, the L2D routers get paired differences
    to every other router (:mod:`~l2d_core.evaluation.paired`); ``progress`` hears of each router
    (:class:`ComparisonProgress`).
    """
    plan, progress = plan or ComparisonPlan(), progress or ComparisonProgress()
    routers, n_boot, boot_seed, prices = plan.routers, plan.n_boot, plan.boot_seed, plan.prices
    params, latencies, budgets = plan.params, plan.latencies, plan.budgets
    seeds = plan.seeds
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise ValueError("run_comparison needs at least one seed")
    test = bench.test
    g = test.gflops.mean(axis=0)
    span = aiq_cost(bench).scale * bench.mixing_cost("test")  # what AIQ integrates over
    lo, hi = float(span.min()), float(span.max())
    weak_j, strong_j = pgr_refs(bench)
    results: Results = {
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
        "price_points": [float(x) for x in prices],
        "dense_betas": list(DENSE_BETAS),
        "target_shares": list(TARGET_SHARES),
        "gflops_range": [float(g.min()), float(g.max())],
        "aiq_cost": aiq_cost(bench).words,
        "aiq_range": [lo, hi],
        "aiq_note": f"area under the non-decreasing upper convex hull of (cost, EM), cost in "
        f"{aiq_cost(bench).words}, over the range of the pool's agents / that range; hull flat to the "
        "right end; left of the router's cheapest point: 0 (aiq, RouterBench) or flat (aiq_flat)",
        "pgr_weak": test.agent_ids[weak_j],
        "pgr_strong": test.agent_ids[strong_j],
        "pgr_note": "share_strong = share of queries sent to a non-main agent; PGR between the main "
        "agent's EM (pgr_weak) and that of the agent of best EM on the training articles (pgr_strong); "
        "two agents: RouteLLM's APGR",
        "validation_note": "validation (L2D routers ranked on the training articles, out of fold, first "
        "seed): gain = best EM above random mixing over the per-TFLOP prices, price = where, aiq = "
        "validation AIQ; the reports choose their router and operating point by it",
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
    results["tdl_random"] = {beta_key(b): M.random_tdl(c, None, seeds)[0] for b, c in cost_by_beta.items()}
    ref_q = {beta_key(b): query_costs(c).mean(axis=1) for b, c in cost_by_beta.items()}  # (N,) each
    weights = M.bootstrap_weights(len(test), n_boot, boot_seed) if n_boot > 0 else None
    ref_em = (
        None
        if weights is None
        else 100 * M.resample_means(test.em[:, [weak_j, strong_j]].T.astype(float), weights)
    )
    ids = list(routers if routers is not None else router_ids(bench))
    if latencies is None:
        latencies = LATENCY_POINTS if bench.has_latency else ()
    monies = bench.money_prices or ()  # where every answer has its price: the money rule's scale
    results["latency_points"], results["money_points"] = [float(x) for x in latencies], list(monies)
    results["questions"] = bench.questions
    boot: dict[str, dict[str, np.ndarray]] = {}
    for done, rid in enumerate(ids, 1):
        if progress.started:
            progress.started(f"{rid}: {len(seeds)} seed(s)")
        fitted = [make_router(rid, **params.get(rid, {})).fit(bench, s) for s in seeds]
        runs = [router_points(r, prices=prices, latencies=latencies, monies=monies) for r in fitted]
        per_seed = [curve_summary(bench, pts, lo, hi) for pts in runs]
        points = _mean_points(runs)
        entry: dict = {"points": points}
        if plan.validate and validated(type(fitted[0])):  # what the reports choose by (no test label read)
            gain, price, aiq, low = validation_score(fitted[0])
            scored = {"gain": gain, "price": price, "aiq": aiq, "gain_low": low}
            entry["validation"] = {**scored, "seed": seeds[0]}
        # what the router pays on every query besides the agent it picks (encoder, main + helpers)
        entry["overhead_gflops"] = float(fitted[0].decide(bench.costs(BETA_POINTS[-1])).overhead_gflops)
        for k in per_seed[0]:
            vals = np.array([s[k] for s in per_seed], float)
            entry[k] = float(np.nanmean(vals)) if np.isfinite(vals).any() else float("nan")
            if k in ("aiq", "apgr"):
                entry[f"{k}_std"] = float(np.nanstd(vals)) if np.isfinite(vals).any() else float("nan")
                entry[f"{k}_seeds"] = vals.tolist()
        main = test.agent_ids[0]
        em_agents = 100 * test.em.mean(axis=0)
        for p in points:
            p["share_strong"] = expert_share(p, main)
            if em_agents[strong_j] > em_agents[weak_j]:
                p["pgr"] = M.pgr(p["em"], float(em_agents[weak_j]), float(em_agents[strong_j]))
        core = [i for i, p in enumerate(points) if not p.get("dense") and p["beta1"] is not None]
        core = [i for i in core if points[i]["tdl"] is not None]
        entry["tdl"] = {beta_key(points[i]["beta1"]): points[i]["tdl"] for i in core}
        entry["tdl_std"] = {
            beta_key(points[i]["beta1"]): float(np.std([r[i]["tdl"] for r in runs])) for i in core
        }
        tdl_q = {beta_key(points[i]["beta1"]): points[i]["_q"]["tdl"] for i in core if "_q" in points[i]}
        price_q = {}
        reference = fitted[0].tdl_vectors({beta_key(b): bench.costs(b) for b in BETA_POINTS})
        if reference is not None:  # a router whose TDL is not that of its points (the zero router)
            tdl_q = reference
            entry["tdl"] = {k: float(v.mean()) for k, v in tdl_q.items()}
            entry["tdl_std"] = dict.fromkeys(tdl_q, 0.0)
            price_q = fitted[0].tdl_vectors({beta_key(x): bench.price_costs(x) for x in prices})
        if weights is not None:
            entry.update(bootstrap_summary(bench, points, tdl_q, ref_q, weights, lo, hi))
            if all("_q" in p for pts in runs for p in pts):  # for the paired differences
                refs = ref_em if weak_j != strong_j else None
                for metric, samples in seed_mean_samples(runs, weights, lo, hi, refs).items():
                    boot.setdefault(metric, {})[rid] = samples
        if budgets and supports_budget(fitted[0]):
            entry["budgets"] = budget_rows(fitted[0], bench, budgets, n_boot or N_BOOT)
        if reference is None:
            entry.update(_price_tdl(bench, points, price_q, weights))
        else:  # the zero router at a price: the best single agent; no allocation of its own
            entry["tdl_price"] = {k: float(v.mean()) for k, v in price_q.items()}
        entry["pareto"] = M.pareto_front(
            np.array([p["gflops"] for p in points]), np.array([p["em"] for p in points])
        ).tolist()
        for p in points:
            p.pop("_q", None)
        results["routers"][rid] = entry
        if progress.done:
            progress.done(done, len(ids), rid)
    for rid, add in paired_differences(results["routers"], boot).items():
        results["routers"][rid].update(add)
    results["pareto_front"] = _pareto_all(results["routers"])
    return results
