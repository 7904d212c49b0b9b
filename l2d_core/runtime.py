"""Seeds, devices and the learning-rate schedule: one place for each."""

from __future__ import annotations

import math
import os
import random

import numpy as np
import torch

__all__ = ["set_seed", "pick_device", "linear_schedule"]


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def pick_device(device: str | None = None) -> torch.device:
    """``device`` if given, else ``L2D_DEVICE``, else CUDA when present, else CPU."""
    name = device or os.environ.get("L2D_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("CUDA was requested but no CUDA device is available")
    return dev


def linear_schedule(optimizer: torch.optim.Optimizer, total_steps: int, warmup_ratio: float):
    """Linear warm-up over ``warmup_ratio`` of the steps, then linear decay to 0 (transformers'
    schedule, the paper's)."""
    from transformers import get_linear_schedule_with_warmup

    warm = max(1, math.ceil(total_steps * warmup_ratio))
    return get_linear_schedule_with_warmup(optimizer, warm, total_steps)
