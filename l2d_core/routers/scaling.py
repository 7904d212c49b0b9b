"""The standardisation and projection of a head's features, fitted on the training rows:

- :func:`fit_scaler`: scikit-learn's per-feature standardisation, kept as a :class:`Scaler` (its two
  arrays: a loaded head needs no scikit-learn), and its checkpoint state;
- :class:`Projection`: standardisation and the top principal directions of the features (a
  linear head fitted in them costs a fraction of a full one per step: ``TrainConfig.rank``).
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["Scaler", "fit_scaler", "Projection", "forget_projections", "scaler_state", "scaler_from_state"]


@dataclass(frozen=True)
class Scaler:
    """A fitted per-feature standardisation, ``(x - mean_) / scale_``, computed as scikit-learn's
    ``StandardScaler.transform`` computes it (the same dtype rules and in-place steps)."""

    mean_: np.ndarray
    scale_: np.ndarray

    @property
    def n_features_in_(self) -> int:
        return len(self.mean_)

    def transform(self, X) -> np.ndarray:
        X = np.array(X, copy=True)
        if X.dtype not in (np.float64, np.float32, np.float16):
            X = X.astype(np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has shape {X.shape}, the scaler was fitted on {self.n_features_in_} features"
            )
        X -= self.mean_.astype(X.dtype)
        X /= self.scale_.astype(X.dtype)
        return X


def fit_scaler(X: np.ndarray) -> Scaler:
    """``StandardScaler.fit`` on the rows as float32, its steps without importing scikit-learn (float64
    sums, the corrected two-pass variance, its near-constant test: scale 1), so the same bits.

    >>> s = fit_scaler(np.array([[0.0, 1.0], [2.0, 1.0]], np.float32))
    >>> s.transform(np.array([[1.0, 1.0]], np.float32)).tolist()
    [[0.0, 0.0]]
    """
    X, eps = np.asarray(X, np.float32), np.finfo(np.float64).eps
    if np.isnan(X).any():  # scikit-learn counts each column's rows apart: its own code
        from sklearn.preprocessing import StandardScaler

        fitted = StandardScaler().fit(X)
        return Scaler(fitted.mean_, fitted.scale_)
    n, total = np.full(X.shape[1], float(len(X))), np.sum(X, axis=0, dtype=np.float64)
    centred = X - total / n
    correction = np.sum(centred, axis=0)
    np.square(centred, out=centred)  # in place: no second N × d array
    var = (np.sum(centred, axis=0) - correction**2 / n) / n
    mean, scale = (0.0 + total) / n, np.sqrt(var)  # 0.0 + total: a sum of -0.0 is +0.0, as there
    scale[var <= len(X) * eps * var + (len(X) * mean * eps) ** 2] = 1.0
    return Scaler(mean, scale)


@dataclass(frozen=True)
class Projection:
    """What a rank-k linear head reads: features standardized by ``scaler`` (:func:`fit_scaler`),
    then projected on ``basis``, their top k principal directions ((d, k), orthonormal columns).
    Fitted once per feature matrix, it serves every cost setting's fit (``TrainConfig.rank``).

    >>> rng = np.random.default_rng(0)
    >>> P = Projection.fit(rng.normal(size=(50, 6)), 2).basis
    >>> P.shape, bool(np.allclose(P.T @ P, np.eye(2), atol=1e-5))
    ((6, 2), True)
    """

    scaler: Scaler
    basis: np.ndarray
    projected: dict = field(default_factory=dict, compare=False, repr=False)  # id → (weak rows, projected)

    def project(self, X: np.ndarray) -> torch.Tensor:
        """The standardized rows of ``X`` on the basis, (N, k) float32: torch's product, which the
        head is fitted on. Those of the last two arrays given are kept, by identity: a sweep of
        cost settings fits on one benchmark's training and validation rows again and again (rows
        changed in place would need a new array). The arrays are not kept alive by this."""
        import torch

        X = X if isinstance(X, np.ndarray) else np.asarray(X, np.float32)
        with _PROJECTIONS_LOCK:
            kept = self.projected.get(id(X))
            if kept is not None and kept[0]() is X:  # (an id reused by a new array: its ref is dead)
                return kept[1]
        rows = np.asarray(X, np.float32)
        x = torch.from_numpy(self.scaler.transform(rows).astype(np.float32)) @ torch.from_numpy(self.basis)
        with _PROJECTIONS_LOCK:
            self.projected[id(X)] = (weakref.ref(X), x)
            while len(self.projected) > 2:
                del self.projected[next(iter(self.projected))]
        return x

    @staticmethod
    def applies(rank: int, X: np.ndarray) -> bool:
        """Whether a rank-``rank`` head on ``X`` is fitted in a projection: 0 < rank < min(N, d)
        (fewer rows or features than that: the head reads every feature)."""
        return 0 < rank < min(np.shape(X))

    @classmethod
    def fit(cls, X: np.ndarray, rank: int) -> Projection:
        """scikit-learn's ``PCA(svd_solver="covariance_eigh")`` on the standardized rows, its steps
        without importing it (the same bits; a test holds them to it): the d × d covariance, its
        eigenvectors by decreasing eigenvalue, each signed so that its largest entry is positive.
        A pure function of ``X`` and ``rank``: the projections of the last few feature matrices
        are kept (one per benchmark serves every seed and cost setting)."""
        X = np.asarray(X, np.float32)
        key = (_digest(X), X.shape, int(rank))
        with _PROJECTIONS_LOCK:
            if key in _PROJECTIONS:
                _PROJECTIONS.move_to_end(key)
                return _PROJECTIONS[key]
        scaler = fit_scaler(X)
        x = scaler.transform(X)
        n, mean = len(x), np.mean(x, axis=0)
        cov = x.T @ x
        cov -= n * mean.reshape(-1, 1) * mean.reshape(1, -1)
        cov /= n - 1
        top = np.linalg.eigh(cov)[1][:, ::-1][:, :rank]  # columns: the principal directions
        top = top * np.sign(top[np.argmax(np.abs(top), axis=0), np.arange(top.shape[1])])
        projection = cls(scaler, top.astype(np.float32))
        with _PROJECTIONS_LOCK:
            _PROJECTIONS[key] = projection
            while len(_PROJECTIONS) > 4:
                _PROJECTIONS.popitem(last=False)
        return projection


def forget_projections() -> None:
    """Forget the projections kept in this process (a benchmark's cold start)."""
    with _PROJECTIONS_LOCK:
        _PROJECTIONS.clear()


def _digest(X: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(X).tobytes()).hexdigest()


_PROJECTIONS: OrderedDict[tuple, Projection] = OrderedDict()
_PROJECTIONS_LOCK = threading.Lock()


def scaler_state(scaler: Scaler) -> dict[str, np.ndarray]:
    """What a checkpoint stores of a fitted scaler."""
    return {
        "mean": np.ascontiguousarray(scaler.mean_),
        "scale": np.ascontiguousarray(scaler.scale_),
    }


def scaler_from_state(state: dict) -> Scaler:
    """A fitted scaler rebuilt from :func:`scaler_state` (NumPy arrays or CPU tensors)."""
    return Scaler(np.asarray(state["mean"]), np.asarray(state["scale"]))
