"""Platt calibration of the post-hoc heads (:mod:`.posthoc`): which training rows each head fits on
and which it is calibrated on (whole articles, so the calibration sees articles the head did not),
and the per-output (slope, bias) maps."""

from __future__ import annotations

import numpy as np

__all__ = ["crossfit_splits", "calibration_split", "fit_platt"]


def crossfit_splits(groups: np.ndarray, k: int, seed: int) -> list[np.ndarray]:
    """The rows each cross-fitted head fits on (True; False: its calibration fold), one mask per
    fold: seeded folds of whole articles (as many folds as articles when there are fewer than
    ``k``); with a single article, seeded folds of its questions. Fewer than two questions
    cannot be split: refused.

    >>> [m.tolist() for m in crossfit_splits(np.array(["a", "a", "b", "c"]), 3, 0)]
    [[True, True, True, False], [False, False, True, True], [True, True, False, True]]
    >>> len(crossfit_splits(np.array(["a", "b"]), 4, 0))
    2
    """
    titles = np.array(sorted(set(groups)))
    rng = np.random.default_rng(seed)
    if len(titles) >= 2:
        k = min(k, len(titles))
        rng.shuffle(titles)
        fold_of = {t: i % k for i, t in enumerate(titles)}
        fold = np.array([fold_of[t] for t in groups], dtype=int)
    else:
        if len(groups) < 2:
            raise ValueError("platt calibration needs at least two training questions")
        k = min(k, len(groups))
        fold = rng.permutation(len(groups)) % k
    return [fold != i for i in range(k)]


def calibration_split(groups: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Rows the head fits on (True) and rows held out for Platt calibration (False): whole
    articles (a ``fraction`` of them, seeded), so the calibration sees articles the head did not;
    with a single article in the training data (a pool whose logs cover few articles), a seeded
    ``fraction`` of its questions instead. Fewer than two questions cannot be split: refused.

    >>> calibration_split(np.array(["a", "a", "b", "b"]), 0.5, 0).sum()
    np.int64(2)
    >>> int((~calibration_split(np.array(["a"] * 8), 0.25, 0)).sum())
    2
    """
    titles = np.array(sorted(set(groups)))
    rng = np.random.default_rng(seed)
    if len(titles) >= 2:
        rng.shuffle(titles)
        return ~np.isin(groups, titles[: max(1, round(fraction * len(titles)))])
    if len(groups) < 2:
        raise ValueError("platt calibration needs at least two training questions")
    held = rng.permutation(len(groups))[: max(1, round(fraction * len(groups)))]
    mask = np.ones(len(groups), bool)
    mask[held] = False
    return mask


def fit_platt(z: np.ndarray, errors: np.ndarray, ridge: float = 1.0, steps: int = 50) -> np.ndarray:
    """Per output, (slope, bias) minimising the log loss of sigmoid(slope·z + bias) plus
    ``ridge``/2 · ‖(slope, bias) − (1, 0)‖² (identity when data are scarce); damped Newton."""
    n, e, a = z.shape
    out = np.zeros((e, a, 2))
    w0 = np.array([1.0, 0.0])

    def loss(w, X, y):
        m = X @ w
        return float(np.sum(np.logaddexp(0.0, m) - y * m) + 0.5 * ridge * np.sum((w - w0) ** 2))

    for i in range(e):
        for j in range(a):
            X = np.stack([z[:, i, j].astype(np.float64), np.ones(n)], 1)
            y = errors[:, i, j].astype(np.float64)
            w = w0.copy()
            for _ in range(steps):
                p = np.exp(-np.logaddexp(0.0, -(X @ w)))
                g = X.T @ (p - y) + ridge * (w - w0)
                H = (X * (p * (1 - p))[:, None]).T @ X + ridge * np.eye(2)
                step, t, f0 = np.linalg.solve(H, g), 1.0, loss(w, X, y)
                while t > 1e-4 and loss(w - t * step, X, y) > f0:
                    t /= 2
                w = w - t * step
                if np.abs(t * step).max() < 1e-9:
                    break
            out[i, j] = w
    return out
