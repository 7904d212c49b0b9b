"""One query at a time, possibly new text: route it with the rejector, and ask an agent.

- :func:`route_query` featurizes ``(question, context)`` with the benchmark's encoder and
  feature kind (embeddings go through the on-disk cache), and returns the plug-in error
  probabilities p̂, the expected cost of every agent at the given costs, the chosen agent,
  optional SDL scores, and the rejector's measured latency and GFLOPs.
- :func:`answer_with` returns an agent's answer: the cached, scored answer for a dataset
  question; for new text only *runnable* agents answer (kind ``extractive``, run by the
  minimal :class:`ExtractiveRunner` below). Prediction-file agents cannot answer new text and
  the result says so; nothing is ever made up.

A fuller agent package (batching, generative agents, sliding windows over long contexts)
is a later issue; the runner here is deliberately small.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from .agent_cache import AgentCache
from .agents import AgentSpec
from .costs import CostConfig
from .data.records import QARecord
from .experiment import encoder_for, fit_plugin
from .flops import forward_gflops
from .policies import expected_costs, learned_policy
from .positions import ContextIndex, locate
from .rejector import featurize
from .squad_eval import exact_match, f1

__all__ = [
    "RUNNABLE_KINDS",
    "route_query",
    "answer_with",
    "can_answer_new_text",
    "check_expected_answer",
    "ExtractiveRunner",
    "load_extractive",
]

RUNNABLE_KINDS = ("extractive",)  # agent kinds this module can run on new text


def _require_text(question: str, context: str) -> tuple[str, str]:
    if not isinstance(question, str) or not question.strip():
        raise ValueError("the question is empty: type a question")
    if not isinstance(context, str) or not context.strip():
        raise ValueError("the context is empty: paste the passage the answer should come from")
    return question, context  # as given: the embedding cache is keyed by the exact text


# --- routing ---------------------------------------------------------------------------------


def route_query(
    bench, question: str, context: str, costs: CostConfig, p_err_estimator=None, sdl_estimator=None
) -> dict:
    """Route one query ``(question, context)`` of the benchmark's pool at ``costs``.

    ``p_err_estimator`` is a fitted :class:`~l2d_core.rejector.PluginRejector` (default: the
    benchmark's, fitted or loaded from disk); ``sdl_estimator`` an optional fitted
    :class:`~l2d_core.rejector.SDLRejector`. Returns plain data:

    - ``agent_ids``; ``p_err`` (2, A) p̂ per endpoint (start, end) and agent;
      ``expected_cost`` (A,) Σ_i ĉ_j^i; ``chosen`` / ``chosen_index`` (plug-in policy);
    - ``sdl_scores`` (2, A), ``sdl_chosen`` when an SDL estimator is given (else ``None``);
    - ``latency_ms``: featurize + heads, measured with ``time.perf_counter``;
      ``embeddings_cached``: whether the embeddings came from the cache (then the latency
      is a cache read, not an encoder forward); ``rejector_gflops``: measured GFLOPs of one
      rejector forward at 384 tokens (``bench.rejector_gflops``).
    """
    question, context = _require_text(question, context)
    n_agents = len(bench.pool.agent_ids)
    if costs.n_experts != n_agents - 1:
        raise ValueError(f"costs have {costs.n_experts} experts, pool {bench.pool.name} has {n_agents - 1}")
    if p_err_estimator is None:
        p_err_estimator = fit_plugin(bench)
    encoder = encoder_for(bench.encoder_name)
    rec = QARecord(qid="live", title="", context=context, question=question, answers=())
    texts = (
        [question, context]
        if bench.features == "separate"
        else [f"{question}{encoder.tokenizer.sep_token}{context}"]
    )
    cached = encoder.is_cached(texts)

    t0 = time.perf_counter()
    x = featurize(encoder, [rec], bench.features)  # (1, d)
    p_err = p_err_estimator.error_proba(x)  # (1, 2, A)
    sdl_scores = sdl_estimator.scores(x) if sdl_estimator is not None else None  # (1, 2, A)
    latency_ms = 1000.0 * (time.perf_counter() - t0)

    expected = expected_costs(p_err, costs)[0]  # (A,)
    j = int(expected.argmin())
    ids = tuple(bench.pool.agent_ids)
    out = {
        "question": question,
        "context": context,
        "agent_ids": ids,
        "costs": {"alpha": list(costs.alpha), "beta": list(costs.beta)},
        "p_err": p_err[0],
        "expected_cost": expected,
        "chosen_index": j,
        "chosen": ids[j],
        "sdl_scores": None,
        "sdl_chosen_index": None,
        "sdl_chosen": None,
        "latency_ms": latency_ms,
        "embeddings_cached": cached,
        "rejector_gflops": float(bench.rejector_gflops),
    }
    if sdl_scores is not None:
        k = int(learned_policy(sdl_scores)[0])
        out.update(sdl_scores=sdl_scores[0], sdl_chosen_index=k, sdl_chosen=ids[k])
    return out


# --- answering -------------------------------------------------------------------------------


def can_answer_new_text(spec: AgentSpec) -> bool:
    """Only agents that run a model answer text outside their dataset."""
    return spec.kind in RUNNABLE_KINDS


def check_expected_answer(context: str, answer: str) -> dict:
    """Locate an answer the user expects (SPEC §2 positions) in the context.

    >>> check_expected_answer("Tesla moved to Paris in 1882.", "Paris")["in_context"]
    True
    >>> r = check_expected_answer("Tesla moved to Paris in 1882.", "London")
    >>> r["in_context"], r["message"]
    (False, "the given answer 'London' is not in the context")
    """
    if not answer or not answer.strip():
        raise ValueError("the expected answer is empty")
    loc = locate(answer, ContextIndex.build(context), None, context)
    found = loc.status != "not_found"
    return {
        "in_context": found,
        "start": loc.start,
        "end": loc.end,
        "status": loc.status,
        "message": "" if found else f"the given answer {answer.strip()!r} is not in the context",
    }


def _result(spec: AgentSpec, status: str, message: str = "", **fields) -> dict:
    base = {
        "agent": spec.id,
        "kind": spec.kind,
        "status": status,  # cached | live | cannot_answer | not_cached
        "answer": None,
        "em": None,
        "f1": None,
        "latency_ms": None,
        "gflops": None,
        "gflops_source": spec.gflops_source,
        "message": message,
        "expected_answer": None,
    }
    base.update(fields)
    return base


def answer_with(
    agent_spec: AgentSpec,
    question: str,
    context: str,
    dataset_qid: str | None = None,
    cache: AgentCache | None = None,
    expected_answer: str | None = None,
) -> dict:
    """``agent_spec``'s answer to ``(question, context)``, as a dict with ``status``:

    - ``cached``: ``dataset_qid`` is a question of the agent's dataset and its scored answer
      is in the agent cache (EM/F1 against the gold answers, GFLOPs and latency as stored);
    - ``live``: the agent ran now (runnable kinds only): answer, measured latency (ms) and
      GFLOPs; EM/F1 against the gold answers of ``dataset_qid`` if given, else against
      ``expected_answer`` when that is in the context, else ``None``;
    - ``cannot_answer``: the agent is known only by its predictions (or is of a kind this
      module does not run) and the text is new — ``answer`` stays ``None``;
    - ``not_cached``: a dataset question the cache has no answer for, and the agent cannot run.

    ``expected_answer`` (optional, new text): reported under ``expected_answer`` with
    ``in_context`` — an answer that is not in the context is said to be so.
    """
    question, context = _require_text(question, context)
    check = check_expected_answer(context, expected_answer) if expected_answer else None
    if dataset_qid is not None:
        rec = (cache or AgentCache()).get(agent_spec.dataset, agent_spec.id, dataset_qid)
        if rec is not None:
            return _result(
                agent_spec,
                "cached",
                f"cached answer ({rec.get('source') or agent_spec.kind})",
                answer=rec["answer"],
                em=rec["em"],
                f1=rec["f1"],
                latency_ms=rec.get("latency_ms"),
                gflops=rec.get("gflops") if rec.get("gflops") is not None else agent_spec.gflops,
                expected_answer=check,
            )
    if not can_answer_new_text(agent_spec):
        status = "not_cached" if dataset_qid is not None else "cannot_answer"
        why = (
            "known only by its prediction file: it cannot answer new text"
            if agent_spec.kind == "prediction_file"
            else f"agents of kind {agent_spec.kind!r} are not runnable here yet"
        )
        if dataset_qid is not None:
            why = f"no cached answer for question {dataset_qid}; {why}"
        return _result(agent_spec, status, why, gflops=agent_spec.gflops, expected_answer=check)

    runner = load_extractive(_model_path(agent_spec), **_runner_options(agent_spec))
    out = runner.answer(question, context)
    golds = None
    if dataset_qid is not None:
        from .data import load_dataset

        ds = load_dataset(agent_spec.dataset)
        golds = list(ds[dataset_qid].answers) if dataset_qid in ds else None
        v2 = ds.v2
    elif check is not None and check["in_context"]:
        golds, v2 = [expected_answer], False
    scored = {}
    if golds is not None:
        scored = {"em": exact_match(out["answer"], golds, v2), "f1": f1(out["answer"], golds, v2)}
    return _result(
        agent_spec,
        "live",
        f"ran {agent_spec.path} now" + (" (context truncated to fit)" if out["truncated"] else ""),
        answer=out["answer"],
        latency_ms=out["latency_ms"],
        gflops=out["gflops"],
        gflops_source="measured",
        expected_answer=check,
        **scored,
    )


def _model_path(spec: AgentSpec) -> str:
    """A local model directory (absolute, or relative to the data directory), else a hub id."""
    if not spec.path:
        raise ValueError(f"agent {spec.id}: an extractive agent needs a model path or hub id")
    local = spec.resolved_path()
    return str(local) if local.exists() else spec.path


def _runner_options(spec: AgentSpec) -> dict:
    o = spec.options or {}
    return {
        "max_length": int(o.get("max_length", 384)),
        "max_answer_tokens": int(o.get("max_answer_tokens", 30)),
        "null_answer": bool(o.get("null_answer", spec.dataset == "squad20")),
    }


# --- a minimal extractive runner -----------------------------------------------------------


@dataclass(eq=False)  # identity hash: memoizes GFLOPs per loaded runner
class ExtractiveRunner:
    """A Hugging Face ``AutoModelForQuestionAnswering`` answering one query at a time.

    Tokenizes ``(question, context)`` with ``truncation="only_second"`` at ``max_length``
    tokens (no sliding window: a longer context is cut), takes the best span
    ``start <= end < start + max_answer_tokens`` inside the context by start + end logit,
    and maps it to characters with the offsets. With ``null_answer`` the [CLS] score can win
    (no answer, SQuAD v2.0). Loaded with eager attention so torch's FLOP counter sees it all.
    """

    path: str
    tokenizer: object
    model: torch.nn.Module
    max_length: int = 384
    max_answer_tokens: int = 30
    null_answer: bool = False

    def _encode(self, question: str, context: str):
        return self.tokenizer(
            question,
            context,
            truncation="only_second",
            max_length=self.max_length,
            return_offsets_mapping=True,
            return_tensors="pt",
        )

    def answer(self, question: str, context: str) -> dict:
        """``answer`` text (a substring of ``context``, or "" for no answer), character span,
        ``latency_ms`` (tokenize + forward + decode) and ``gflops`` (forward, counted)."""
        question, context = _require_text(question, context)
        t0 = time.perf_counter()
        enc = self._encode(question, context)
        offsets = enc.pop("offset_mapping")[0].tolist()
        in_context = np.array([s == 1 for s in enc.sequence_ids(0)])  # (T,)
        with torch.inference_mode():
            out = self.model(**enc)
        start = out.start_logits[0].float().numpy()  # (T,)
        end = out.end_logits[0].float().numpy()  # (T,)
        score = start[:, None] + end[None, :]  # (T, T): span (s, e)
        t = np.arange(len(start))
        ok = (t[None, :] >= t[:, None]) & (t[None, :] - t[:, None] < self.max_answer_tokens)
        ok &= in_context[:, None] & in_context[None, :]
        if not ok.any():
            raise ValueError("the context left no room after the question: shorten the question")
        score = np.where(ok, score, -np.inf)
        s, e = np.unravel_index(int(score.argmax()), score.shape)
        best = float(score[s, e])
        null = self.null_answer and float(start[0] + end[0]) > best
        c0, c1 = offsets[s][0], offsets[e][1]
        text = "" if null else context[c0:c1]
        latency_ms = 1000.0 * (time.perf_counter() - t0)
        n_tokens = int(enc["input_ids"].shape[1])
        return {
            "answer": text,
            "char_start": None if null else c0,
            "char_end": None if null else c1,
            "score": best,
            "null": null,
            "tokens": n_tokens,
            "truncated": bool(offsets[int(np.flatnonzero(in_context)[-1])][1] < len(context.rstrip())),
            "latency_ms": latency_ms,
            "gflops": self.gflops(n_tokens),
        }

    def gflops(self, n_tokens: int) -> float:
        """Counted GFLOPs of one forward pass at ``n_tokens`` (memoized per length)."""
        return _gflops_at(self, n_tokens)


@lru_cache(maxsize=256)
def _gflops_at(runner: ExtractiveRunner, n_tokens: int) -> float:
    return forward_gflops(runner.model, n_tokens, runner.tokenizer.unk_token_id or 0)


@lru_cache(maxsize=4)
def load_extractive(
    path: str, max_length: int = 384, max_answer_tokens: int = 30, null_answer: bool = False
) -> ExtractiveRunner:
    """Load (once per process) an extractive QA model and its fast tokenizer from ``path``."""
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if not path:
        raise ValueError("an extractive agent needs a model path or hub id")
    try:
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForQuestionAnswering.from_pretrained(path, attn_implementation="eager").eval()
    except OSError as exc:
        raise OSError(f"could not load the extractive model at {path!r}: {exc}") from None
    if not getattr(tok, "is_fast", False):
        raise ValueError(f"{path}: the runner needs a fast tokenizer (character offsets)")
    return ExtractiveRunner(path, tok, model, max_length, max_answer_tokens, null_answer)
