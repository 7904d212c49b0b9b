"""The summaries of one router's curve in a comparison (:mod:`.comparison`): AIQ three ways,
APGR and CPT per seed (:func:`curve_summary`), and the paired bootstrap intervals of its
seed-averaged points (:func:`bootstrap_summary`) — AIQ over GFLOPs, or over dollars per 1,000
questions on a pool whose answers all have prices (:func:`aiq_cost`, as RouterBench)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..method.costs import paid_per_agent
from . import metrics as M
from .benchmark import Benchmark
from .paired import point_em_intervals
from .results import Point, expert_share

__all__ = ["AiqCost", "aiq_cost", "bootstrap_summary", "curve_summary", "latency_range", "pgr_refs"]


def pgr_refs(bench: Benchmark) -> tuple[int, int]:
    """Indices of the weak (main) and strong agents of the PGR metrics: the strong one is the
    agent of best EM on the training articles (chosen before the test articles are read)."""
    return 0, int(np.argmax(bench.train.em.mean(axis=0)))


class AiqCost(NamedTuple):
    """What AIQ integrates over: a point's field, the per-question vector (``_q``) behind it and
    the scale from one to the other, and the words for it."""

    point: str
    per_question: str
    scale: float
    words: str


def aiq_cost(bench: Benchmark) -> AiqCost:
    """Dollars per 1,000 questions where every answer of ``bench``'s pool has its price (as
    RouterBench), else GFLOPs per query."""
    if bench.has_money:
        return AiqCost("usd_per_1k", "usd", 1000.0, "dollars per 1,000 questions")
    return AiqCost("gflops", "gflops", 1.0, "GFLOPs")


def latency_range(bench: Benchmark) -> tuple[float, float]:
    """The least and the most mean latency per question (seconds) on the test articles of sending
    every question to one agent, paid as the latency rule counts it (the main agent's always, the
    expert's on top): the range :func:`curve_summary`'s AIQ over latency integrates over."""
    paid = paid_per_agent(bench.test.latency)
    return float(paid.min()), float(paid.max())


def curve_summary(bench: Benchmark, points: list[Point], lo: float, hi: float) -> dict:
    """AIQ (three ways), APGR, CPT(50%), CPT(80%) of one set of points; on a pool that logs every
    agent's latency also ``aiq_latency``, the AIQ over the mean realised latency per question
    (:func:`latency_range`): where the pool's costs are latencies, the GFLOPs axis may not order
    its agents as their latencies do (Plocal's larger LLM counts fewer GFLOPs per answer)."""
    cost = np.array([p[aiq_cost(bench).point] for p in points], float)
    em = np.array([p["em"] for p in points], float)
    core = np.array([not p.get("dense") for p in points])
    out = {
        "aiq": M.aiq(cost, em, lo, hi),
        "aiq_flat": M.aiq(cost, em, lo, hi, left="flat"),
        "aiq_beta_points": M.aiq(cost[core], em[core], lo, hi) if core.any() else float("nan"),
    }
    if bench.has_latency and all("latency_s" in p for p in points):
        seconds = np.array([p["latency_s"] for p in points], float)
        out["aiq_latency"] = M.aiq(seconds, em, *latency_range(bench))
    weak_j, strong_j = pgr_refs(bench)
    em_agents = 100 * bench.test.em.mean(axis=0)
    weak, strong = float(em_agents[weak_j]), float(em_agents[strong_j])
    if strong > weak:
        share = np.array([expert_share(p, bench.test.agent_ids[0]) for p in points])
        out["apgr"] = M.apgr(share, em, weak, strong)
        out["cpt50"] = M.cpt(share, em, weak, strong, 0.5)
        out["cpt80"] = M.cpt(share, em, weak, strong, 0.8)
    return out


def bootstrap_summary(
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
    axis = aiq_cost(bench)
    cost = axis.scale * M.resample_means(np.stack([p["_q"][axis.per_question] for p in points]), weights)
    em = 100 * M.resample_means(np.stack([p["_q"]["em"] for p in points]), weights)
    share = M.resample_means(np.stack([p["_q"]["share"] for p in points]), weights)
    n_boot = weights.shape[0]
    aiq = [M.aiq(cost[:, b], em[:, b], lo, hi) for b in range(n_boot)]
    out: dict = {"aiq_ci": list(M.percentile_interval(np.array(aiq), level))}
    out["point_em_ci"] = point_em_intervals(em, level)
    weak_j, strong_j = pgr_refs(bench)
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
