"""Markdown tables of the router benchmark report, and :func:`summary_frame` (the per-router
summary as a DataFrame, which the dashboard shows and :func:`summary_table` formats).

>>> md_table(["a", "b"], [[1, "x|y"]])
'| a | b |\\n|---|---|\\n| 1 | x\\\\|y |'
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from ..evaluation import metrics as M
from ..evaluation.results import Results
from .frames import (
    AGENT_PREFIX,
    NO_ALLOCATION,
    PAPER_BETAS,
    agent_em,
    agent_gflops,
    beta_key,
    beta_points,
    beta_routers,
    fmt,
    fmt_ci,
    interval,
    is_agent,
    num,
    point_gflops_per_em,
    points_of,
    router_role,
    routers_of,
    share_of,
    tdl_below,
    with_role,
)

# fmt: off
__all__ = [
    "md_table", "agents_table", "summary_frame", "summary_table", "tdl_table",
    "price_table", "beta_table",
    "paper_table", "pareto_table",
]
# fmt: on


def md_table(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    """A GitHub markdown table (cells as given, ``|`` escaped)."""
    esc = lambda c: str(c).replace("|", "\\|")
    lines = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def agents_table(results: Results) -> str:
    """Agents alone (and the majority-vote ensemble): EM, F1, GFLOPs/query, GFLOPs/EM."""
    routers, rows = routers_of(results), []
    for i, a in enumerate(results.get("agents") or []):
        p = (points_of(routers.get(AGENT_PREFIX + a, {})) or [{}])[0]
        em = agent_em(results, a) if agent_em(results, a) is not None else num(p.get("em"))
        g = agent_gflops(results, a) if agent_gflops(results, a) is not None else num(p.get("gflops"))
        role = "main" if i == 0 else "expert"
        rows.append([a, role, fmt(em, 2), fmt(p.get("f1"), 2), fmt(g, 2), fmt(g / em if g and em else None)])
    ensemble = with_role(routers, "all-agents")
    if ensemble and points_of(routers[ensemble]):
        p = points_of(routers[ensemble])[0]
        rows.append(["ensemble (majority vote)", "all agents", fmt(p.get("em"), 2), fmt(p.get("f1"), 2)])
        rows[-1] += [fmt(p.get("gflops"), 2), fmt(point_gflops_per_em(p))]
    table = md_table(["agent", "role", "EM", "F1", "GFLOPs/query", "GFLOPs/EM"], rows)
    return table + f"\n\nRejector: {fmt(results.get('rejector_gflops'))} GFLOPs per routed query (measured)."


_BELOW, _TESTED = "β₁ with TDL < random (95%)", "β₁ tested"


def summary_frame(results: Results) -> pd.DataFrame:
    """One row per router, best AIQ first (missing AIQ last; ties keep the results' order): AIQ
    (all points, β points only) with its std over seeds and bootstrap 95% interval, APGR / CPT
    likewise (those columns dropped when no router has an APGR), the mean TDL over the β sweep,
    at how many of the β₁ tested the TDL is below random with 95% confidence, and the number of
    points. Missing or non-numeric fields are NaN.

    >>> res = {"routers": {"a": {"aiq": 70.0, "points": [{}]}, "b": {"aiq": 80, "aiq_ci": [79, 81],
    ...     "apgr": 0.5, "tdl": {"0": 0.2, "0.5": 0.4}, "tdl_below_random_95": {"0": True, "0.5": False}}}}
    >>> df = summary_frame(res)
    >>> df[["router", "AIQ", "AIQ 95% hi", "mean TDL", "points"]]
      router   AIQ  AIQ 95% hi  mean TDL  points
    0      b  80.0        81.0       0.3       0
    1      a  70.0         NaN       NaN       1
    >>> df.loc[0, "β₁ with TDL < random (95%)"], df.loc[0, "β₁ tested"]
    (np.float64(1.0), np.float64(2.0))
    >>> print(summary_table(res).splitlines()[2])
    | b | 80.00 [79.00, 81.00] | n/a | 0.500 | n/a | n/a | 0.3000 | 1/2 |
    """
    rows = []
    for rid, r in routers_of(results).items():
        aiq_ci, apgr_ci = (
            interval(r.get("aiq_ci")) or (None, None),
            interval(r.get("apgr_ci")) or (None, None),
        )
        tdl = r.get("tdl") if isinstance(r.get("tdl"), dict) else {}
        tdl = [v for v in map(num, tdl.values()) if v is not None]
        below, tested = r.get("tdl_below_random_95"), None
        if isinstance(below, dict):
            below, tested = sum(bool(v) for v in below.values()), len(below)
        elif isinstance(below, bool):  # older results: one flag for every β₁ (no count tested)
            below = int(below)
        else:
            below = None
        rows.append(
            {
                "router": rid,
                "AIQ": num(r.get("aiq")),
                "AIQ std": num(r.get("aiq_std")),
                "AIQ 95% lo": aiq_ci[0],
                "AIQ 95% hi": aiq_ci[1],
                "AIQ (flat left)": num(r.get("aiq_flat")),
                "AIQ (β points)": num(r.get("aiq_beta_points")),
                "AIQ over latency": num(r.get("aiq_latency")),
                "APGR": num(r.get("apgr")),
                "APGR std": num(r.get("apgr_std")),
                "APGR 95% lo": apgr_ci[0],
                "APGR 95% hi": apgr_ci[1],
                "CPT(50%)": num(r.get("cpt50")),
                "CPT(80%)": num(r.get("cpt80")),
                "mean TDL": float(np.mean(tdl)) if tdl else None,
                _BELOW: below,
                _TESTED: tested,
                "points": len(points_of(r)),
            }
        )
    rows.sort(key=lambda row: -row["AIQ"] if row["AIQ"] is not None else math.inf)  # stable
    df = pd.DataFrame(rows) if rows else pd.DataFrame(columns=["router", "AIQ", "APGR", "points"])
    num_cols = [c for c in df.columns if c not in ("router", "points")]
    df[num_cols] = df[num_cols].astype(float)
    if "AIQ over latency" in df and df["AIQ over latency"].isna().all():  # a pool with no latency
        df = df.drop(columns=["AIQ over latency"])
    if df["APGR"].isna().all():
        df = df.drop(columns=[c for c in df.columns if c.startswith(("APGR", "CPT"))])
    return df


def _pm(row: dict, name: str, nd: int = 3) -> str:
    """``mean ± std [lo, hi]`` of a summary column (parts that are missing are left out)."""
    if num(row.get(name)) is None:
        return "n/a"
    out = fmt(row.get(name), nd)
    if num(row.get(f"{name} std")) is not None:
        out += f" ± {fmt(row.get(f'{name} std'), nd)}"
    ci = [row.get(f"{name} 95% lo"), row.get(f"{name} 95% hi")]
    if interval(ci):
        out += f" {fmt_ci(ci, nd)}"
    return out


def _below_text(row: dict) -> str:
    below, tested = num(row.get(_BELOW)), num(row.get(_TESTED))
    if below is None:
        return "n/a"
    if tested is None:  # older results: one flag
        return "yes" if below else "no"
    return f"{int(below)}/{int(tested)}"


def summary_table(results: Results) -> str:
    """Per router, the rows of :func:`summary_frame`: AIQ ± std over seeds [bootstrap 95% CI],
    AIQ over latency where the pool logs it, APGR likewise, CPT(50%), CPT(80%), mean TDL over
    the β₁ sweep and at how many β₁ the TDL is below random with 95% confidence."""
    frame = summary_frame(results)
    latency = "AIQ over latency" in frame.columns
    rows = [
        [
            row["router"],
            _pm(row, "AIQ", 2),
            fmt(row.get("AIQ (β points)"), 2),
            *([fmt(row.get("AIQ over latency"), 2)] if latency else []),
            _pm(row, "APGR"),
            fmt(row.get("CPT(50%)")),
            fmt(row.get("CPT(80%)")),
            fmt(row.get("mean TDL"), 4),
            _below_text(row),
        ]
        for row in frame.to_dict("records")
    ]
    header = [
        "router",
        "AIQ ± std [95% CI]",
        "AIQ (β₁ points)",
        *(["AIQ over latency (s)"] if latency else []),
        "APGR ± std [95% CI]",
        "CPT(50%)",
        "CPT(80%)",
        "mean TDL",
        _BELOW,
    ]
    return md_table(header, rows)


def tdl_table(results: Results) -> str:
    """TDL per β₁: uniform random, then each router (✓: TDL − random < 0 with 95% confidence,
    ✗: not); then the paired-bootstrap 95% interval of TDL(router) − TDL(random)."""
    betas = [beta_key(b) for b in results.get("beta_points") or []]
    rnd = results.get("tdl_random") or {}
    rows = [["uniform random", *[fmt(rnd.get(k), 4) for k in betas]]]
    ci_rows = []
    for rid, r in routers_of(results).items():
        tdl = r.get("tdl") or {}
        if is_agent(rid) or not tdl:
            continue
        cells = []
        for k in betas:
            flag = {True: " ✓", False: " ✗", None: ""}[tdl_below(r, k)]
            cells.append(fmt(tdl.get(k), 4) + flag)
        rows.append([rid, *cells])
        diff = r.get("tdl_diff_ci") or {}
        if diff:
            ci_rows.append([rid, *[fmt_ci(diff.get(k), 4) for k in betas]])
    out = md_table(["router", *[f"β₁={k}" for k in betas]], rows)
    if ci_rows:
        out += "\n\nTDL(router) − TDL(uniform random), paired bootstrap 95% interval:\n\n"
        out += md_table(["router", *[f"β₁={k}" for k in betas]], ci_rows)
    return out


def price_table(results: Results) -> str:
    """TDL per per-TFLOP price λ of each router beside random allocation with the router's own
    shares (✓: below it with 95% confidence, ✗: not), and uniform random."""
    keys = [beta_key(x) for x in results.get("price_points") or []]
    if not keys:
        return "No per-TFLOP price points in these results."
    rows = []
    for rid, r in routers_of(results).items():
        tdl, matched = r.get("tdl_price") or {}, r.get("tdl_price_matched") or {}
        if is_agent(rid) or not tdl:
            continue
        below = r.get("tdl_price_below_matched_95") or {}
        flag = lambda k: {True: " ✓", False: " ✗"}.get(below.get(k), "")  # noqa: E731, B023
        cells = [f"{fmt(tdl.get(k), 4)} / {fmt(matched.get(k), 4)}{flag(k)}" for k in keys]
        rows.append([rid, *cells])
    uniform = next(
        (r.get("tdl_price_uniform") for r in routers_of(results).values() if r.get("tdl_price_uniform")), {}
    )
    rows.insert(0, ["uniform random", *[fmt(uniform.get(k), 4) for k in keys]])
    return "Each cell: TDL of the router / of random allocation with its own shares.\n\n" + md_table(
        ["router", *[f"λ={k}" for k in keys]], rows
    )


def beta_table(results: Results) -> str:
    """Per learned router and β₁: EM, GFLOPs/EM, the share answered by an expert and, on a pool
    with an agent that abstains, the share abstained on (Fig. 3's numbers)."""
    betas = [beta_key(b) for b in results.get("beta_points") or []]
    rows = []
    for rid in beta_routers(results):
        if router_role(rid) in NO_ALLOCATION:
            continue
        by = {beta_key(p["beta1"]): p for p in beta_points(routers_of(results)[rid])}
        for label, f in (
            ("EM", lambda p: fmt(p.get("em"), 2)),
            ("GFLOPs/EM", lambda p: fmt(point_gflops_per_em(p))),
            ("answered by an expert", lambda p: fmt(p.get("answered_by_expert", share_of(p, results)), 3)),
            *([("abstained", lambda p: fmt(p.get("abstained"), 3))] if abstains(results) else []),
        ):
            rows.append([rid, label, *[f(by[k]) if k in by else "n/a" for k in betas]])
    return md_table(["router", "metric", *[f"β₁={k}" for k in betas]], rows)


def abstains(results: Results) -> bool:
    """Whether a router's point of ``results`` kept abstentions apart (a pool with ``abstain``)."""
    return any("abstained" in p for r in routers_of(results).values() for p in r.get("points") or [])


def paper_table(results: Results) -> str:
    """The single-expert comparison at β₁ ∈ PAPER_BETAS (paper Tables 1–2: EM, and EM per unit
    of cost — shown here as GFLOPs/EM — of the L2D rejectors against r_prob, r_deter, r_trans),
    from the results' ``paper_table`` (written by scripts/benchmark_routers.py)."""
    pt = results.get("paper_table")
    if not isinstance(pt, dict) or not isinstance(pt.get("rows"), dict) or not pt["rows"]:
        return "n/a (no `paper_table` in the results: run scripts/benchmark_routers.py)"
    rows_by = pt["rows"]
    cols = list(rows_by)
    betas = [beta_key(b) for b in pt.get("betas") or PAPER_BETAS]
    gpe = point_gflops_per_em
    out = []
    for label, f in (
        ("EM %", lambda p: fmt(p.get("em"), 2)),
        ("GFLOPs/EM", lambda p: fmt(gpe(p))),
        ("EM per GFLOP", lambda p: fmt(1 / gpe(p) if gpe(p) else None)),
        ("expert share", lambda p: fmt(share_of(p, results), 3)),
    ):
        rows = []
        for k in betas:
            cells = []
            for c in cols:
                p = rows_by[c].get(k) if isinstance(rows_by[c], dict) else None
                cells.append(f(p) if isinstance(p, dict) else "n/a")
            rows.append([f"β₁={k}", *cells])
        out.append(f"**{label}**\n\n" + md_table(["", *cols], rows))
    notes = pt.get("notes")
    if isinstance(notes, list):
        out.append("\n".join(f"- {n}" for n in notes if isinstance(n, str)))
    return "\n\n".join(out)


def pareto_table(results: Results, exclude: Sequence[str] = ("bound",)) -> str:
    """Which routers own the non-dominated (GFLOPs, EM) points of all routers but those whose role
    is in ``exclude`` (the oracle, an upper bound that dominates nearly everything): per router,
    how many points of the front and their GFLOPs and EM ranges (points only: mixing between them
    is not counted)."""
    rows = []
    for rid, r in routers_of(results).items():
        if router_role(rid) not in exclude:
            rows += [
                (rid, p)
                for p in points_of(r)
                if num(p.get("gflops")) is not None and num(p.get("em")) is not None
            ]
    if not rows:
        return "n/a"
    front = M.pareto_front(np.array([p["gflops"] for _, p in rows]), np.array([p["em"] for _, p in rows]))
    by: dict[str, list[dict]] = {}
    for i in front:
        by.setdefault(rows[i][0], []).append(rows[i][1])
    cells = []
    for rid, pts in sorted(by.items(), key=lambda kv: -len(kv[1])):
        g, e = [p["gflops"] for p in pts], [p["em"] for p in pts]
        cells.append([rid, len(pts), f"{min(g):.2f} – {max(g):.2f}", f"{min(e):.2f} – {max(e):.2f}"])
    return md_table(["router", "points on the front", "GFLOPs/query", "EM"], cells) + (
        f"\n\n{len(front)} non-dominated points of {len(rows)}."
    )
