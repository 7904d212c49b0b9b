"""The routers' torch networks: :class:`MLPHead`, ``(B, d) → (B, *out_shape)`` with one hidden
layer (the rejector's head, SPEC §6), or one linear layer; and :class:`PairModel`, the encoder
with that head on its pooled output (the rejector fine-tuned end to end, ``l2d-sdl-full``).
Imported where a head is trained or its network run: a served router scores with the head's
arrays (:class:`~l2d_core.routers.head.HeadArrays`) and never imports torch.

>>> head = MLPHead(8, (2, 3), hidden=4, dropout=0.0)
>>> tuple(head(torch.zeros(5, 8)).shape)
(5, 2, 3)
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

__all__ = ["Dropout", "MLPHead", "PairModel"]


class Dropout(nn.Module):
    """``nn.Dropout`` (each input zeroed with chance ``p`` in training, the rest scaled by 1/(1 − p))
    whose mask on a CPU comes from NumPy's PCG64: 32 random bits an input, kept where they are at
    least p·2³². Torch's CPU ``bernoulli_`` was the slowest step of an embedding head's training
    (``scripts/bench_fit.py`` times it). The bits are seeded from torch's global generator at the
    first draw, so ``set_seed`` fixes them; on a GPU torch draws the mask.

    >>> d = Dropout(0.5).train()
    >>> _ = torch.manual_seed(0)
    >>> y = d(torch.ones(1000))
    >>> sorted(set(y.tolist())), 400 < int((y == 0).sum()) < 600
    ([0.0, 2.0], True)
    """

    def __init__(self, p: float):
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {p!r}")
        self.p = float(p)
        self.kept_from = np.uint32(round(self.p * 2**32))  # draws at or above it keep their input
        self.bits: np.random.PCG64 | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return nn.functional.dropout(x, self.p, True)
        if self.bits is None:
            self.bits = np.random.PCG64(int(torch.randint(0, 2**62, ())))
        n = x.numel()
        draws = self.bits.random_raw((n + 1) // 2).view(np.uint32)[:n]
        scale = (draws >= self.kept_from).astype(np.float32)
        scale *= np.float32(1.0 / (1.0 - self.p))
        return x * torch.from_numpy(scale.reshape(x.shape)).to(x.dtype)  # (x's dtype kept, as torch's)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class MLPHead(nn.Module):
    """(B, d) → (B, *out_shape): dropout, a hidden GELU layer, dropout, one linear output;
    ``hidden=0``: one linear layer (a classification head)."""

    def __init__(self, in_dim: int, out_shape: tuple[int, ...], hidden: int = 256, dropout: float = 0.1):
        super().__init__()
        self.out_shape = tuple(int(s) for s in out_shape)
        out = math.prod(self.out_shape)
        layers = [Dropout(dropout), nn.Linear(in_dim, hidden), nn.GELU(), Dropout(dropout)] if hidden else []
        self.net = nn.Sequential(*layers, nn.Linear(hidden or in_dim, out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).view(-1, *self.out_shape)


class PairModel(nn.Module):
    """A question/context pair → (B, 2, A): the encoder's pooled output through an :class:`MLPHead`."""

    def __init__(self, encoder, n_agents: int, hidden: int, dropout: float):
        super().__init__()
        self.encoder = encoder.model
        self.pooling = encoder.pooling
        self.head = MLPHead(encoder.dim, (2, n_agents), hidden, dropout)

    def forward(self, **enc) -> torch.Tensor:
        from .encoder import pool

        h = self.encoder(**enc).last_hidden_state
        return self.head(pool(h, enc["attention_mask"], self.pooling))
