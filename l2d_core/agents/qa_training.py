"""Fine-tune a Hugging Face encoder for extractive QA (the project's own live agent).

The recipe of Hugging Face's ``run_qa.py``, kept small: 384-token windows with stride 128
(windows that do not contain the answer point at [CLS]), cross-entropy on start and end
positions, AdamW with linear warm-up and decay, windows grouped by length so batches carry
little padding, bf16 autocast on CUDA and on CPUs that compute bf16 natively (elsewhere fp32:
emulated bf16 is several times slower). A checkpoint is a
``save_pretrained`` directory (weights, tokenizer) plus ``l2d_training.json`` holding the
config, the training articles and the measured time — it carries its own provenance.

Cross-fitting (:func:`crossfit_folds`): the training articles are cut into k folds; the model
for fold f never sees fold f's articles, so every cached prediction on a training article
comes from a model that never saw that article.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from ..data.records import QARecord
from ..runtime import cpu_has_fast_bf16, linear_schedule, pick_device, set_seed, transformers_names
from .base import load_tokenizer
from .profiles import QATrainConfig

__all__ = [
    "QATrainConfig",
    "crossfit_folds",
    "train_features",
    "train_qa_model",
    "time_training_step",
    "training_batches",
    "is_trained",
    "MARKER",
]

DEFAULT_CONFIG = QATrainConfig()
MARKER = "l2d_training.json"  # written last: its presence means the checkpoint is complete


def crossfit_folds(titles: Sequence[str], k: int, seed: int = 0) -> list[tuple[str, ...]]:
    """Cut article titles into ``k`` folds of nearly equal size (seeded shuffle).

    >>> folds = crossfit_folds([f"a{i}" for i in range(7)], 3)
    >>> [len(f) for f in folds], sorted(sum(folds, ()))  == [f"a{i}" for i in range(7)]
    ([3, 2, 2], True)
    """
    titles = sorted(set(titles))
    if k < 2 or k > len(titles):
        raise ValueError(f"cross-fitting needs 2 <= k <= {len(titles)} articles, got k={k}")
    random.Random(seed).shuffle(titles)
    return [tuple(titles[f::k]) for f in range(k)]


def _answer_chars(r: QARecord) -> tuple[int, int] | None:
    """Character span of ``r``'s first gold answer in its context (None: none, or not found)."""
    if not r.answers or not r.answers[0]:
        return None
    answer = r.answers[0]
    c0 = r.answer_starts[0] if r.answer_starts and r.answer_starts[0] is not None else r.context.find(answer)
    if c0 < 0:  # the same letters in another case (searched in the context itself: offsets stay true)
        found = re.search(re.escape(answer), r.context, re.IGNORECASE)
        c0 = found.start() if found else -1
    return None if c0 < 0 else (c0, c0 + len(answer))


def train_features(tokenizer, records: Sequence[QARecord], max_length: int, stride: int) -> dict:
    """Windows of ``records`` with start/end token labels, as lists (one entry per window).

    The first gold answer is the label, at its offset or, where the source gives none (the derived
    SQuAD v2.0 file), at its first occurrence in the context; a window that does not contain it
    whole is labelled (0, 0), i.e. [CLS]. Unanswerable records (SQuAD v2.0) get (0, 0), and so
    does an answer that does not occur in its context.
    """
    enc = tokenizer(
        [r.question.lstrip() for r in records],
        [r.context for r in records],
        truncation="only_second",
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )
    starts, ends = [], []
    for w, offsets in enumerate(enc["offset_mapping"]):
        r = records[enc["overflow_to_sample_mapping"][w]]
        seq = enc.sequence_ids(w)
        s = e = 0
        span = _answer_chars(r)
        if span is not None:
            c0, c1 = span
            ctx = [t for t, sid in enumerate(seq) if sid == 1]
            if ctx and offsets[ctx[0]][0] <= c0 and offsets[ctx[-1]][1] >= c1:
                s = next(t for t in ctx if offsets[t][1] > c0)
                e = next(t for t in reversed(ctx) if offsets[t][0] < c1)
        starts.append(s)
        ends.append(e)
    return {
        "input_ids": enc["input_ids"],
        "token_type_ids": enc.get("token_type_ids"),
        "start": starts,
        "end": ends,
    }


def _length_grouped_batches(lengths: Sequence[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Shuffled batches of similar length: shuffle, sort within chunks of 50 batches, shuffle batches."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    chunk = 50 * batch_size
    batches = []
    for i in range(0, len(order), chunk):
        part = sorted(order[i : i + chunk], key=lambda j: lengths[j])
        batches += [part[k : k + batch_size] for k in range(0, len(part), batch_size)]
    rng.shuffle(batches)
    return batches


def _collate(collator, feats: dict, idx: list[int], device) -> dict:
    """One batch of windows, padded by ``collator`` (transformers' ``DataCollatorWithPadding``
    with ``pad_to_multiple_of=32``: few distinct shapes keep the CPU kernels' caches and the
    allocator from growing with every new length)."""
    rows = []
    for j in idx:
        row = {
            "input_ids": feats["input_ids"][j],
            "start_positions": feats["start"][j],
            "end_positions": feats["end"][j],
        }
        if feats["token_type_ids"] is not None:
            row["token_type_ids"] = feats["token_type_ids"][j]
        rows.append(row)
    return {k: v.to(device) for k, v in collator(rows).items()}


def is_trained(out_dir: str | Path) -> bool:
    """A complete checkpoint: weights saved and the provenance marker written after them."""
    return (Path(out_dir) / MARKER).is_file()


_clock = time.perf_counter  # the timer of :func:`time_training_step` (a test may replace it)


def training_batches(
    lengths: Sequence[int], batch_size: int, epochs: int, seed: int = 0
) -> list[tuple[int, int]]:
    """(windows, padded tokens) of every step :func:`train_qa_model` takes on windows of these
    token ``lengths``: the same length-grouped batches in the same seeded order, each padded to a
    multiple of 32 tokens as its collator pads them — what an estimate of its time is made from."""
    rng = random.Random(seed)
    return [
        (len(idx), -(-max(lengths[j] for j in idx) // 32) * 32)
        for _ in range(epochs)
        for idx in _length_grouped_batches(lengths, batch_size, rng)
    ]


def time_training_step(
    config: QATrainConfig = DEFAULT_CONFIG,
    device: str | None = None,
    batch: int = 4,
    tokens: int = 192,
    forward_batch: int = 32,
    forward_tokens: int = 192,
    repeats: int = 5,
) -> dict:
    """How long the base model of ``config`` takes on ``device`` here, in seconds: ``load_s``
    (loading it), then after one warm-up step each, ``repeats`` training steps on ``batch``
    windows of ``tokens`` tokens (``train_step_s``: forward, backward, gradient clipping, AdamW;
    ``optimizer_s``: the clipping and AdamW part of each, which does not grow with the batch) and
    ``repeats`` forward passes without gradients on ``forward_batch`` windows of
    ``forward_tokens`` tokens (``forward_s``, as the trained model answers; none when
    ``forward_batch`` is 0). Lists, one entry per timed step: an estimate takes their median. The
    windows carry some padding, as real batches do."""
    (AutoModelForQuestionAnswering,) = transformers_names("AutoModelForQuestionAnswering")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    dev = pick_device(device)
    bf16 = config.bf16 if config.bf16 is not None else (dev.type == "cuda" or cpu_has_fast_bf16())
    t0 = _clock()
    model = AutoModelForQuestionAnswering.from_pretrained(config.base_path()).to(dev)
    load_s = _clock() - t0
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    vocab = model.config.vocab_size

    def windows(n: int, length: int) -> dict:
        mask = torch.ones(n, length, dtype=torch.long)
        mask[: n // 2, length - length // 8 :] = 0  # the shorter windows of a batch, padded
        ids = torch.randint(min(1000, vocab - 1), vocab, (n, length))
        return {"input_ids": ids.to(dev), "attention_mask": mask.to(dev)}

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize()

    def train_step() -> tuple[float, float]:
        inputs = windows(batch, tokens)
        pos = torch.randint(0, tokens // 2, (batch,), device=dev)
        t0 = _clock()
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            loss = model.train()(**inputs, start_positions=pos, end_positions=pos).loss
        loss.backward()
        sync()
        t1 = _clock()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        t2 = _clock()
        return t2 - t0, t2 - t1

    def forward() -> float:
        inputs = windows(forward_batch, forward_tokens)
        t0 = _clock()
        with torch.inference_mode(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            model.eval()(**inputs)
        sync()
        return _clock() - t0

    train_step()  # warm-ups: first-call allocations
    steps = [train_step() for _ in range(repeats)]
    if forward_batch:
        forward()
    return {
        "load_s": load_s,
        "train_step_s": [s for s, _ in steps],
        "optimizer_s": [o for _, o in steps],
        "forward_s": [forward() for _ in range(repeats if forward_batch else 0)],
        "batch": batch,
        "tokens": tokens,
        "forward_batch": forward_batch,
        "forward_tokens": forward_tokens,
        "device": str(dev),
        "torch_threads": torch.get_num_threads(),
    }


def train_qa_model(
    records: Sequence[QARecord],
    out_dir: str | Path,
    config: QATrainConfig = DEFAULT_CONFIG,
    device: str | None = None,
    progress: bool = True,
    meta: dict | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> dict:
    """Fine-tune ``config.base`` on ``records`` and save it to ``out_dir``; returns the stats
    written to ``out_dir/l2d_training.json`` (config, windows, steps, seconds, final loss).
    ``on_step(done, total)`` hears of every step (and of step 0 before the first)."""
    AutoModelForQuestionAnswering, DataCollatorWithPadding = transformers_names(
        "AutoModelForQuestionAnswering", "DataCollatorWithPadding"
    )
    from transformers.utils import logging as hf_logging

    if not records:
        raise ValueError("no training questions: the training split is empty")
    hf_logging.set_verbosity_error()
    set_seed(config.seed)
    dev = pick_device(device)
    bf16 = config.bf16 if config.bf16 is not None else (dev.type == "cuda" or cpu_has_fast_bf16())
    tok = load_tokenizer(config.base_path())
    if not getattr(tok, "is_fast", False):
        raise ValueError(f"{config.base_path()}: training needs a fast tokenizer (character offsets)")
    model = AutoModelForQuestionAnswering.from_pretrained(config.base_path()).to(dev).train()
    feats = train_features(tok, records, config.max_length, config.stride)
    lengths = [len(x) for x in feats["input_ids"]]
    rng = random.Random(config.seed)
    steps_per_epoch = math.ceil(len(lengths) / config.batch_size)
    total = steps_per_epoch * config.epochs
    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight")
    groups = [
        {
            "params": [p for n, p in model.named_parameters() if not n.endswith(no_decay)],
            "weight_decay": config.weight_decay,
        },
        {"params": [p for n, p in model.named_parameters() if n.endswith(no_decay)], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=config.lr)
    sched = linear_schedule(opt, total, config.warmup_ratio)
    collator = DataCollatorWithPadding(tok, pad_to_multiple_of=32, return_tensors="pt")
    t0 = time.perf_counter()
    losses: list[float] = []
    bar = tqdm(total=total, desc=f"train {Path(out_dir).name}", unit="step", disable=not progress)
    report = on_step or (lambda done, total: None)
    report(0, total)
    for _ in range(config.epochs):
        for idx in _length_grouped_batches(lengths, config.batch_size, rng):
            batch = _collate(collator, feats, idx, dev)
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
                loss = model(**batch).loss  # mean of start and end cross-entropy
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()))
            bar.update(1)
            bar.set_postfix(loss=f"{np.mean(losses[-50:]):.3f}")
            report(len(losses), total)
    bar.close()
    seconds = time.perf_counter() - t0
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).unlink(missing_ok=True)
    model.eval().save_pretrained(out)
    tok.save_pretrained(out)
    stats = {
        "config": asdict(config) | {"base": config.base_path()},
        "device": str(dev),
        "torch_threads": torch.get_num_threads(),
        "questions": len(records),
        "windows": len(lengths),
        "steps": total,
        "seconds": round(seconds, 1),
        "final_loss": float(np.mean(losses[-50:])),
        **(meta or {}),
    }
    (out / MARKER).write_text(json.dumps(stats, indent=1), encoding="utf-8")  # last: completes it
    return stats
