"""Agents known only by a SQuAD-format prediction file ``{question_id: answer_text}``."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from ..data.records import DataFormatError, QADataset
from ..data.squad_json import read_json
from ..qa.scoring import MISSING, SCORING_VERSION, gold_index, score_answer
from .cache import AgentCache
from .registry import AgentSpec

__all__ = [
    "read_prediction_file",
    "import_predictions",
    "add_agent_from_upload",
    "ImportReport",
    "MAX_PREDICTION_BYTES",
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
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        unknown_examples=unknown[:3],
    )
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


def add_agent_from_upload(
    agent_id: str,
    dataset: QADataset,
    data: bytes,
    gflops: float,
    name: str = "",
    cache: AgentCache | None = None,
    filename: str = "uploaded file",
    replace: bool = False,
) -> ImportReport:
    """Make an agent from an uploaded prediction file: validate, keep a copy under
    ``<cache>/uploads``, score into the agent cache, then register it (in that order, so a bad
    file changes nothing). A built-in agent's id is refused, a user agent's unless ``replace``."""
    import os
    import tempfile

    from ..paths import cache_dir
    from .registry import check_new_agent, register_agent

    if len(data) > MAX_PREDICTION_BYTES:
        raise DataFormatError(
            f"{filename} is {len(data):,} bytes; the limit is {MAX_PREDICTION_BYTES:,} bytes"
        )
    spec = AgentSpec(id=agent_id.strip(), dataset=dataset.name, gflops=gflops, name=name or agent_id.strip())
    check_new_agent(spec.id, replace)
    folder = cache_dir() / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".json.part")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    try:
        report = import_predictions(spec, dataset, cache or AgentCache(), tmp, label=filename)
    except Exception:
        os.unlink(tmp)
        raise
    final = folder / f"{dataset.name}-{spec.id}.json"
    os.replace(tmp, final)
    register_agent(AgentSpec(**{**spec.__dict__, "path": str(final)}), replace=replace)
    return report
