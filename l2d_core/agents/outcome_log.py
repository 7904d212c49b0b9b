"""Agents known by a per-question outcome log instead of answer text (kind ``outcome_log``), and
the agent that always abstains (kind ``abstain``).

An outcome log is a CSV or JSONL file with one row per question: its id, whether the agent was
right (or its answer text), optionally its confidence, its latency in seconds and its price in
dollars (a price column, or token counts priced by ``options["usd_per_1m_input"]`` and
``options["usd_per_1m_output"]``: :mod:`.prices`) — what a routing
study logs (``llm_routing/bisupervised/squadv2_local.csv``: ``index, is_possible, exact_match,
sm_confidence, pred_time``). Columns are found by name (:data:`COLUMNS`) or named in
``options["columns"]``. Rows whose id is a row number map to question ids through
``options["ids"]``, a CSV whose first column is that number and whose ``id`` column is the
question id; a log without an id column is keyed by its row number. ``options["no_answer"]``
is the text meaning "no answer" (e.g. ``NO ANSWER``); ``options["confidence_rule"]`` how to read
the confidence (:data:`~.confidence.CONFIDENCE_RULES`); ``options["confidence_signal"]`` the
name of the model signal it also feeds the cascade as (e.g. ``span_prob``).

**Where a log has no answer text, F1 and both endpoints follow EM**: a right answer is right on
both ends with F1 = 1, a wrong one wrong on both with F1 = 0, and the record's answer is None —
pages say "right"/"wrong" and never invent a text. Logged questions are read into the same agent
cache records as prediction files (:mod:`.prediction_file`); a log that covers part of the dataset
makes the pool route on the questions it covers.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..data.records import DataFormatError, QADataset
from ..paths import data_path
from ..qa.scoring import SCORING_VERSION, gold_index, score_answer
from .cache import AgentCache
from .catalog import AgentSpec
from .confidence import oriented
from .log_table import MAX_LOG_BYTES, read_table
from .measured import agent_gflops
from .prices import MAX_USD, TokenPrices

if TYPE_CHECKING:
    import pandas as pd


__all__ = [
    "LOG_KINDS",
    "LOG_FORMAT",
    "COLUMNS",
    "LOGGED",
    "LogReport",
    "read_outcome_log",
    "log_records",
    "abstain_records",
    "import_log",
    "log_needs_import",
    "MAX_LOG_BYTES",
    "MAX_LATENCY_S",
]

LOG_KINDS = ("outcome_log", "abstain")  # agents read in from a log, or made from nothing
LOG_FORMAT = 2  # stored in the cache metadata: bump when a log's records change meaning
LOGGED = "logged"  # status of a question known by its logged outcome only (no answer text)
MAX_LATENCY_S = 86_400.0  # a day: a logged latency beyond it is a unit or parsing mistake
# column → names it is found under (first present wins); ``options["columns"]`` overrides
COLUMNS = {
    "id": ("id", "qid", "question_id", "index", "row"),
    "correct": ("correct", "is_correct", "exact_match", "em"),
    "answer": ("answer", "prediction", "final_answer", "answer_text"),
    "confidence": ("confidence", "score", "sm_confidence", "gpt3_confidence", "margin"),
    "latency": ("latency_s", "seconds", "pred_time", "latency"),
    "usd": ("cost_usd", "usd", "total_cost", "cost"),  # dollars for that answer
    "tokens_in": ("tokens_in", "prompt_tokens", "input_tokens"),
    "tokens_out": ("tokens_out", "completion_tokens", "output_tokens"),
    "possible": ("is_possible",),
    "impossible": ("is_impossible",),
}
_TRUE, _FALSE = {"true", "1", "yes", "1.0"}, {"false", "0", "no", "0.0"}


@dataclass
class LogReport:
    agent: str
    dataset: str
    questions: int  # dataset questions the log covers
    rows: int
    unknown_ids: int  # rows whose question is not in the dataset (ignored)
    em: float  # percent over the covered questions
    f1: float
    has_text: bool
    has_confidence: bool
    has_latency: bool
    has_usd: bool = False
    sha256: str = ""
    unknown_examples: list[str] = field(default_factory=list)
    disagree_rows: list[int] = field(default_factory=list)  # `correct` says otherwise than the text

    def lines(self) -> list[str]:
        carried = (("answer text", self.has_text), ("confidence", self.has_confidence),
                   ("latency", self.has_latency), ("price in dollars", self.has_usd))  # fmt: skip
        carries = [n for n, h in carried if h]
        examples = f" e.g. {', '.join(self.unknown_examples)}" if self.unknown_examples else ""
        return [
            f"{self.agent} on {self.dataset}: EM {self.em:.2f}  F1 {self.f1:.2f}  "
            f"({self.questions} questions logged, {self.rows} rows)",
            f"  ids not in the dataset (ignored): {self.unknown_ids}{examples}",
            f"  the log carries: {', '.join(carries) or 'right/wrong only'}"
            + ("" if self.has_text else " (no answer text: F1 and endpoints follow EM)"),
        ] + self.disagreement()

    def disagreement(self) -> list[str]:
        """A warning when the log's right/wrong column and its answer text disagree (the text is
        scored), naming the rows."""
        if not self.disagree_rows:
            return []
        rows = ", ".join(map(str, self.disagree_rows[:5])) + (" …" if len(self.disagree_rows) > 5 else "")
        return [
            f"  warning: on {len(self.disagree_rows)} rows the log's right/wrong column disagrees with its "
            f"answer text scored against the dataset (rows {rows}); the answer text is what counts — "
            "check that the rows are aligned with the ids"
        ]


def _columns(table: pd.DataFrame, override: dict, name: str) -> dict[str, str]:
    found = {}
    for key, names in COLUMNS.items():
        if key in override:
            if override[key] not in table.columns:
                raise DataFormatError(
                    f"outcome log {name}: no column {override[key]!r} (named for {key}); "
                    f"it has {', '.join(map(str, table.columns))}"
                )
            found[key] = override[key]
            continue
        hit = next((c for c in names if c in table.columns), None)
        if hit is not None:
            found[key] = hit
    if "correct" not in found and "answer" not in found:
        right, text, has = (
            ", ".join(map(str, c)) for c in (COLUMNS["correct"], COLUMNS["answer"], table.columns)
        )
        raise DataFormatError(
            f"outcome log {name}: no column saying whether the agent was right ({right}) "
            f"and none with its answer ({text}); it has {has}"
        )
    return found


def _bool(v, name: str, row: int, col: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float) and v in (0, 1):
        return bool(v)
    s = str(v).strip().lower()
    if s in _TRUE or s in _FALSE:
        return s in _TRUE
    raise DataFormatError(
        f"outcome log {name}: row {row}, column {col} must be true/false, got {str(v)[:40]!r}"
    )


def _number(
    v, name: str, row: int, col: str, least: float | None = None, most: float | None = None, unit: str = ""
) -> float:
    try:
        f = float(v) if not isinstance(v, bool) else math.nan
    except (TypeError, ValueError, OverflowError):
        f = math.nan
    if not math.isfinite(f) or (least is not None and f < least) or (most is not None and f > most):
        need = f"a finite number >= {least:g}" if least is not None else "a finite number"
        need += f" and <= {most:g} ({unit})" if most is not None else ""
        raise DataFormatError(
            f"outcome log {name}: row {row}, column {col} must be {need}, got {str(v)[:40]!r}"
        )
    return f


def read_outcome_log(
    spec: AgentSpec, dataset: QADataset, path: str | Path | None = None, label: str | None = None
) -> tuple[dict, dict]:
    """``({question id: row}, summary)`` of an agent's outcome log, checked against ``dataset``
    (ids, duplicates, types, answerability where the log records it); each row a dict with
    ``correct`` or ``answer``, optionally ``confidence`` and ``latency`` (seconds, at most a day);
    the summary's ``row_of`` gives each question's row. Read from ``path`` (default: the agent's
    file) in the format of the agent's file name; every problem is one DataFormatError naming
    ``label`` (the user's file name; default the path)."""
    opts = spec.options if isinstance(spec.options, dict) else {}
    path = Path(path) if path else spec.resolved_path()
    name = label or str(path)
    table = read_table(path, name, Path(spec.path).suffix if spec.path else None)
    if table.empty:
        raise DataFormatError(f"outcome log {name} has no rows")
    cols = _columns(table, opts.get("columns", {}), name)
    keys = (
        [str(k).strip() for k in table[cols["id"]]] if "id" in cols else [str(i) for i in range(len(table))]
    )
    if "ids" in opts:
        id_map = _id_map(data_path(opts["ids"]))
        gone = [k for k in keys if k not in id_map]
        if gone:
            raise DataFormatError(
                f"outcome log {name}: {len(gone)} row keys are not in the id map {opts['ids']} "
                f"(e.g. {gone[0]!r})"
            )
        keys = [id_map[k] for k in keys]
    first: dict[str, int] = {}
    rows: dict[str, dict] = {}
    unknown: list[str] = []
    no_answer = str(opts.get("no_answer", "")).strip().lower()
    prices = TokenPrices.of(opts, f"outcome log {name}")
    for n, (qid, rec) in enumerate(zip(keys, table.to_dict("records")), start=1):
        if qid in first:
            raise DataFormatError(
                f"outcome log {name}: question {qid!r} appears twice (rows {first[qid]} and {n})"
            )
        first[qid] = n
        if qid not in dataset:
            unknown.append(qid)
            continue
        row: dict = {}
        if "answer" in cols:
            a = rec[cols["answer"]]
            a = "" if a is None or (isinstance(a, float) and math.isnan(a)) else str(a)
            row["answer"] = "" if no_answer and a.strip().lower() == no_answer else a
        if "correct" in cols:
            row["correct"] = _bool(rec[cols["correct"]], name, n, cols["correct"])
        if "confidence" in cols:
            row["confidence"] = _number(rec[cols["confidence"]], name, n, cols["confidence"])
        if "latency" in cols:
            row["latency"] = _number(
                rec[cols["latency"]], name, n, cols["latency"], 0.0, MAX_LATENCY_S, "a day, in seconds"
            )
        if "usd" in cols:
            row["usd"] = _number(
                rec[cols["usd"]], name, n, cols["usd"], 0.0, MAX_USD, "dollars for one answer"
            )
        elif prices is not None and "tokens_in" in cols:
            counts = [
                _number(rec[cols[k]], name, n, cols[k], 0.0) if k in cols else 0.0
                for k in ("tokens_in", "tokens_out")
            ]
            row["usd"] = prices.usd(*counts)
        impossible = dataset[qid].is_impossible or (dataset.v2 and not dataset[qid].answers)
        for key, says_impossible in (("possible", False), ("impossible", True)):
            if key in cols and _bool(rec[cols[key]], name, n, cols[key]) != (impossible == says_impossible):
                raise DataFormatError(
                    f"outcome log {name}: row {n} says question {qid!r} is "
                    f"{'un' if impossible != says_impossible else ''}answerable, the dataset says not — "
                    "are the rows aligned with the ids?"
                )
        rows[qid] = row
    if not rows:
        raise DataFormatError(
            f"outcome log {name}: none of its {len(keys)} questions belong to dataset {dataset.name!r} "
            f"(e.g. {unknown[0]!r}) — wrong dataset or id map?"
        )
    summary = {"rows": len(keys), "unknown": unknown, "columns": cols, "row_of": first}
    return rows, summary


def _id_map(path: Path) -> dict[str, str]:
    table = read_table(path, str(path))
    if "id" not in table.columns or len(table.columns) < 2:
        raise DataFormatError(f"id map {path}: needs a key column first and an 'id' column")
    key = table.columns[0]
    return {str(k).strip(): str(v).strip() for k, v in zip(table[key], table["id"])}


def log_records(spec: AgentSpec, dataset: QADataset, rows: dict[str, dict], gflops: float) -> dict[str, dict]:
    """Agent cache records of logged rows: scored from the answer text where the log has it,
    else from the logged outcome (answer None, status ``logged``, F1 and endpoints = EM)."""
    opts = spec.options if isinstance(spec.options, dict) else {}
    rule, signal = opts.get("confidence_rule", "direct"), opts.get("confidence_signal")
    gold = gold_index(dataset) if any("answer" in r for r in rows.values()) else None
    out = {}
    for qid, row in rows.items():
        if "answer" in row:
            rec = score_answer(gold, qid, row["answer"])
        else:
            ok = row["correct"]
            rec = {"answer": None, "start": None, "end": None, "status": LOGGED,
                   "start_ok": ok, "end_ok": ok, "em": float(ok), "f1": float(ok)}  # fmt: skip
        conf: dict = {}
        if "confidence" in row:
            conf["score"] = oriented(row["confidence"], row.get("answer"), rule)
            if signal:
                conf[signal] = row["confidence"]
        latency = row.get("latency")
        source = f"log:{spec.resolved_path().name}"
        rec.update(gflops=gflops, latency_ms=None if latency is None else 1000.0 * latency,
                   usd=row.get("usd"), source=source, confidence=conf)  # fmt: skip
        out[qid] = rec
    return out


def abstain_records(dataset: QADataset) -> dict[str, dict]:
    """The abstaining agent's records: "no answer" to every question at no cost, no latency and no price —
    right exactly on the unanswerable questions of a SQuAD v2.0 set."""
    gold = gold_index(dataset)
    out = {}
    for qid in dataset.qids:
        rec = score_answer(gold, qid, "")
        rec.update(gflops=0.0, latency_ms=0.0, usd=0.0, source="abstain", confidence=None)
        out[qid] = rec
    return out


def _digest(spec: AgentSpec, path: str | Path | None = None) -> str:
    """The log's fingerprint: its bytes (read from ``path`` when given, a copy about to become the
    agent's file), its id map and options."""
    if spec.kind == "abstain":
        return "abstain"
    h = hashlib.sha256(Path(path or spec.resolved_path()).read_bytes())
    if isinstance(spec.options, dict) and "ids" in spec.options:
        h.update(data_path(spec.options["ids"]).read_bytes())
    h.update(json.dumps(spec.options, sort_keys=True).encode())
    return h.hexdigest()


def _questions_digest(dataset: QADataset) -> str:
    return hashlib.sha256("\n".join(sorted(dataset.qids)).encode()).hexdigest()[:16]


def log_needs_import(dataset: QADataset, spec: AgentSpec, cache: AgentCache) -> bool:
    """Whether a log agent must be (re-)read in: nothing cached, another format or scoring
    version, last read for other questions (a slice of the dataset), or its log, id map or
    options changed since."""
    meta = cache.meta(dataset.name, spec.id)
    if not cache.done_ids(dataset.name, spec.id) or meta.get("log_format") != LOG_FORMAT:
        return True
    if meta.get("scoring_version") != SCORING_VERSION or meta.get("read_for") != _questions_digest(dataset):
        return True
    return spec.kind != "abstain" and (
        not spec.resolved_path().is_file() or meta.get("sha256") != _digest(spec)
    )


def import_log(
    spec: AgentSpec,
    dataset: QADataset,
    cache: AgentCache,
    path: str | Path | None = None,
    label: str | None = None,
) -> LogReport:
    """Read an outcome log (or make the abstaining agent's answers) into the agent cache, in one
    transaction, after the whole log has been checked: a bad log leaves the cache as it was.
    ``label``: the file's name in errors (an upload's own name, not its temporary copy)."""
    disagree: list[int] = []
    if spec.kind not in LOG_KINDS:
        raise ValueError(f"agent {spec.id} is of kind {spec.kind!r}, not one of {LOG_KINDS}")
    if spec.kind == "abstain":
        records, summary = abstain_records(dataset), {"rows": len(dataset), "unknown": []}
    else:
        rows, summary = read_outcome_log(spec, dataset, path, label)
        records = log_records(spec, dataset, rows, agent_gflops(spec))
        disagree = [summary["row_of"][q] for q, r in rows.items() if "answer" in r and "correct" in r
                    and bool(records[q]["em"]) != r["correct"]]  # fmt: skip
    n = len(records)
    first = next(iter(records.values()))
    report = LogReport(
        agent=spec.id,
        dataset=dataset.name,
        questions=n,
        rows=summary["rows"],
        unknown_ids=len(summary["unknown"]),
        em=100 * sum(r["em"] for r in records.values()) / n,
        f1=100 * sum(r["f1"] for r in records.values()) / n,
        has_text=first["status"] != LOGGED,
        has_confidence=bool(first["confidence"]),
        has_latency=first["latency_ms"] is not None,
        has_usd=first.get("usd") is not None,
        sha256=_digest(spec, path),
        unknown_examples=summary["unknown"][:3],
        disagree_rows=disagree,
    )
    meta = {
        "scoring_version": SCORING_VERSION,
        "log_format": LOG_FORMAT,
        "kind": spec.kind,
        "gflops": first["gflops"],
        "gflops_source": spec.gflops_source,
        "source": str(path or (spec.resolved_path() if spec.kind != "abstain" else "abstain")),
        "sha256": report.sha256,
        "questions": n,
        "partial": n < len(dataset),
        "unknown_ids": report.unknown_ids,
        "has_text": report.has_text,
        "read_for": _questions_digest(dataset),
    }
    cache.put_many(dataset.name, spec.id, records, meta=meta, replace=True)
    return report
