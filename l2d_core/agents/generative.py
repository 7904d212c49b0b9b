"""A few-shot generative agent: any Hugging Face ``AutoModelForCausalLM`` prompted with the
paper's four demonstrations (appendix "Few-Shot Demonstrations"; ``?`` means no answer).

Decoding is greedy, at most ``max_new_tokens`` new tokens, stopping at the first newline (or
end of sequence); prompts are batched with left padding. The output line is cut at its closing
quote; ``?`` or nothing means no answer (""). The text is then located in the context by the
SPEC §2 rule when it is scored (not found: both positions wrong — the run summary counts them).

Cost of a query, counted by torch's FLOP counter with eager attention, batch of 1 (padding
and the batch-mates' longer generations are not charged to a query):

- prefill: one forward over the prompt's ``L`` tokens with logits for the last position only
  (what ``generate`` runs);
- decoding: the ``n`` generated tokens cost ``n - 1`` more forwards, each of one token over a
  KV cache; step ``k`` attends to ``L + k`` positions.

Both are functions of a length that torch's counter fixes exactly from a few counted calls
(quadratic for the prefill, affine for a step; checked, see
:class:`~l2d_core.agents.base.LengthCost`); longer inputs are counted at their own length.

``gflops_at(L)`` (the figure the paper's table reports at L = 384) is the prefill at ``L``.

Confidence (SPEC §5, what a cascade router reads), recorded with every answer: the mean and
the minimum log-probability of the generated tokens (up to the newline) under the model, and
whether it abstained (answered ``?`` or nothing).
Latency: the wall time of a generate batch divided by its size.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Sequence

import torch
from tqdm.auto import tqdm

from ..data.records import QARecord
from ..runtime import on_model_thread, transformers_names
from .base import LengthCost, Prediction, load_pretrained

__all__ = ["GenerativeAgent", "FEW_SHOT", "build_prompt", "parse_output"]

# (context, question, output): the paper's appendix, verbatim
FEW_SHOT = (
    ("The Eiffel Tower is located in Paris, France.", "Where is the Eiffel Tower?", "Paris, France"),
    (
        "Albert Einstein developed the theory of relativity in the early 20th century.",
        "What did Albert Einstein develop?",
        "the theory of relativity",
    ),
    (
        "Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911.",
        "What year was Marie Curie born?",
        "?",
    ),
    (
        "The Great Wall of China was built to protect against invasions. It stretches over 13,000 miles.",
        "Who built the Great Wall of China?",
        "?",
    ),
)
INSTRUCTION = (
    "Answer the question with the exact words of the context. "
    "If the context does not contain the answer, output ?."
)


def _block(context: str, question: str) -> str:
    return f'Context: "{context}"\nQuestion: "{question}"\nOutput: "'


def build_prompt(question: str, context: str) -> str:
    """The few-shot prompt; the model continues after the opening quote of the last ``Output``.

    >>> p = build_prompt("Who wrote Moby-Dick?", "Moby-Dick is a novel by Herman Melville.")
    >>> p.count("Context:"), p.endswith('Question: "Who wrote Moby-Dick?"\\nOutput: "')
    (5, True)
    """
    demos = [_block(c, q) + f'{a}"\n' for c, q, a in FEW_SHOT]
    return "\n".join([INSTRUCTION + "\n", *demos, _block(context, question.strip())])


def parse_output(text: str) -> str:
    """The answer in a generated continuation: its first line, up to the closing quote;
    ``?`` or nothing is no answer ("").

    >>> parse_output('Herman Melville"\\nContext: ...'), parse_output('?"'), parse_output("  \\n")
    ('Herman Melville', '', '')
    """
    line = text.split("\n", 1)[0]
    if '"' in line:
        line = line[: line.rindex('"')]
    answer = line.strip()
    return "" if answer in ("", "?") else answer


class GenerativeAgent:
    """``predict(records) -> [Prediction]`` with a causal LM loaded from ``path`` (local or hub id)."""

    kind = "generative"
    FIT_UPTO = 2048  # lengths up to which counts are fixed by a few counted calls (LengthCost)

    def __init__(self, path: str, *, device=None, dtype=None, batch_size: int = 8, max_new_tokens: int = 32):
        (AutoModelForCausalLM,) = transformers_names("AutoModelForCausalLM")

        if batch_size < 1 or max_new_tokens < 1:
            raise ValueError("batch_size and max_new_tokens must be >= 1")
        self.path, self.batch_size, self.max_new_tokens = path, batch_size, max_new_tokens
        tok, self.model, self.device = load_pretrained(
            AutoModelForCausalLM, path, device, dtype, padding_side="left"
        )
        if tok.pad_token is None:
            if tok.eos_token is None:
                raise ValueError(f"{path}: the tokenizer has neither a pad nor an eos token")
            tok.pad_token = tok.eos_token
        self.tokenizer, self.source = tok, f"generative:{path}"
        eos = self.model.generation_config.eos_token_id
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        self.eos_ids = {i for i in [*eos, tok.eos_token_id] if i is not None}
        keep = "logits_to_keep" in inspect.signature(self.model.forward).parameters
        self._keep = {"logits_to_keep": 1} if keep else {}
        upto = min(
            self.FIT_UPTO, getattr(self.model.config, "max_position_embeddings", None) or self.FIT_UPTO
        )
        self._prefill = LengthCost(self.model, self._prefill_at, upto, degree=2)
        self._step = LengthCost(self.model, self._step_at, upto, degree=1)

    def _dummy(self, n: int) -> dict:
        ids = torch.full((1, n), self.tokenizer.pad_token_id, dtype=torch.long, device=self.device)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    def _prefill_at(self, n: int):
        inputs = self._dummy(n)
        return lambda: self.model(**inputs, **self._keep)

    def _step_at(self, p: int):
        """One decoding forward (1 token) attending to ``p`` positions: a KV cache of ``p - 1``
        tokens is built first (not counted)."""
        with torch.inference_mode():
            past = self.model(**self._dummy(p - 1), use_cache=True).past_key_values
        one = self._dummy(p)
        ids, mask = one["input_ids"][:, :1], one["attention_mask"]
        return lambda: self.model(input_ids=ids, attention_mask=mask, past_key_values=past, **self._keep)

    def gflops_at(self, n_tokens: int) -> float:
        """GFLOPs of the prefill of an ``n_tokens`` prompt (batch of 1), from torch's FLOP counter."""
        return self._prefill(int(n_tokens))

    def query_gflops(self, prompt_tokens: int, generated: int) -> float:
        """Prefill at ``prompt_tokens`` + the ``generated - 1`` decoding steps that follow it."""
        steps = sum(self._step(prompt_tokens + k) for k in range(1, generated))
        return self.gflops_at(prompt_tokens) + steps

    def _generated_length(self, row: list[int]) -> int:
        """Tokens really generated: up to the first end of sequence or the token that completes
        a newline (everything after is padding of a finished sequence)."""
        n = next((k + 1 for k, t in enumerate(row) if t in self.eos_ids), len(row))
        if "\n" not in self.tokenizer.decode(row[:n]):
            return n
        lo, hi = 1, n  # smallest k with a newline in the first k tokens
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if "\n" in self.tokenizer.decode(row[:mid]) else (mid + 1, hi)
        return lo

    def _generate(self, enc, config) -> tuple[list[list[int]], list[list[float]]]:
        """The new token ids of each prompt of the batch ``enc`` and their log-probabilities."""
        with torch.inference_mode():
            out = self.model.generate(**enc, generation_config=config, tokenizer=self.tokenizer)
        new_ids = out.sequences[:, enc["input_ids"].shape[1] :]  # (B, S)
        steps = torch.stack(out.scores, dim=1).float().log_softmax(-1)  # (B, S, V)
        logp = steps.gather(2, new_ids[:, : steps.shape[1], None])[:, :, 0].tolist()  # (B, S)
        return new_ids.tolist(), logp  # synchronizes

    def predict(self, records: Sequence[QARecord], progress: bool = False) -> list[Prediction]:
        """Answer every record (see the module docstring for decoding, cost and latency)."""
        (GenerationConfig,) = transformers_names("GenerationConfig")

        records = list(records)
        if not records:
            return []
        prompts = [build_prompt(r.question, r.context) for r in records]
        lengths = [len(ids) for ids in self.tokenizer(prompts)["input_ids"]]
        order = sorted(range(len(records)), key=lengths.__getitem__)  # less padding
        config = GenerationConfig(
            max_new_tokens=self.max_new_tokens,
            do_sample=False,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=sorted(self.eos_ids) or None,
            stop_strings=["\n"],
            output_scores=True,  # the tokens' log-probabilities: the answer's confidence
            return_dict_in_generate=True,
        )
        raw: dict[int, tuple[str, int, float, list[float]]] = {}
        bar = tqdm(total=len(records), unit="q", desc="generate", disable=not progress, leave=False)
        for i in range(0, len(order), self.batch_size):
            idx = order[i : i + self.batch_size]
            enc = self.tokenizer([prompts[j] for j in idx], return_tensors="pt", padding=True).to(self.device)
            t0 = time.perf_counter()
            new, logp = on_model_thread(self._generate, enc, config)
            ms = 1000.0 * (time.perf_counter() - t0) / len(idx)
            for j, row, lp in zip(idx, new, logp):
                n = self._generated_length(row)
                raw[j] = (self.tokenizer.decode(row[:n], skip_special_tokens=True), n, ms, lp[:n])
            bar.update(len(idx))
        bar.close()
        preds = []
        for j, r in enumerate(records):
            text, n, ms, lp = raw[j]
            answer = parse_output(text)
            confidence = {
                "mean_logprob": float(sum(lp) / len(lp)) if lp else 0.0,
                "min_logprob": float(min(lp)) if lp else 0.0,
                "abstained": float(answer == ""),
            }
            extra = {
                "raw": text,
                "prompt_tokens": lengths[j],
                "generated_tokens": n,
                "confidence": confidence,
            }
            gflops = self.query_gflops(lengths[j], n)
            preds.append(Prediction(r.qid, answer, gflops, ms, 1, extra))
        return preds
