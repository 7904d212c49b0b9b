"""Trained routers on disk, so that a setting fitted before is loaded instead of trained again.

One pure function builds every key (:func:`artifact_key`): the kind of artifact, the
benchmark's ``cache_key`` (:meth:`~l2d_core.evaluation.benchmark.Benchmark.cache_key`) and the estimator's
constructor arguments. Checkpoints are written into a temporary folder and renamed into place,
so a killed run never leaves a half-written one behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict, is_dataclass
from pathlib import Path

import numpy as np

from ..paths import PACKAGED, cache_dir, data_path
from ..stores import open_disk_cache, set_aside

__all__ = [
    "STORE_FORMAT",
    "SHIPPED",
    "estimator_params",
    "artifact_key",
    "is_stored",
    "fitted",
    "cached_fit",
    "recording",
    "memo_arrays",
    "npz_bytes",
    "shipped_file",
]

# what a fresh clone would otherwise compute first on its first view, shipped with the package
# under its content key (``scripts/rank_pools.py --ship``): the built-in pools' validation rankings
# (memos, one ``<key>.npz`` each) and their default routers fitted (one ``<key>/`` folder each)
SHIPPED = PACKAGED + "routers/shipped"
# Part of every key: bump when a fit or a feature changes what an artifact holds.
STORE_FORMAT = 7  # 7: the post-hoc estimator cross-fits K calibrated heads


def _jsonable(v):
    if is_dataclass(v):
        return asdict(v)
    if isinstance(v, tuple | list):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


def estimator_params(est) -> dict:
    """The constructor arguments of an estimator (scikit-learn's ``get_params``), JSON-ready;
    ``progress`` (display only) and ``device`` (where, not what) are left out."""
    return {k: _jsonable(v) for k, v in est.get_params(deep=False).items() if k not in ("progress", "device")}


def artifact_key(kind: str, bench, params: dict, embeddings: bool = True) -> str:
    """The one key of a stored artifact (pure); ``embeddings``: the artifact depends on the
    benchmark's question/context embeddings.

    >>> class B:
    ...     def cache_key(self, embeddings=True): return "abc"
    >>> artifact_key("sdl", B(), {"lr": 0.1}) == artifact_key("sdl", B(), {"lr": 0.1})
    True
    >>> artifact_key("sdl", B(), {"lr": 0.1}) == artifact_key("sdl", B(), {"lr": 0.2})
    False
    """
    doc = json.dumps(
        [STORE_FORMAT, kind, bench.cache_key(embeddings), params], sort_keys=True, default=_jsonable
    )
    return hashlib.sha256(doc.encode()).hexdigest()[:24]


def is_stored(kind: str, bench, est, embeddings: bool = True, **extra) -> bool:
    """Whether :func:`fitted` would load ``est`` from disk (the cache or the package) rather than
    train it."""
    key = artifact_key(kind, bench, {**estimator_params(est), **extra}, embeddings)
    return any((d / "config.json").is_file() for d in _places(key))


def _places(key: str) -> tuple[Path, Path]:
    """Where a fit stored under ``key`` is looked for: the cache, then the package."""
    return cached_fit(key), shipped_file(key, "")


def cached_fit(key: str) -> Path:
    """The folder of the cache where :func:`fitted` stores the fit of ``key``, present or not."""
    return cache_dir() / "routers" / key


def fitted(kind: str, bench, est, fit: Callable[[object], object], load=None, embeddings=True, **extra):
    """``est`` fitted by ``fit(est)``, or loaded from disk when the same fit was stored before: in
    the cache, or shipped with the package under the same key (:func:`shipped_file`).

    ``extra`` joins the key (e.g. a digest of features that are not the benchmark's own);
    ``embeddings=False``: the fit does not read the benchmark's embeddings (the same artifact
    serves a benchmark prepared with or without them); ``load(path)`` rebuilds a stored
    estimator (default ``type(est).load``). Inside :func:`recording` every key is recorded, and
    with ``fresh=True`` nothing stored is read.
    """
    key = artifact_key(kind, bench, {**estimator_params(est), **extra}, embeddings)
    for keys in _RECORDING:
        keys.append(key)
    path = _places(key)[0]
    fresh = any(keys.fresh for keys in _RECORDING)
    for stored in () if fresh else _places(key):
        if (stored / "config.json").is_file():
            try:
                return (load or type(est).load)(stored)
            except Exception as exc:  # a damaged checkpoint (truncated, garbage): train it again
                if stored == path:
                    why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                    set_aside(path, "the trained router", why, "the router is trained again")
    fit(est)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        est.save(tmp)
        if fresh:
            shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)
    except OSError:  # another process stored the same artifact first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return est


class _Keys(list):
    fresh = False


_RECORDING: list[_Keys] = []


@contextlib.contextmanager
def recording(fresh: bool = False) -> Iterator[list[str]]:
    """The keys of the fits :func:`fitted` looks up inside the block, in order; ``fresh``: every
    one is fitted now, nothing stored is read, and what it stores replaces what the cache held
    (what ``scripts/rank_pools.py --ship`` ships of a default router)."""
    keys = _Keys()
    keys.fresh = fresh
    _RECORDING.append(keys)
    try:
        yield keys
    finally:
        _RECORDING.remove(keys)


def memo_arrays(
    kind: str,
    bench,
    est,
    compute: Callable[[], dict[str, np.ndarray]] | None,
    embeddings: bool = True,
) -> dict[str, np.ndarray] | None:
    """``compute()`` — arrays from fitting ``est`` (an estimator, or the dict of everything the
    arrays depend on besides the benchmark) — memoized on disk (``.npz`` bytes, no pickle); a memo
    shipped with the package under the same key (:func:`shipped_file`) is taken instead of
    computing; ``compute=None``: the arrays only when they are on disk already, else None."""
    params = est if isinstance(est, dict) else estimator_params(est)
    key = artifact_key(kind, bench, params, embeddings)
    with open_disk_cache(
        cache_dir() / "router_scores", "the router-score cache", "scores are computed again"
    ) as cache:
        blob = cache.get(key)
        if blob is None and (shipped := shipped_file(key)).is_file():
            blob = cache[key] = shipped.read_bytes()
        if blob is None:
            if compute is None:
                return None
            arrays = compute()
            cache[key] = npz_bytes(arrays)
            return arrays
    with np.load(io.BytesIO(blob), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """``arrays`` as the bytes of an ``.npz`` file (what a memo holds, on disk or shipped)."""
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def shipped_file(key: str, suffix: str = ".npz") -> Path:
    """Where the package ships artifact ``key`` (see :data:`SHIPPED`), present or not: a memo's
    ``.npz``, or (``suffix=""``) a fitted router's folder."""
    return data_path(f"{SHIPPED}/{key}{suffix}")
