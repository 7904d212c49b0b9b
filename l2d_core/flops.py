"""Measured compute: GFLOPs of a forward pass with torch's FLOP counter."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

__all__ = ["count_gflops"]


def count_gflops(fn: Callable[[], object]) -> float:
    """GFLOPs that ``fn()`` executes (matmuls, convolutions, attention), counted by torch.

    Count with eager attention: the fused SDPA kernels are undercounted.
    """
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops() / 1e9
