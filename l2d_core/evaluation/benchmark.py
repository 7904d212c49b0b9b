"""The benchmark of BENCHMARK.md: one dataset × pool, split by article, with the features the
ex-ante routers read. A :class:`Benchmark` is frozen once built; :meth:`Benchmark.cache_key`
identifies everything a router trained on it depends on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from ..agents.cache import AgentCache
from ..agents.catalog import PoolSpec, get_pool
from ..agents.routing_data import RoutingData, load_routing_data
from ..data import held_out_titles, load_dataset, validation_split
from ..data.records import QADataset, QARecord
from ..method.costs import (
    BETA_POINTS,
    COST_RULES,
    PRICE_POINTS,
    CostConfig,
    log_price_scale,
    mean_latency,
    mean_usd,
    money_scale,
    paid_per_agent,
)
from ..paths import DEFAULT_ENCODER, cache_dir
from ..routers.encoder import Encoder, load_encoder
from ..routers.features import feature_texts, featurize
from ..stores import open_disk_cache

__all__ = [
    "QUESTION_SETS",
    "BETA_POINTS",
    "PRICE_POINTS",
    "Benchmark",
    "prepare",
    "embeddings_on_disk",
    "encoder_for",
    "measure_rejector_gflops",
]


QUESTION_SETS = ("all", "answerable")  # which questions a benchmark keeps (every split)


def answerable_mask(ds: QADataset, qids) -> np.ndarray:
    """Whether each question has a gold answer (SQuAD v2.0's unanswerable ones have none)."""
    return np.array([not ds[q].is_impossible and bool(ds[q].answers) for q in qids], dtype=bool)


@dataclass(frozen=True, eq=False)
class Benchmark:
    """One dataset × pool on the BENCHMARK.md split. ``X_*`` are the ex-ante features of each
    split, (N, d) — zero columns when the benchmark was prepared without embeddings."""

    dataset: QADataset
    pool: PoolSpec
    train: RoutingData
    test: RoutingData
    X_train: np.ndarray
    X_test: np.ndarray
    train_records: tuple[QARecord, ...]
    test_records: tuple[QARecord, ...]
    encoder_name: str
    features: str
    val: RoutingData | None = None
    X_val: np.ndarray | None = None
    rejector_gflops_known: float | None = None  # None: measured when first asked for
    questions: str = "all"  # the questions kept in every split: all, or the answerable ones (QUESTION_SETS)

    @cached_property
    def rejector_gflops(self) -> float:
        """GFLOPs of one ex-ante rejector forward (its encoder at 384 tokens): measured on first
        use only, so that routers which never run the encoder never load it."""
        if self.rejector_gflops_known is not None:
            return float(self.rejector_gflops_known)
        return measure_rejector_gflops(self.encoder_name)

    @property
    def expert_gflops(self) -> np.ndarray:
        return self.train.agent_gflops[1:]

    @property
    def has_embeddings(self) -> bool:
        return self.X_train.shape[1] > 0

    def costs(self, beta1: float, alpha: float = 1.0) -> CostConfig:
        """The BENCHMARK.md cost setting at β₁ (GFLOPs rule)."""
        return CostConfig.from_beta1(beta1, self.expert_gflops, alpha)

    @property
    def log_prices(self) -> tuple[float, ...] | None:
        """The per-TFLOP prices of a log scale where the experts' extra compute needs one
        (:func:`~l2d_core.method.costs.log_price_scale`: a remote LLM), else None."""
        main = float(self.train.agent_gflops[0])
        return log_price_scale([(float(g) - main) / 1000.0 for g in self.expert_gflops])

    def price_costs(self, lam: float, alpha: float = 1.0) -> CostConfig:
        """The BENCHMARK.md cost setting at the per-TFLOP price λ."""
        return CostConfig.from_price(lam, float(self.train.agent_gflops[0]), self.expert_gflops, alpha)

    @property
    def has_latency(self) -> bool:
        """Whether every agent's latency is logged on every training question (the latency
        price rule is offered only then)."""
        return self.train.has_latency

    def latency_costs(self, lam_s: float, alpha: float = 1.0) -> CostConfig:
        """The BENCHMARK.md cost setting at the latency price λ_s (errors per second): β_j from
        the agents' mean latencies on the training articles."""
        if not self.has_latency:
            raise ValueError(
                f"pool {self.pool.name}: the latency price needs every agent's latency, and "
                f"{', '.join(self._without_latency())} logged none; use the gflops or price rule"
            )
        t = mean_latency(self.train.latency)
        return CostConfig.from_latency(lam_s, float(t[0]), t[1:], alpha)

    def _without_latency(self) -> list[str]:
        return self._without(self.train.latency)

    def _without(self, values: np.ndarray | None) -> list[str]:
        """The agents whose measure (``values``, (N, A)) is unknown on some training question."""
        return [
            a
            for j, a in enumerate(self.train.agent_ids)
            if values is None or not np.isfinite(values[:, j]).all()
        ]

    @property
    def has_money(self) -> bool:
        """Whether every agent's price in dollars is known on every training question (the money
        rule needs it: a log's price column, or token counts and the agent's token prices)."""
        return self.train.has_money

    def money_costs(self, lam: float, alpha: float = 1.0) -> CostConfig:
        """The cost setting at the money price λ_$ (errors per dollar): β_j from each expert's mean
        price per question over the main agent's on the training articles."""
        if not self.has_money:
            raise ValueError(
                f"pool {self.pool.name}: the money rule needs every agent's price per answer, and "
                f"{', '.join(self._without(self.train.usd))} has none; give the agent its prices "
                "per 1M tokens, or use another rule"
            )
        usd = mean_usd(self.train.usd)
        return CostConfig.from_money(lam, float(usd[0]), usd[1:], alpha)

    def mixing_cost(self, split: str = "test") -> np.ndarray:
        """Per agent (A,), the mean cost on ``split`` of sending it every question: what random
        mixing of single agents is matched on (:mod:`~l2d_core.evaluation.gain`) — dollars where
        every answer has its price (the main agent's paid on every question, as the money rule
        counts), else GFLOPs."""
        data = self.split(split)
        return data.gflops.mean(axis=0) if not self.has_money else paid_per_agent(data.usd)

    @cached_property
    def money_prices(self) -> tuple[float, ...] | None:
        """The money prices λ_$ (errors per dollar) of the pool's slider and sweeps
        (:func:`~l2d_core.method.costs.money_scale`); None where the money rule does not apply or
        no expert costs more than the main agent."""
        if not self.has_money:
            return None
        usd = mean_usd(self.train.usd)
        return money_scale(usd[1:] - usd[0])

    def rule_costs(self, rule: str, value: float, alpha: float = 1.0) -> CostConfig:
        """The cost setting of ``rule`` (``gflops``: β₁; ``price``: λ; ``latency``: λ_s; ``money``:
        λ_$) at ``value``."""
        if rule not in COST_RULES:
            raise ValueError(f"unknown cost rule {rule!r}; known: {COST_RULES}")
        if rule == "latency":
            return self.latency_costs(value, alpha)
        if rule == "money":
            return self.money_costs(value, alpha)
        return self.costs(value, alpha) if rule == "gflops" else self.price_costs(value, alpha)

    def split(self, name: str) -> RoutingData:
        """``train``, ``val`` or ``test``."""
        data = {"train": self.train, "val": self.val, "test": self.test}.get(name)
        if data is None:
            raise ValueError(f"benchmark has no {name!r} split")
        return data

    @cached_property
    def _keys(self) -> dict[bool, str]:
        h = hashlib.sha256()
        h.update(
            json.dumps(
                [
                    self.dataset.name,
                    list(self.pool.agent_ids),
                    self.encoder_name,
                    self.features,
                    list(self.train.qids),
                    list(self.val.qids) if self.val is not None else None,
                    list(self.test.qids),
                    *([self.questions] if self.questions != "all" else []),
                ]
            ).encode()
        )
        for data in (self.train, self.val):  # what routers learn from: labels, answers, costs, confidence
            if data is not None:
                h.update(np.ascontiguousarray(data.errors).tobytes())
                h.update(np.ascontiguousarray(data.agent_gflops, dtype=np.float64).tobytes())
                conf = data.confidence.tolist() if data.confidence is not None else None
                h.update(json.dumps([data.answers.tolist(), conf], sort_keys=True, default=str).encode())
        without = h.hexdigest()[:20]
        for X in (self.X_train, self.X_val, self.X_test):
            if X is not None:
                h.update(np.ascontiguousarray(X).tobytes())
        return {False: without, True: h.hexdigest()[:20]}

    def cache_key(self, embeddings: bool = True) -> str:
        """Identity of the data a router is trained and scored on: dataset, agents, split (every
        question id), the training articles' labels, answers, agent costs and confidence and — for
        routers that read them (``embeddings``) — every embedding row. Part of every on-disk
        artifact key."""
        return self._keys[bool(embeddings) and self.has_embeddings]


@lru_cache(maxsize=2)
def encoder_for(name: str) -> Encoder:
    """The encoder of a benchmark, shared per process."""
    return load_encoder(name, lazy=True)  # loads the model only on embedding-cache misses


def measure_rejector_gflops(encoder_name: str = DEFAULT_ENCODER, length: int = 384) -> float:
    """Measured GFLOPs of one rejector forward at ``length`` tokens (the encoder; the head is
    negligible). Memoized on disk per encoder."""
    with open_disk_cache(
        cache_dir() / "meta", "the measurement cache", "measurements are taken again"
    ) as meta:
        key = f"rejector_gflops|{encoder_name}|{length}"
        if key not in meta:
            meta[key] = load_encoder(encoder_name, eager_attention=True, device="cpu").gflops(length)
        return float(meta[key])


def embeddings_on_disk(dataset: str, encoder: str = DEFAULT_ENCODER, features: str = "separate") -> bool:
    """Whether every question/context embedding of ``dataset`` is already in the on-disk cache
    (preparing a benchmark with embeddings then takes seconds, not minutes)."""
    ds, enc = load_dataset(dataset), encoder_for(encoder)
    if features == "separate":
        texts = [*dict.fromkeys(r.context for r in ds), *(r.question for r in ds)]
    else:
        texts = [f"{r.question}{enc.tokenizer.sep_token}{r.context}" for r in ds]
    return enc.is_cached(texts)


def prepare(
    dataset: str = "squad11",
    pool: str | PoolSpec = "P3",
    encoder: str = DEFAULT_ENCODER,
    features: str = "separate",
    val_fraction: float = 0.0,
    seed: int = 0,
    cache: AgentCache | None = None,
    progress: bool = False,
    features_needed: bool = True,
    limit_train: int | None = None,
    embed_progress: Callable[[int, int, float], None] | None = None,
    questions: str = "all",
) -> Benchmark:
    """Load data, split by the BENCHMARK.md test articles (:func:`~l2d_core.data.held_out_titles`),
    featurize every split.

    ``val_fraction`` carves validation articles out of the training articles (seeded);
    ``limit_train`` keeps a random sample of that many training questions (seed 0), before
    featurizing; ``features_needed=False`` skips the encoder (enough for routers that read no
    embeddings). ``embed_progress(done, total, work)`` follows the embedding of the texts not in
    the embedding cache yet (:meth:`~l2d_core.routers.encoder.Encoder.embed`'s ``step``; not
    called when every text is cached). ``questions="answerable"`` keeps the answerable questions
    only, in every split: routers train, are validated and are scored on them, as the anchor's
    study of the LLM logs does (on validation articles, PLLM's post-hoc router trained this way
    scores higher on answerable questions than one trained on all of them).
    """
    if questions not in QUESTION_SETS:
        raise ValueError(f"questions must be one of {QUESTION_SETS}, got {questions!r}")
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    ds = load_dataset(dataset)
    pool = get_pool(pool) if isinstance(pool, str) else pool
    if pool.dataset != dataset:
        raise ValueError(f"pool {pool.name} is for {pool.dataset}, not {dataset}")
    data = load_routing_data(ds, pool, cache)
    if questions == "answerable":
        data = data.take(answerable_mask(ds, data.qids))
    held_out = held_out_titles(ds)  # BENCHMARK.md's test articles (a log's dataset: a quarter of its own)
    train, test = data.split(held_out)
    if len(train) == 0 or len(test) == 0:
        raise ValueError(f"empty split on {dataset}: {len(train)} training, {len(test)} test questions")
    if limit_train is not None and limit_train < len(train):
        train = train.take(np.sort(np.random.default_rng(0).choice(len(train), limit_train, replace=False)))
    val = None
    if val_fraction > 0:
        _, val_ds = validation_split(
            ds.by_titles([t for t in ds.titles if t not in held_out]), val_fraction, seed
        )
        val_mask = np.isin(train.titles, list(val_ds.titles))
        val, train = train.take(val_mask), train.take(~val_mask)
    if features_needed and embed_progress is not None:  # every split's texts in one counted run
        recs = [ds[q] for split in (train, val, test) if split is not None for q in split.qids]
        enc = encoder_for(encoder)
        enc.embed(feature_texts(enc, recs, features), progress=progress, step=embed_progress)

    def embed(split: RoutingData) -> np.ndarray:
        recs = [ds[q] for q in split.qids]
        if not features_needed:
            return np.zeros((len(recs), 0), np.float32)
        return featurize(encoder_for(encoder), recs, features, progress)

    return Benchmark(
        dataset=ds,
        pool=pool,
        train=train,
        test=test,
        X_train=embed(train),
        X_test=embed(test),
        train_records=tuple(ds[q] for q in train.qids),
        test_records=tuple(ds[q] for q in test.qids),
        encoder_name=encoder,
        features=features,
        val=val,
        X_val=embed(val) if val is not None else None,
        questions=questions,
    )
