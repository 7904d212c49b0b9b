"""Where the project finds its data and writes its caches.

Two settings, each an environment variable with a sensible default:

- ``L2D_DATA_DIR``: the SQuAD files and prediction files (layout of ``shared/data``,
  see ``scripts/download_data.py``). Default: ``../shared/data`` next to the project
  when it exists, else ``data/`` inside the project (where the download script writes).
- ``L2D_CACHE_DIR``: runtime caches (agent predictions, embeddings, checkpoints).
  Default: ``cache/`` inside the project.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["PROJECT_ROOT", "data_dir", "cache_dir", "DataNotFoundError"]

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class DataNotFoundError(FileNotFoundError):
    """A data file the user asked for is not where the tool looks for it."""


def data_dir() -> Path:
    """Directory holding ``squad/`` and ``predictions/``."""
    env = os.environ.get("L2D_DATA_DIR")
    if env:
        return Path(env).expanduser().resolve()
    shared = PROJECT_ROOT.parent / "shared" / "data"
    if shared.is_dir():
        return shared
    return PROJECT_ROOT / "data"


def cache_dir() -> Path:
    """Directory for runtime caches (created on first use)."""
    env = os.environ.get("L2D_CACHE_DIR")
    path = Path(env).expanduser().resolve() if env else PROJECT_ROOT / "cache"
    path.mkdir(parents=True, exist_ok=True)
    return path
