"""Data: one record type, SQuAD JSON and Hugging Face sources, article splits, registry."""

from .datasets import DATASETS, dataset_description, dataset_names, load_dataset
from .records import DataFormatError, QADataset, QARecord
from .splits import (
    BENCHMARK_TEST_ARTICLES,
    EmptySplitError,
    benchmark_split,
    held_out_titles,
    random_article_split,
    validation_split,
)
from .squad_json import load_squad_json, read_json

__all__ = [
    "QARecord",
    "QADataset",
    "DataFormatError",
    "DATASETS",
    "dataset_names",
    "dataset_description",
    "load_dataset",
    "BENCHMARK_TEST_ARTICLES",
    "EmptySplitError",
    "benchmark_split",
    "held_out_titles",
    "random_article_split",
    "validation_split",
    "load_squad_json",
    "read_json",
]
