"""One home for the small networks the routers train on fixed features.

- :class:`~l2d_core.routers.network.MLPHead` (torch): the network of every head;
- :class:`HeadArrays`: a fitted head as NumPy arrays (a served router scores without torch);
- the features' standardisation and projection: :mod:`~l2d_core.routers.scaling`;
- :class:`HeadEstimator`: the scikit-learn-style base of every head-based router — it scales the
  features, builds the head, trains it with Algorithm 1's loop (:func:`train_loop`) on a loss
  the subclass defines, and saves / loads a checkpoint (safetensors + ``config.json``, no pickle).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from safetensors.numpy import load_file

from ..method.training import FAST_CONFIG, TrainConfig, batch_rows, train_loop
from ..runtime import in_threads, seeded, set_seed
from ..stores import atomic_save_file
from .estimator import Estimator, check_fitted
from .scaling import Projection, Scaler, fit_scaler, scaler_from_state, scaler_state
from .special import gelu

if TYPE_CHECKING:
    import torch
    from torch import nn

    from .network import MLPHead

__all__ = [
    "HeadArrays",
    "HeadEstimator",
    "save_head",
    "load_head_state",
    "fit_heads",
]


@dataclass(frozen=True)
class HeadArrays:
    """A fitted :class:`MLPHead` and its scaler as float64 NumPy arrays: the standardisation
    (``mean``, ``scale``) and the linear layers ``(W, b)`` in order, an exact GELU between two."""

    mean: np.ndarray
    scale: np.ndarray
    layers: tuple[tuple[np.ndarray, np.ndarray], ...]
    out_shape: tuple[int, ...]

    @classmethod
    def of(cls, state: dict[str, np.ndarray], scaler: Scaler, out_shape) -> HeadArrays:
        """From a head's state dict (``net.<i>.weight`` / ``net.<i>.bias``) and its scaler."""
        f64 = lambda a: np.array(a, np.float64)  # noqa: E731
        index = sorted({int(k.split(".")[1]) for k in state if k.startswith("net.")})
        layers = tuple((f64(state[f"net.{i}.weight"]).T.copy(), f64(state[f"net.{i}.bias"])) for i in index)
        return cls(f64(scaler.mean_), f64(scaler.scale_), layers, tuple(int(s) for s in out_shape))

    def check(self, in_dim: int, hidden: int) -> None:
        """Raise ValueError unless these are the layers of a head on ``in_dim`` features with
        ``hidden`` units (0: one linear layer) and its scaler has ``in_dim`` columns."""
        dims = [in_dim, *([hidden] if hidden else []), math.prod(self.out_shape)]
        got = [(W.shape, b.shape) for W, b in self.layers]
        want = [((a, b), (b,)) for a, b in zip(dims, dims[1:])]
        if got != want or self.mean.shape != (in_dim,) or self.scale.shape != (in_dim,):
            raise ValueError(f"saved head weights {got} do not match its config {want}")

    def forward(self, X: np.ndarray) -> np.ndarray:
        """The head's outputs in float64, (N, *out_shape) — what the network in eval mode computes
        in float64 (standardise, then each layer, torch's exact GELU between two)."""
        x = (np.asarray(X, np.float64) - self.mean) / self.scale
        for i, (W, b) in enumerate(self.layers):
            if i:
                x = gelu(x)
            x = x @ W + b
        return x.reshape(len(x), *self.out_shape)


def save_head(directory: str | Path, head: nn.Module, config: dict, scaler: Scaler | None = None) -> Path:
    """Write ``model.safetensors`` (and ``scaler.safetensors``), then ``config.json`` (never pickle)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()}
    atomic_save_file(state, directory / "model.safetensors")
    if scaler is not None:
        atomic_save_file(scaler_state(scaler), directory / "scaler.safetensors")
    (directory / "config.json").write_text(json.dumps(config, indent=1))
    return directory


def load_head_state(directory: str | Path) -> tuple[dict[str, torch.Tensor], dict]:
    """The head's weights and its ``config.json``."""
    from safetensors.torch import load_file as load_tensors

    directory = Path(directory)
    return load_tensors(str(directory / "model.safetensors")), json.loads(
        (directory / "config.json").read_text()
    )


class HeadEstimator(Estimator):
    """Base of the routers that train an :class:`MLPHead` on standardized features.

    scikit-learn's contract: ``__init__`` stores its arguments; ``fit`` returns ``self``;
    learned state (``head_``, ``scaler_``, ``history_``) ends in ``_``. Subclasses give
    :meth:`_loss` and call :meth:`_fit_head` with targets of shape (N, *out_shape).
    """

    def __init__(self, config: TrainConfig = FAST_CONFIG, progress: bool = False):
        self.config = config
        self.progress = progress

    def _loss(self, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def __getattr__(self, name: str):
        """A loaded head builds its torch network on first use: a served router scores with
        :meth:`arrays` and never needs it (nor torch)."""
        state = self.__dict__.get("loaded_state_") if name == "head_" else None
        if state is None:
            raise AttributeError(name)
        import torch

        from .network import MLPHead

        in_dim, out_shape = self.__dict__["loaded_shape_"]
        head = MLPHead(in_dim, out_shape, self.config.hidden, self.config.dropout)
        head.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
        self.__dict__["head_"] = head.eval()
        return head

    def _x(self, X: np.ndarray) -> torch.Tensor:
        import torch

        return torch.from_numpy(self.scaler_.transform(np.asarray(X, np.float32)).astype(np.float32))

    @seeded
    def _fit_head(self, *args, **kwargs) -> None:
        """Fit on ``(X, Y, X_val, Y_val, init, projection)``: see :meth:`_head_training`."""
        self._head_training(*args, **kwargs)()

    @seeded
    def _head_training(
        self,
        X: np.ndarray,
        Y: np.ndarray,
        X_val=None,
        Y_val=None,
        init: dict | None = None,
        projection: Projection | None = None,
    ) -> Callable[[], None]:
        """What a fit draws from the seeded generators — the scaler, the head's first weights —
        done now; the training that follows, returned as a call (:func:`fit_heads` runs several
        full-batch trainings at once: they draw nothing)."""
        if len(X) != len(Y):
            raise ValueError(f"{len(X)} feature rows for {len(Y)} queries")
        if len(X) == 0:
            raise ValueError("cannot fit a router on an empty training split")
        import torch

        from .network import MLPHead

        cfg = self.config
        projection = self._projection(X, projection)
        P = None if projection is None else torch.from_numpy(projection.basis)
        self.scaler_ = fit_scaler(X) if projection is None else projection.scaler
        rows = self._x if projection is None else projection.project  # (the projected rows are kept)
        x, y = rows(X), torch.from_numpy(np.asarray(Y, np.float32))
        set_seed(cfg.seed)
        self.head_ = MLPHead(X.shape[1], tuple(y.shape[1:]), cfg.hidden, cfg.dropout)
        if init is not None:  # a warm start (the same shapes)
            self.head_.load_state_dict(init)
        model = self.head_ if P is None else self._reduced(P)
        val = None
        if X_val is not None and Y_val is not None and len(Y_val):
            xv, yv = rows(X_val), torch.from_numpy(np.asarray(Y_val, np.float32))
            val = lambda: self._loss(model(xv), yv)

        def train() -> None:
            self.history_ = train_loop(
                model,
                len(x),
                lambda idx: self._loss(model(batch_rows(x, idx)), batch_rows(y, idx)),
                cfg,
                val_loss=val,
                progress=self.progress,
            )
            if P is not None:  # fold the projection into the full head: W = W_k Pᵀ
                with torch.no_grad():
                    self.head_.net[-1].weight.copy_(model.net[-1].weight @ P.T)
                    self.head_.net[-1].bias.copy_(model.net[-1].bias)
                self.head_.eval()

        return train

    def _projection(self, X: np.ndarray, given: Projection | None) -> Projection | None:
        """What a rank-k linear head is fitted in (``given``, when fitted before), or None."""
        k, d = self.config.rank, X.shape[1]
        if not Projection.applies(k, X):
            return None
        if self.config.hidden:
            raise ValueError(f"rank={k} fits a linear head only; this config has hidden={self.config.hidden}")
        projection = given or Projection.fit(X, k)
        if projection.basis.shape != (d, k):
            raise ValueError(f"a projection of shape {projection.basis.shape} for {d} features at rank {k}")
        return projection

    def _reduced(self, P: torch.Tensor) -> MLPHead:
        """A linear head on the k projected features, starting where the full head stands."""
        import torch

        from .network import MLPHead

        out = self.head_.out_shape
        model = MLPHead(P.shape[1], out, 0, self.config.dropout)
        with torch.no_grad():
            model.net[-1].weight.copy_(self.head_.net[-1].weight @ P)
            model.net[-1].bias.copy_(self.head_.net[-1].bias)
        return model

    def arrays(self) -> HeadArrays:
        """The fitted head as float64 arrays, made once per fitted network (a served router scores
        every request with them; :func:`forward64`)."""
        made, head = self.__dict__.get("arrays_cache"), self.__dict__.get("head_")
        if made is not None and made[0] is head:  # the served path: no other check per call
            return made[1]
        check_fitted(self, "scaler_")
        if made is None or made[0] is not head:
            if head is None:  # loaded: the saved weights, the network never built
                state, shape = self.__dict__["loaded_state_"], self.__dict__["loaded_shape_"][1]
            else:
                state = {k: v.detach().numpy() for k, v in head.state_dict().items()}
                shape = head.out_shape
            made = (head, HeadArrays.of(state, self.scaler_, shape))
            self.__dict__["arrays_cache"] = made
        return made[1]

    def raw_scores(self, X: np.ndarray) -> np.ndarray:
        """The head's outputs (logits or scores), (N, *out_shape), float32."""
        import torch

        check_fitted(self, "head_")
        with torch.no_grad():
            return self.head_.eval()(self._x(X)).numpy()

    def checkpoint_config(self) -> dict:
        """What a checkpoint records besides the weights (subclasses add their own fields)."""
        return {
            "estimator": type(self).__name__,
            "in_dim": int(self.scaler_.n_features_in_),
            "out_shape": list(self.head_.out_shape),
            "train": self.config.to_dict(),
        }

    def save(self, directory: str | Path, extra: dict | None = None) -> Path:
        return save_head(directory, self.head_, {**self.checkpoint_config(), **(extra or {})}, self.scaler_)

    @classmethod
    def load(cls, directory: str | Path, **params):
        """Rebuild a saved estimator; ``params`` override the constructor arguments."""
        directory = Path(directory)
        config = json.loads((directory / "config.json").read_text())
        if config.get("estimator") != cls.__name__:
            raise ValueError(f"{directory} holds a {config.get('estimator')}, not a {cls.__name__}")
        est = cls(**{"config": TrainConfig(**config["train"]), **cls._params_from(config), **params})
        est.loaded_state_ = load_file(str(directory / "model.safetensors"))  # the network: on first use
        est.loaded_shape_ = (int(config["in_dim"]), tuple(int(s) for s in config["out_shape"]))
        est.scaler_ = scaler_from_state(load_file(str(Path(directory) / "scaler.safetensors")))
        est._restore(config)
        est.arrays().check(est.loaded_shape_[0], est.config.hidden)
        return est

    @classmethod
    def _params_from(cls, config: dict) -> dict:
        """Constructor arguments recorded in a checkpoint (subclasses with more override)."""
        return {}

    def _restore(self, config: dict) -> None:
        """Learned state recorded in a checkpoint besides the weights."""


class AgentHead(HeadEstimator):
    """A head with one output per answer endpoint × agent, (N, 2, A), fitted on every agent's
    mistakes ``y`` (N, 2, A): what the paper's rejector and the plug-in estimator share."""

    def _targets(self, y: np.ndarray) -> np.ndarray:  # (N, 2, A)
        raise NotImplementedError

    def fit(
        self,
        X: np.ndarray,
        y: np.ndarray,
        X_val: np.ndarray | None = None,
        y_val: np.ndarray | None = None,
        init: dict | None = None,
        projection: Projection | None = None,
    ):
        """Fit on features ``X`` (N, d) and mistakes ``y`` (N, 2, A) bool; ``init``: a head's
        weights to start from (a warm start; the full-batch solver converges to the same head);
        ``projection``: the :class:`Projection` of ``X`` at the config's rank, when fitted before."""
        self._fit_head(*self._arrays(X, y, X_val, y_val), init=init, projection=projection)
        return self

    def training(self, X: np.ndarray, y: np.ndarray, X_val=None, y_val=None) -> Callable[[], None]:
        """:meth:`fit`'s draws (scaler, first weights) done now, its training returned as a call
        (:func:`fit_heads`)."""
        return self._head_training(*self._arrays(X, y, X_val, y_val))

    def _arrays(self, X, y, X_val, y_val) -> tuple:
        y = np.asarray(y)
        if len(X) != len(y):
            raise ValueError(f"{len(X)} feature rows for {len(y)} queries")
        val = (X_val, self._targets(y_val)) if X_val is not None and y_val is not None else (None, None)
        return X, self._targets(y), *val


def fit_heads(fits: Sequence[tuple[AgentHead, tuple]]) -> None:
    """Fit each head on its :meth:`AgentHead.fit` arguments ``(X, y, X_val, y_val)``, as fitting
    them one after another would: each head's draws in turn, then the trainings. Full-batch
    (L-BFGS) trainings draw nothing and run side by side, one per core
    (:func:`~l2d_core.runtime.in_threads`); mini-batch ones draw throughout, and run in turn."""
    if not all(head.config.solver == "lbfgs" for head, _ in fits):
        for head, args in fits:
            head.fit(*args)
        return
    in_threads([head.training(*args) for head, args in fits])
