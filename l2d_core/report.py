"""The router benchmark report: Plotly figures and markdown tables built from a router-comparison
``results.json`` (:func:`l2d_core.comparison.run_comparison`) — pure functions, no I/O, no UI.

It reproduces the paper's experiment structure on real systems: TDL against random allocation
over β₁ (paper Fig. 2), EM and GFLOPs/EM over β₁ (Fig. 3), allocation over β₁, the single-expert
table against r_prob / r_deter / r_trans at β₁ ∈ {0, 0.25, 0.5} (Tables 1–2; from the results'
``paper_table``), the agents table, and the issue's targets, each computed from the results.

Every field is read defensively: a missing or non-numeric one shows as ``n/a``, never an error,
so results written by an older or newer engine still render.

>>> fmt(0.71234), fmt(None), fmt(float("nan")), fmt(12.3456, 1)
('0.712', 'n/a', 'n/a', '12.3')
>>> md_table(["a", "b"], [[1, "x"]])
'| a | b |\\n|---|---|\\n| 1 | x |'
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import metrics as M

__all__ = [
    "TARGETS",
    "OURS_PREFIX",
    "PAPER_BETAS",
    "fmt",
    "md_table",
    "num",
    "beta_key",
    "beta_points",
    "router_colors",
    "cost_em_figure",
    "tdl_figure",
    "em_beta_figure",
    "allocation_figure",
    "pgr_figure",
    "figures",
    "agents_table",
    "summary_table",
    "tdl_table",
    "beta_table",
    "paper_table",
    "pareto_table",
    "evaluate_targets",
    "targets_markdown",
    "report_markdown",
]

AGENT_PREFIX = "agent:"
OURS_PREFIX = "l2d-"  # the project's own routers: the candidates of every target
PAPER_BETAS: tuple[float, ...] = (0.0, 0.25, 0.5)  # β₁ of the paper's Tables 1–2
PAPER_BASELINES = ("r-prob", "r-det", "r-trans")  # the paper's r_prob, r_deter, r_trans
# The issue's targets (thresholds are the targets' own numbers; everything else is computed).
TARGETS = {
    "apgr": {"pool": "P2", "min": 0.70},
    "aiq_gain": {"pool": "P3", "min": 0.30},
    "tdl_below_random": {"level": 0.95},
    "vs_agent": {"agent": "bert-ens", "em_gap": 1.0, "min_ratio": 4.0},
}
_PALETTE = (
    "#1f77b4 #d62728 #2ca02c #9467bd #8c564b #e377c2 #17becf #bcbd22 #ff7f0e #7f7f7f #393b79 #637939 "
    "#8c6d31 #843c39 #7b4173 #3182bd #e6550d #31a354"
).split()
_FIXED_COLORS = {"oracle": "#000000", "zero": "#7f7f7f", "random": "#bdbdbd"}
_WIDTH, _HEIGHT = 1000, 600


# --- small helpers -----------------------------------------------------------------------------


def num(x) -> float | None:
    """``x`` as a finite float, else None (missing, NaN, bool, text…).

    >>> num(3), num("3"), num(True), num(float("inf"))
    (3.0, None, None, None)
    """
    if isinstance(x, bool) or not isinstance(x, int | float | np.number):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def fmt(x, nd: int = 3) -> str:
    """A number with ``nd`` decimals, or ``n/a``."""
    v = num(x)
    return "n/a" if v is None else f"{v:.{nd}f}"


def _ci(x) -> tuple[float, float] | None:
    if isinstance(x, list | tuple) and len(x) == 2 and num(x[0]) is not None and num(x[1]) is not None:
        return float(x[0]), float(x[1])
    return None


def _fmt_ci(x, nd: int = 3) -> str:
    c = _ci(x)
    return "n/a" if c is None else f"[{c[0]:.{nd}f}, {c[1]:.{nd}f}]"


def _pm(r: dict, key: str, nd: int = 3) -> str:
    """``mean ± std [lo, hi]`` of a router field (parts that are missing are left out)."""
    if num(r.get(key)) is None:
        return "n/a"
    out = fmt(r.get(key), nd)
    if num(r.get(f"{key}_std")) is not None:
        out += f" ± {fmt(r.get(f'{key}_std'), nd)}"
    if _ci(r.get(f"{key}_ci")):
        out += f" {_fmt_ci(r.get(f'{key}_ci'), nd)}"
    return out


def md_table(header: Sequence[str], rows: Iterable[Sequence]) -> str:
    """A GitHub markdown table (cells as given, ``|`` escaped)."""
    esc = lambda c: str(c).replace("|", "\\|")
    lines = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def beta_key(beta1: float) -> str:
    """The results' key of a β₁ (``f"{β₁:g}"``): ``beta_key(0.25) == "0.25"``."""
    return f"{beta1:g}"


def _routers(results: dict) -> dict[str, dict]:
    r = results.get("routers")
    return {k: v for k, v in r.items() if isinstance(v, dict)} if isinstance(r, dict) else {}


def _points(r: dict) -> list[dict]:
    pts = r.get("points")
    return [p for p in pts if isinstance(p, dict)] if isinstance(pts, list) else []


def _is_agent(rid: str) -> bool:
    return rid.startswith(AGENT_PREFIX)


def _ours(results: dict) -> list[str]:
    return [rid for rid in _routers(results) if rid.startswith(OURS_PREFIX)]


def beta_points(r: dict) -> list[dict]:
    """A router's points at the β₁ of the sweep (not the dense extras), by β₁."""
    pts = [p for p in _points(r) if not p.get("dense") and num(p.get("beta1")) is not None]
    return sorted(pts, key=lambda p: float(p["beta1"]))


def _beta_routers(results: dict) -> list[str]:
    """Routers whose allocation can change with β₁ (single agents excluded)."""
    return [rid for rid, r in _routers(results).items() if not _is_agent(rid) and beta_points(r)]


def router_colors(results: dict) -> dict[str, str]:
    """One colour per router, the same in every figure (reference routers in greys/black)."""
    out, i = {}, 0
    for rid in _routers(results):
        if rid in _FIXED_COLORS:
            out[rid] = _FIXED_COLORS[rid]
        else:
            out[rid] = _PALETTE[i % len(_PALETTE)]
            i += 1
    return out


def _agent_colors(results: dict) -> dict[str, str]:
    agents = results.get("agents") or []
    return {a: c for a, c in zip(agents, ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2") * 4)}


def _agent_em(results: dict, agent: str) -> float | None:
    return num((results.get("agent_em") or {}).get(agent))


def _agent_gflops(results: dict, agent: str) -> float | None:
    return num((results.get("agent_gflops") or {}).get(agent))


def _share(p: dict, results: dict) -> float | None:
    """Share of queries sent to a non-main agent (``share_strong``, or from the allocation)."""
    s = num(p.get("share_strong"))
    if s is not None:
        return s
    agents, alloc = results.get("agents") or [], p.get("allocation")
    if agents and isinstance(alloc, dict) and num(alloc.get(agents[0])) is not None:
        return 1.0 - float(alloc[agents[0]])
    return None


def _gpe(p: dict) -> float | None:
    """GFLOPs/EM of a point (stored, or computed from its GFLOPs and EM)."""
    v = num(p.get("gflops_per_em"))
    if v is not None:
        return v
    g, em = num(p.get("gflops")), num(p.get("em"))
    return g / em if g is not None and em else None


def _layout(fig: go.Figure, title: str, **kw) -> go.Figure:
    fig.update_layout(
        title=title,
        template="plotly_white",
        width=_WIDTH,
        height=_HEIGHT,
        legend=dict(font=dict(size=10)),
        **kw,
    )
    return fig


def _subtitle(results: dict) -> str:
    return (
        f"{results.get('dataset', '?')} {results.get('pool', '?')}, "
        f"{results.get('n_test', '?')} test questions, seeds {results.get('seeds', '?')}"
    )


# --- figures -----------------------------------------------------------------------------------


def cost_em_figure(results: dict, log_x: bool = True) -> go.Figure:
    """The cost–EM plane: every router's points and non-decreasing upper hull (what AIQ
    integrates), the agents, the oracle and the zero router's hull, on a log GFLOPs axis."""
    colors, fig = router_colors(results), go.Figure()
    agents_x, agents_y, agents_t = [], [], []
    for rid, r in _routers(results).items():
        pts = [p for p in _points(r) if num(p.get("gflops")) is not None and num(p.get("em")) is not None]
        if not pts:
            continue
        if _is_agent(rid):
            agents_x.append(pts[0]["gflops"])
            agents_y.append(pts[0]["em"])
            agents_t.append(rid[len(AGENT_PREFIX) :])
            continue
        x = np.array([p["gflops"] for p in pts], float)
        y = np.array([p["em"] for p in pts], float)
        dense = np.array([bool(p.get("dense")) for p in pts])
        hx, hy = M.upper_hull(x, y)
        c = colors[rid]
        line = dict(color=c, width=2, dash="dash" if rid == "zero" else "solid")
        if len(hx) > 1:
            fig.add_trace(go.Scatter(x=hx, y=hy, mode="lines", line=line, name=rid, legendgroup=rid))
        beta = [p.get("beta1") for p in pts]
        for mask, size, show in ((~dense, 8, len(hx) < 2), (dense, 4, False)):
            if mask.any():
                fig.add_trace(
                    go.Scatter(
                        x=x[mask],
                        y=y[mask],
                        mode="markers",
                        marker=dict(color=c, size=size, opacity=0.85 if size > 4 else 0.45),
                        name=rid,
                        legendgroup=rid,
                        showlegend=bool(show),
                        customdata=[[b] for b, m in zip(beta, mask) if m],
                        hovertemplate=rid
                        + ": %{x:.2f} GFLOPs, EM %{y:.2f}, β₁ %{customdata[0]}<extra></extra>",
                    )
                )
    if agents_x:
        fig.add_trace(
            go.Scatter(
                x=agents_x,
                y=agents_y,
                mode="markers+text",
                text=agents_t,
                textposition=["bottom right" if x <= min(agents_x) else "bottom left" for x in agents_x],
                marker=dict(symbol="diamond", size=14, color="#222222"),
                name="agents",
            )
        )
    lo_hi = results.get("gflops_range")
    if _ci(lo_hi):
        fig.add_vrect(x0=lo_hi[0], x1=lo_hi[1], fillcolor="grey", opacity=0.05, line_width=0)
    fig.update_xaxes(title="mean GFLOPs / query (rejector included)", type="log" if log_x else "linear")
    fig.update_yaxes(title="EM %")
    return _layout(fig, f"Cost–EM plane, every router and its upper hull — {_subtitle(results)}")


def tdl_figure(results: dict) -> go.Figure:
    """TDL over β₁ per router (the zero router: the best single agent's) against uniform random
    allocation (black, dashed) and, for the L2D routers, random allocation with the router's own
    shares (dotted, the router's colour) — the paper's Fig. 2."""
    colors, fig = router_colors(results), go.Figure()
    betas = [beta_key(b) for b in results.get("beta_points") or []]
    rnd = results.get("tdl_random") or {}
    xs = [k for k in betas if num(rnd.get(k)) is not None]
    if xs:
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[rnd[k] for k in xs],
                mode="lines+markers",
                line=dict(color="black", width=3, dash="dash"),
                name="uniform random",
            )
        )
    for rid, r in _routers(results).items():
        tdl = r.get("tdl") if isinstance(r.get("tdl"), dict) else {}
        x = [k for k in betas if num(tdl.get(k)) is not None]
        if _is_agent(rid) or rid == "random" or not x:
            continue
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[tdl[k] for k in x],
                mode="lines+markers",
                line=dict(color=colors[rid], width=3 if rid.startswith(OURS_PREFIX) else 1.5),
                name=rid,
                legendgroup=rid,
            )
        )
        pts = [p for p in beta_points(r) if num(p.get("tdl_random_matched")) is not None]
        if rid.startswith(OURS_PREFIX) and pts:
            fig.add_trace(
                go.Scatter(
                    x=[beta_key(p["beta1"]) for p in pts],
                    y=[p["tdl_random_matched"] for p in pts],
                    mode="lines",
                    line=dict(color=colors[rid], dash="dot", width=1.5),
                    name=f"{rid}: random, same shares",
                    legendgroup=rid,
                )
            )
    fig.update_xaxes(title="β₁ (β_j by the GFLOPs rule)", type="category", categoryarray=betas)
    fig.update_yaxes(title="mean TDL (lower is better)")
    fig = _layout(fig, f"TDL vs random allocation over β₁ (paper Fig. 2) — {_subtitle(results)}")
    return fig.update_layout(height=700)


def em_beta_figure(results: dict) -> go.Figure:
    """EM and GFLOPs/EM over β₁ (the paper's Fig. 3), the agents alone as flat dotted lines."""
    colors = router_colors(results)
    fig = make_subplots(rows=1, cols=2, subplot_titles=("EM % vs β₁", "GFLOPs/EM vs β₁ (log)"))
    for rid, r in _routers(results).items():
        pts = [p for p in beta_points(r) if num(p.get("em")) is not None]
        if not pts:
            continue
        agent = _is_agent(rid)
        x = [beta_key(p["beta1"]) for p in pts]
        style = dict(line=dict(color=colors[rid], dash="dot" if agent else "solid", width=1 if agent else 2))
        err = [num(p.get("em_std")) or 0.0 for p in pts]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[p["em"] for p in pts],
                error_y=dict(type="data", array=err, visible=any(err)),
                mode="lines" if agent else "lines+markers",
                name=rid,
                legendgroup=rid,
                **style,
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[_gpe(p) for p in pts],
                mode="lines" if agent else "lines+markers",
                name=rid,
                legendgroup=rid,
                showlegend=False,
                **style,
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(title="β₁", type="category")
    fig.update_yaxes(title="EM %", row=1, col=1)
    fig.update_yaxes(title="GFLOPs / EM", type="log", row=1, col=2)
    return _layout(fig, f"Accuracy and compute over β₁ (paper Fig. 3) — {_subtitle(results)}")


def allocation_figure(results: dict) -> go.Figure:
    """Allocation over β₁, stacked per agent, one panel per learned router (and the oracle)."""

    def stackable(p: dict) -> bool:  # shares of one agent per query (not the ensemble's "all")
        a = p.get("allocation")
        return isinstance(a, dict) and abs(sum(num(v) or 0.0 for v in a.values()) - 1.0) < 1e-6

    rids = [
        rid
        for rid in _beta_routers(results)
        if rid not in ("random", "zero") and any(stackable(p) for p in beta_points(_routers(results)[rid]))
    ]
    agents, acol = results.get("agents") or [], _agent_colors(results)
    cols = min(4, max(1, len(rids)))
    rows = max(1, math.ceil(len(rids) / cols))
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=rids or ["no learned router"],
        shared_yaxes=True,
        vertical_spacing=0.3 / rows,
    )
    for i, rid in enumerate(rids):
        pts = [p for p in beta_points(_routers(results)[rid]) if stackable(p)]
        for a in agents:
            fig.add_trace(
                go.Bar(
                    x=[beta_key(p["beta1"]) for p in pts],
                    y=[num(p["allocation"].get(a)) for p in pts],
                    name=a,
                    legendgroup=a,
                    showlegend=i == 0,
                    marker_color=acol.get(a),
                ),
                row=i // cols + 1,
                col=i % cols + 1,
            )
    fig.update_layout(barmode="stack")
    fig.update_xaxes(type="category", tickangle=0, tickfont=dict(size=9))
    fig.update_yaxes(tickformat=".0%", range=[0, 1.0001])
    fig = _layout(fig, f"Allocation over β₁ (x: β₁, one panel per router) — {_subtitle(results)}")
    return fig.update_layout(height=max(_HEIGHT, 300 * rows))


def pgr_figure(results: dict) -> go.Figure | None:
    """PGR against the share of calls to a non-main agent, per router (the curve APGR averages,
    points as markers), with random mixing (the diagonal); None without two distinct agent EMs."""
    agents = results.get("agents") or []
    weak = results.get("pgr_weak") or (agents[0] if agents else None)
    strong = results.get("pgr_strong") or (agents[-1] if len(agents) > 1 else None)
    em_w, em_s = _agent_em(results, weak), _agent_em(results, strong)
    if em_w is None or em_s is None or em_s == em_w:
        return None
    colors, fig = router_colors(results), go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[0, 1],
            y=[0, 1],
            mode="lines",
            line=dict(color="black", dash="dash"),
            name=f"random mixing {weak} / {strong}",
        )
    )
    for rid, r in _routers(results).items():
        if _is_agent(rid) or rid in ("zero", "random", "ensemble"):  # the ensemble calls every agent
            continue
        sh = [(_share(p, results), num(p.get("em"))) for p in _points(r)]
        sh = [(s, e) for s, e in sh if s is not None and e is not None]
        if not sh:
            continue
        s, e = np.array(sh).T
        try:
            gx, gy = M.pgr_curve(s, e, em_w, em_s)
        except ValueError:
            continue
        fig.add_trace(
            go.Scatter(x=gx, y=gy, mode="lines", line=dict(color=colors[rid]), name=rid, legendgroup=rid)
        )
        fig.add_trace(
            go.Scatter(
                x=s,
                y=(e - em_w) / (em_s - em_w),
                mode="markers",
                marker=dict(color=colors[rid], size=5),
                name=rid,
                legendgroup=rid,
                showlegend=False,
            )
        )
    fig.update_xaxes(title=f"share of queries not sent to {weak}", range=[0, 1], tickformat=".0%")
    fig.update_yaxes(title=f"PGR (EM between {weak} and {strong})")
    return _layout(fig, f"Performance gap recovered vs share of expert calls — {_subtitle(results)}")


def figures(results: dict) -> dict[str, go.Figure]:
    """Every figure of the report by file stem (PGR only when it is defined)."""
    out = {
        "cost_em": cost_em_figure(results),
        "tdl_vs_beta": tdl_figure(results),
        "em_gflops_per_em_vs_beta": em_beta_figure(results),
        "allocation_vs_beta": allocation_figure(results),
    }
    pgr = pgr_figure(results)
    if pgr is not None:
        out["pgr_vs_share"] = pgr
    return out


# --- tables ------------------------------------------------------------------------------------


def agents_table(results: dict) -> str:
    """Agents alone (and the majority-vote ensemble): EM, F1, GFLOPs/query, GFLOPs/EM."""
    routers, rows = _routers(results), []
    for i, a in enumerate(results.get("agents") or []):
        p = (_points(routers.get(AGENT_PREFIX + a, {})) or [{}])[0]
        em = _agent_em(results, a) if _agent_em(results, a) is not None else num(p.get("em"))
        g = _agent_gflops(results, a) if _agent_gflops(results, a) is not None else num(p.get("gflops"))
        role = "main" if i == 0 else "expert"
        rows.append([a, role, fmt(em, 2), fmt(p.get("f1"), 2), fmt(g, 2), fmt(g / em if g and em else None)])
    if "ensemble" in routers and _points(routers["ensemble"]):
        p = _points(routers["ensemble"])[0]
        rows.append(["ensemble (majority vote)", "all agents", fmt(p.get("em"), 2), fmt(p.get("f1"), 2)])
        rows[-1] += [fmt(p.get("gflops"), 2), fmt(_gpe(p))]
    table = md_table(["agent", "role", "EM", "F1", "GFLOPs/query", "GFLOPs/EM"], rows)
    return table + f"\n\nRejector: {fmt(results.get('rejector_gflops'))} GFLOPs per routed query (measured)."


def summary_table(results: dict) -> str:
    """Per router: AIQ ± std over seeds [bootstrap 95% CI], APGR likewise, CPT(50%), CPT(80%),
    mean TDL over the β₁ sweep and at how many β₁ the TDL is below random with 95% confidence."""
    rows = []
    for rid, r in _routers(results).items():
        tdl = [num(v) for v in (r.get("tdl") or {}).values()]
        tdl = [v for v in tdl if v is not None]
        below = r.get("tdl_below_random_95")
        if isinstance(below, dict):
            below_txt = f"{sum(bool(v) for v in below.values())}/{len(below)}"
        elif isinstance(below, bool):
            below_txt = "yes" if below else "no"
        else:
            below_txt = "n/a"
        rows.append(
            (
                num(r.get("aiq")),
                [
                    rid,
                    _pm(r, "aiq", 2),
                    fmt(r.get("aiq_beta_points"), 2),
                    _pm(r, "apgr"),
                    fmt(r.get("cpt50")),
                    fmt(r.get("cpt80")),
                    fmt(float(np.mean(tdl)) if tdl else None, 4),
                    below_txt,
                ],
            )
        )
    rows.sort(key=lambda t: -t[0] if t[0] is not None else math.inf)
    header = [
        "router",
        "AIQ ± std [95% CI]",
        "AIQ (β₁ points)",
        "APGR ± std [95% CI]",
        "CPT(50%)",
        "CPT(80%)",
        "mean TDL",
        "β₁ with TDL < random (95%)",
    ]
    return md_table(header, [r for _, r in rows])


def _below(r: dict, k: str) -> bool | None:
    ci = _ci((r.get("tdl_diff_ci") or {}).get(k))
    if ci is not None:
        return ci[1] < 0
    b = r.get("tdl_below_random_95")
    return bool(b[k]) if isinstance(b, dict) and k in b else None


def tdl_table(results: dict) -> str:
    """TDL per β₁: uniform random, then each router (✓: TDL − random < 0 with 95% confidence,
    ✗: not); then the paired-bootstrap 95% interval of TDL(router) − TDL(random)."""
    betas = [beta_key(b) for b in results.get("beta_points") or []]
    rnd = results.get("tdl_random") or {}
    rows = [["uniform random", *[fmt(rnd.get(k), 4) for k in betas]]]
    ci_rows = []
    for rid, r in _routers(results).items():
        tdl = r.get("tdl") or {}
        if _is_agent(rid) or not tdl:
            continue
        cells = []
        for k in betas:
            flag = {True: " ✓", False: " ✗", None: ""}[_below(r, k)]
            cells.append(fmt(tdl.get(k), 4) + flag)
        rows.append([rid, *cells])
        diff = r.get("tdl_diff_ci") or {}
        if diff:
            ci_rows.append([rid, *[_fmt_ci(diff.get(k), 4) for k in betas]])
    out = md_table(["router", *[f"β₁={k}" for k in betas]], rows)
    if ci_rows:
        out += "\n\nTDL(router) − TDL(uniform random), paired bootstrap 95% interval:\n\n"
        out += md_table(["router", *[f"β₁={k}" for k in betas]], ci_rows)
    return out


def beta_table(results: dict) -> str:
    """Per learned router and β₁: EM, GFLOPs/EM and the share of expert calls (Fig. 3's numbers)."""
    betas = [beta_key(b) for b in results.get("beta_points") or []]
    rows = []
    for rid in _beta_routers(results):
        if rid in ("random", "zero"):
            continue
        by = {beta_key(p["beta1"]): p for p in beta_points(_routers(results)[rid])}
        for label, f in (
            ("EM", lambda p: fmt(p.get("em"), 2)),
            ("GFLOPs/EM", lambda p: fmt(_gpe(p))),
            ("expert share", lambda p: fmt(_share(p, results), 3)),
        ):
            rows.append([rid, label, *[f(by[k]) if k in by else "n/a" for k in betas]])
    return md_table(["router", "metric", *[f"β₁={k}" for k in betas]], rows)


def paper_table(results: dict) -> str:
    """The single-expert comparison at β₁ ∈ PAPER_BETAS (paper Tables 1–2: EM, and EM per unit
    of cost — shown here as GFLOPs/EM — of the L2D rejectors against r_prob, r_deter, r_trans),
    from the results' ``paper_table`` (written by scripts/benchmark_routers.py)."""
    pt = results.get("paper_table")
    if not isinstance(pt, dict) or not isinstance(pt.get("rows"), dict) or not pt["rows"]:
        return "n/a (no `paper_table` in the results: run scripts/benchmark_routers.py)"
    rows_by = pt["rows"]
    cols = list(rows_by)
    betas = [beta_key(b) for b in pt.get("betas") or PAPER_BETAS]
    out = []
    for label, f in (
        ("EM %", lambda p: fmt(p.get("em"), 2)),
        ("GFLOPs/EM", lambda p: fmt(_gpe(p))),
        ("EM per GFLOP", lambda p: fmt(1 / _gpe(p) if _gpe(p) else None)),
        ("expert share", lambda p: fmt(_share(p, results), 3)),
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


def pareto_table(results: dict, exclude: Sequence[str] = ("oracle",)) -> str:
    """Which routers own the non-dominated (GFLOPs, EM) points of all routers but ``exclude``
    (the oracle, an upper bound that dominates nearly everything): per router, how many points
    of the front and their GFLOPs and EM ranges (points only: mixing between them is not counted)."""
    rows = []
    for rid, r in _routers(results).items():
        if rid not in exclude:
            rows += [
                (rid, p)
                for p in _points(r)
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


# --- targets -----------------------------------------------------------------------------------


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


def _target_apgr(results: dict, siblings: dict | None) -> dict:
    t = TARGETS["apgr"]
    text = f"APGR ≥ {t['min']:.2f} on {t['pool']}"
    res, src = _source(results, t["pool"], siblings)
    if res is None:
        return _target("apgr", text, "n/a", f"no {t['pool']} results (this run is {results.get('pool')})")
    vals = {rid: num(_routers(res)[rid].get("apgr")) for rid in _ours(res)}
    vals = {k: v for k, v in vals.items() if v is not None}
    if not vals:
        return _target("apgr", text, "n/a", f"no APGR of an L2D router in {src}")
    best = max(vals, key=vals.get)
    ci = _fmt_ci(_routers(res)[best].get("apgr_ci"))
    all_txt = ", ".join(f"{k} {v:.3f}" for k, v in vals.items())
    status = "met" if vals[best] >= t["min"] else "not met"
    detail = f"best {best}: APGR {vals[best]:.3f} (95% CI {ci}) vs {t['min']:.2f}; all: {all_txt}; from {src}"
    return _target("apgr", text, status, detail, router=best, value=vals[best], threshold=t["min"])


def _target_aiq(results: dict, siblings: dict | None) -> dict:
    t = TARGETS["aiq_gain"]
    text = f"AIQ gain over the zero router ≥ {t['min']:.0%} of the oracle's gain on {t['pool']}"
    res, src = _source(results, t["pool"], siblings)
    if res is None:
        return _target("aiq_gain", text, "n/a", f"no {t['pool']} results (this run is {results.get('pool')})")
    routers = _routers(res)
    zero, oracle = num(routers.get("zero", {}).get("aiq")), num(routers.get("oracle", {}).get("aiq"))
    if zero is None or oracle is None or oracle <= zero:
        return _target("aiq_gain", text, "n/a", f"zero / oracle AIQ missing or oracle ≤ zero in {src}")
    vals = {rid: num(routers[rid].get("aiq")) for rid in _ours(res)}
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


def _target_tdl(results: dict) -> dict:
    text = (
        f"TDL below uniform random at every β₁ point with {TARGETS['tdl_below_random']['level']:.0%} "
        "confidence"
    )
    betas = [beta_key(b) for b in results.get("beta_points") or []]
    per = {}
    for rid in _ours(results):
        r = _routers(results)[rid]
        flags = [_below(r, k) for k in betas]
        if betas and all(f is not None for f in flags):
            his = [_ci((r.get("tdl_diff_ci") or {}).get(k)) for k in betas]
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


def _target_vs_agent(results: dict) -> dict:
    t = TARGETS["vs_agent"]
    a = t["agent"]
    text = f"within {t['em_gap']:g} EM of {a} at ≥ {t['min_ratio']:g}× lower GFLOPs/EM"
    em_a, g_a = _agent_em(results, a), _agent_gflops(results, a)
    if em_a is None or g_a is None or em_a <= 0:
        return _target("vs_agent", text, "n/a", f"{a} is not in pool {results.get('pool')}")
    gpe_a = g_a / em_a
    best = None  # (ratio, router, point)
    for rid in _ours(results):
        for p in _points(_routers(results)[rid]):
            em, gpe = num(p.get("em")), _gpe(p)
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
    where += f", expert share {fmt(_share(p, results))}"
    detail = (
        f"{rid} at {where}: EM {p['em']:.2f} (≥ {em_a:.2f} − {t['em_gap']:g}), GFLOPs/EM {_gpe(p):.3f} vs "
        f"{a} {gpe_a:.3f} → {ratio:.2f}× lower (needs {t['min_ratio']:g}×; pool {results.get('pool')})"
    )
    return _target("vs_agent", text, status, detail, router=rid, value=ratio, threshold=t["min_ratio"])


def evaluate_targets(results: dict, siblings: dict | None = None) -> list[dict]:
    """The issue's four targets, each with ``status`` (met / not met / n/a), its computed value
    and a one-line ``detail``. Candidates: the L2D routers (ids ``l2d-…``). ``siblings`` maps a
    pool name to ``{"path": …, "results": …}`` of another run, used for the targets on P2 / P3
    when this run is on another pool."""
    return [
        _target_apgr(results, siblings),
        _target_aiq(results, siblings),
        _target_tdl(results),
        _target_vs_agent(results),
    ]


def targets_markdown(results: dict, siblings: dict | None = None) -> str:
    rows = [[t["target"], f"**{t['status']}**", t["detail"]] for t in evaluate_targets(results, siblings)]
    return md_table(["target", "status", "computed"], rows)


# --- the whole report ---------------------------------------------------------------------------


def report_markdown(
    results: dict,
    siblings: dict | None = None,
    plots: Sequence[str] = (),
    title: str | None = None,
) -> str:
    """``report.md``: run facts, targets, agents, summary, TDL per β₁, Fig. 3 numbers, the
    paper's single-expert table and links to ``plots`` (paths relative to the report)."""
    run = results.get("run") if isinstance(results.get("run"), dict) else {}
    agents = results.get("agents") or []
    head = title or f"Router benchmark — {results.get('dataset', '?')} {results.get('pool', '?')}"
    facts = [
        f"- agents: {' → '.join(agents) or 'n/a'} (main first); "
        f"{results.get('n_test', 'n/a')} test questions",
        f"- seeds: {results.get('seeds', 'n/a')}; encoder {results.get('encoder', 'n/a')}, "
        f"features {results.get('features', 'n/a')}; created {results.get('created', 'n/a')}",
        f"- β₁ points: {results.get('beta_points', 'n/a')} (α = 1, β_j by the GFLOPs rule)",
        f"- GFLOPs range of AIQ: {_fmt_ci(results.get('gflops_range'), 2)}",
    ]
    if run:
        secs = run.get("compute_s", run.get("elapsed_s"))
        facts.append(
            f"- command: `{run.get('command', 'n/a')}`; computed in {fmt(secs, 1)} s"
            + (f"; **reduced run** ({run.get('reduced')})" if run.get("reduced") else "")
        )
    boot = results.get("bootstrap")
    if isinstance(boot, dict):
        facts.append(
            f"- intervals: paired bootstrap over {boot.get('unit', 'test questions')}, "
            f"{boot.get('n_boot', 'n/a')} resamples, {boot.get('level', 0.95):.0%} percentile"
        )
    parts = [
        f"# {head}",
        "\n".join(facts),
        "## Targets\n\nCandidates: the L2D routers (`l2d-…`); every number below is computed from "
        "`results.json`.\n\n" + targets_markdown(results, siblings),
        "## Agents\n\n" + agents_table(results),
        "## Routers\n\nAIQ: area under the router's non-decreasing upper convex hull of (GFLOPs, EM) "
        "over the agents' GFLOPs range / that range (RouterBench; zero left of the router's cheapest "
        "point). APGR: mean PGR over the share of expert calls (RouteLLM); CPT(p%): smallest share "
        "reaching p% PGR. ± std over seeds, [bootstrap 95% interval].\n\n" + summary_table(results),
        "## TDL per β₁ (paper Fig. 2)\n\n" + tdl_table(results),
        "## EM, GFLOPs/EM and expert share per β₁ (paper Fig. 3)\n\n" + beta_table(results),
        "## Single-expert table (paper Tables 1–2)\n\n" + paper_table(results),
        "## Pareto front (every router but the oracle)\n\n" + pareto_table(results),
    ]
    if plots:
        links = "\n".join(f"- [{p}]({p})" for p in plots if not p.endswith(".png"))
        images = "\n\n".join(f"![{p}]({p})" for p in plots if p.endswith(".png"))
        parts.append("## Plots\n\n" + "\n\n".join(x for x in (links, images) if x))
    return "\n\n".join(parts) + "\n"
