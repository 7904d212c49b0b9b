"""Seeds and devices: one place for both."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["set_seed", "pick_device"]


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
