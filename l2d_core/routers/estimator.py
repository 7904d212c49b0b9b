"""scikit-learn's estimator contract without importing scikit-learn at start-up: importing it
(SciPy's statistics come with it) took about a second of every command and of the dashboard's first
view, for a base class. Constructor arguments are kept as attributes, ``get_params`` /
``set_params`` as scikit-learn defines them (so ``sklearn.base.clone`` copies an estimator), a
repr, and :func:`check_fitted`; code that fits imports scikit-learn where it uses it.

>>> class Demo(Estimator):
...     def __init__(self, k: int = 3, scale: float = 1.0):
...         self.k, self.scale = k, scale
>>> Demo(k=5).set_params(scale=2.0)
Demo(k=5, scale=2.0)
>>> check_fitted(Demo(), "knn_")
Traceback (most recent call last):
...
l2d_core.routers.estimator.NotFittedError: This Demo is not fitted yet: call 'fit' first.
"""

from __future__ import annotations

import inspect

__all__ = ["Estimator", "NotFittedError", "check_fitted"]


class NotFittedError(ValueError, AttributeError):
    """An estimator used before ``fit`` (the bases of scikit-learn's error of that name)."""


class Estimator:
    """Base of the routers' estimators: ``__init__`` stores its arguments, learned state ends in
    ``_`` (scikit-learn's conventions)."""

    @classmethod
    def _get_param_names(cls) -> list[str]:
        if cls.__init__ is object.__init__:
            return []
        params = inspect.signature(cls.__init__).parameters.values()
        return sorted(
            p.name for p in params if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        )

    def get_params(self, deep: bool = True) -> dict:
        """The constructor arguments by name (``deep``: with those of estimator-valued ones, as
        ``name__argument``)."""
        out = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{name}__{k}", v) for k, v in value.get_params().items())
            out[name] = value
        return out

    def set_params(self, **params) -> Estimator:
        valid = self._get_param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; valid: {valid}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params(deep=False).items())
        return f"{type(self).__name__}({args})"


def check_fitted(estimator, *attributes: str) -> None:
    """Raise :class:`NotFittedError` unless ``estimator`` has every one of ``attributes``."""
    if not all(hasattr(estimator, a) for a in attributes):
        raise NotFittedError(f"This {type(estimator).__name__} is not fitted yet: call 'fit' first.")
