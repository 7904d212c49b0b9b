"""What every target evaluator shares: the row it returns, and where it finds the results of
its pool (this run, or another run's ``results.json`` beside it)."""

from __future__ import annotations

from ..evaluation.results import Results, run_key

__all__ = ["target_key", "make_target", "source_of", "missing"]


def target_key(t: dict) -> str:
    """The run a target reads: its pool, with ``:answerable`` for a target on the answerable
    questions only (``"questions": "answerable"``).

    >>> target_key({"pool": "PLLM"}), target_key({"pool": "PLLM", "questions": "answerable"})
    ('PLLM', 'PLLM:answerable')
    """
    return run_key({"pool": t["pool"], "questions": t.get("questions", "all")})


def make_target(tid: str, text: str, status: str, detail: str, **values) -> dict:
    return {"id": tid, "target": text, "status": status, "detail": detail, **values}


def source_of(results: Results, t: dict, siblings: dict | None) -> tuple[dict | None, str]:
    """The results the target ``t`` reads, and where they come from (a line)."""
    key = target_key(t)
    if run_key(results) == key:
        return results, "this run"
    sib = (siblings or {}).get(key)
    if isinstance(sib, dict) and isinstance(sib.get("results"), dict):
        res = sib["results"]
        return res, f"{sib.get('path', 'another results file')} (created {res.get('created')})"
    return None, ""


def missing(t: dict, text: str, results: Results) -> dict:
    return make_target(t["id"], text, "n/a", f"no {target_key(t)} results (this run is {run_key(results)})")
