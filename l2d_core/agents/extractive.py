"""An extractive QA agent: any Hugging Face ``AutoModelForQuestionAnswering``.

Long contexts are cut into windows of ``max_length`` tokens that overlap by ``stride`` tokens
(the tokenizer's ``return_overflowing_tokens``, as in Hugging Face's ``run_qa``). Every span
``start <= end < start + max_answer_tokens`` inside the context of any window competes by
start + end logit; the winner is mapped back to context characters with the offsets. With
``null_answer`` (SQuAD v2.0) the null score — the [CLS] start + end logit, minimum over the
question's windows as in ``run_qa`` — wins when the best span's score exceeds it by less than
``null_threshold`` (0, or what a training run calibrated on held-out questions): the answer is "".

Confidence (SPEC §5, what a cascade router reads), recorded with every answer: the probability
of the chosen span under a softmax of start + end logits over every valid span of its window
(``span_prob``), that window's top start and end logits, the margin of the chosen span's score
over the second-best span's, the number of windows, and — when the null score competes — the
margin of the best span over the null score (``null_margin``; negative: "no answer" won).

Cost: the GFLOPs of a question are the sum over its windows of one forward pass at the
window's own token length (batch of 1, eager attention, torch's FLOP counter; see
:class:`~l2d_core.agents.base.LengthCost`: four counted forwards fix every length up to
``max_length`` exactly). Latency: the wall time of the whole ``predict`` call (tokenize, forwards,
span search) shared among its questions in proportion to their windows.

Shapes: a forward batch is padded (masked) to a length that is a multiple of ``pad_to`` — 32 on a
CPU in bf16 or fp16, 8 elsewhere. A low-precision CPU forward runs oneDNN kernels built for each
input shape on first sight (milliseconds each, and more shapes than its cache holds when every
length is its own); padding leaves a dozen lengths, which :meth:`ExtractiveAgent.warm_up` builds
before a server's first query. The answers are those of a forward at the window's own length up to
rounding (masked positions are not attended to); costs stay counted at that length.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ..data.records import QARecord
from ..runtime import on_model_thread, transformers_names
from .base import LengthCost, Prediction, check_windows, load_pretrained

__all__ = ["ExtractiveAgent"]


class ExtractiveAgent:
    """``predict(records) -> [Prediction]`` with a QA model loaded from ``path`` (local or hub id)."""

    kind = "extractive"

    def __init__(
        self,
        path: str,
        *,
        device=None,
        dtype=None,
        batch_size: int = 32,
        max_length: int = 384,
        stride: int = 128,
        max_answer_tokens: int = 30,
        null_answer: bool = False,
        null_threshold: float = 0.0,
    ):
        (AutoModelForQuestionAnswering,) = transformers_names("AutoModelForQuestionAnswering")

        if batch_size < 1 or max_answer_tokens < 1:
            raise ValueError("batch_size and max_answer_tokens must be >= 1")
        if not 0 <= stride < max_length:
            raise ValueError(f"stride must lie in [0, max_length={max_length}), got {stride}")
        self.path, self.batch_size, self.max_length, self.stride = path, batch_size, max_length, stride
        self.max_answer_tokens, self.null_answer = max_answer_tokens, null_answer
        self.null_threshold = float(null_threshold)
        self.tokenizer, self.model, self.device = load_pretrained(
            AutoModelForQuestionAnswering, path, device, dtype
        )
        if not getattr(self.tokenizer, "is_fast", False):
            raise ValueError(f"{path}: the extractive agent needs a fast tokenizer (character offsets)")
        check_windows(self.tokenizer)
        self.source = f"extractive:{path}"
        low = self.device.type == "cpu" and self.model.dtype in (torch.bfloat16, torch.float16)
        self.pad_to = 32 if low else 8
        self._gflops = LengthCost(self.model, self._forward_at, upto=max_length)

    def _forward_at(self, n: int):
        ids = torch.full((1, n), self.tokenizer.unk_token_id or 0, dtype=torch.long, device=self.device)
        return lambda: self.model(input_ids=ids, attention_mask=torch.ones_like(ids))

    def warm_up(self) -> None:
        """Run one forward at every padded length up to ``max_length`` (batch of 1), so no query
        waits for a kernel built for its shape."""

        def forwards():
            for n in range(self.pad_to, self.max_length + self.pad_to, self.pad_to):
                with torch.inference_mode():
                    self._forward_at(min(n, self.max_length))()

        on_model_thread(forwards)

    def gflops_at(self, n_tokens: int) -> float:
        """GFLOPs of one forward pass (batch of 1) at ``n_tokens``, from torch's FLOP counter."""
        return self._gflops(int(n_tokens))

    # --- windows ---------------------------------------------------------------------------
    def _encode(self, records: Sequence[QARecord]):
        """Tokenized windows of every record; ValueError when one cannot be windowed."""
        right = self.tokenizer.padding_side == "right"  # question first, as in run_qa
        qs = [r.question.lstrip() for r in records]
        cs = [r.context for r in records]
        kw = dict(
            truncation="only_second" if right else "only_first",
            max_length=self.max_length,
            stride=self.stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
        )
        try:
            return self.tokenizer(qs, cs, **kw) if right else self.tokenizer(cs, qs, **kw)
        except Exception as exc:  # the tokenizers library raises bare Exceptions
            raise ValueError(
                f"could not cut the context into {self.max_length}-token windows with stride "
                f"{self.stride} (question too long?): {str(exc).splitlines()[0]}"
            ) from None

    def _windows(self, records: Sequence[QARecord]) -> tuple[list[dict], dict[int, str]]:
        """One dict per window (ids, context mask, offsets, owner); errors per record index."""
        try:
            groups = [(list(range(len(records))), self._encode(records))]
            errors: dict[int, str] = {}
        except ValueError:  # find the culprits: encode one record at a time
            groups, errors = [], {}
            for i, r in enumerate(records):
                try:
                    groups.append(([i], self._encode([r])))
                except ValueError as exc:
                    errors[i] = str(exc)
        ctx_id = 1 if self.tokenizer.padding_side == "right" else 0
        cls_id = self.tokenizer.cls_token_id
        keys = (
            [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in groups[0][1]]
            if groups
            else []
        )
        windows = []
        for owners, enc in groups:
            for w, sample in enumerate(enc["overflow_to_sample_mapping"]):
                ids = enc["input_ids"][w]
                windows.append(
                    {
                        "owner": owners[sample],
                        "inputs": {k: enc[k][w] for k in keys},
                        "context": np.array([s == ctx_id for s in enc.sequence_ids(w)]),  # (T,)
                        "offsets": enc["offset_mapping"][w],
                        "cls": ids.index(cls_id) if cls_id is not None and cls_id in ids else 0,
                    }
                )
        return windows, errors

    # --- forward + span search --------------------------------------------------------------
    def _best_spans(self, batch: list[dict]) -> list[tuple[float, int, int, float, dict]]:
        """(best span score, start, end, null score, confidence) per window of one forward batch."""
        n = [len(w["context"]) for w in batch]
        B, longest = len(batch), max(n)  # at most max_length: padded to a multiple of pad_to within it
        T = max(longest, min(-(-longest // self.pad_to) * self.pad_to, self.max_length))
        left = self.tokenizer.padding_side == "left"
        pad = self.tokenizer.pad_token_id or 0
        inputs = {
            k: torch.full((B, T), pad if k == "input_ids" else 0, dtype=torch.long)
            for k in batch[0]["inputs"]
        }
        ctx = torch.zeros(B, T, dtype=torch.bool)
        shift = [T - k if left else 0 for k in n]
        for b, w in enumerate(batch):
            sl = slice(shift[b], shift[b] + n[b])
            for k, v in w["inputs"].items():
                inputs[k][b, sl] = torch.tensor(v)
            ctx[b, sl] = torch.from_numpy(w["context"])
        with torch.inference_mode():
            out = self.model(**{k: v.to(self.device) for k, v in inputs.items()})
        start, end = out.start_logits.float(), out.end_logits.float()  # (B, T)
        ctx = ctx.to(start.device)
        t = torch.arange(T, device=start.device)
        band = (t[None, :] >= t[:, None]) & (t[None, :] - t[:, None] < self.max_answer_tokens)  # (T, T)
        valid = band[None] & ctx[:, :, None] & ctx[:, None, :]  # (B, T, T)
        scores = (start[:, :, None] + end[:, None, :]).masked_fill(~valid, float("-inf"))
        top, flat = scores.view(B, -1).topk(2, dim=1)  # (B, 2): best and second-best span
        best, flat = top[:, 0], flat[:, 0]
        cls = torch.tensor([w["cls"] + s for w, s in zip(batch, shift)], device=start.device)
        null = start.gather(1, cls[:, None])[:, 0] + end.gather(1, cls[:, None])[:, 0]  # (B,)
        span_prob = torch.exp(best - torch.logsumexp(scores.view(B, -1), dim=1))  # (B,)
        margin = (best - top[:, 1]).nan_to_num(posinf=1e4)  # one valid span: a large margin
        top_start = start.masked_fill(~ctx, float("-inf")).max(dim=1).values
        top_end = end.masked_fill(~ctx, float("-inf")).max(dim=1).values
        conf = [
            {"span_prob": p, "start_logit": s, "end_logit": e, "margin": m}
            for p, s, e, m in zip(span_prob.tolist(), top_start.tolist(), top_end.tolist(), margin.tolist())
        ]
        best, flat, null = best.tolist(), flat.tolist(), null.tolist()
        return [
            (best[b], flat[b] // T - shift[b], flat[b] % T - shift[b], null[b], conf[b]) for b in range(B)
        ]

    def predict(self, records: Sequence[QARecord], progress: bool = False) -> list[Prediction]:
        """Answer every record (see the module docstring for the rules, cost and latency)."""
        records = list(records)
        if not records:
            return []
        t0 = time.perf_counter()
        windows, errors = self._windows(records)
        order = sorted(range(len(windows)), key=lambda i: len(windows[i]["context"]))  # less padding
        results: list = [None] * len(windows)
        bar = tqdm(total=len(windows), unit="window", desc="windows", disable=not progress, leave=False)
        for i in range(0, len(order), self.batch_size):
            idx = order[i : i + self.batch_size]
            for j, r in zip(idx, on_model_thread(self._best_spans, [windows[j] for j in idx])):
                results[j] = r
            bar.update(len(idx))
        bar.close()
        wall_ms = 1000.0 * (time.perf_counter() - t0)

        per_q: dict[int, list[int]] = {}
        for j, w in enumerate(windows):
            per_q.setdefault(w["owner"], []).append(j)
        preds = []
        for i, r in enumerate(records):
            js = per_q.get(i, [])
            latency = wall_ms * len(js) / len(windows) if windows else 0.0
            if not js:
                preds.append(Prediction(r.qid, None, 0.0, latency, 0, {"error": errors.get(i, "no window")}))
                continue
            j = max(js, key=lambda k: results[k][0])
            score, s, e, _, conf = results[j]
            null = min(results[k][3] for k in js)
            c0, c1 = windows[j]["offsets"][s][0], windows[j]["offsets"][e][1]
            no_answer = self.null_answer and score - null < self.null_threshold
            confidence = {**conf, "windows": len(js)}
            if self.null_answer:
                confidence["null_margin"] = score - null
            extra = {"score": score, "null_score": null, "window": js.index(j), "confidence": confidence}
            extra["span"] = r.context[c0:c1]  # the best span, also where "no answer" won
            if not no_answer:
                extra.update(char_start=c0, char_end=c1)
            gflops = sum(self.gflops_at(len(windows[k]["context"])) for k in js)
            preds.append(
                Prediction(r.qid, "" if no_answer else r.context[c0:c1], gflops, latency, len(js), extra)
            )
        return preds
