"""Named datasets: the names BENCHMARK.md uses, resolved under ``L2D_DATA_DIR``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..paths import DataNotFoundError, data_dir
from .checksums import verify_dataset_file
from .records import QADataset
from .squad_json import load_squad_json
from .user_datasets import user_dataset_names, user_dataset_path

__all__ = ["DatasetSpec", "DATASETS", "load_dataset", "dataset_path", "dataset_names", "dataset_description"]


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    description: str
    files: tuple[str, ...] = ()  # SQuAD JSON: candidates under the data dir, first found wins
    hf_path: str = ""  # Hugging Face `datasets` source (hub id or local path)
    hf_config: str | None = None
    hf_split: str = "validation"


DATASETS: dict[str, DatasetSpec] = {
    s.name: s
    for s in (
        DatasetSpec("squad11", "SQuAD v1.1 dev (official file)", files=("squad/dev-v1.1.json",)),
        DatasetSpec(
            "squad20",
            "SQuAD v2.0 dev (official file, else the derived rebuild)",
            files=("squad/dev-v2.0.json", "squad/derived/dev-v2.0.explorer-derived.json"),
        ),
        DatasetSpec("hf-squad", "SQuAD v1.1 via Hugging Face datasets", hf_path="squad"),
        DatasetSpec("hf-squad_v2", "SQuAD v2.0 via Hugging Face datasets", hf_path="squad_v2"),
        DatasetSpec(
            "hf-trivia_qa", "TriviaQA rc via Hugging Face datasets", hf_path="trivia_qa", hf_config="rc"
        ),
    )
}


def dataset_path(name: str, root: Path | None = None) -> Path:
    """The file a SQuAD-JSON dataset loads from; a clear error naming where it looked."""
    spec = _spec(name)
    root = Path(root) if root else data_dir()
    for rel in spec.files:
        if (root / rel).is_file():
            return root / rel
    raise DataNotFoundError(
        f"dataset {name!r}: none of {list(spec.files)} under {root}. Set L2D_DATA_DIR or run "
        f"`python scripts/download_data.py`."
    )


def _spec(name: str) -> DatasetSpec:
    try:
        return DATASETS[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(dataset_names())}") from None


def dataset_names() -> list[str]:
    """The built-in datasets, then those registered from a user's log (:mod:`.user_datasets`)."""
    return [*DATASETS, *(n for n in user_dataset_names() if n not in DATASETS)]


def dataset_description(name: str) -> str:
    """What a dataset is, in a few words."""
    if name in DATASETS:
        return DATASETS[name].description
    path = user_dataset_path(name)
    if path is None:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(dataset_names())}")
    return _user_description(name, str(path), path.stat().st_mtime_ns)


@lru_cache(maxsize=32)
def _user_description(name: str, path: str, mtime_ns: int) -> str:
    """Read once per version of the file (the dataset menu asks on every page run)."""
    return str(json.loads(Path(path).read_bytes()).get("description") or f"{name}, registered from a log")


@lru_cache(maxsize=8)
def _load_cached(name: str, root: str) -> QADataset:
    spec = _spec(name)
    if spec.files:
        path = dataset_path(name, Path(root))
        rel = path.relative_to(root).as_posix()
        verify_dataset_file(path, rel, name)  # a known file must have its known bytes
        return load_squad_json(path, name=name, label=rel)
    from .hf import load_hf_dataset

    return load_hf_dataset(spec.hf_path, config=spec.hf_config, split=spec.hf_split, name=name)


def load_dataset(name: str, root: Path | None = None) -> QADataset:
    """Load a registered dataset (memoized per process). A known file (the official SQuAD dev
    sets, the derived v2.0 file) must have its known sha256: see :mod:`l2d_core.data.checksums`.
    A dataset registered from a user's log is read from its file (again when it was rewritten)."""
    if name not in DATASETS and (path := user_dataset_path(name)) is not None:
        return _load_user(name, str(path), path.stat().st_mtime_ns)
    return _load_cached(name, str(Path(root) if root else data_dir()))


@lru_cache(maxsize=8)
def _load_user(name: str, path: str, mtime_ns: int) -> QADataset:
    return load_squad_json(path, name=name, label=f"dataset {name}")
