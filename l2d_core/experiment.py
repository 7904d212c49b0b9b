"""The routing benchmark glue: load a pool on a split, featurize, fit policies, evaluate.

Trained heads are cached on disk under ``<cache>/rejectors/<key>`` (safetensors + JSON),
keyed by everything that determines them, so refitting a setting seen before is instant.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import diskcache
import numpy as np

from . import metrics as M
from .agent_cache import AgentCache
from .agents import PoolSpec, get_pool
from .costs import CostConfig, cost_matrix
from .data import BENCHMARK_TEST_ARTICLES, load_dataset, validation_split
from .data.records import QADataset
from .encoder import DEFAULT_ENCODER, Encoder, load_encoder
from .paths import cache_dir
from .policies import POLICIES, oracle_policy, random_policy
from .rejector import FullSDLRejector, PluginRejector, SDLRejector, featurize
from .routing_data import RoutingData, load_routing_data
from .training import FAST_CONFIG, PAPER_CONFIG, TrainConfig

__all__ = [
    "BETA_POINTS",
    "Benchmark",
    "prepare",
    "evaluate_choice",
    "fit_sdl",
    "sdl_is_cached",
    "encoder_for",
    "fit_full_sdl",
    "fit_plugin",
    "run_policy",
    "sweep",
    "rejector_gflops",
]

# BENCHMARK.md sweep points for β₁ (β_j from the GFLOPs rule, α_j = 1).
BETA_POINTS: tuple[float, ...] = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
# Part of every trained-head cache key: bump when training code changes what a fit produces.
HEAD_FORMAT = 2


@dataclass(eq=False)
class Benchmark:
    """One dataset × pool on the BENCHMARK.md split, with fast-mode features."""

    dataset: QADataset
    pool: PoolSpec
    train: RoutingData
    test: RoutingData
    X_train: np.ndarray
    X_test: np.ndarray
    train_records: tuple
    test_records: tuple
    encoder_name: str
    features: str
    rejector_gflops: float
    val: RoutingData | None = None
    X_val: np.ndarray | None = None

    @property
    def expert_gflops(self) -> np.ndarray:
        return self.train.agent_gflops[1:]

    def costs(self, beta1: float, alpha: float = 1.0) -> CostConfig:
        """The BENCHMARK.md cost setting at β₁ (GFLOPs rule)."""
        return CostConfig.from_beta1(beta1, self.expert_gflops, alpha)

    def fingerprint(self) -> str:
        """Identity of the training data and features (part of every trained-head key)."""
        h = hashlib.sha256()
        h.update(
            json.dumps(
                [
                    self.dataset.name,
                    list(self.pool.agent_ids),
                    self.encoder_name,
                    self.features,
                    len(self.train),
                ]
            ).encode()
        )
        h.update(self.train.errors.tobytes())
        h.update(np.ascontiguousarray(self.X_train[:50]).tobytes())
        return h.hexdigest()[:16]


@lru_cache(maxsize=2)
def encoder_for(name: str) -> Encoder:
    """The encoder of a benchmark, shared per process."""
    return load_encoder(name, lazy=True)  # loads the model only on embedding-cache misses


def rejector_gflops(encoder_name: str = DEFAULT_ENCODER, length: int = 384) -> float:
    """Measured GFLOPs of one rejector forward at ``length`` tokens (encoder; head is negligible
    but counted by the FLOP counter when present). Memoized on disk per encoder."""
    with diskcache.Cache(str(cache_dir() / "meta")) as meta:
        key = f"rejector_gflops|{encoder_name}|{length}"
        if key not in meta:
            meta[key] = load_encoder(encoder_name, eager_attention=True, device="cpu").gflops(length)
        return float(meta[key])


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
) -> Benchmark:
    """Load data, split by the BENCHMARK.md test articles, featurize both sides.

    ``features_needed=False`` skips the encoder (enough for the oracle and random policies).
    """
    ds = load_dataset(dataset)
    pool = get_pool(pool) if isinstance(pool, str) else pool
    if pool.dataset != dataset:
        raise ValueError(f"pool {pool.name} is for {pool.dataset}, not {dataset}")
    data = load_routing_data(ds, pool, cache)
    train, test = data.split(BENCHMARK_TEST_ARTICLES)
    if len(train) == 0 or len(test) == 0:
        raise ValueError(f"empty split on {dataset}: {len(train)} training, {len(test)} test questions")
    recs = {r.qid: r for r in ds}
    train_recs = tuple(recs[q] for q in train.qids)
    test_recs = tuple(recs[q] for q in test.qids)
    if features_needed:
        enc = encoder_for(encoder)
        X_train = featurize(enc, train_recs, features, progress)
        X_test = featurize(enc, test_recs, features, progress)
    else:
        X_train = np.zeros((len(train_recs), 0), np.float32)
        X_test = np.zeros((len(test_recs), 0), np.float32)
    bench = Benchmark(
        ds,
        pool,
        train,
        test,
        X_train,
        X_test,
        train_recs,
        test_recs,
        encoder,
        features,
        rejector_gflops(encoder),
    )
    if val_fraction > 0:
        fit_ds, val_ds = validation_split(
            ds.by_titles([t for t in ds.titles if t not in BENCHMARK_TEST_ARTICLES]), val_fraction, seed
        )
        val_mask = np.isin(train.titles, list(val_ds.titles))
        bench.val, bench.X_val = train.take(val_mask), X_train[val_mask]
        bench.train, bench.X_train = train.take(~val_mask), X_train[~val_mask]
        bench.train_records = tuple(r for r, m in zip(train_recs, val_mask) if not m)
    return bench


def _head_dir(kind: str, bench: Benchmark, config: TrainConfig, costs: CostConfig | None) -> Path:
    key = json.dumps(
        [
            HEAD_FORMAT,
            kind,
            bench.fingerprint(),
            config.to_dict(),
            asdict(costs) if costs else None,
            bench.val is not None,
        ],
        sort_keys=True,
    )
    return cache_dir() / "rejectors" / hashlib.sha256(key.encode()).hexdigest()[:20]


def _saved(path: Path) -> bool:
    return (path / "model.safetensors").is_file() and (path / "scaler.safetensors").is_file()


def sdl_is_cached(bench: Benchmark, costs: CostConfig, config: TrainConfig = FAST_CONFIG) -> bool:
    """Whether the fast-mode SDL rejector for ``costs`` is already trained (on disk)."""
    return _saved(_head_dir("sdl", bench, config, costs))


def _fit_cached(est, kind: str, bench: Benchmark, costs: CostConfig | None):
    path = _head_dir(kind, bench, est.config, costs)
    if _saved(path):
        return type(est).load(path, progress=est.progress, costs=costs)
    est.fit(bench.X_train, bench.train, bench.X_val, bench.val)
    est.save(path, {"pool": bench.pool.name})
    return est


def fit_sdl(
    bench: Benchmark, costs: CostConfig, config: TrainConfig = FAST_CONFIG, progress: bool = False
) -> SDLRejector:
    """The paper's rejector (fast mode) for one cost setting; cached on disk."""
    return _fit_cached(SDLRejector(config=config, costs=costs, progress=progress), "sdl", bench, costs)


def fit_full_sdl(
    bench: Benchmark,
    costs: CostConfig,
    config: TrainConfig = PAPER_CONFIG,
    progress: bool = False,
    device: str | None = None,
) -> FullSDLRejector:
    """The paper's rejector in full mode (fine-tuned encoder); cached on disk."""
    path = _head_dir("full-sdl", bench, config, costs)
    if (path / "model.safetensors").is_file() and (path / "encoder").is_dir():
        return FullSDLRejector.load(path, device)
    est = FullSDLRejector(costs, bench.encoder_name, config, device=device, progress=progress)
    est.fit(list(bench.train_records), bench.train)
    est.save(path)
    return est


def fit_plugin(bench: Benchmark, config: TrainConfig = FAST_CONFIG, progress: bool = False) -> PluginRejector:
    """The cost-free error estimator behind the reweight policy; cached on disk."""
    return _fit_cached(PluginRejector(config=config, progress=progress), "plugin", bench, None)


def evaluate_choice(
    choice: np.ndarray, data: RoutingData, costs: CostConfig, rejector_gflops: float = 0.0, seeds=range(5)
) -> dict:
    """Every SPEC §7 metric of one allocation on ``data``."""
    cost = cost_matrix(data.errors, costs)
    em = 100 * M.chosen_mean(data.em, choice)
    gq = M.mean_gflops(choice, data.gflops, rejector_gflops)
    alloc = M.allocation(choice, data.n_agents)
    tpr, fpr = M.tpr_fpr(choice, data.correct)
    tdl_r, tdl_r_sd = M.random_tdl(cost, None, seeds)
    tdl_m, _ = M.random_tdl(cost, alloc, seeds)
    return {
        "em": em,
        "f1": 100 * M.chosen_mean(data.f1, choice),
        "gflops_per_query": gq,
        "gflops_per_em": M.gflops_per_em(gq, em),
        "allocation": {a: float(s) for a, s in zip(data.agent_ids, alloc)},
        "tpr": tpr,
        "fpr": fpr,
        "tdl": M.mean_tdl(cost, choice),
        "tdl_random": tdl_r,
        "tdl_random_std": tdl_r_sd,
        "tdl_random_matched": tdl_m,
        "n": len(choice),
    }


def run_policy(
    bench: Benchmark,
    policy: str,
    costs: CostConfig,
    seed: int = 0,
    config: TrainConfig = FAST_CONFIG,
    progress: bool = False,
    mode: str = "fast",
) -> dict:
    """Fit (or load) ``policy`` on the training articles and evaluate it on the test articles.

    ``mode="full"`` fine-tunes the encoder for the SDL rejector (use ``PAPER_CONFIG``).
    """
    test = bench.test
    if policy == "sdl" and mode == "full":
        choice = fit_full_sdl(bench, costs, config.but(seed=seed), progress).predict(list(bench.test_records))
        rg = bench.rejector_gflops
    elif policy == "sdl":
        choice = fit_sdl(bench, costs, config.but(seed=seed), progress).predict(bench.X_test)
        rg = bench.rejector_gflops
    elif policy == "plugin":
        choice = fit_plugin(bench, config.but(seed=seed), progress).predict(bench.X_test, costs)
        rg = bench.rejector_gflops
    elif policy == "oracle":
        choice, rg = oracle_policy(cost_matrix(test.errors, costs), test.gflops), 0.0
    elif policy == "random":
        choice, rg = random_policy(len(test), test.n_agents, seed), 0.0
    else:
        raise ValueError(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
    out = evaluate_choice(choice, test, costs, rg)
    out.update(policy=policy, alpha=list(costs.alpha), beta=list(costs.beta), rejector_gflops=rg)
    return out


def sweep(
    bench: Benchmark,
    policy: str,
    betas=BETA_POINTS,
    alpha: float = 1.0,
    seed: int = 0,
    config: TrainConfig = FAST_CONFIG,
    progress: bool = False,
) -> list[dict]:
    """``run_policy`` at every β₁ of the sweep."""
    return [
        dict(run_policy(bench, policy, bench.costs(b, alpha), seed, config, progress), beta1=b) for b in betas
    ]
