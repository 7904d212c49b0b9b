"""A small real benchmark for fast tests: a few articles of SQuAD v1.1 (three training, one
test) with a pool's real answers and hashed bag-of-words features instead of embeddings."""

from __future__ import annotations

import zlib

import numpy as np

from l2d_core.agents import get_pool
from l2d_core.agents.routing_data import load_routing_data
from l2d_core.data import BENCHMARK_TEST_ARTICLES, load_dataset
from l2d_core.evaluation.benchmark import Benchmark
from l2d_core.qa.squad_eval import normalize_answer


def bow(records, dim: int = 64) -> np.ndarray:
    """Hashed bag of words of question and context, (N, 2·dim) — deterministic across runs."""
    out = np.zeros((len(records), 2 * dim), np.float32)
    for i, r in enumerate(records):
        for k, text in enumerate((r.question, r.context)):
            for w in normalize_answer(text).split():
                out[i, k * dim + zlib.crc32(w.encode()) % dim] += 1.0
    return np.log1p(out)


def slice_bench(pool_name: str, n_train: int = 3, n_test: int = 1) -> Benchmark:
    """``n_train`` training and ``n_test`` test articles of SQuAD v1.1 with ``pool_name``'s answers."""
    ds = load_dataset("squad11")
    test_titles = [t for t in ds.titles if t in BENCHMARK_TEST_ARTICLES][:n_test]
    train_titles = [t for t in ds.titles if t not in BENCHMARK_TEST_ARTICLES][:n_train]
    return bow_bench(ds.by_titles(train_titles + test_titles), get_pool(pool_name), test_titles)


def bow_bench(sub, pool, test_titles) -> Benchmark:
    """The benchmark of dataset ``sub`` and ``pool`` (its agents' answers read in) split at
    ``test_titles``, with bag-of-words features."""
    train, test = load_routing_data(sub, pool).split(test_titles)
    recs = {r.qid: r for r in sub}
    tr, te = tuple(recs[q] for q in train.qids), tuple(recs[q] for q in test.qids)
    return Benchmark(
        dataset=sub,
        pool=pool,
        train=train,
        test=test,
        X_train=bow(tr),
        X_test=bow(te),
        train_records=tr,
        test_records=te,
        encoder_name="bow",
        features="bow",
        rejector_gflops_known=0.15,
    )
