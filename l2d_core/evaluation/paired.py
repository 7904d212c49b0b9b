"""Paired comparisons between the routers of one run: every router's bootstrap resamples of AIQ
and APGR are drawn on the same test-question resamples (one weight array for every router), so
the difference of two routers' figures has its own percentile interval — narrower than either
router's interval whenever their errors move together.

:func:`paired_differences` adds to each L2D router (family ``l2d``), for every other router of the
run, ``aiq_diff`` / ``aiq_diff_ci`` and ``apgr_diff`` / ``apgr_diff_ci`` (this router minus the
other: the point figure is the difference of the seed means; the interval is that of the paired
resamples of the seed-mean figure, :func:`seed_mean_samples`, which at the full sample is the
reported seed mean), and ``aiq_gain_ci``: the interval of
(AIQ − AIQ(zero)) / (AIQ(oracle) − AIQ(zero)) over the same resamples (the zero router and the
oracle: the routers whose role is ``floor`` and ``bound``).

>>> s = {"l2d-plugin": np.array([2.0, 3.0, 4.0]), "knn": np.array([1.0, 1.5, 2.5])}
>>> routers = {"l2d-plugin": {"aiq": 3.0}, "knn": {"aiq": 1.5}}
>>> paired_differences(routers, {"aiq": s}, level=1.0)["l2d-plugin"]["aiq_diff_ci"]
{'knn': [1.0, 1.5]}
"""

from __future__ import annotations

import numpy as np

from ..routers.registry import router_family, with_role
from . import metrics as M

__all__ = ["seed_mean_samples", "paired_differences", "point_em_intervals"]


def seed_mean_samples(
    runs: list[list[dict]], weights: np.ndarray, lo: float, hi: float, refs: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Per resample of ``weights`` (B, N) the mean over seeds of each seed's AIQ (and APGR, given
    ``refs`` (2, B): the weak and strong agents' EM in each resample), from the seeds' points and
    their per-question vectors (``_q``: gflops, em, share). With one resample of weight 1/N each
    they are the seed means of the reported figures.

    >>> q = {"gflops": np.array([0.0, 10.0]), "em": np.array([0.0, 1.0]), "share": np.array([0.0, 1.0])}
    >>> pts = [{"_q": q}, {"_q": {k: np.zeros(2) for k in q}}]
    >>> seed_mean_samples([pts], np.full((1, 2), 0.5), 0.0, 10.0)["aiq"].tolist()  # (0, 0) → (5, 50), flat
    [37.5]
    """
    aiq, apgr = [], []
    for pts in runs:
        cost = M.resample_means(np.stack([p["_q"]["gflops"] for p in pts]), weights)  # (P, B)
        em = 100 * M.resample_means(np.stack([p["_q"]["em"] for p in pts]), weights)
        aiq.append([M.aiq(cost[:, b], em[:, b], lo, hi) for b in range(weights.shape[0])])
        if refs is not None:
            share = M.resample_means(np.stack([p["_q"]["share"] for p in pts]), weights)
            apgr.append(
                [
                    M.apgr(share[:, b], em[:, b], refs[0, b], refs[1, b])
                    if refs[1, b] > refs[0, b]
                    else np.nan
                    for b in range(weights.shape[0])
                ]
            )
    out = {"aiq": np.mean(aiq, axis=0)}
    if refs is not None:
        out["apgr"] = np.mean(apgr, axis=0)
    return out


def _gain_interval(s: np.ndarray, zero: np.ndarray, oracle: np.ndarray, level: float) -> list[float]:
    span = oracle - zero
    frac = np.where(span > 0, (s - zero) / np.where(span > 0, span, 1.0), np.nan)
    return list(M.percentile_interval(frac, level))


def paired_differences(routers: dict, samples: dict[str, dict[str, np.ndarray]], level: float = 0.95) -> dict:
    """Per L2D router the paired differences to every other router (see the module docstring).
    ``samples`` maps a metric (``aiq``, ``apgr``) to router id → (B,) resamples; ``routers`` the
    results' router entries (their seed-mean figures). Returns router id → the fields to add."""
    out: dict[str, dict] = {}
    for rid in routers:
        if router_family(rid) != "l2d":
            continue
        add: dict = {}
        for metric, by_router in samples.items():
            mine = by_router.get(rid)
            if mine is None:
                continue
            diff, ci = {}, {}
            for other, theirs in by_router.items():
                if other == rid:
                    continue
                a, b = routers[rid].get(metric), routers[other].get(metric)
                diff[other] = float(a - b) if a is not None and b is not None else float("nan")
                ci[other] = list(M.percentile_interval(mine - theirs, level))
            add[f"{metric}_diff"], add[f"{metric}_diff_ci"] = diff, ci
        aiq = samples.get("aiq", {})
        zero, oracle = with_role(aiq, "floor"), with_role(aiq, "bound")
        if rid in aiq and zero and oracle:
            add["aiq_gain_ci"] = _gain_interval(aiq[rid], aiq[zero], aiq[oracle], level)
        out[rid] = add
    return out


def point_em_intervals(em: np.ndarray, level: float = 0.95) -> list[list[float]]:
    """Per point the percentile interval of its EM over the resamples; ``em`` is (P, B).

    >>> point_em_intervals(np.array([[1.0, 2.0, 3.0]]), level=1.0)
    [[1.0, 3.0]]
    """
    return [list(M.percentile_interval(row, level)) for row in np.atleast_2d(em)]
