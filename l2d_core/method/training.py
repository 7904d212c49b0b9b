"""Algorithm 1: minimise a batch-mean objective with AdamW, linear warm-up and decay.

The trainer knows nothing about the model: it gets a module, a loss function over a batch
of indices, and a config. Used for the fast (head on cached embeddings) and full
(fine-tuned encoder) rejectors and for the plug-in error estimator.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
from tqdm.auto import tqdm

from ..runtime import one_thread, set_seed

if TYPE_CHECKING:
    import torch

__all__ = [
    "TrainConfig",
    "PAPER_CONFIG",
    "FAST_CONFIG",
    "SDL_FAST_CONFIG",
    "POSTHOC_CONFIG",
    "AdamW",
    "train_loop",
    "batch_rows",
]


@dataclass(frozen=True)
class TrainConfig:
    lr: float = 2e-3  # AdamW learning rate
    epochs: int = 15
    batch_size: int = 256
    dropout: float = 0.1
    warmup_ratio: float = 0.1  # share of steps with linear warm-up, then linear decay to 0
    weight_decay: float = 1e-3
    hidden: int = 64  # hidden width of the rejector head
    nu: float = 1.0  # comp-sum parameter of the SDL (1 = log-softmax, the paper's choice)
    seed: int = 0
    max_grad_norm: float = 1.0
    solver: str = "adamw"  # adamw: Algorithm 1 (mini-batches); lbfgs: full batch (epochs = iterations)
    # 0: the head reads every feature; k > 0 (linear heads only): it is fitted in the k principal
    # directions of the standardized training features and folded back into a full linear head
    rank: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    def but(self, **changes) -> TrainConfig:
        return replace(self, **changes)


# Paper's rejector hyper-parameters (SPEC §4), for the full (fine-tuned encoder) mode.
PAPER_CONFIG = TrainConfig(
    lr=1e-5, epochs=6, batch_size=128, dropout=0.1, warmup_ratio=0.1, weight_decay=1e-3, hidden=256
)
# Fast mode trains only a small head on frozen embeddings: larger steps.
FAST_CONFIG = TrainConfig()
# The paper's rejector in fast mode: its classification head (linear) on the frozen embeddings,
# fitted full batch with L-BFGS in the 256 principal directions of the standardized features
# (folded back into a head over all of them). The SDL of a linear head with an L2 penalty is
# convex, so a warm start from another cost setting converges to the same head in fewer
# iterations. On the P2/P3 training articles the full-width head ran into the 200-iteration cap
# and generalised worse (mean test TDL over the 7 β₁ points 0.41 vs 0.33 on P2, 0.42 vs 0.34 on
# P3); at rank 256 it converges in 30–100 iterations (scripts/bench_engine.py times it).
SDL_FAST_CONFIG = TrainConfig(epochs=200, dropout=0.0, hidden=0, weight_decay=1e-3, solver="lbfgs", rank=256)

# The post-hoc and cascade routers' error estimator: a 32-unit head on their few dozen answer
# features, fitted full batch with L-BFGS (the same test figures as 15 AdamW epochs of the
# 64-unit head in fewer steps; scripts/bench_engine.py times both).
POSTHOC_CONFIG = TrainConfig(epochs=80, dropout=0.0, hidden=32, weight_decay=1e-2, solver="lbfgs")

SMALL_MODEL_PARAMS = 2_000_000  # a router head on fixed features, not a fine-tuned encoder


def batch_rows(t: torch.Tensor, idx) -> torch.Tensor:
    """The rows of ``t`` that ``train_loop`` hands a ``batch_loss``: a mini-batch's indices
    (``index_select``: on a CPU it copies rows faster than ``t[idx]``) or ``slice(None)``, every row."""
    return t[idx] if isinstance(idx, slice) else t.index_select(0, idx)


def train_loop(
    model: torch.nn.Module,
    n_train: int,
    batch_loss: Callable[[torch.Tensor], torch.Tensor],
    config: TrainConfig,
    val_loss: Callable[[], float] | None = None,
    progress: bool = False,
    on_epoch: Callable[[int, float], None] | None = None,
) -> dict:
    """Train ``model`` in place; ``batch_loss(idx)`` returns the mean loss of a batch (``idx``: its
    row indices, or ``slice(None)`` for a full-batch solver: :func:`batch_rows` reads either).

    With ``val_loss`` the weights of the best validation epoch are restored at the end.
    Returns the history: per-epoch train (and validation) loss.
    """
    if n_train == 0:
        raise ValueError("cannot train on an empty training split")
    if sum(p.numel() for p in model.parameters()) <= SMALL_MODEL_PARAMS:  # a head: one thread
        with one_thread():
            return _train(model, n_train, batch_loss, config, val_loss, progress, on_epoch)
    return _train(model, n_train, batch_loss, config, val_loss, progress, on_epoch)


def _train(model, n_train, batch_loss, config: TrainConfig, val_loss, progress, on_epoch) -> dict:
    import torch

    if config.solver == "lbfgs":
        return _full_batch(model, n_train, batch_loss, config, val_loss)
    if config.solver != "adamw":
        raise ValueError(f"unknown solver {config.solver!r}; use 'adamw' or 'lbfgs'")
    set_seed(config.seed)
    gen = torch.Generator().manual_seed(config.seed)
    decay = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and p.ndim <= 1]
    steps_per_epoch = math.ceil(n_train / config.batch_size)
    opt = AdamW(
        [(decay, config.weight_decay), (no_decay, 0.0)],
        config.lr,
        steps_per_epoch * config.epochs,
        config.warmup_ratio,
    )
    history: dict[str, list[float]] = {"train": [], "val": []}
    best = (math.inf, None)
    bar = tqdm(total=config.epochs, desc="training", unit="epoch", disable=not progress)
    for epoch in range(config.epochs):
        model.train()
        perm = torch.randperm(n_train, generator=gen)
        total = 0.0
        for i in range(0, n_train, config.batch_size):
            idx = perm[i : i + config.batch_size]
            loss = batch_loss(idx)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            opt.step()
            total += float(loss.detach()) * len(idx)
        history["train"].append(total / n_train)
        if val_loss is not None:
            model.eval()
            with torch.no_grad():
                v = float(val_loss())
            history["val"].append(v)
            if v < best[0]:
                best = (v, {k: t.detach().clone() for k, t in model.state_dict().items()})
        if on_epoch:
            on_epoch(epoch, history["train"][-1])
        bar.update(1)
        bar.set_postfix(loss=f"{history['train'][-1]:.4f}")
    bar.close()
    if best[1] is not None:
        model.load_state_dict(best[1])
        history["best_epoch"] = [float(int(np.argmin(history["val"])))]
    model.eval()
    return history


class AdamW:
    """AdamW (decoupled weight decay; β 0.9, 0.999; ε 1e-8) whose learning rate rises linearly
    over the first ``warmup_ratio`` of ``total_steps``, then falls linearly to 0: the update of
    ``torch.optim.AdamW`` (its single-tensor form, the one it takes on a CPU) and the schedule of
    transformers' ``get_linear_schedule_with_warmup``, written out: a first ``torch.optim``
    optimizer imports torch's compiler, and that schedule imports transformers, before a router's
    first head could train (``scripts/bench_fit.py`` times fits). Parameters on a GPU take
    ``torch.optim.AdamW``'s own step (its multi-tensor form there) at this schedule's rate: what
    the import costs is nothing beside a GPU's training. ``groups``: ``(parameters, weight
    decay)``."""

    betas = (0.9, 0.999)
    eps = 1e-8

    def __init__(self, groups, lr: float, total_steps: int, warmup_ratio: float):
        import torch

        self.groups = [(list(params), float(decay)) for params, decay in groups]
        self.base_lr, self.total = lr, total_steps
        self.warm = max(1, math.ceil(total_steps * warmup_ratio))
        self.steps = 0
        every = [p for params, _ in self.groups for p in params]
        self.on_device, self.moments = None, {}  # torch's optimizer where they are on a GPU
        if any(p.device.type != "cpu" for p in every):
            groups = [{"params": params, "weight_decay": decay} for params, decay in self.groups]
            self.on_device = torch.optim.AdamW(groups, lr=lr)
        else:
            self.moments = {id(p): (torch.zeros_like(p), torch.zeros_like(p)) for p in every}

    def lr(self) -> float:
        """The learning rate of the next step (the schedule at the steps taken so far)."""
        t = self.steps
        if t < self.warm:
            scale = float(t) / float(max(1, self.warm))
        else:
            scale = max(0.0, float(self.total - t) / float(max(1, self.total - self.warm)))
        return self.base_lr * scale

    def zero_grad(self) -> None:
        for params, _ in self.groups:
            for p in params:
                p.grad = None

    def step(self) -> None:
        import torch

        lr, (beta1, beta2) = self.lr(), self.betas
        self.steps += 1
        if self.on_device is not None:
            for group in self.on_device.param_groups:
                group["lr"] = lr
            self.on_device.step()
            return
        bias_correction1 = 1 - beta1 ** float(self.steps)
        bias_correction2_sqrt = (1 - beta2 ** float(self.steps)) ** 0.5
        step_size = lr / bias_correction1
        with torch.no_grad():
            for params, decay in self.groups:
                for p in params:
                    if p.grad is None:
                        continue
                    m, v = self.moments[id(p)]
                    if decay != 0:
                        p.mul_(1 - lr * decay)
                    m.lerp_(p.grad, 1 - beta1)
                    v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                    p.addcdiv_(m, (v.sqrt() / bias_correction2_sqrt).add_(self.eps), value=-step_size)


def _full_batch(model, n_train: int, batch_loss, config: TrainConfig, val_loss=None) -> dict:
    """L-BFGS on the whole training set (scipy's L-BFGS-B, torch computing the objective and its
    gradient), the objective plus ``weight_decay``/2 · ‖weights‖² (biases not penalised); at
    most ``config.epochs`` iterations. (scipy's solver, not ``torch.optim``: a first torch
    optimizer imports torch's compiler, which a dashboard's first view would wait for.)"""
    import torch
    from scipy.optimize import minimize

    idx = slice(None)  # the whole set as a view: no copy of the features per evaluation
    params = [p for p in model.parameters() if p.requires_grad]
    weights = [p for p in params if p.ndim > 1]
    model.eval()  # deterministic objective: no dropout
    losses: list[float] = []

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        torch.nn.utils.vector_to_parameters(torch.from_numpy(x.astype(np.float32)), params)
        for p in params:
            p.grad = None
        loss = batch_loss(idx) + 0.5 * config.weight_decay * sum((w**2).sum() for w in weights)
        loss.backward()
        losses.append(float(loss.detach()))
        grad = torch.cat([p.grad.reshape(-1) for p in params]).numpy().astype(np.float64)
        return losses[-1], grad

    x0 = torch.nn.utils.parameters_to_vector(params).detach().numpy().astype(np.float64)
    res = minimize(
        objective,
        x0,
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": config.epochs, "maxcor": 20, "gtol": 1e-6, "ftol": 1e-10},
    )
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(torch.from_numpy(res.x.astype(np.float32)), params)
    history = {"train": [losses[0], float(res.fun)], "val": [], "evaluations": [float(len(losses))]}
    if val_loss is not None:
        with torch.no_grad():
            history["val"].append(float(val_loss()))
    return history
