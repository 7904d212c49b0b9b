"""The rows of the paper's Tables 1–2 on our benchmark: the L2D routers and the Hybrid-LLM
routers r_prob / r_deter / r_trans at β₁ ∈ {0, 0.25, 0.5}.

β₁ = 0.25 is not a BENCHMARK.md point: each router is run at the missing β₁ for the table only
(those points stay out of the curves, AIQ and figures). The r_* baselines appear twice: at
each β₁ by their own cost rule (threshold 1 − β of the expert), and at the *matched share* —
their two operating points nearest in share of expert calls, mixed at random so that the
share equals the paper's rejector's at that β₁ (an equal-budget comparison that uses no test
labels). Which routers these are is the routers' own say: the ``l2d`` family, the class whose
``role`` is ``paper`` (the reference column) and those whose role is ``paper-baseline``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from ..routers.registry import router_class, router_family, router_role, with_role
from .benchmark import Benchmark
from .comparison import run_router
from .points import beta_key
from .results import beta_points, num

__all__ = ["PAPER_BETAS", "paper_baselines", "matched_share", "seed_mean", "paper_table"]

PAPER_BETAS: tuple[float, ...] = (0.0, 0.25, 0.5)  # β₁ of the paper's Tables 1–2
_MEAN_FIELDS = (
    "em",
    "f1",
    "gflops",
    "gflops_per_em",
    "tdl",
    "tdl_random",
    "tdl_random_matched",
    "share_strong",
)


def seed_mean(points: list[dict]) -> dict:
    """Seed average of the same point of several runs (the fields the table shows)."""
    out = {"beta1": points[0].get("beta1")}
    for k in _MEAN_FIELDS:
        vals = [num(p.get(k)) for p in points]
        if all(v is not None for v in vals):
            out[k] = float(np.mean(vals))
    if "em" in out:
        out["em_std"] = float(np.std([p["em"] for p in points]))
    if all(isinstance(p.get("allocation"), dict) for p in points):
        agents = points[0]["allocation"]
        out["allocation"] = {a: float(np.mean([p["allocation"].get(a, 0.0) for p in points])) for a in agents}
    thr = [num(p.get("threshold")) for p in points]
    if all(t is not None for t in thr):
        out["threshold"] = float(np.mean(thr))
    return out


def matched_share(points: list[dict], share: float | None) -> dict | None:
    """The operating point of a threshold-swept router at a given share of expert calls: random
    mixing of the two swept points around it (EM, F1 and GFLOPs are linear in the mixing
    weight); the nearest end point outside their range. None without points or share.

    >>> weak = {"share_strong": 0.0, "em": 60.0, "gflops": 5.0}
    >>> p = matched_share([weak, {"share_strong": 1.0, "em": 80.0, "gflops": 105.0}], 0.25)
    >>> p["em"], p["gflops"], p["gflops_per_em"]
    (65.0, 30.0, 0.46153846153846156)
    """
    pts = sorted(
        (p for p in points if num(p.get("share_strong")) is not None and num(p.get("em")) is not None),
        key=lambda p: p["share_strong"],
    )
    if share is None or not pts:
        return None
    lo = max((p for p in pts if p["share_strong"] <= share), key=lambda p: p["share_strong"], default=pts[0])
    hi = min((p for p in pts if p["share_strong"] >= share), key=lambda p: p["share_strong"], default=pts[-1])
    span = hi["share_strong"] - lo["share_strong"]
    w = (share - lo["share_strong"]) / span if span > 0 else 0.0
    out = {"share_strong": lo["share_strong"] + w * span, "matched_share": share, "mix": w}
    for k in ("em", "f1", "gflops"):
        if num(lo.get(k)) is not None and num(hi.get(k)) is not None:
            out[k] = (1 - w) * lo[k] + w * hi[k]
    out["thresholds"] = [lo.get("threshold"), hi.get("threshold")]
    if out.get("em"):
        out["gflops_per_em"] = out["gflops"] / out["em"]
    return out


def paper_baselines(router_ids) -> list[str]:
    """The paper's r_* baselines among ``router_ids`` (role ``paper-baseline``), in the paper's
    column order (their classes' ``paper_column``: r_prob, r_deter, r_trans)."""
    found = [r for r in router_ids if router_role(r) == "paper-baseline"]
    return sorted(found, key=lambda r: getattr(router_class(r), "paper_column", 0))


def paper_table(
    bench: Benchmark, results: dict, seeds: Sequence[int], log: Callable[[str], None] = lambda m: None
) -> dict:
    """Rows of the paper's Tables 1–2 from a comparison's ``results`` (points where they exist,
    else the router run at the missing β₁ for every seed), and each r_* at the matched share."""
    routers = results["routers"]
    ours = [r for r in routers if router_family(r) == "l2d"]
    baselines = paper_baselines(routers)
    cols = ours + baselines
    have = {beta_key(b) for b in results.get("beta_points") or ()}
    missing = [b for b in PAPER_BETAS if beta_key(b) not in have]
    wanted = {beta_key(b) for b in PAPER_BETAS}
    rows: dict[str, dict] = {c: {} for c in cols}
    notes = []
    for c in cols:
        for p in beta_points(routers[c]):
            if beta_key(p["beta1"]) in wanted:
                rows[c][beta_key(p["beta1"])] = {k: v for k, v in p.items() if k != "_q"}
        if not missing:
            continue
        if router_class(c).on_request:  # hours of training per β₁: the table says n/a instead
            notes.append(f"{c} is run only where named: n/a at β₁ {', '.join(f'{b:g}' for b in missing)}")
            continue
        t0 = time.perf_counter()
        try:
            runs = [run_router(bench, c, s, betas=missing) for s in seeds]
        except (ValueError, KeyError, LookupError, RuntimeError) as exc:  # one router must not lose the run
            notes.append(f"{c} failed at β₁ {missing}: {exc}")
            continue
        for b in missing:
            at = [[p for p in run if not p.get("dense") and num(p.get("beta1")) == b][:1] for run in runs]
            if all(at):
                rows[c][beta_key(b)] = dict(seed_mean([a[0] for a in at]), extra_beta=True)
            else:
                notes.append(f"{c} has no point at β₁ = {b:g}: n/a")
        at = ", ".join(f"{b:g}" for b in missing)
        log(f"  paper table: {c} at β₁ {at} ({time.perf_counter() - t0:.1f} s)")
    ref_id = with_role(rows, "paper") or (ours[0] if ours else None)
    ref = rows.get(ref_id, {})
    for c in [c for c in baselines if ref_id]:
        rows[f"{c} @ {ref_id} share"] = {
            k: matched_share(routers[c]["points"], num(rp.get("share_strong"))) for k, rp in ref.items()
        }
    notes += [
        f"Columns `r-…`: the Hybrid-LLM routers at each β₁ by their own cost rule; `r-… @ {ref_id} "
        f"share`: their two operating points nearest in share mixed at random so that the share "
        f"of expert calls on the test articles equals {ref_id}'s at that β₁ (equal budget, no test labels).",
        "β₁ = " + ", ".join(f"{b:g}" for b in missing) + " is not a BENCHMARK.md point: those rows were run "
        "for this table only (not in the curves, AIQ or figures)."
        if missing
        else "Every β₁ of the table is a BENCHMARK.md point.",
        "The paper's Table 2 reports EM per unit of cost: see GFLOPs/EM (lower is better) and EM per GFLOP.",
    ]
    return {"betas": list(PAPER_BETAS), "reference": ref_id, "rows": rows, "notes": notes}
