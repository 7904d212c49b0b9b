"""An agent's confidence in its own answer as one number per question, and confidence files kept
beside prediction files.

A confidence record is the dict an agent's cache record holds under ``confidence``: model agents
record their signals (``span_prob``, ``mean_logprob``, …), outcome logs their logged score under
``score``. :func:`confidence_score` turns one record into one number, higher = surer of the
answer given, or NaN when the agent gave none. A confidence file is a JSON object
``{question_id: number}`` (e.g. a ``run_qa.py`` model's ``null_odds.json``) that an agent of kind
``prediction_file`` names under ``options["confidence_file"]``; ``options["confidence_rule"]``
says how to read it (:data:`CONFIDENCE_RULES`).
"""

from __future__ import annotations

import math
import stat
from pathlib import Path

from ..data.records import DataFormatError
from ..data.squad_json import read_json

__all__ = [
    "CONFIDENCE_RULES",
    "confidence_score",
    "oriented",
    "read_confidence_file",
    "file_confidences",
    "check_confidence_file",
    "MAX_CONFIDENCE_BYTES",
]

MAX_CONFIDENCE_BYTES = 64 * 1024 * 1024  # a SQuAD dev run's null_odds.json is ~0.5 MB

# ``direct``: the number is the confidence (higher = surer). ``null_margin``: the number is the
# evidence for "no answer" (null odds, P(no) − P(phrase)): it backs an empty answer and speaks
# against any other, so the confidence in the answer given is ``v`` if it is empty, else ``−v``.
CONFIDENCE_RULES = ("direct", "null_margin")


def oriented(value: float, answer: str | None, rule: str = "direct") -> float:
    """The confidence in ``answer`` that ``value`` gives under ``rule``.

    >>> oriented(2.5, "", "null_margin"), oriented(2.5, "Paris", "null_margin"), oriented(0.3, None)
    (2.5, -2.5, 0.3)
    """
    if rule not in CONFIDENCE_RULES:
        raise ValueError(f"unknown confidence rule {rule!r}; known: {', '.join(CONFIDENCE_RULES)}")
    if rule == "direct":
        return float(value)
    return float(value) if isinstance(answer, str) and not answer.strip() else -float(value)


def confidence_score(record) -> float:
    """One number per confidence record: its ``score`` (outcome logs, confidence files), else a
    model agent's span probability, else the exponent of a generative agent's mean token
    log-probability; NaN where there is none.

    >>> confidence_score({"score": 0.4}), confidence_score({"span_prob": 0.7, "margin": 3.0})
    (0.4, 0.7)
    >>> round(confidence_score({"mean_logprob": -0.5}), 4), confidence_score(None)
    (0.6065, nan)
    """
    if not isinstance(record, dict):
        return math.nan
    for key, f in (("score", float), ("span_prob", float), ("mean_logprob", math.exp)):
        v = record.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            return f(v)
    return math.nan


def read_confidence_file(path: str | Path, label: str | None = None) -> dict[str, float]:
    """A confidence file ``{question_id: number}``, checked: every problem is one short
    DataFormatError naming the file."""
    name = label or str(path)
    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        raise FileNotFoundError(f"confidence file not found: {name}") from None
    if not stat.S_ISREG(st.st_mode):
        raise DataFormatError(f"confidence file {name} is not a regular file")
    if st.st_size > MAX_CONFIDENCE_BYTES:
        raise DataFormatError(
            f"confidence file {name} is {st.st_size:,} bytes; the limit is {MAX_CONFIDENCE_BYTES:,}"
        )
    doc = read_json(path, "confidence file", label=name, unique_keys=True)
    if not isinstance(doc, dict) or not doc:
        raise DataFormatError(
            f"confidence file {name}: expected a non-empty JSON object {{question_id: number}}"
        )
    bad = [
        k
        for k, v in doc.items()
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
    ]
    if bad:
        raise DataFormatError(
            f"confidence file {name}: {len(bad)} values are not finite numbers (e.g. id {bad[0]!r}: "
            f"{str(doc[bad[0]])[:40]!r})"
        )
    return {k: float(v) for k, v in doc.items()}


def _confidence_path(spec) -> Path | None:
    rel = spec.options.get("confidence_file") if isinstance(spec.options, dict) else None
    if not rel:
        return None
    from ..paths import data_path

    return data_path(str(rel))


def check_confidence_file(spec, qids=None) -> dict[str, float] | None:
    """Check a prediction-file agent's confidence file when it is registered, as its prediction
    file is: its rule known, the file a regular file under the size limit, every value a finite
    number, and (given the dataset's ``qids``) some of its ids questions of the dataset. Returns
    its values (``None`` without a confidence file); every problem one line naming agent and file."""
    path = _confidence_path(spec)
    rule = spec.options.get("confidence_rule", "direct") if isinstance(spec.options, dict) else "direct"
    if rule not in CONFIDENCE_RULES:
        raise DataFormatError(
            f"agent {spec.id}: unknown confidence_rule {str(rule)[:40]!r}; "
            f"known: {', '.join(CONFIDENCE_RULES)}"
        )
    if path is None:
        return None
    values = read_confidence_file(path)
    if qids is not None and not set(values) & set(qids):
        raise DataFormatError(
            f"confidence file {path} of agent {spec.id}: none of its {len(values)} ids are questions "
            "of this dataset — wrong file?"
        )
    return values


def file_confidences(spec, qids, answers) -> list[dict | None]:
    """The confidence records of a prediction-file agent with ``options["confidence_file"]``
    (relative to the data folder) for ``qids`` and the agent's ``answers``: ``{"score": the
    oriented value, <rule's signal>: the raw value}`` (a ``null_margin`` file also feeds the
    cascade's ``null_margin`` column); None for a question the file does not cover. An agent
    without a confidence file gives None everywhere."""
    values = check_confidence_file(spec, qids)
    if values is None:
        return [None] * len(qids)
    rule = spec.options.get("confidence_rule", "direct")
    out: list[dict | None] = []
    for q, a in zip(qids, answers):
        if q not in values:
            out.append(None)
            continue
        rec = {"score": oriented(values[q], a, rule)}
        if rule == "null_margin":
            rec["null_margin"] = values[q]
        out.append(rec)
    return out
