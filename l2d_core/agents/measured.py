"""Measured GFLOPs of an agent known only by its answers but whose architecture is known
(BENCHMARK.md: "build the model from its configuration with random weights and count with the
project's FLOP counter"). An agent says so with ``gflops_source: "measured"`` and its Hugging Face
configuration under ``options["architecture"]`` (``model_type`` plus the fields that differ from
that type's defaults). Measured once per configuration and token count, kept on disk.
"""

from __future__ import annotations

import json

from ..paths import cache_dir
from ..runtime import transformers_names
from ..stores import open_disk_cache

__all__ = [
    "ARCHITECTURE_TOKENS",
    "architecture_gflops",
    "architecture_model",
    "agent_gflops",
    "per_query_gflops",
]

ARCHITECTURE_TOKENS = 384  # BENCHMARK.md: costs are per query at a 384-token input


def architecture_gflops(architecture: dict, tokens: int = ARCHITECTURE_TOKENS) -> float:
    """GFLOPs of one question-answering forward of the model ``architecture`` describes, at
    ``tokens`` tokens (of its backbone where the type has no span head: an LLM's prompt read
    once), counted by torch's FLOP counter (eager attention) on the model built on the ``meta``
    device (shapes alone: :func:`~l2d_core.flops.shape_gflops`), or where it cannot run without
    values, on weights left uninitialised (the count depends on the shapes alone; drawing them at
    random gives the same)."""
    if not isinstance(architecture, dict) or not isinstance(architecture.get("model_type"), str):
        raise ValueError(f"an architecture is a configuration with a model_type, got {architecture!r}")
    key = f"architecture_gflops|{json.dumps(architecture, sort_keys=True)}|{tokens}"
    with open_disk_cache(
        cache_dir() / "meta", "the measurement cache", "measurements are taken again"
    ) as meta:
        if key not in meta:
            import torch

            from ..flops import forward_gflops, shape_gflops

            try:
                with torch.device("meta"):  # shapes only: no weights, no arithmetic
                    gflops = shape_gflops(architecture_model(architecture), tokens)
            except (RuntimeError, NotImplementedError):  # a type that cannot be built on it
                gflops = None
            if gflops is None:  # a model that needs values to run: a real forward, weights left as allocated
                torch.manual_seed(0)
                with _no_init_weights():  # the count reads shapes, not values: the same figure, in ms
                    gflops = forward_gflops(architecture_model(architecture), tokens)
            meta[key] = gflops
        return float(meta[key])


def architecture_model(architecture: dict):
    """The model ``architecture`` describes (see :func:`architecture_gflops`), eager attention, in
    eval mode, on the current default device: its question-answering model, or its backbone where
    the type has no span head (a generative LLM)."""
    AutoConfig, AutoModel, AutoModelForQuestionAnswering = transformers_names(
        "AutoConfig", "AutoModel", "AutoModelForQuestionAnswering"
    )
    fields = {k: v for k, v in architecture.items() if k != "model_type"}
    config = AutoConfig.for_model(architecture["model_type"], **fields)
    config._attn_implementation = "eager"  # the fused kernels are undercounted
    try:
        return AutoModelForQuestionAnswering.from_config(config).eval()
    except ValueError:  # no span head for this type: its backbone
        return AutoModel.from_config(config).eval()


def _no_init_weights():
    """transformers' context that builds a model without initialising its weights (DeBERTa-v3's
    128k-word embedding took 3 s to draw at random)."""
    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # transformers 4
        from transformers.modeling_utils import no_init_weights
    return no_init_weights()


def _architecture(spec) -> dict | None:
    return spec.options.get("architecture") if isinstance(spec.options, dict) else None


def agent_gflops(spec) -> float:
    """An agent's GFLOPs per query: measured from its architecture when it declares one and says
    ``measured``, else its declared figure."""
    if spec.gflops_source == "measured" and (arch := _architecture(spec)):
        return architecture_gflops(arch)
    return float(spec.gflops)


def per_query_gflops(spec) -> bool:
    """Whether what ``spec`` costs differs per query: a model this tool ran, which recorded each
    query's GFLOPs (its windows); else every query costs :func:`agent_gflops` — not the figure
    recorded beside its imported answers, which is its spec's (0 for one measured from its
    architecture)."""
    return spec.gflops_source == "measured" and not _architecture(spec)
