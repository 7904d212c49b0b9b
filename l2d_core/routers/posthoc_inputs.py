"""What the post-hoc family (post-hoc, cascade, two-stage) reads on a benchmark, and its defaults:
the main agent's and the helper agents' answers on one split aligned by question id, the features
built from them, what always runs (the main agent and the helpers are paid on every query), and
the cheap helper agents a post-hoc router reads by default. Shared by
:mod:`~l2d_core.routers.posthoc` and :mod:`~l2d_core.routers.staged`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from ..agents.cache import AgentCache
from ..agents.catalog import cheap_builtin_agents, get_agent, list_agents
from ..agents.measured import agent_gflops
from ..agents.read_in import import_agents, needs_import
from ..agents.routing_data import RoutingData, load_routing_data
from ..data.records import QADataset
from ..method.costs import CostConfig
from ..paths import cache_dir
from ..qa.squad_eval import normalize_all
from .features import POSTHOC_FEATURE_SETS, posthoc_matrix
from .trained import memo_arrays

__all__ = [
    "FEATURE_SETS",
    "DEFAULT_FEATURES",
    "FEATURE_FORMAT",
    "GFLOPS_SWEEP",
    "DEFAULT_MAX_HELPER_GFLOPS",
    "DEFAULT_CALIBRATION",
    "CALIBRATION_FOLDS",
    "default_helpers",
    "posthoc_helpers",
    "posthoc_gflops",
    "gflops_costs",
    "agents_outcomes",
    "posthoc_answers",
    "main_has_confidence",
    "main_gives_text",
    "asked_adds_nothing",
    "feature_set",
    "posthoc_features",
    "helpers_to_import",
    "import_helpers",
]

FEATURE_SETS = POSTHOC_FEATURE_SETS
DEFAULT_FEATURES = "answer+extra"
DEFAULT_MAX_HELPER_GFLOPS = 5.0
DEFAULT_CALIBRATION = "platt"
# Cross-fitted heads of the post-hoc estimator (PosthocRejector): K folds of training articles,
# each fold's head trained on the others and Platt-calibrated on it, p̂ their mean (1: one head,
# one held-out calibration split).
CALIBRATION_FOLDS = 4
# Part of the trained-head cache key: bump when the features change. 4: a two-stage cascade's
# second stage describes the asked expert's answer; 5: extra_features reads question_overlap;
# 6: a main agent with no answer text is read by its confidence alone (feature_set).
FEATURE_FORMAT = 6
FEATURES_KIND = "posthoc-features"  # their store beside the routers' scores (kept on disk)
# Second dense sweep of posthoc_points: β of the dearest expert, every other expert's β in
# proportion to its *marginal* GFLOPs (0 for an agent that already ran), so the policy trades
# error against compute itself; the GFLOPs rule of SPEC §3 (β_j ∝ GFLOPs_j / 20 for j ≥ 2)
# makes a dear expert cheaper than a mid-priced one and never reaches P3's rnet-plus.
GFLOPS_SWEEP: tuple[float, ...] = (0.0, *(float(b) for b in np.geomspace(1e-3, 50.0, 48)))


def default_helpers(dataset: str, main: str, exclude: Sequence[str], max_gflops: float) -> tuple[str, ...]:
    """Cheap agents of the dataset (≤ ``max_gflops`` each), other than the pool's agents."""
    return tuple(
        a.id for a in list_agents(dataset) if a.id != main and a.id not in exclude and a.gflops <= max_gflops
    )


def posthoc_helpers(
    dataset: str, main: str, max_gflops: float = DEFAULT_MAX_HELPER_GFLOPS
) -> tuple[str, ...]:
    """The default helpers of a post-hoc router: the BENCHMARK.md agents of ``dataset``
    (``builtin.json``, so user imports never change the benchmark figures) other than the main
    agent, at most ``max_gflops`` each. Cheap experts of the pool count (P10's dcr … match-lstm)."""
    return cheap_builtin_agents(dataset, main, max_gflops)


def posthoc_gflops(data: RoutingData, helpers: Sequence[str]) -> tuple[RoutingData, float]:
    """Cost accounting of a post-hoc policy: the main agent and the helpers always run, so their
    GFLOPs move into the per-query overhead and their own columns become 0 (a helper may also
    be an expert of the pool, as in P10: routing to it then costs nothing more)."""
    own = dict(zip(data.agent_ids, data.agent_gflops.tolist()))
    paid = [own[h] if h in own else agent_gflops(get_agent(h)) for h in helpers]  # measured where they are
    overhead = float(data.agent_gflops[0]) + sum(paid)
    zero = {data.agent_ids[0]: 0.0, **{h: 0.0 for h in helpers if h in own}}
    return data.with_gflops(zero), overhead


def gflops_costs(data: RoutingData, beta_max: float) -> CostConfig:
    """α = 1 and β_j = ``beta_max`` · G_j / max_k G_k, with G the experts' mean GFLOPs in
    ``data`` (after :func:`posthoc_gflops`: their marginal cost; all 0 → every β is 0).

    >>> from l2d_core.agents.routing_data import RoutingData
    >>> z = np.zeros((1, 3), bool)
    >>> d = RoutingData("d", ("a", "b", "c"), ("q",), np.array(["t"]), z, z, z * 1.0, z * 1.0,
    ...                 np.array([[0.0, 100.0, 1000.0]]), np.empty((1, 3), object))
    >>> gflops_costs(d, 0.5).beta
    (0.05, 0.5)
    """
    g = data.agent_gflops[1:]
    top = float(g.max()) if len(g) else 0.0
    beta = g / top * beta_max if top > 0 else np.zeros_like(g)
    return CostConfig(tuple([1.0] * len(g)), tuple(float(b) for b in beta))


@lru_cache(maxsize=8)
def _outcomes(dataset: QADataset, agent_ids: tuple[str, ...], specs: tuple[str, ...], cache: str):
    return load_routing_data(dataset, agent_ids)


def agents_outcomes(dataset: QADataset, agent_ids: Sequence[str]) -> RoutingData:
    """:func:`~l2d_core.agents.routing_data.load_routing_data` memoized per process (by the
    dataset, the agents as registered now, and the cache directory)."""
    ids = tuple(agent_ids)
    return _outcomes(dataset, ids, tuple(repr(get_agent(a)) for a in ids), str(cache_dir()))


def helpers_to_import(bench, helpers: Sequence[str]) -> tuple[str, ...]:
    """The helpers whose prediction files are not read into the agent cache yet (or were
    scored by another scoring version)."""
    cache = AgentCache()
    return tuple(h for h in helpers if needs_import(bench.dataset, get_agent(h), cache))


def import_helpers(bench, helpers: Sequence[str], on_done=None, processes: int = 0) -> None:
    """Read in the helpers' answers that are not read in yet (see
    :func:`~l2d_core.agents.read_in.import_agents`: ``on_done(k, n, agent_id)`` after each;
    ``processes`` > 0 runs them in child processes)."""
    import_agents(bench.dataset, helpers_to_import(bench, helpers), processes, on_done)


def posthoc_answers(bench, helpers: Sequence[str], split: str = "train"):
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


def main_has_confidence(bench) -> bool:
    """Whether the pool's main agent recorded its confidence (a model agent does)."""
    conf = bench.train.confidence
    return conf is not None and any(isinstance(c, dict) for c in conf[:, 0])


def main_gives_text(bench) -> bool:
    """Whether the pool's main agent gives answer texts on the training articles (an agent known
    only by an outcome log gives right/wrong and no text)."""
    return any(isinstance(a, str) for a in bench.train.answers[:, 0])


def asked_adds_nothing(bench, router_id: str) -> str | None:
    """Why a two-stage cascade is the cascade on ``bench`` (one line), or None: the expert it asks
    first (the cheapest) gives no answer text, or one answer to every question (``abstain``), so
    comparing its answer with the main agent's adds nothing."""
    data = bench.train
    if data.n_agents < 2:
        return None  # fit says why
    j = 1 + int(np.argmin(data.agent_gflops[1:]))
    texts = {a for a in data.answers[:, j] if isinstance(a, str)}
    if len(texts) > 1:
        return None
    gives = "no answer text" if not texts else "the same answer to every question"
    return (
        f"{router_id} is the same as l2d-cascade on pool {bench.pool.name}: the expert it asks first, "
        f"{data.agent_ids[j]}, gives {gives}, so comparing answers adds nothing (choose l2d-cascade)"
    )


def feature_set(bench, features: str, confidence: bool) -> str:
    """The feature set a post-hoc router asked for ``features`` reads on ``bench``: its own, or
    ``confidence`` where the main agent gives no answer text but its confidence. Without a text
    the answer columns are constant and the rest describe the question alone (type, lengths);
    fitted beside the confidence they only add noise: on PLLM-abstain a logistic model of
    confidence and those columns split main from ``abstain`` 0.2 EM below confidence alone."""
    if confidence and not features.endswith("+emb") and not main_gives_text(bench):
        return "confidence"
    return features


def posthoc_features(
    bench,
    helpers: Sequence[str],
    split: str = "train",
    features: str = "answer+extra",
    confidence: bool = False,
    asked: bool = False,
) -> np.ndarray:
    """Features of the post-hoc router on one split (``train``, ``val`` or ``test``), (N, d),
    in the order of that split (aligned by qid; see :func:`posthoc_answers`); ``confidence``
    adds the main agent's own confidence signals; ``asked``, the last helper's answer described
    as the main agent's is (:func:`~l2d_core.routers.features.posthoc_matrix`). Memoized per
    benchmark object (read-only array): ranking, fitting and scoring a router read the same
    features."""
    return _features(bench, tuple(helpers), split, features, bool(confidence), bool(asked))


@lru_cache(maxsize=16)
def _features(bench, helpers: tuple[str, ...], split: str, features: str, confidence: bool, asked: bool):
    main, helper_answers, records = posthoc_answers(bench, helpers, split)
    conf = None
    if confidence:
        recorded = bench.split(split).confidence
        conf = recorded[:, 0] if recorded is not None else [None] * len(records)
    X = {"train": bench.X_train, "val": bench.X_val, "test": bench.X_test}[split]
    emb = features.endswith("+emb")
    # what the features are a pure function of, besides the benchmark's key and this code: the
    # split's questions and every answer and confidence read (helpers' answers are not in the key)
    read = json.dumps(
        [[r.qid for r in records], list(main), helper_answers.tolist(), None if conf is None else list(conf)],
        sort_keys=True,
        default=str,
    )
    params = {
        "helpers": list(helpers),
        "split": split,
        "features": features,
        "asked": asked,
        "format": FEATURE_FORMAT,
        "read": hashlib.sha256(read.encode()).hexdigest(),
    }

    def compute() -> dict[str, np.ndarray]:
        return {"X": posthoc_matrix(main, helper_answers, records, features, conf, X, asked)}

    out = memo_arrays(FEATURES_KIND, bench, params, compute, emb)["X"]
    out.flags.writeable = False
    return out
