"""SPEC §7: metrics of a policy — small pure functions over arrays.

``choice`` (N,) is the agent each query went to; per-agent arrays are (N, A).

>>> choice = np.array([0, 1, 1, 0])
>>> em = np.array([[1, 1], [0, 1], [0, 0], [0, 1]], dtype=float)
>>> chosen_mean(em, choice) * 100
50.0
>>> allocation(choice, 2).tolist()
[0.5, 0.5]
>>> mean_gflops(choice, np.array([5.0, 100.0]), rejector_gflops=1.0)
53.5
>>> gflops_per_em(53.5, 50.0)
1.07
>>> tpr_fpr(choice, em.astype(bool))
(0.3333333333333333, 0.0)
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..method.costs import query_costs, tdl
from ..method.mixing import hull_value, upper_hull
from ..method.policies import random_policy

__all__ = [
    "chosen",
    "chosen_mean",
    "allocation",
    "mean_gflops",
    "gflops_per_em",
    "tpr_fpr",
    "mean_tdl",
    "random_tdl",
    "upper_hull",
    "hull_value",
    "aiq",
]


def chosen(values: np.ndarray, choice: np.ndarray) -> np.ndarray:
    """values[n, choice[n]] for per-agent values (N, A); (A,) broadcasts over queries."""
    values = np.asarray(values)
    choice = np.asarray(choice)
    if values.ndim == 1:
        return values[choice]
    return values[np.arange(len(choice)), choice]


def chosen_mean(values: np.ndarray, choice: np.ndarray) -> float:
    """Mean over queries of the chosen agent's value (EM or F1 as 0/1 or fractions)."""
    if len(choice) == 0:
        raise ValueError("no queries to evaluate (empty split)")
    return float(chosen(values, choice).mean())


def allocation(choice: np.ndarray, n_agents: int) -> np.ndarray:
    """Share of queries routed to each agent, (A,)."""
    if len(choice) == 0:
        raise ValueError("no queries to evaluate (empty split)")
    return np.bincount(np.asarray(choice), minlength=n_agents) / len(choice)


def mean_gflops(choice: np.ndarray, gflops: np.ndarray, rejector_gflops: float = 0.0) -> float:
    """Mean GFLOPs per query: the rejector's plus the chosen agent's."""
    if len(choice) == 0:
        raise ValueError("no queries to evaluate (empty split)")
    return float(rejector_gflops + chosen(gflops, choice).mean())


def gflops_per_em(gflops_per_query: float, em_percent: float) -> float:
    """GFLOPs/EM with EM in percent; infinite when EM is 0."""
    return float(gflops_per_query / em_percent) if em_percent > 0 else float("inf")


def tpr_fpr(choice: np.ndarray, correct: np.ndarray) -> tuple[float, float]:
    """TPR = #(main wrong, sent to a right expert)/#(main wrong);
    FPR = #(main right, sent to a wrong expert)/#(main right). NaN when a class is empty."""
    correct = np.asarray(correct, dtype=bool)
    main_ok = correct[:, 0]
    deferred = np.asarray(choice) != 0
    got_ok = chosen(correct, choice)
    n_wrong, n_right = int((~main_ok).sum()), int(main_ok.sum())
    tpr = float((~main_ok & deferred & got_ok).sum() / n_wrong) if n_wrong else float("nan")
    fpr = float((main_ok & deferred & ~got_ok).sum() / n_right) if n_right else float("nan")
    return tpr, fpr


def mean_tdl(cost: np.ndarray, choice: np.ndarray) -> float:
    """Mean TDL of a single-agent policy over queries; ``cost`` is (N, 2, A)."""
    if len(choice) == 0:
        raise ValueError("no queries to evaluate (empty split)")
    return float(tdl(cost, choice).mean())


def random_tdl(
    cost: np.ndarray, probs: np.ndarray | None = None, seeds: Iterable[int] = range(5)
) -> tuple[float, float]:
    """TDL of random allocation (uniform, or with ``probs``), mean and std over seeds."""
    qc = query_costs(cost)
    n, a = qc.shape
    vals = [float(chosen(qc, random_policy(n, a, s, probs)).mean()) for s in seeds]
    return float(np.mean(vals)), float(np.std(vals))


# --- router-comparison metrics (SPEC §7, from RouterBench and RouteLLM) -----------------------


def aiq(cost: np.ndarray, quality: np.ndarray, lo: float, hi: float, left: str = "zero") -> float:
    """AIQ: mean height over ``[lo, hi]`` of the router's non-decreasing upper convex hull.

    The hull (:func:`upper_hull`) is linear between its vertices and **extended flat to the
    right** up to ``hi`` (a router can always leave budget unspent). Left of its cheapest
    vertex no operating point of the router exists: ``left="zero"`` counts quality 0 there,
    as RouterBench's code does (``calc_AIQ`` integrates from the first hull point and divides
    by the whole range) — a lower bound; ``left="flat"`` extends the cheapest vertex's quality
    to ``lo`` — an upper bound, under which one dear agent alone scores its own quality over
    the whole range. Points outside ``[lo, hi]`` shape the hull but only ``[lo, hi]`` is
    integrated (exactly: the curve is piecewise linear); ``lo == hi`` gives the height there.

    >>> aiq(np.array([0.0, 10.0]), np.array([0.0, 100.0]), 0.0, 10.0)      # the diagonal
    50.0
    >>> aiq(np.array([1.0, 3.0, 10.0]), np.array([60.0, 80.0, 85.0]), 1.0, 10.0)  # 717.5 / 9
    79.72222222222223
    >>> aiq(np.array([0.0, 4.0, 10.0]), np.array([0.0, 20.0, 100.0]), 0.0, 10.0)  # (4,20) under the chord
    50.0
    >>> aiq(np.array([5.0]), np.array([70.0]), 0.0, 10.0)    # 0 on [0, 5), 70 on [5, 10]
    35.0
    >>> aiq(np.array([5.0]), np.array([70.0]), 0.0, 10.0, left="flat")
    70.0
    >>> aiq(np.array([0.0, 20.0]), np.array([50.0, 90.0]), 0.0, 10.0)   # hull beyond hi: 50→70
    60.0
    """
    if not hi >= lo:
        raise ValueError(f"AIQ needs lo <= hi, got [{lo}, {hi}]")
    if len(cost) == 0:
        raise ValueError("AIQ needs at least one (cost, quality) point")
    if left not in ("zero", "flat"):
        raise ValueError(f"left must be 'zero' or 'flat', got {left!r}")
    hc, hq = upper_hull(np.asarray(cost, float), np.asarray(quality, float))
    a = lo if left == "flat" else max(lo, float(hc[0]))  # zero below the cheapest vertex
    if hi == lo:
        return float(np.interp(lo, hc, hq)) if a <= lo else 0.0
    if a >= hi:
        return 0.0
    xs = np.unique(np.concatenate([[a, hi], hc[(hc > a) & (hc < hi)]]))
    ys = np.interp(xs, hc, hq)  # np.interp is flat outside [hc[0], hc[-1]]
    return float(np.trapezoid(ys, xs) / (hi - lo))


def pgr(quality: np.ndarray | float, weakest: float, strongest: float) -> np.ndarray | float:
    """Performance gap recovered: (Q − Q_weakest) / (Q_strongest − Q_weakest).

    >>> pgr(75.0, 60.0, 80.0)
    0.75
    >>> pgr(np.array([60.0, 80.0]), 60.0, 80.0).tolist()
    [0.0, 1.0]
    """
    if strongest == weakest:
        raise ValueError("PGR is undefined when the strongest and weakest agents score the same")
    out = (np.asarray(quality, float) - weakest) / (strongest - weakest)
    return float(out) if out.ndim == 0 else out


def pgr_curve(
    share_strong: np.ndarray, quality: np.ndarray, weakest: float, strongest: float, grid: int = 101
) -> tuple[np.ndarray, np.ndarray]:
    """PGR as a function of the share of strong calls, on ``grid`` points of [0, 1].

    The router's points are sorted by share and interpolated linearly; of points at the same
    share (up to rounding at 1e-9) the best counts — an operator would pick it, and with
    J + 1 agents two settings can call experts as often with different results. When the
    points do not reach share 0 (or 1), the curve is anchored at (0, PGR 0) (or (1, PGR 1)):
    a threshold router at ±∞ is the weak (strong) agent alone. With J + 1 agents the share is
    that of calls to any non-main agent, weakest = the main agent, strongest = the best single
    agent; (1, PGR 1) is then reached by mixing the router with the best agent alone.

    >>> s, p = pgr_curve(np.array([0.5]), np.array([70.0]), 60.0, 80.0, grid=5)
    >>> s.tolist(), p.tolist()
    ([0.0, 0.25, 0.5, 0.75, 1.0], [0.0, 0.25, 0.5, 0.75, 1.0])
    """
    share = np.asarray(share_strong, float)
    if len(share) == 0 or len(share) != len(quality):
        raise ValueError("pgr_curve needs one share of strong calls per quality point")
    if np.any((share < -1e-9) | (share > 1 + 1e-9)):
        raise ValueError("shares of strong calls must lie in [0, 1]")
    # shares equal up to rounding (e.g. bootstrap means of all-ones) are the same share
    xs, inv = np.unique(np.round(np.clip(share, 0.0, 1.0), 9), return_inverse=True)
    ys = np.full(len(xs), -np.inf)
    np.maximum.at(ys, inv, np.atleast_1d(pgr(np.asarray(quality, float), weakest, strongest)))
    if xs[0] > 0:
        xs, ys = np.concatenate([[0.0], xs]), np.concatenate([[0.0], ys])
    if xs[-1] < 1:
        xs, ys = np.concatenate([xs, [1.0]]), np.concatenate([ys, [1.0]])
    g = np.linspace(0.0, 1.0, grid)
    return g, np.interp(g, xs, ys)


def apgr(
    share_strong: np.ndarray, quality: np.ndarray, weakest: float, strongest: float, grid: int = 101
) -> float:
    """Average PGR over the share of strong calls in [0, 1] (RouteLLM): the area under
    :func:`pgr_curve` (trapezoid rule on the grid; exact for piecewise-linear curves whose
    vertices lie on the grid).

    >>> apgr(np.array([0.0, 1.0]), np.array([60.0, 80.0]), 60.0, 80.0)   # random mixing
    0.5
    >>> apgr(np.array([0.0, 1.0]), np.array([80.0, 80.0]), 60.0, 80.0)   # oracle-like
    1.0
    >>> apgr(np.array([0.2]), np.array([80.0]), 60.0, 80.0)              # 0→1 by 0.2, then 1
    0.9
    """
    g, p = pgr_curve(share_strong, quality, weakest, strongest, grid)
    return float(np.trapezoid(p, g))


def cpt(
    share_strong: np.ndarray,
    quality: np.ndarray,
    weakest: float,
    strongest: float,
    target: float,
    grid: int = 1001,
) -> float:
    """Call-performance threshold: the smallest share of strong calls whose interpolated PGR
    reaches ``target`` (e.g. 0.5 for CPT(50%)); NaN when the curve never reaches it.

    >>> cpt(np.array([0.0, 1.0]), np.array([60.0, 80.0]), 60.0, 80.0, 0.8)
    0.8
    >>> cpt(np.array([0.2]), np.array([80.0]), 60.0, 80.0, 0.5)
    0.1
    """
    g, p = pgr_curve(share_strong, quality, weakest, strongest, grid)
    hit = np.flatnonzero(p >= target - 1e-12)
    return float(g[hit[0]]) if len(hit) else float("nan")


def pareto_front(cost: np.ndarray, quality: np.ndarray) -> np.ndarray:
    """Indices of the non-dominated points (no other point is at most as dear and at least as
    good, and strictly better in one), by increasing cost; of identical points the first.

    >>> pareto_front(np.array([1.0, 2.0, 2.0, 3.0, 5.0, 4.0]), np.array([60.0, 70.0, 65.0, 70.0, 90.0, 90.0]))
    array([0, 1, 5])
    """
    cost, quality = np.asarray(cost, float), np.asarray(quality, float)
    if cost.shape != quality.shape or cost.ndim != 1:
        raise ValueError("pareto_front needs two 1-d arrays of the same length")
    order = np.lexsort((np.arange(len(cost)), -quality, cost))  # cheapest first, best first
    keep, best = [], -np.inf
    for i in order:
        if quality[i] > best:
            keep.append(int(i))
            best = quality[i]
    return np.array(keep, dtype=int)


# --- bootstrap over test questions (paired: one set of resamples for every router) -----------


def bootstrap_weights(n: int, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """Resampling weights of ``n`` questions in ``n_boot`` resamples with replacement, (B, N):
    how often each question is drawn, divided by ``n`` (each row sums to 1). Reuse one array
    for every router so that comparisons are paired.

    >>> w = bootstrap_weights(4, n_boot=3, seed=0)
    >>> w.shape, (w * 4).sum(axis=1).tolist(), bool(np.all(w * 4 == np.round(w * 4)))
    ((3, 4), [4.0, 4.0, 4.0], True)
    """
    if n < 1 or n_boot < 1:
        raise ValueError("bootstrap needs at least one question and one resample")
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    counts = np.empty((n_boot, n))
    rows = max(1, 2**20 // n)  # resamples counted at once: one bincount over ≤ 1M offset ids
    for b in range(0, n_boot, rows):
        block = idx[b : b + rows] + (np.arange(len(idx[b : b + rows])) * n)[:, None]
        counts[b : b + rows] = np.bincount(block.ravel(), minlength=block.size).reshape(-1, n)
    counts /= n
    return counts


def resample_means(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Mean of per-question ``values`` (..., N) in every resample of ``weights`` (B, N): (..., B).

    >>> resample_means(np.array([0.0, 1.0]), np.array([[1.0, 0.0], [0.5, 0.5]])).tolist()
    [0.0, 0.5]
    """
    return np.asarray(values, float) @ np.asarray(weights, float).T


def percentile_interval(samples: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Central ``level`` percentile interval of bootstrap samples (NaNs dropped; NaN if none).

    >>> [round(x, 6) for x in percentile_interval(np.arange(101.0), 0.9)]
    [5.0, 95.0]
    """
    s = np.asarray(samples, float)
    s = s[np.isfinite(s)]
    if len(s) == 0:
        return float("nan"), float("nan")
    a = 100 * (1 - level) / 2
    lo, hi = np.percentile(s, [a, 100 - a])
    return float(lo), float(hi)


def bootstrap_ci(
    values: np.ndarray,
    statistic=None,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    weights: np.ndarray | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap interval over questions. ``values`` is (N,) or (K, N) per-question
    values; each resample gives their K means, and ``statistic`` maps those (K,) means to a
    number (default: the mean of the single row). Pass :func:`bootstrap_weights` as
    ``weights`` to pair several calls.

    >>> v = np.r_[np.zeros(50), np.ones(50)]
    >>> lo, hi = bootstrap_ci(v, seed=1)
    >>> lo < 0.5 < hi, round(hi - lo, 1)
    (True, 0.2)
    >>> lo, hi = bootstrap_ci(np.stack([v, v * 0.5]), lambda m: m[0] - m[1])   # paired difference
    >>> lo < 0.25 < hi
    True
    """
    v = np.asarray(values, float)
    rows = v[None] if v.ndim == 1 else v
    weights = bootstrap_weights(rows.shape[1], n_boot, seed) if weights is None else weights
    means = resample_means(rows, weights)  # (K, B)
    if statistic is None:
        if len(rows) != 1:
            raise ValueError("give a statistic for several rows of values")
        samples = means[0]
    else:
        samples = np.array([statistic(means[:, b]) for b in range(means.shape[1])], dtype=float)
    return percentile_interval(samples, level)


__all__ += [
    "aiq",
    "pgr",
    "pgr_curve",
    "apgr",
    "cpt",
    "pareto_front",
    "bootstrap_weights",
    "resample_means",
    "percentile_interval",
    "bootstrap_ci",
]
