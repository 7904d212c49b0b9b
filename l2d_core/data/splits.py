"""Article-level splits: the fixed BENCHMARK.md split and seeded random ones."""

from __future__ import annotations

import hashlib
import random

from .records import QADataset
from .user_datasets import user_dataset_path

__all__ = [
    "BENCHMARK_TEST_ARTICLES",
    "EmptySplitError",
    "benchmark_split",
    "held_out_titles",
    "hashed_quarter",
    "random_article_split",
    "spread",
    "validation_split",
]

# BENCHMARK.md: the 14 test articles of SQuAD v1.1 dev (2,595 questions).
BENCHMARK_TEST_ARTICLES: tuple[str, ...] = (
    "Computational_complexity_theory",
    "Construction",
    "Doctor_Who",
    "Economic_inequality",
    "Harvard_University",
    "Huguenot",
    "Immune_system",
    "Jacksonville,_Florida",
    "Kenya",
    "Pharmacy",
    "Prime_number",
    "Private_school",
    "Southern_California",
    "Steam_engine",
)


class EmptySplitError(ValueError):
    """A split that would hold no question."""


def _split(ds: QADataset, test_titles: set[str], what: str) -> tuple[QADataset, QADataset]:
    train = ds.by_titles([t for t in ds.titles if t not in test_titles], f"{ds.name}:train")
    test = ds.by_titles([t for t in ds.titles if t in test_titles], f"{ds.name}:{what}")
    for part in (train, test):
        if len(part) == 0:
            raise EmptySplitError(
                f"{part.name} is empty: {len(ds)} questions in {len(ds.titles)} articles, "
                f"{len(test_titles & set(ds.titles))} of them held out"
            )
    return train, test


def benchmark_split(ds: QADataset) -> tuple[QADataset, QADataset]:
    """(train, test) by the test articles of ``ds`` (:func:`held_out_titles`)."""
    return _split(ds, set(held_out_titles(ds)), "test")


def held_out_titles(ds: QADataset) -> frozenset[str]:
    """The test articles of ``ds``: the BENCHMARK.md test articles; for a dataset registered from a
    log (:mod:`.user_datasets`: no SQuAD articles), a quarter of its own (:func:`hashed_quarter`)."""
    if user_dataset_path(ds.name) is None:
        return frozenset(BENCHMARK_TEST_ARTICLES)
    return hashed_quarter(ds.titles)


def hashed_quarter(titles) -> frozenset[str]:
    """The titles whose SHA-256 is 0 modulo 4: about a quarter, fixed by the titles alone.

    >>> held = hashed_quarter([f"q{i}" for i in range(40)])
    >>> sorted(held)[:3], len(held)
    (['q11', 'q13', 'q14'], 8)
    """
    return frozenset(t for t in titles if int(hashlib.sha256(t.encode()).hexdigest(), 16) % 4 == 0)


def random_article_split(ds: QADataset, test_fraction: float, seed: int) -> tuple[QADataset, QADataset]:
    """Hold out ``round(test_fraction * n_articles)`` articles chosen with ``seed``."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    titles = sorted(ds.titles)
    k = max(1, round(test_fraction * len(titles)))
    held = set(random.Random(seed).sample(titles, k))
    return _split(ds, held, "test")


def validation_split(train: QADataset, fraction: float, seed: int) -> tuple[QADataset, QADataset]:
    """Carve validation articles out of the training articles: (fit, validation)."""
    fit, val = random_article_split(train, fraction, seed)
    return (
        QADataset(f"{train.name}:fit", fit.records, train.v2, train.source),
        QADataset(f"{train.name}:val", val.records, train.v2, train.source),
    )


def spread(records: list, n: int) -> list:
    """``n`` of ``records`` evenly spaced over them (every article of a split has its share: the
    routers hold whole articles out to validate).

    >>> spread(list(range(10)), 4), spread(list(range(3)), 5)
    ([0, 2, 5, 7], [0, 1, 2])
    """
    if n >= len(records):
        return list(records)
    return [records[i * len(records) // n] for i in range(n)]
