"""Targets against a baseline router and at an operating constraint (the LLM pools of
BENCHMARK.md, issue 25) — evaluators registered into :mod:`~l2d_core.report.targets`:

The router a target reads is the L2D router chosen on validation (best validation AIQ, on the
training articles: :func:`~l2d_core.report.target_common.chosen_router`), never the best on test.

- ``apgr_aiq_vs`` (``min``, ``router``): the chosen L2D router has APGR ≥ ``min`` **and**
  its AIQ lies above ``router``'s by the paired bootstrap: the 95% interval of
  AIQ(chosen) − AIQ(router) over the same test-question resamples lies above 0;
- ``apgr_vs`` (``router``): the chosen L2D router is at or above ``router``'s APGR
  (the paired interval of the difference shown);
- ``em_at_share`` (``agent``, ``max_share``, ``min_em``): EM ≥ ``min_em`` (%) at the chosen
  router's operating point (its price chosen on validation, or the nearest dearer one that sends
  at most ``max_share`` of the questions to ``agent``, the remote one: decided without labels);
- ``budget_share`` (``share``, ``tolerance``): every L2D router that follows budgets lands
  within ±``tolerance`` of a ``share`` budget of expert calls on test (the comparison's
  ``budgets`` rows).

>>> res = {"pool": "X", "routers": {"l2d-cascade": {"apgr": 0.9, "apgr_diff": {"knn": 0.1},
...        "apgr_diff_ci": {"knn": [0.02, 0.2]}, "validation": {"aiq": 60.0}}, "knn": {"apgr": 0.8}}}
>>> LLM_TARGETS["apgr_vs"](res, None, {"id": "t", "pool": "X", "router": "knn"})["status"]
'met'
"""

from __future__ import annotations

from ..evaluation.results import Results
from .frames import fmt_ci, interval, num, our_routers, points_of, router_role, routers_of
from .target_common import chosen_point, chosen_router, make_target, missing, source_of, target_key

__all__ = ["LLM_TARGET_TYPES", "LLM_TARGETS"]

LLM_TARGET_TYPES = {
    "apgr_aiq_vs": ("min", "router"),
    "apgr_vs": ("router",),
    "em_at_share": ("agent", "max_share", "min_em"),
    "budget_share": ("share", "tolerance"),
}


def _best_apgr(res: dict) -> tuple[str | None, dict[str, float]]:
    """The L2D router chosen on validation, and every L2D router's APGR (shown beside it)."""
    routers = routers_of(res)
    vals = {rid: num(routers[rid].get("apgr")) for rid in our_routers(res)}
    vals = {k: v for k, v in vals.items() if v is not None}
    chosen = chosen_router(res, list(vals))
    return chosen, vals


def _all(vals: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.3f}" for k, v in vals.items())


def _apgr_aiq_vs(results: Results, siblings: dict | None, t: dict) -> dict:
    ref = t["router"]
    text = (
        f"APGR of the L2D router chosen on validation ≥ {t['min']:.2f} and AIQ above {ref}'s "
        f"(paired 95% interval of the difference > 0) on {target_key(t)}"
    )
    res, src = source_of(results, t, siblings)
    if res is None:
        return missing(t, text, results)
    best, vals = _best_apgr(res)
    routers = routers_of(res)
    if best is None or ref not in routers:
        return make_target(
            t["id"], text, "n/a", f"no L2D router chosen on validation with an APGR, or no {ref}, in {src}"
        )
    r = routers[best]
    diff = num((r.get("aiq_diff") or {}).get(ref))
    ci = interval((r.get("aiq_diff_ci") or {}).get(ref))
    if diff is None or ci is None:
        return make_target(t["id"], text, "n/a", f"no paired AIQ difference {best} − {ref} in {src}")
    ok_apgr, ok_aiq = vals[best] >= t["min"], ci[0] > 0
    detail = (
        f"chosen {best}: APGR {vals[best]:.3f} (95% CI {fmt_ci(r.get('apgr_ci'))}) vs {t['min']:.2f} "
        f"[{'ok' if ok_apgr else 'short'}]; AIQ {num(r.get('aiq')):.3f} − {ref} "
        f"{num(routers[ref].get('aiq')):.3f} = {diff:+.3f} (paired 95% CI [{ci[0]:+.3f}, {ci[1]:+.3f}]) "
        f"[{'above 0' if ok_aiq else 'not above 0'}]; {ref} APGR {num(routers[ref].get('apgr')) or 0:.3f}; "
        f"all: {_all(vals)}; from {src}"
    )
    status = "met" if ok_apgr and ok_aiq else "not met"
    return make_target(
        t["id"], text, status, detail, router=best, value=vals[best], aiq_diff=diff, interval=list(ci)
    )


def _apgr_vs(results: Results, siblings: dict | None, t: dict) -> dict:
    ref = t["router"]
    text = f"APGR of the L2D router chosen on validation at or above {ref}'s on {target_key(t)}"
    res, src = source_of(results, t, siblings)
    if res is None:
        return missing(t, text, results)
    best, vals = _best_apgr(res)
    routers = routers_of(res)
    theirs = num(routers.get(ref, {}).get("apgr"))
    if best is None or theirs is None:
        return make_target(
            t["id"], text, "n/a", f"no L2D router chosen on validation with an APGR, or no {ref}, in {src}"
        )
    ci = interval((routers[best].get("apgr_diff_ci") or {}).get(ref))
    ci_txt = f" (paired 95% CI of the difference [{ci[0]:+.3f}, {ci[1]:+.3f}])" if ci else ""
    detail = (
        f"chosen {best}: APGR {vals[best]:.3f} (95% CI {fmt_ci(routers[best].get('apgr_ci'))}) vs {ref} "
        f"{theirs:.3f} (95% CI {fmt_ci(routers[ref].get('apgr_ci'))}): {vals[best] - theirs:+.3f}{ci_txt}; "
        f"all: {_all(vals)}; from {src}"
    )
    status = "met" if vals[best] >= theirs else "not met"
    return make_target(t["id"], text, status, detail, router=best, value=vals[best], threshold=theirs)


def _best_at_share(res: dict, rids, agent: str, cap: float):
    """(EM, router, point index) of the best point sending at most ``cap`` to ``agent``."""
    best = None
    for rid in rids:
        for i, p in enumerate(points_of(routers_of(res).get(rid, {}))):
            share, em = num((p.get("allocation") or {}).get(agent)), num(p.get("em"))
            if share is None or em is None or share > cap + 1e-9:
                continue
            if best is None or em > best[0]:
                best = (em, rid, i)
    return best


def _em_at_share(results: Results, siblings: dict | None, t: dict) -> dict:
    a, cap, need = t["agent"], float(t["max_share"]), float(t["min_em"])
    text = f"EM ≥ {need:g} at ≤ {cap:.0%} of questions sent to {a} on {target_key(t)}"
    res, src = source_of(results, t, siblings)
    if res is None:
        return missing(t, text, results)
    if a not in (res.get("agents") or []):
        return make_target(t["id"], text, "n/a", f"{a} is not in pool {res.get('pool')}")
    others = [r for r in routers_of(res) if r not in our_routers(res) and router_role(r) != "bound"]
    ref = _best_at_share(res, others, a, cap)
    ref_txt = (
        f"; best baseline point there (picked on test, for reference): {ref[1]} EM {ref[0]:.2f}"
        if ref
        else ""
    )
    rid = chosen_router(res)
    fits = lambda p: (num((p.get("allocation") or {}).get(a)) or 0.0) <= cap + 1e-9  # noqa: E731
    found = chosen_point(res, rid, fits) if rid else None
    if found is None:
        why = "no L2D router chosen on validation" if rid is None else f"no price point of {rid}"
        return make_target(t["id"], text, "not met", f"{why} at ≤ {cap:.0%} to {a}{ref_txt}; from {src}")
    i, p = found
    em = num(p.get("em"))
    cis = routers_of(res)[rid].get("point_em_ci") or []
    ci = interval(cis[i]) if i < len(cis) else None
    alloc = ", ".join(f"{k} {v:.1%}" for k, v in p["allocation"].items())
    detail = (
        f"{rid} (chosen on validation) at λ {p['price']:g}: EM {em:.2f} (95% CI {fmt_ci(ci, 2)}) with "
        f"{p['allocation'][a]:.1%} to {a} (allocation {alloc}) vs {need:g}{ref_txt}; from {src}"
    )
    status = "met" if em is not None and em >= need else "not met"
    return make_target(
        t["id"],
        text,
        status,
        detail,
        router=rid,
        point=i,
        value=em,
        interval=list(ci) if ci else None,
        threshold=need,
    )


def _budget_share(results: Results, siblings: dict | None, t: dict) -> dict:
    share, tol = float(t["share"]), float(t["tolerance"])
    text = (
        f"L2D budget routers land within ±{tol:g} of a {share:.0%} share of expert calls on {target_key(t)}"
    )
    res, src = source_of(results, t, siblings)
    if res is None:
        return missing(t, text, results)
    rows = {}
    for rid in our_routers(res):
        for b in routers_of(res)[rid].get("budgets") or []:
            if (
                b.get("kind") == "share"
                and num(b.get("target")) is not None
                and abs(b["target"] - share) < 1e-9
            ):
                rows[rid] = b
    if not rows:
        return make_target(
            t["id"], text, "n/a", f"no L2D router followed a {share:.0%} share budget in {src}"
        )
    ok = {
        rid: num(b.get("realised")) is not None and abs(b["realised"] - share) <= tol + 1e-12
        for rid, b in rows.items()
    }
    parts = [
        f"{rid}: {b['realised']:.3f} (95% CI {fmt_ci(b.get('ci'))}; "
        f"training {num(b.get('training')) or 0:.3f}){' ✓' if ok[rid] else ' ✗'}"
        for rid, b in rows.items()
    ]
    detail = "; ".join(parts) + f"; from {src}"
    status = "met" if all(ok.values()) else "not met"
    worst = max(rows, key=lambda r: abs((num(rows[r].get("realised")) or 0) - share))
    return make_target(
        t["id"], text, status, detail, router=worst, value=rows[worst].get("realised"), threshold=share
    )


LLM_TARGETS = {
    "apgr_aiq_vs": _apgr_aiq_vs,
    "apgr_vs": _apgr_vs,
    "em_at_share": _em_at_share,
    "budget_share": _budget_share,
}
