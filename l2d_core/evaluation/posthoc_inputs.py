"""What the post-hoc router reads on a benchmark: the main agent's and the helpers' cached
answers on one split, aligned by question id, and the features built from them."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from ..agents.cache import AgentCache
from ..agents.read_in import import_agents, needs_import
from ..agents.registry import get_agent
from ..agents.routing_data import RoutingData, load_routing_data
from ..data.records import QADataset
from ..paths import cache_dir
from ..qa.squad_eval import normalize_all
from ..routers.features import posthoc_matrix
from .benchmark import Benchmark

__all__ = [
    "agents_outcomes",
    "posthoc_answers",
    "main_has_confidence",
    "posthoc_features",
    "helpers_to_import",
    "import_helpers",
]


@lru_cache(maxsize=8)
def _outcomes(dataset: QADataset, agent_ids: tuple[str, ...], specs: tuple[str, ...], cache: str):
    return load_routing_data(dataset, agent_ids)


def agents_outcomes(dataset: QADataset, agent_ids: Sequence[str]) -> RoutingData:
    """:func:`~l2d_core.agents.routing_data.load_routing_data` memoized per process (by the
    dataset, the agents as registered now, and the cache directory)."""
    ids = tuple(agent_ids)
    return _outcomes(dataset, ids, tuple(repr(get_agent(a)) for a in ids), str(cache_dir()))


def helpers_to_import(bench: Benchmark, helpers: Sequence[str]) -> tuple[str, ...]:
    """The helpers whose prediction files are not read into the agent cache yet (or were
    scored by another scoring version)."""
    cache = AgentCache()
    return tuple(h for h in helpers if needs_import(bench.dataset, get_agent(h), cache))


def import_helpers(bench: Benchmark, helpers: Sequence[str], on_done=None, processes: int = 0) -> None:
    """Read in the helpers' answers that are not read in yet (see
    :func:`~l2d_core.agents.read_in.import_agents`: ``on_done(k, n, agent_id)`` after each;
    ``processes`` > 0 runs them in child processes)."""
    import_agents(bench.dataset, helpers_to_import(bench, helpers), processes, on_done)


def posthoc_answers(bench: Benchmark, helpers: Sequence[str], split: str = "train"):
    """The main agent's and the helpers' answers on one split of ``bench``, aligned by qid.

    Returns ``(main (N,), helpers (N, H), records)`` in the split's order; raises when the
    helpers' cached answers for the main agent disagree with the split's (a misalignment).
    """
    data = bench.split(split)
    records = tuple(bench.dataset[q] for q in data.qids)
    main = np.asarray(data.answers[:, 0], dtype=object)
    if not helpers:
        return main, np.empty((len(data), 0), dtype=object), records
    hd = agents_outcomes(bench.dataset, (data.agent_ids[0], *helpers))
    row = {q: i for i, q in enumerate(hd.qids)}
    idx = np.array([row[q] for q in data.qids], dtype=np.intp)
    if tuple(hd.qids[i] for i in idx) != tuple(data.qids) or not np.array_equal(
        normalize_all(hd.answers[idx, 0]), normalize_all(main)
    ):
        raise RuntimeError("post-hoc features: helper answers are not aligned with the split by qid")
    return main, np.asarray(hd.answers[idx, 1:], dtype=object), records


def main_has_confidence(bench: Benchmark) -> bool:
    """Whether the pool's main agent recorded its confidence (a model agent does)."""
    conf = bench.train.confidence
    return conf is not None and any(isinstance(c, dict) for c in conf[:, 0])


def posthoc_features(
    bench: Benchmark,
    helpers: Sequence[str],
    split: str = "train",
    features: str = "answer+extra",
    confidence: bool = False,
) -> np.ndarray:
    """Features of the post-hoc router on one split (``train``, ``val`` or ``test``), (N, d),
    in the order of that split (aligned by qid; see :func:`posthoc_answers`); ``confidence``
    adds the main agent's own confidence signals. Memoized per benchmark object (read-only
    array): ranking, fitting and scoring a router read the same features."""
    return _features(bench, tuple(helpers), split, features, bool(confidence))


@lru_cache(maxsize=16)
def _features(bench: Benchmark, helpers: tuple[str, ...], split: str, features: str, confidence: bool):
    main, helper_answers, records = posthoc_answers(bench, helpers, split)
    conf = None
    if confidence:
        recorded = bench.split(split).confidence
        conf = recorded[:, 0] if recorded is not None else [None] * len(records)
    X = {"train": bench.X_train, "val": bench.X_val, "test": bench.X_test}[split]
    out = posthoc_matrix(main, helper_answers, records, features, conf, X)
    out.flags.writeable = False
    return out
