"""What every runnable agent shares: the prediction type, devices and dtypes, model loading,
and FLOP counting with eager attention."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..flops import count_gflops
from ..runtime import cpu_has_fast_bf16, on_model_thread, pick_device, transformers_names

__all__ = [
    "Prediction",
    "ModelLoadError",
    "resolve_dtype",
    "load_pretrained",
    "load_tokenizer",
    "check_windows",
    "eager_attention",
    "LengthCost",
]

DTYPES = {
    "fp32": torch.float32,
    "float32": torch.float32,
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp16": torch.float16,
    "float16": torch.float16,
}


@dataclass
class Prediction:
    """One agent's answer to one question. ``answer``: text ("" = explicit no answer, ``None`` =
    no prediction); ``gflops``: measured (or declared) compute of this query; ``latency_ms``: its
    share of the batch wall time; ``windows``: forward windows (extractive) or 1."""

    qid: str
    answer: str | None
    gflops: float
    latency_ms: float | None
    windows: int = 1
    extra: dict = field(default_factory=dict)


class ModelLoadError(FileNotFoundError):
    """A model path that is neither a loadable local directory nor a reachable hub id."""


def resolve_dtype(dtype, device: torch.device) -> torch.dtype:
    """``None`` (an agent without a ``dtype`` option): bf16 on a CPU that computes bf16 natively
    (:func:`~l2d_core.runtime.cpu_has_fast_bf16`: on such a CPU a small QA model answers about
    twice as fast, and ``scripts/bench_serve.py --precision`` measures what that does to its
    EM/F1), fp32 elsewhere: emulated bf16 is slower than fp32, and on CUDA a MiniLM-sized QA model
    is bound by kernel launches, not arithmetic (timed on an H100 and an H200, bf16 was slower
    than fp32 at batch 8 in every run and no faster at batch 1 in most). Strings:
    ``fp32``/``bf16``/``fp16`` (or the torch names) force one; fp16 is refused on the CPU.

    >>> resolve_dtype("fp32", torch.device("cpu")), resolve_dtype("bf16", torch.device("cpu"))
    (torch.float32, torch.bfloat16)
    >>> resolve_dtype(None, torch.device("cpu")) == (torch.bfloat16 if cpu_has_fast_bf16() else torch.float32)
    True
    """
    if dtype is None:
        if device.type == "cpu":
            return torch.bfloat16 if cpu_has_fast_bf16() else torch.float32
        return torch.float32
    d = DTYPES.get(dtype.lower()) if isinstance(dtype, str) else dtype
    if d not in DTYPES.values():
        raise ValueError(f"unknown dtype {dtype!r}; use one of fp32, bf16, fp16")
    if d == torch.float16 and device.type == "cpu":
        raise ValueError("fp16 is not supported on the CPU: use fp32 or bf16")
    return d


def check_windows(tok, max_length: int = 32, stride: int = 8) -> None:
    """Raise :class:`ModelLoadError` when ``tok`` cuts a long (question, context) pair into
    overflow windows that stop before the context's end. tokenizers 0.23.2 does: it returns two
    windows whatever the length, so every answer past them is lost without a word (training,
    answering and the time estimate all read these windows)."""
    context = "x " * (4 * max_length)
    enc = tok(
        ["q"],
        [context],
        truncation="only_second",
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )
    spans = (zip(enc["offset_mapping"][w], enc.sequence_ids(w)) for w in range(len(enc["input_ids"])))
    reached = max((o[1] for window in spans for o, s in window if s == 1), default=0)
    if reached < len(context.rstrip()):
        import tokenizers

        raise ModelLoadError(
            f"this tokenizer's windows stop at character {reached} of a {len(context.rstrip())}-character "
            f"context (tokenizers {tokenizers.__version__} drops the end of long contexts): "
            "pip install tokenizers==0.23.3"
        )


def load_tokenizer(path: str, **kwargs):
    """A fast tokenizer from ``path`` whose overflow windows cover a long context
    (:func:`check_windows`); slow tokenizers have no windows to check."""
    (AutoTokenizer,) = transformers_names("AutoTokenizer")

    tok = AutoTokenizer.from_pretrained(path, **kwargs)
    if getattr(tok, "is_fast", False):
        check_windows(tok)
    return tok


def load_pretrained(model_cls, path: str, device=None, dtype=None, **tokenizer_kwargs):
    """(tokenizer, model in eval mode on ``device``, device) from a local directory or hub id.

    A path that cannot be loaded raises :class:`ModelLoadError` with a one-line message.
    """
    (AutoTokenizer,) = transformers_names("AutoTokenizer")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if not path:
        raise ValueError("a runnable agent needs a model path or hub id")
    dev = pick_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    try:
        tok = AutoTokenizer.from_pretrained(path, **tokenizer_kwargs)
        model = model_cls.from_pretrained(path, dtype=torch_dtype)
    except (OSError, ValueError) as exc:
        local = Path(path).expanduser().exists()
        where = "a local directory" if local else "no such local directory; tried as a hub id"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelLoadError(f"could not load the model at {path!r} ({where}): {first}") from None
    return tok, model.to(dev).eval(), dev


@contextmanager
def eager_attention(model) -> Iterator[None]:
    """Run the block with eager attention (torch's FLOP counter undercounts fused SDPA kernels),
    then restore the model's own implementation."""
    config = getattr(model, "config", None)
    before = getattr(config, "_attn_implementation", "eager")
    switch = before != "eager" and hasattr(model, "set_attn_implementation")
    if switch:
        model.set_attn_implementation("eager")
    try:
        yield
    finally:
        if switch:
            model.set_attn_implementation(before)


class LengthCost:
    """GFLOPs of a model call as a function of a length ``n``, counted by torch's FLOP counter
    with eager attention. ``prepare(n)`` does any uncounted set-up and returns the call to count.

    A transformer's count is a polynomial in the length: projections and MLPs grow linearly,
    the attention products quadratically (``degree`` 2 for a forward over ``n`` tokens, 1 for a
    decoding step over a cache of ``n``). So ``degree + 1`` counts at lengths up to ``upto``
    fix every length up to ``upto``, and one more count at ``upto`` checks it. A model that
    fails the check, and every length above ``upto``, is counted at that length (memoized).
    """

    def __init__(self, model, prepare, upto: int, degree: int = 2):
        self.model, self.prepare, self.upto, self.degree = model, prepare, int(upto), degree
        self.counted: dict[int, float] = {}
        self._poly: np.ndarray | None = None
        self._exact: bool | None = None  # None: not checked yet

    def count(self, n: int) -> float:
        """Counted (not interpolated) GFLOPs at length ``n``, memoized."""
        if n not in self.counted:  # on the model thread: no forward runs while attention is switched
            self.counted[n] = on_model_thread(self._count, n)
        return self.counted[n]

    def _count(self, n: int) -> float:
        with eager_attention(self.model):
            return count_gflops(self.prepare(n))

    def _fit(self) -> None:
        points = sorted({max(1, self.upto * k // (self.degree + 2)) for k in range(1, self.degree + 2)})
        self._exact = False
        if len(points) == self.degree + 1 and points[-1] < self.upto:
            self._poly = np.polyfit(points, [self.count(p) for p in points], self.degree)
            want = self.count(self.upto)
            self._exact = abs(float(np.polyval(self._poly, self.upto)) - want) <= 1e-6 * max(want, 1e-9)

    def __call__(self, n: int) -> float:
        n = int(n)
        if n in self.counted:
            return self.counted[n]
        if self._exact is None:
            self._fit()
        if self._exact and n <= self.upto:
            return float(np.polyval(self._poly, n))
        return self.count(n)
