"""What every target evaluator shares: the row it returns, where it finds the results of its pool
(this run, or another run's ``results.json`` beside it), and the router and operating point a
target reads, chosen on the training articles (the comparison's ``validation`` scores) and read
once on test: no choice a report makes looks at a test label."""

from __future__ import annotations

import math

from ..evaluation.results import Results, run_key
from .frames import num, our_routers, points_of, routers_of

__all__ = ["target_key", "make_target", "source_of", "missing", "chosen_router", "chosen_point"]


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


def chosen_router(res: dict, allowed=None) -> str | None:
    """The L2D router the reports read: of best validation AIQ (out of fold, on the training
    articles), among ``allowed`` ids when given; None when no L2D router has validation scores
    (results of an older version: run the benchmark again).

    >>> res = {"routers": {"l2d-cascade": {"validation": {"aiq": 60.0}, "apgr": 0.9},
    ...        "l2d-staged": {"validation": {"aiq": 61.0}, "apgr": 0.5}, "l2d-posthoc": {"apgr": 1.0}}}
    >>> chosen_router(res), chosen_router(res, ["l2d-cascade", "l2d-posthoc"]), chosen_router({"routers": {}})
    ('l2d-staged', 'l2d-cascade', None)
    """
    scores = {
        rid: num((routers_of(res)[rid].get("validation") or {}).get("aiq"))
        for rid in our_routers(res)
        if allowed is None or rid in allowed
    }
    scores = {k: v for k, v in scores.items() if v is not None}
    return max(scores, key=scores.get) if scores else None


def chosen_point(res: dict, rid: str, fits=lambda p: True) -> tuple[int, dict] | None:
    """(index, point) of router ``rid`` that a target reads: its per-TFLOP price point nearest
    the price chosen on validation, or — when that point does not satisfy ``fits`` (a condition
    on what the point decided, never on its EM) — the nearest dearer price point that does; None
    if none does.

    >>> r = {"validation": {"price": 0.1}, "points": [{"price": 0.05, "share": 0.4},
    ...      {"price": 0.1, "share": 0.3}, {"price": 0.5, "share": 0.1}, {"beta1": 0.0, "share": 1.0}]}
    >>> res = {"routers": {"l2d-a": r}}
    >>> chosen_point(res, "l2d-a")[0], chosen_point(res, "l2d-a", lambda p: p["share"] <= 0.2)[0]
    (1, 2)
    """
    r = routers_of(res).get(rid) or {}
    want = num((r.get("validation") or {}).get("price"))
    priced = [(i, p) for i, p in enumerate(points_of(r)) if num(p.get("price")) is not None]
    if want is None or not priced:
        return None
    log = lambda x: math.log(max(x, 1e-12))  # noqa: E731
    start = min(priced, key=lambda ip: abs(log(ip[1]["price"]) - log(want)))[1]["price"]
    for i, p in sorted(priced, key=lambda ip: ip[1]["price"]):
        if p["price"] >= start and fits(p):
            return i, p
    return None
