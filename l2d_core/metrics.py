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

from .costs import query_costs, tdl
from .policies import random_policy

__all__ = [
    "chosen",
    "chosen_mean",
    "allocation",
    "mean_gflops",
    "gflops_per_em",
    "tpr_fpr",
    "mean_tdl",
    "random_tdl",
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


def upper_hull(cost: np.ndarray, quality: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Non-decreasing upper convex hull of (cost, quality) points: what random mixing of
    the points can reach (the zero router when the points are single agents).

    >>> upper_hull(np.array([1.0, 2.0, 3.0, 10.0]), np.array([60.0, 61.0, 80.0, 85.0]))
    (array([ 1.,  3., 10.]), array([60., 80., 85.]))
    """
    order = np.lexsort((-np.asarray(quality), np.asarray(cost)))
    hull: list[tuple[float, float]] = []
    for c, q in zip(np.asarray(cost, float)[order], np.asarray(quality, float)[order]):
        if hull and q <= hull[-1][1]:
            continue  # costs more, no better: never on a non-decreasing frontier
        while len(hull) >= 2:
            (c1, q1), (c2, q2) = hull[-2], hull[-1]
            if (q2 - q1) * (c - c1) <= (q - q1) * (c2 - c1):  # middle point under the chord
                hull.pop()
            else:
                break
        hull.append((c, q))
    arr = np.array(hull)
    return arr[:, 0], arr[:, 1]
