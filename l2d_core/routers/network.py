"""The routers' one torch network: :class:`MLPHead`, ``(B, d) → (B, *out_shape)`` with one
hidden layer (the rejector's head, SPEC §6), or one linear layer. Imported where a head is
trained or its network run: a served router scores with the head's arrays
(:class:`~l2d_core.routers.head.HeadArrays`) and never imports torch.

>>> head = MLPHead(8, (2, 3), hidden=4, dropout=0.0)
>>> tuple(head(torch.zeros(5, 8)).shape)
(5, 2, 3)
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["MLPHead"]


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
