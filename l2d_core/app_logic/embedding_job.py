"""The embedding job (a :mod:`l2d_core.background` job): every question and context of a
dataset embedded once into the embedding cache, its progress read back by any page."""

from __future__ import annotations

from ..background import JobStatus, Reporter, job_key, start
from ..paths import DEFAULT_ENCODER

__all__ = ["embedding_key", "embedding_step", "embed_dataset", "start_embedding"]


def embedding_key(dataset: str, encoder: str = DEFAULT_ENCODER, features: str = "separate") -> str:
    return job_key("embeddings", dataset, encoder, features)


def embedding_step(report: Reporter):
    """An encoder's ``step(done, total, work)`` that reports as the stage "Embedding …"."""
    started = []

    def step(done: int, total: int, work: float) -> None:
        if not started:
            report.stage("Embedding the questions and contexts", "texts", total)
            started.append(True)
        report(done, total, work=work)

    return step


def embed_dataset(report: Reporter, dataset: str, encoder: str = DEFAULT_ENCODER, features: str = "separate"):
    """The job: embed every question and context of ``dataset`` into the embedding cache (those
    :func:`~l2d_core.evaluation.benchmark.embeddings_on_disk` checks), each batch kept as done."""
    from ..data import load_dataset
    from ..evaluation.benchmark import encoder_for
    from ..routers.features import feature_texts

    report.stage("Loading the encoder and the questions")
    enc = encoder_for(encoder)
    enc.embed(feature_texts(enc, list(load_dataset(dataset)), features), step=embedding_step(report))


def start_embedding(dataset: str, encoder: str = DEFAULT_ENCODER, features: str = "separate") -> JobStatus:
    """Start (or attach to) the embedding job of ``dataset``."""
    kwargs = {"dataset": dataset, "encoder": encoder, "features": features}
    title = f"Embedding the questions and contexts of {dataset}"
    return start(embedding_key(dataset, encoder, features), f"{__name__}:embed_dataset", kwargs, title)
