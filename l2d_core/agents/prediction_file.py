"""Agents known only by a SQuAD-format prediction file ``{question_id: answer_text}``."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from ..data.records import DataFormatError, QADataset
from ..data.squad_json import read_json
from ..qa.scoring import MISSING, SCORING_VERSION, gold_index, score_answer
from .cache import AgentCache
from .catalog import AgentSpec, agent_lock
from .confidence import check_confidence_file

__all__ = [
    "read_prediction_file",
    "import_predictions",
    "ImportReport",
    "MAX_PREDICTION_BYTES",
    "file_sha256",
    "answers_match_source",
]

MAX_PREDICTION_BYTES = 200 * 1024 * 1024  # a SQuAD dev prediction file is ~0.6 MB


@dataclass
class ImportReport:
    agent: str
    dataset: str
    questions: int
    answered: int
    missing: int  # dataset questions the file has no answer for (scored wrong)
    unknown_ids: int  # ids in the file that the dataset does not have (ignored)
    not_found: int  # answers that could not be located in the context (positions wrong)
    ambiguous: int  # answers whose words occur more than once in the context (first taken)
    em: float
    f1: float
    sha256: str
    unknown_examples: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        examples = f" e.g. {', '.join(self.unknown_examples)}" if self.unknown_examples else ""
        return [
            f"{self.agent} on {self.dataset}: EM {self.em:.2f}  F1 {self.f1:.2f}  "
            f"({self.answered}/{self.questions} answered)",
            f"  missing ids (counted wrong): {self.missing}; ids not in the dataset (ignored): "
            f"{self.unknown_ids}{examples}",
            f"  answers not found in the context: {self.not_found}; ambiguous (first occurrence): "
            f"{self.ambiguous}",
        ]


def _short(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def read_prediction_file(path: str | Path, label: str | None = None) -> dict[str, str]:
    """Read and validate a prediction file; every problem becomes one short DataFormatError
    that names the file (``label``: the name the user knows it by, e.g. an upload's)."""
    path = Path(path)
    name = label or str(path)
    if path.is_file() and path.stat().st_size > MAX_PREDICTION_BYTES:
        raise DataFormatError(
            f"prediction file {name} is {path.stat().st_size:,} bytes; the limit is "
            f"{MAX_PREDICTION_BYTES:,} bytes"
        )
    doc = read_json(path, "prediction file", label=name, unique_keys=True)
    if isinstance(doc, dict) and isinstance(doc.get("data"), list):
        raise DataFormatError(
            f"{name} is a SQuAD dataset, not predictions: a prediction file maps each question id "
            'to its answer text, {"question id": "answer", …}'
        )
    if not isinstance(doc, dict):
        raise DataFormatError(
            f"prediction file {name}: expected a JSON object {{question_id: answer}}, "
            f"got a JSON {type(doc).__name__.replace('dict', 'object')}"
        )
    bad = [k for k, v in doc.items() if not isinstance(v, str)]
    if bad:
        raise DataFormatError(
            f"prediction file {name}: {len(bad)} answers are not strings (e.g. id {_short(bad[0], 40)}: "
            f"{_short(doc[bad[0]])})"
        )
    if not doc:
        raise DataFormatError(f"prediction file {name} is empty")
    return doc


def import_predictions(
    spec: AgentSpec,
    dataset: QADataset,
    cache: AgentCache,
    path: str | Path | None = None,
    label: str | None = None,
) -> ImportReport:
    """Score a prediction file against ``dataset`` and write every question to the cache.

    The file is read and validated completely before anything is written, so a bad file
    leaves the cache as it was. ``label`` names the file in messages (default: its path).
    """
    path = Path(path) if path else spec.resolved_path()
    preds = read_prediction_file(path, label)
    known = set(dataset.qids)
    check_confidence_file(spec, known)  # checked at registration, as the predictions are
    unknown = [q for q in preds if q not in known]
    if len(unknown) == len(preds):
        raise DataFormatError(
            f"prediction file {label or path}: none of its {len(preds)} ids belong to dataset "
            f"{dataset.name!r} (e.g. {_short(unknown[0], 40)}) — wrong dataset?"
        )
    gold = gold_index(dataset)
    records = {}
    for qid in dataset.qids:
        rec = score_answer(gold, qid, preds.get(qid))
        rec.update(gflops=spec.gflops, latency_ms=None, source=f"file:{path.name}")
        records[qid] = rec
    statuses = [r["status"] for r in records.values()]
    report = ImportReport(
        agent=spec.id,
        dataset=dataset.name,
        questions=len(records),
        answered=len(records) - statuses.count(MISSING),
        missing=statuses.count(MISSING),
        unknown_ids=len(unknown),
        not_found=statuses.count("not_found"),
        ambiguous=statuses.count("ambiguous"),
        em=100 * sum(r["em"] for r in records.values()) / len(records),
        f1=100 * sum(r["f1"] for r in records.values()) / len(records),
        sha256=file_sha256(path),
        unknown_examples=unknown[:3],
    )
    if spec.source_sha256 and report.sha256 != spec.source_sha256:
        raise DataFormatError(
            f"the prediction file of agent {spec.id} ({label or path.name}) has changed since the agent "
            "was registered: import it again (scripts/import_predictions.py --replace)"
        )
    with agent_lock(spec.id):  # one transaction with the agent's registration (see registry_file)
        cache.put_many(
            dataset.name,
            spec.id,
            records,
            meta={
                "scoring_version": SCORING_VERSION,
                "gflops": spec.gflops,
                "gflops_source": spec.gflops_source,
                "kind": spec.kind,
                "source": str(path),
                "sha256": report.sha256,
                "missing": report.missing,
                "unknown_ids": report.unknown_ids,
                "not_found": report.not_found,
                "ambiguous": report.ambiguous,
                "questions": report.questions,
            },
        )
    return report


_SHA256: dict[str, tuple] = {}  # file → (its stat stamp, its sha256)


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes (remembered while the file is unchanged)."""
    path = Path(path)
    st = path.stat()
    stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
    hit = _SHA256.get(str(path))
    if hit is None or hit[0] != stamp:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _SHA256[str(path)] = hit = (stamp, h.hexdigest())
    return hit[1]


def answers_match_source(spec: AgentSpec, dataset_name: str, cache: AgentCache) -> bool:
    """Whether a prediction-file agent's answers in the cache came from the file it is registered
    with (the sha256 the registry recorded, else that of the file now at its path): the agent
    cache records which file it imported. False also when nothing is cached; always True for model
    agents and for a file that is gone (nothing to compare with)."""
    if spec.kind != "prediction_file":
        return True
    want = spec.source_sha256
    if not want:
        path = spec.resolved_path()
        if not path.is_file():
            return True
        want = file_sha256(path)
    return cache.meta(dataset_name, spec.id).get("sha256") == want
