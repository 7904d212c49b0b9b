"""Platt calibration of the post-hoc heads (:mod:`.posthoc`): which training rows each head fits on
and which it is calibrated on (whole articles, so the calibration sees articles the head did not),
and the per-output (slope, bias) maps."""

from __future__ import annotations

import numpy as np

__all__ = ["sigmoid", "crossfit_splits", "calibration_split", "fit_platt", "article_folds"]


def sigmoid(x) -> np.ndarray:
    """1 / (1 + e^-x) in float64, the formula of ``scipy.special.expit`` (the two differ by at most
    2.2e-16: numpy's exp is not libm's), without importing scipy: 0 and 1 at the ends, no overflow
    warning.

    >>> sigmoid(np.array([-1000.0, 0.0, 2.0, 1000.0])).round(6).tolist()
    [0.0, 0.5, 0.880797, 1.0]
    """
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


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


def _platt_loss(w: np.ndarray, z: np.ndarray, y: np.ndarray, w0: np.ndarray, ridge: float) -> np.ndarray:
    """Each output's penalised log loss at (slope, bias) ``w`` (K, 2), over ``z``, ``y`` (N, K)."""
    m = z * w[:, 0] + w[:, 1]
    return np.sum(np.logaddexp(0.0, m) - y * m, axis=0) + 0.5 * ridge * np.sum((w - w0) ** 2, axis=1)


def fit_platt(z: np.ndarray, errors: np.ndarray, ridge: float = 1.0, steps: int = 50) -> np.ndarray:
    """Per output, (slope, bias) minimising the log loss of sigmoid(slope·z + bias) plus
    ``ridge``/2 · ‖(slope, bias) − (1, 0)‖² (identity when data are scarce): a damped Newton
    solve, every output's 2×2 system at once (an output stops when its step is below 1e-9).

    >>> z = np.array([-2.0, -1.0, 1.0, 2.0])[:, None, None]
    >>> fit_platt(z, (z > 0).astype(float)).shape, bool(fit_platt(z, (z > 0).astype(float))[0, 0, 0] > 1)
    ((1, 1, 2), True)
    """
    n, e, a = z.shape
    zk = z.reshape(n, e * a).astype(np.float64)
    y = errors.reshape(n, e * a).astype(np.float64)
    w0 = np.array([1.0, 0.0])
    w = np.tile(w0, (e * a, 1))
    active = np.ones(e * a, bool)
    eye = ridge * np.eye(2)
    for _ in range(steps):
        p = sigmoid(zk * w[:, 0] + w[:, 1])
        r, s = p - y, p * (1 - p)
        g = np.stack([(r * zk).sum(0), r.sum(0)], 1) + ridge * (w - w0)
        sz = (s * zk).sum(0)
        H = np.stack([np.stack([(s * zk * zk).sum(0), sz], 1), np.stack([sz, s.sum(0)], 1)], 1) + eye
        step = np.linalg.solve(H, g[:, :, None])[:, :, 0] * active[:, None]
        t, f0 = np.ones(e * a), _platt_loss(w, zk, y, w0, ridge)
        while (worse := (t > 1e-4) & (_platt_loss(w - t[:, None] * step, zk, y, w0, ridge) > f0)).any():
            t[worse] /= 2
        w = w - t[:, None] * step
        active &= np.abs(t[:, None] * step).max(1) >= 1e-9
        if not active.any():
            break
    return w.reshape(e, a, 2)


def article_folds(titles: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """Fold index (0..k-1) of each question, by article, seeded.

    >>> article_folds(np.array(["a", "a", "b", "c", "d"]), 2).tolist()
    [1, 1, 0, 0, 1]
    """
    names = np.array(sorted(set(titles)))
    np.random.default_rng(seed).shuffle(names)
    fold_of = {t: i % k for i, t in enumerate(names)}
    return np.array([fold_of[t] for t in titles], dtype=int)
