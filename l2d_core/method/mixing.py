"""What random mixing of agents reaches (SPEC §7's zero router): the non-decreasing upper convex
hull of their (cost, quality) points — sending each query to one agent drawn at random in fixed
proportions reaches any point on it, and nothing above it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["upper_hull", "hull_value"]


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


def hull_value(hull_cost: np.ndarray, hull_quality: np.ndarray, cost: float) -> float:
    """The quality random mixing reaches at ``cost`` on an upper hull (its vertices sorted by
    cost): linear between vertices, flat right of the last, −inf left of the first (unreachable).

    >>> c, q = np.array([1.0, 3.0]), np.array([60.0, 80.0])
    >>> hull_value(c, q, 2.0), hull_value(c, q, 9.0), hull_value(c, q, 0.5)
    (70.0, 80.0, -inf)
    """
    if len(hull_cost) == 0 or cost < hull_cost[0]:
        return float("-inf")
    return float(np.interp(cost, hull_cost, hull_quality))
