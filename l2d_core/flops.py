"""Measured compute: GFLOPs of a forward pass with torch's FLOP counter."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["count_gflops", "forward_gflops"]


def count_gflops(fn: Callable[[], object]) -> float:
    """GFLOPs that ``fn()`` executes (matmuls, convolutions, attention), counted by torch.

    Count with eager attention: the fused SDPA kernels are undercounted.
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops() / 1e9


def forward_gflops(model: torch.nn.Module, n_tokens: int, token_id: int = 0, device=None) -> float:
    """GFLOPs of one forward pass of a Hugging Face model on ``n_tokens`` tokens (batch of 1)."""
    import torch

    ids = torch.full((1, n_tokens), token_id, dtype=torch.long, device=device)
    mask = torch.ones_like(ids)
    return count_gflops(lambda: model(input_ids=ids, attention_mask=mask))
