"""Measured compute: GFLOPs of a forward pass with torch's FLOP counter."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["count_gflops", "forward_gflops", "shape_gflops"]


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


def shape_gflops(model: torch.nn.Module, n_tokens: int) -> float | None:
    """:func:`forward_gflops` of a model built on torch's ``meta`` device: shapes flow, no arithmetic
    is done (a 270M-parameter LLM counted in under a second instead of seconds of matmuls; the
    counter reads shapes alone, so the figure is the same). Tried with, then without, the attention
    mask (models differ in which they can run without values; a mask adds no counted operation);
    None when neither runs."""
    import torch

    ids = torch.zeros((1, n_tokens), dtype=torch.long, device="meta")
    for extra in ({"attention_mask": torch.ones_like(ids)}, {}):
        try:
            return count_gflops(lambda: model(input_ids=ids, **extra))  # noqa: B023 - called at once
        except (RuntimeError, NotImplementedError, ValueError):
            continue
    return None
