"""The issue's four targets, evaluated on a router-comparison results dict.

Their thresholds are data, in ``targets.json`` beside this module (read once at import into
:data:`TARGETS`; :func:`load_targets` reads another file); everything else is computed from the
results. Candidates: the L2D routers (ids ``l2d-…``).

>>> sorted(TARGETS), TARGETS["apgr"]
(['aiq_gain', 'apgr', 'tdl_below_random', 'vs_agent'], {'pool': 'P2', 'min': 0.7})
>>> [t["status"] for t in evaluate_targets({"pool": "P2"})]
['n/a', 'n/a', 'n/a', 'n/a']
"""

from __future__ import annotations

import json
from pathlib import Path

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
    points_of,
    routers_of,
    share_of,
    tdl_below,
)
from .tables import md_table

__all__ = ["TARGETS_FILE", "TARGETS", "load_targets", "evaluate_targets", "targets_markdown"]

TARGETS_FILE = Path(__file__).with_name("targets.json")


def load_targets(path: str | Path = TARGETS_FILE) -> dict:
    """The targets' thresholds from a JSON file (default: ``targets.json`` of the package): ids
    ``apgr`` and ``aiq_gain`` (``pool``, ``min``), ``tdl_below_random`` (``level``) and
    ``vs_agent`` (``agent``, ``em_gap``, ``min_ratio``)."""
    targets = json.loads(Path(path).read_text(encoding="utf-8"))
    missing = {"apgr", "aiq_gain", "tdl_below_random", "vs_agent"} - set(targets)
    if missing:
        raise ValueError(f"{path}: no target {sorted(missing)}")
    return targets


TARGETS = load_targets()


def _target(tid: str, text: str, status: str, detail: str, **values) -> dict:
    return {"id": tid, "target": text, "status": status, "detail": detail, **values}


def _source(results: dict, pool: str, siblings: dict | None) -> tuple[dict | None, str]:
    if results.get("pool") == pool:
        return results, "this run"
    sib = (siblings or {}).get(pool)
    if isinstance(sib, dict) and isinstance(sib.get("results"), dict):
        res = sib["results"]
        return res, f"{sib.get('path', 'another results file')} (created {res.get('created')})"
    return None, ""


def _target_apgr(results: dict, siblings: dict | None, t: dict) -> dict:
    text = f"APGR ≥ {t['min']:.2f} on {t['pool']}"
    res, src = _source(results, t["pool"], siblings)
    if res is None:
        return _target("apgr", text, "n/a", f"no {t['pool']} results (this run is {results.get('pool')})")
    vals = {rid: num(routers_of(res)[rid].get("apgr")) for rid in our_routers(res)}
    vals = {k: v for k, v in vals.items() if v is not None}
    if not vals:
        return _target("apgr", text, "n/a", f"no APGR of an L2D router in {src}")
    best = max(vals, key=vals.get)
    ci = fmt_ci(routers_of(res)[best].get("apgr_ci"))
    all_txt = ", ".join(f"{k} {v:.3f}" for k, v in vals.items())
    status = "met" if vals[best] >= t["min"] else "not met"
    detail = f"best {best}: APGR {vals[best]:.3f} (95% CI {ci}) vs {t['min']:.2f}; all: {all_txt}; from {src}"
    return _target("apgr", text, status, detail, router=best, value=vals[best], threshold=t["min"])


def _target_aiq(results: dict, siblings: dict | None, t: dict) -> dict:
    text = f"AIQ gain over the zero router ≥ {t['min']:.0%} of the oracle's gain on {t['pool']}"
    res, src = _source(results, t["pool"], siblings)
    if res is None:
        return _target("aiq_gain", text, "n/a", f"no {t['pool']} results (this run is {results.get('pool')})")
    routers = routers_of(res)
    zero, oracle = num(routers.get("zero", {}).get("aiq")), num(routers.get("oracle", {}).get("aiq"))
    if zero is None or oracle is None or oracle <= zero:
        return _target("aiq_gain", text, "n/a", f"zero / oracle AIQ missing or oracle ≤ zero in {src}")
    vals = {rid: num(routers[rid].get("aiq")) for rid in our_routers(res)}
    frac = {k: (v - zero) / (oracle - zero) for k, v in vals.items() if v is not None}
    if not frac:
        return _target("aiq_gain", text, "n/a", f"no AIQ of an L2D router in {src}")
    best = max(frac, key=frac.get)
    status = "met" if frac[best] >= t["min"] else "not met"
    all_txt = ", ".join(f"{k} {v:.1%}" for k, v in frac.items())
    detail = (
        f"best {best}: AIQ {vals[best]:.3f}, zero {zero:.3f}, oracle {oracle:.3f} → "
        f"({vals[best]:.3f} − {zero:.3f}) / ({oracle:.3f} − {zero:.3f}) = {frac[best]:.1%} "
        f"vs {t['min']:.0%}; "
        f"all: {all_txt}; from {src}"
    )
    return _target("aiq_gain", text, status, detail, router=best, value=frac[best], threshold=t["min"])


def _target_tdl(results: dict, t: dict) -> dict:
    text = f"TDL below uniform random at every β₁ point with {t['level']:.0%} confidence"
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
        return _target("tdl", text, "n/a", "no per-β₁ TDL intervals (tdl_diff_ci) of an L2D router")
    met = [k for k, v in per.items() if v[1]]
    status = "met" if met else "not met"

    def one(k):
        n, _, worst = per[k]
        return f"{k}: {n}/{len(betas)} β₁" + (
            f", largest upper bound {worst:+.4f}" if worst is not None else ""
        )

    lead = f"met by {', '.join(met)}" if met else "no L2D router"
    detail = f"{lead}; {'; '.join(one(k) for k in per)} (pool {results.get('pool')})"
    return _target("tdl", text, status, detail, routers_met=met)


def _target_vs_agent(results: dict, t: dict) -> dict:
    a = t["agent"]
    text = f"within {t['em_gap']:g} EM of {a} at ≥ {t['min_ratio']:g}× lower GFLOPs/EM"
    em_a, g_a = agent_em(results, a), agent_gflops(results, a)
    if em_a is None or g_a is None or em_a <= 0:
        return _target("vs_agent", text, "n/a", f"{a} is not in pool {results.get('pool')}")
    gpe_a = g_a / em_a
    best = None  # (ratio, router, point)
    for rid in our_routers(results):
        for p in points_of(routers_of(results)[rid]):
            em, gpe = num(p.get("em")), point_gflops_per_em(p)
            if em is None or gpe is None or gpe <= 0 or em < em_a - t["em_gap"]:
                continue
            if best is None or gpe_a / gpe > best[0]:
                best = (gpe_a / gpe, rid, p)
    if best is None:
        detail = (
            f"no L2D point reaches EM ≥ {em_a - t['em_gap']:.2f} ({a}: EM {em_a:.2f}, GFLOPs/EM {gpe_a:.3f})"
        )
        return _target("vs_agent", text, "not met", detail, value=None, threshold=t["min_ratio"])
    ratio, rid, p = best
    status = "met" if ratio >= t["min_ratio"] else "not met"
    where = "a dense-sweep point" if num(p.get("beta1")) is None else f"β₁ {beta_key(p['beta1'])}"
    where += "" if num(p.get("beta1")) is None or not p.get("dense") else " (dense sweep)"
    where += f", expert share {fmt(share_of(p, results))}"
    detail = (
        f"{rid} at {where}: EM {p['em']:.2f} (≥ {em_a:.2f} − {t['em_gap']:g}), GFLOPs/EM "
        f"{point_gflops_per_em(p):.3f} vs {a} {gpe_a:.3f} → {ratio:.2f}× lower (needs {t['min_ratio']:g}×; "
        f"pool {results.get('pool')})"
    )
    return _target("vs_agent", text, status, detail, router=rid, value=ratio, threshold=t["min_ratio"])


def evaluate_targets(results: dict, siblings: dict | None = None, targets: dict | None = None) -> list[dict]:
    """The issue's four targets, each with ``status`` (met / not met / n/a), its computed value
    and a one-line ``detail``. Candidates: the L2D routers (ids ``l2d-…``). ``siblings`` maps a
    pool name to ``{"path": …, "results": …}`` of another run, used for the targets on P2 / P3
    when this run is on another pool; ``targets``: thresholds (default :data:`TARGETS`)."""
    t = TARGETS if targets is None else targets
    return [
        _target_apgr(results, siblings, t["apgr"]),
        _target_aiq(results, siblings, t["aiq_gain"]),
        _target_tdl(results, t["tdl_below_random"]),
        _target_vs_agent(results, t["vs_agent"]),
    ]


def targets_markdown(results: dict, siblings: dict | None = None, targets: dict | None = None) -> str:
    """The targets as a markdown table: target, status, what was computed."""
    rows = [
        [t["target"], f"**{t['status']}**", t["detail"]] for t in evaluate_targets(results, siblings, targets)
    ]
    return md_table(["target", "status", "computed"], rows)
