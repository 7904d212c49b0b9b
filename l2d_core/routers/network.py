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

import torch
from torch import nn

__all__ = ["MLPHead", "PairModel"]


class MLPHead(nn.Module):
    """(B, d) → (B, *out_shape): dropout, a hidden GELU layer, dropout, one linear output;
    ``hidden=0``: one linear layer (a classification head)."""

    def __init__(self, in_dim: int, out_shape: tuple[int, ...], hidden: int = 256, dropout: float = 0.1):
        super().__init__()
        self.out_shape = tuple(int(s) for s in out_shape)
        out = math.prod(self.out_shape)
        layers = (
            [nn.Dropout(dropout), nn.Linear(in_dim, hidden), nn.GELU(), nn.Dropout(dropout)] if hidden else []
        )
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
