"""The routing targets, evaluated on router-comparison results (this run's, or another pool's
results beside it).

The targets are data, in ``targets.json`` beside this module (read once at import into
:data:`TARGETS`; :func:`load_targets` reads another file): a list of ``{"id", "type", "pool",
…thresholds}`` with ``type`` one of :data:`TARGET_TYPES`; everything else is computed from the
results. Candidates: the L2D routers (ids ``l2d-…``); a target reads the one chosen on validation
(best validation AIQ on the training articles) at its operating point chosen there, never the best
on test (:mod:`~l2d_core.report.target_common`).

>>> TARGETS[0]["type"] in TARGET_TYPES and all("pool" in t for t in TARGETS)
True
>>> {t["status"] for t in evaluate_targets({"pool": "none"})}
{'n/a'}
"""

from __future__ import annotations

import json
from pathlib import Path

from ..evaluation.results import Results
from .frames import (
    agent_em,
    agent_gflops,
    beta_key,
    fmt,
    fmt_ci,
    interval,
    num,
    our_routers,
    point_gflops_per_em,
    routers_of,
    share_of,
    tdl_below,
    with_role,
)
from .tables import md_table
from .target_common import chosen_point, chosen_router, make_target, missing, source_of
from .targets_llm import LLM_TARGET_TYPES, LLM_TARGETS

__all__ = ["TARGETS_FILE", "TARGET_TYPES", "TARGETS", "load_targets", "evaluate_targets", "targets_markdown"]

TARGETS_FILE = Path(__file__).with_name("targets.json")
TARGET_TYPES = {  # type → the thresholds it needs
    "apgr": ("min",),
    "aiq_gain": ("min",),
    "vs_agent": ("agent", "em_gap", "min_ratio"),
    "tdl_below_random": ("level",),
    "tdl_price_matched": ("level",),
    **LLM_TARGET_TYPES,
}


def load_targets(path: str | Path = TARGETS_FILE) -> list[dict]:
    """The targets from a JSON file (default: ``targets.json`` of the package): a list of
    ``{"id", "type", "pool", …}`` with the thresholds of :data:`TARGET_TYPES`."""
    targets = json.loads(Path(path).read_text(encoding="utf-8"))
    for t in targets if isinstance(targets, list) else [None]:
        if not isinstance(t, dict) or t.get("type") not in TARGET_TYPES or "pool" not in t or "id" not in t:
            raise ValueError(f"{path}: each target needs an id, a pool and a type of {sorted(TARGET_TYPES)}")
        missing = [k for k in TARGET_TYPES[t["type"]] if k not in t]
        if missing:
            raise ValueError(f"{path}: target {t['id']} needs {missing}")
    return targets


TARGETS = load_targets()


def _target(tid: str, text: str, status: str, detail: str, **values) -> dict:
    return make_target(tid, text, status, detail, **values)


def _source(
    results: Results, pool: str, siblings: dict | None, t: dict | None = None
) -> tuple[dict | None, str]:
    return source_of(results, t if t is not None else {"pool": pool}, siblings)


def _missing(t: dict, text: str, results: Results) -> dict:
    return missing(t, text, results)


def _target_apgr(results: Results, siblings: dict | None, t: dict) -> dict:
    limit = num(t.get("max_overhead_gflops"))
    text = f"APGR ≥ {t['min']:.2f} on {t['pool']}" + (
        f" at ≤ {limit:g} GFLOPs per query of overhead" if limit is not None else ""
    )
    res, src = _source(results, t["pool"], siblings, t)
    if res is None:
        return _missing(t, text, results)
    routers = routers_of(res)
    ok = lambda rid: limit is None or (num(routers[rid].get("overhead_gflops")) or 0.0) <= limit + 1e-9  # noqa: E731
    vals = {rid: num(routers[rid].get("apgr")) for rid in our_routers(res) if ok(rid)}
    vals = {k: v for k, v in vals.items() if v is not None}
    if not vals:
        return _target(t["id"], text, "n/a", f"no APGR of an L2D router within the overhead in {src}")
    best = chosen_router(res, list(vals))
    if best is None:
        return _target(t["id"], text, "n/a", f"no L2D router chosen on validation in {src}")
    ci = fmt_ci(routers_of(res)[best].get("apgr_ci"))
    all_txt = ", ".join(f"{k} {v:.3f}" for k, v in vals.items())
    status = "met" if vals[best] >= t["min"] else "not met"
    over = num(routers[best].get("overhead_gflops"))
    paid = f", overhead {over:.2f} GFLOPs/query" if over is not None else ""
    detail = f"chosen on validation {best}: APGR {vals[best]:.3f} (95% CI {ci}){paid} vs {t['min']:.2f}; "
    detail += f"all: {all_txt}; from {src}"
    return _target(t["id"], text, status, detail, router=best, value=vals[best], threshold=t["min"])


def _target_aiq(results: Results, siblings: dict | None, t: dict) -> dict:
    text = f"AIQ gain over the zero router ≥ {t['min']:.0%} of the oracle's gain on {t['pool']}"
    res, src = _source(results, t["pool"], siblings, t)
    if res is None:
        return _missing(t, text, results)
    routers = routers_of(res)
    zero_id, oracle_id = with_role(routers, "floor"), with_role(routers, "bound")
    zero, oracle = num(routers.get(zero_id, {}).get("aiq")), num(routers.get(oracle_id, {}).get("aiq"))
    if zero is None or oracle is None or oracle <= zero:
        return _target(t["id"], text, "n/a", f"zero / oracle AIQ missing or oracle ≤ zero in {src}")
    vals = {rid: num(routers[rid].get("aiq")) for rid in our_routers(res)}
    frac = {k: (v - zero) / (oracle - zero) for k, v in vals.items() if v is not None}
    if not frac:
        return _target(t["id"], text, "n/a", f"no AIQ of an L2D router in {src}")
    best = chosen_router(res, list(frac))
    if best is None:
        return _target(t["id"], text, "n/a", f"no L2D router chosen on validation in {src}")
    status = "met" if frac[best] >= t["min"] else "not met"
    all_txt = ", ".join(f"{k} {v:.1%}" for k, v in frac.items())
    ci = interval(routers[best].get("aiq_gain_ci"))
    ci_txt = f" (paired 95% CI [{ci[0]:.1%}, {ci[1]:.1%}])" if ci else ""
    detail = (
        f"chosen on validation {best}: AIQ {vals[best]:.3f}, zero {zero:.3f}, oracle {oracle:.3f} → "
        f"({vals[best]:.3f} − {zero:.3f}) / ({oracle:.3f} − {zero:.3f}) = {frac[best]:.1%}{ci_txt} "
        f"vs {t['min']:.0%}; "
        f"all: {all_txt}; from {src}"
    )
    return _target(
        t["id"], text, status, detail, router=best, value=frac[best], interval=ci, threshold=t["min"]
    )


def _target_tdl(results: Results, siblings: dict | None, t: dict) -> dict:
    text = f"TDL below uniform random at every β₁ point with {t['level']:.0%} confidence on {t['pool']}"
    results, _ = _source(results, t["pool"], siblings, t)
    if results is None:
        return _target(t["id"], text, "n/a", f"no {t['pool']} results")
    betas = [beta_key(b) for b in results.get("beta_points") or []]
    per = {}
    for rid in our_routers(results):
        r = routers_of(results)[rid]
        flags = [tdl_below(r, k) for k in betas]
        if betas and all(f is not None for f in flags):
            his = [interval((r.get("tdl_diff_ci") or {}).get(k)) for k in betas]
            worst = max((h[1] for h in his if h), default=None)
            per[rid] = (sum(flags), all(flags), worst)
    if not per:
        return _target(t["id"], text, "n/a", "no per-β₁ TDL intervals (tdl_diff_ci) of an L2D router")
    met = [k for k, v in per.items() if v[1]]
    status = "met" if met else "not met"

    def one(k):
        n, _, worst = per[k]
        return f"{k}: {n}/{len(betas)} β₁" + (
            f", largest upper bound {worst:+.4f}" if worst is not None else ""
        )

    lead = f"met by {', '.join(met)}" if met else "no L2D router"
    detail = f"{lead}; {'; '.join(one(k) for k in per)} (pool {results.get('pool')})"
    return _target(t["id"], text, status, detail, routers_met=met)


def _target_tdl_price(results: Results, siblings: dict | None, t: dict) -> dict:
    text = (
        f"TDL below allocation-matched random at every per-TFLOP λ point with {t['level']:.0%} "
        f"confidence on {t['pool']}"
    )
    res, src = _source(results, t["pool"], siblings, t)
    if res is None:
        return _missing(t, text, results)
    keys = [beta_key(x) for x in res.get("price_points") or []]
    per = {}
    for rid in our_routers(res):
        below = routers_of(res)[rid].get("tdl_price_below_matched_95") or {}
        if keys and all(k in below for k in keys):
            per[rid] = sum(bool(below[k]) for k in keys)
    if not per:
        return _target(t["id"], text, "n/a", f"no per-λ TDL intervals of an L2D router in {src}")
    met = [k for k, n in per.items() if n == len(keys)]
    lead = f"met by {', '.join(met)}" if met else "no L2D router"
    detail = f"{lead}; " + "; ".join(f"{k}: {n}/{len(keys)} λ" for k, n in per.items()) + f"; from {src}"
    return _target(t["id"], text, "met" if met else "not met", detail, routers_met=met)


def _target_vs_agent(results: Results, siblings: dict | None, t: dict) -> dict:
    a = t["agent"]
    text = f"within {t['em_gap']:g} EM of {a} at ≥ {t['min_ratio']:g}× lower GFLOPs/EM on {t['pool']}"
    found, _ = _source(results, t["pool"], siblings, t)
    if found is None:
        return _missing(t, text, results)
    results = found
    em_a, g_a = agent_em(results, a), agent_gflops(results, a)
    if em_a is None or g_a is None or em_a <= 0:
        return _target(t["id"], text, "n/a", f"{a} is not in pool {results.get('pool')}")
    gpe_a = g_a / em_a
    rid = chosen_router(results)
    found = chosen_point(results, rid) if rid else None
    if found is None:
        why = "no L2D router chosen on validation" if rid is None else f"no price point of {rid}"
        return _target(t["id"], text, "n/a", f"{why} (pool {results.get('pool')})")
    p = found[1]
    em, gpe = num(p.get("em")), point_gflops_per_em(p)
    ratio = gpe_a / gpe if gpe else None
    close = em is not None and em >= em_a - t["em_gap"]
    status = "met" if close and ratio is not None and ratio >= t["min_ratio"] else "not met"
    detail = (
        f"{rid} (chosen on validation) at λ {p['price']:g}, expert share {fmt(share_of(p, results))}: "
        f"EM {fmt(em, 2)} ({'≥' if close else '<'} {em_a:.2f} − {t['em_gap']:g}), GFLOPs/EM {fmt(gpe)} vs "
        f"{a} {gpe_a:.3f} → {fmt(ratio, 2)}× lower (needs {t['min_ratio']:g}×; pool {results.get('pool')})"
    )
    return _target(t["id"], text, status, detail, router=rid, value=ratio, threshold=t["min_ratio"])


_EVALUATE = {
    "apgr": _target_apgr,
    "aiq_gain": _target_aiq,
    "vs_agent": _target_vs_agent,
    "tdl_below_random": _target_tdl,
    "tdl_price_matched": _target_tdl_price,
    **LLM_TARGETS,
}


def evaluate_targets(
    results: Results, siblings: dict | None = None, targets: list[dict] | None = None
) -> list[dict]:
    """Every target, each with ``status`` (met / not met / n/a), its computed value and a
    one-line ``detail``. Candidates: the L2D routers (ids ``l2d-…``). ``siblings`` maps a pool
    name to ``{"path": …, "results": …}`` of another run, used for the targets on other pools
    than this run's; ``targets``: default :data:`TARGETS`."""
    return [_EVALUATE[t["type"]](results, siblings, t) for t in (TARGETS if targets is None else targets)]


def targets_markdown(
    results: Results, siblings: dict | None = None, targets: list[dict] | None = None
) -> str:
    """The targets as a markdown table: target, status, what was computed."""
    rows = [
        [t["target"], f"**{t['status']}**", t["detail"]] for t in evaluate_targets(results, siblings, targets)
    ]
    return md_table(["target", "status", "computed"], rows)
