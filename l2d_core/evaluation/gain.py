"""Does a router pay for itself? Its EM above random mixing of single agents at the same mean
compute (the zero router's hull, SPEC §7), per question so that it gets a bootstrap interval.

Random mixing that spends ``G`` GFLOPs per query sends each query to one of two neighbouring
agents of the hull, in the proportions that average to ``G``; its EM on a question is the same
mixture of theirs. A router above that line knows something about the queries.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from . import metrics as M

__all__ = ["resampling", "mixing_weights", "gain_vector", "gain_over_mixing"]


@lru_cache(maxsize=4)
def resampling(n: int, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """:func:`~l2d_core.evaluation.metrics.bootstrap_weights`, drawn once per process (read-only):
    a page that redraws intervals on every slider move does not draw them again each time."""
    w = M.bootstrap_weights(n, n_boot, seed)
    w.flags.writeable = False
    return w


def mixing_weights(gflops: np.ndarray, em: np.ndarray, at: float) -> np.ndarray:
    """Weights (A,) of the agents that random mixing on their upper hull uses to spend ``at``
    GFLOPs per query (two neighbouring vertices; the best agent alone beyond the last; the
    cheapest alone before the first).

    >>> mixing_weights(np.array([1.0, 3.0, 10.0]), np.array([60.0, 80.0, 70.0]), 2.0).tolist()
    [0.5, 0.5, 0.0]
    >>> mixing_weights(np.array([1.0, 3.0, 10.0]), np.array([60.0, 80.0, 70.0]), 50.0).tolist()
    [0.0, 1.0, 0.0]
    """
    gflops, em = np.asarray(gflops, float), np.asarray(em, float)
    hc, hq = M.upper_hull(gflops, em)
    vertex = [int(np.flatnonzero(np.isclose(gflops, c) & np.isclose(em, q))[0]) for c, q in zip(hc, hq)]
    w = np.zeros(len(gflops))
    if at <= hc[0]:
        w[vertex[0]] = 1.0
    elif at >= hc[-1]:
        w[vertex[-1]] = 1.0
    else:
        k = int(np.searchsorted(hc, at, side="right")) - 1
        t = (at - hc[k]) / (hc[k + 1] - hc[k])
        w[vertex[k]], w[vertex[k + 1]] = 1.0 - t, t
    return w


def gain_vector(em_q: np.ndarray, agent_em: np.ndarray, agent_gflops: np.ndarray, spent: float) -> np.ndarray:
    """Per question (N,): the router's EM (0/1) minus random mixing's expected EM at ``spent``
    GFLOPs per query (``agent_em`` (N, A); ``agent_gflops`` (A,) the agents' mean GFLOPs).

    >>> gain_vector(np.array([1.0, 1.0]), np.array([[1, 1], [0, 1]]), np.array([1.0, 3.0]), 2.0).tolist()
    [0.0, 0.5]
    """
    agent_em = np.asarray(agent_em, float)
    w = mixing_weights(agent_gflops, agent_em.mean(axis=0), spent)
    return np.asarray(em_q, float) - agent_em @ w


def gain_over_mixing(
    em_q: np.ndarray, agent_em: np.ndarray, agent_gflops: np.ndarray, spent: float, n_boot: int = 1000
) -> tuple[float, tuple[float, float]]:
    """EM points (%) above random mixing at ``spent`` GFLOPs per query, and its 95% bootstrap
    interval over the questions (paired: the same resampled questions for both)."""
    g = 100.0 * gain_vector(em_q, agent_em, agent_gflops, spent)
    samples = M.resample_means(g, resampling(len(g), n_boot, 0))
    return float(g.mean()), M.percentile_interval(samples)
