"""A router-comparison ``results.json`` (:func:`l2d_core.evaluation.comparison.run_comparison`) as
long-format pandas frames, and the small helpers every report module shares — pure functions.

Every field is read defensively: a missing or non-numeric one becomes ``None`` / NaN (shown as
``n/a``), never an error, so results written by an older or newer engine still render.

>>> fmt(0.71234), fmt(None), fmt(float("nan")), fmt(12.3456, 1)
('0.712', 'n/a', 'n/a', '12.3')
>>> router_kind("agent:bert-ens"), router_label("agent:bert-ens"), router_label("my-router")
('agent', 'bert-ens', 'my-router')
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..evaluation import metrics as M
from ..evaluation.paper import PAPER_BETAS, paper_baselines
from ..evaluation.points import beta_key
from ..evaluation.results import Point, Results, RouterEntry, beta_points, expert_share, num
from ..routers.registry import AGENT_PREFIX, OURS_PREFIX, router_family, router_label, router_role, with_role

# fmt: off
__all__ = [
    "AGENT_PREFIX", "OURS_PREFIX", "PAPER_BETAS", "paper_baselines", "num", "fmt",
    "interval", "fmt_ci", "beta_key", "routers_of", "points_of", "is_agent", "our_routers",
    "beta_points", "beta_routers", "router_label", "router_role", "with_role", "NO_ALLOCATION",
    "router_kind", "router_colors", "agent_colors",
    "agent_em", "agent_gflops", "share_of", "point_gflops_per_em", "tdl_below",
    "POINT_COLUMNS", "REFERENCE_COLORS", "TDL_CURVES", "points_frame", "tdl_frame", "allocation_frame",
    "pgr_refs", "pgr_frame",
]
# fmt: on

_PALETTE = (
    "#1f77b4 #d62728 #2ca02c #9467bd #8c564b #e377c2 #17becf #bcbd22 #ff7f0e #a55194 #393b79 #637939 "
    "#8c6d31 #843c39 #7b4173 #3182bd #e6550d #31a354 #6b6ecf #b5cf6b #e7ba52 #ad494a"
).split()
# the reference routers' colours by role, distinct from each other and from the palette (chance:
# the random router, also the uniform random policy of the TDL figure)
REFERENCE_COLORS = {"bound": "#000000", "floor": "#7f7f7f", "chance": "#bdbdbd"}
# routers that draw no learned allocation: random allocation and the zero router
NO_ALLOCATION = ("chance", "floor")
_AGENT_PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2")


# --- values ------------------------------------------------------------------------------------


def fmt(x, nd: int = 3) -> str:
    """A number with ``nd`` decimals, or ``n/a``."""
    v = num(x)
    return "n/a" if v is None else f"{v:.{nd}f}"


def interval(x) -> tuple[float, float] | None:
    """A ``[lo, hi]`` pair of numbers as floats, else None.

    >>> interval([1, 2.5]), interval([1, None]), interval("ab")
    ((1.0, 2.5), None, None)
    """
    if isinstance(x, list | tuple) and len(x) == 2 and num(x[0]) is not None and num(x[1]) is not None:
        return float(x[0]), float(x[1])
    return None


def fmt_ci(x, nd: int = 3) -> str:
    """An interval as ``[lo, hi]`` with ``nd`` decimals, or ``n/a``.

    >>> fmt_ci([0.1, 0.25], 2), fmt_ci(None)
    ('[0.10, 0.25]', 'n/a')
    """
    c = interval(x)
    return "n/a" if c is None else f"[{c[0]:.{nd}f}, {c[1]:.{nd}f}]"


# --- routers and points ------------------------------------------------------------------------


def routers_of(results: Results) -> dict[str, RouterEntry]:
    """The results' routers (entries that are not dicts left out)."""
    r = results.get("routers")
    return {k: v for k, v in r.items() if isinstance(v, dict)} if isinstance(r, dict) else {}


def points_of(r: RouterEntry) -> list[Point]:
    """A router's points (entries that are not dicts left out)."""
    pts = r.get("points")
    return [p for p in pts if isinstance(p, dict)] if isinstance(pts, list) else []


def is_agent(rid: str) -> bool:
    """Whether a router id is a single agent (``agent:<id>``)."""
    return rid.startswith(AGENT_PREFIX)


def our_routers(results: Results) -> list[str]:
    """Ids of the project's own routers (family ``l2d``), the candidates of every target."""
    return [rid for rid in routers_of(results) if router_family(rid) == "l2d"]


def router_kind(rid: str) -> str:
    """``agent``, ``ours`` (the L2D routers), ``reference`` (oracle, zero, random) or ``baseline``
    (also any id the registry does not know: results of another version).

    >>> [router_kind(r) for r in ("agent:x", "l2d-sdl", "zero", "knn", "gone")]
    ['agent', 'ours', 'reference', 'baseline', 'baseline']
    """
    family = router_family(rid) or "baseline"
    return {"l2d": "ours"}.get(family, family)


def beta_routers(results: Results) -> list[str]:
    """Routers whose allocation can change with β₁ (single agents excluded)."""
    return [rid for rid, r in routers_of(results).items() if not is_agent(rid) and beta_points(r)]


def router_colors(results: Results) -> dict[str, str]:
    """One colour per router id, the same in every figure (reference routers in greys/black)."""
    out, i = {}, 0
    for rid in routers_of(results):
        if router_role(rid) in REFERENCE_COLORS:
            out[rid] = REFERENCE_COLORS[router_role(rid)]
        else:
            out[rid] = _PALETTE[i % len(_PALETTE)]
            i += 1
    return out


def agent_colors(results: Results) -> dict[str, str]:
    """One colour per agent of the pool (allocation bars)."""
    return dict(zip(results.get("agents") or [], _AGENT_PALETTE * 4))


def agent_em(results: Results, agent: str) -> float | None:
    """An agent's EM % alone on the test questions, or None."""
    return num((results.get("agent_em") or {}).get(agent))


def agent_gflops(results: Results, agent: str) -> float | None:
    """An agent's mean GFLOPs per query, or None."""
    return num((results.get("agent_gflops") or {}).get(agent))


def share_of(p: Point, results: Results) -> float | None:
    """Share of queries a point sends to a non-main agent (the results' main agent first).

    >>> share_of({"allocation": {"a": 0.75, "b": 0.25}}, {"agents": ["a", "b"]})
    0.25
    """
    agents = results.get("agents") or []
    return expert_share(p, agents[0] if agents else None)


def point_gflops_per_em(p: Point) -> float | None:
    """GFLOPs/EM of a point (stored, or computed from its GFLOPs and EM).

    >>> point_gflops_per_em({"gflops": 30.0, "em": 60.0}), point_gflops_per_em({"em": 60.0})
    (0.5, None)
    """
    v = num(p.get("gflops_per_em"))
    if v is not None:
        return v
    g, em = num(p.get("gflops")), num(p.get("em"))
    return g / em if g is not None and em else None


def tdl_below(r: RouterEntry, k: str) -> bool | None:
    """Whether a router's TDL at β₁ key ``k`` is below uniform random with 95% confidence (the
    upper end of ``tdl_diff_ci`` < 0, else ``tdl_below_random_95``); None when unknown."""
    ci = interval((r.get("tdl_diff_ci") or {}).get(k))
    if ci is not None:
        return ci[1] < 0
    b = r.get("tdl_below_random_95")
    return bool(b[k]) if isinstance(b, dict) and k in b else None


# --- frames ------------------------------------------------------------------------------------

POINT_COLUMNS = (
    *("router", "label", "kind", "beta1", "beta", "dense", "sweep", "gflops", "em", "em_std", "f1"),
    *("gflops_per_em", "share_strong", "tdl", "tdl_random_matched", "pgr"),
)


def points_frame(results: Results) -> pd.DataFrame:
    """Every point of every router, one row each (:data:`POINT_COLUMNS`): ``beta`` is the β₁
    key (None without β₁), ``sweep`` marks the points of the β₁ sweep (not ``dense``).

    >>> res = {"agents": ["a", "b"], "routers": {"l2d-sdl": {"points": [
    ...     {"beta1": 0.5, "gflops": 2.0, "em": 50.0}, {"beta1": 0.1, "dense": True, "em": 60}]}}}
    >>> points_frame(res)[["router", "beta", "sweep", "gflops_per_em"]].to_dict("records")
    [{'router': 'l2d-sdl', 'beta': '0.5', 'sweep': True, 'gflops_per_em': 0.04}, \
{'router': 'l2d-sdl', 'beta': '0.1', 'sweep': False, 'gflops_per_em': nan}]
    """
    rows = []
    for rid, r in routers_of(results).items():
        head = {"router": rid, "label": router_label(rid), "kind": router_kind(rid)}  # once per router
        for p in points_of(r):
            b = num(p.get("beta1"))
            row = head | {"beta1": b}
            row.update(beta=None if b is None else beta_key(b), dense=bool(p.get("dense")))
            row["sweep"] = b is not None and not row["dense"]
            row.update({k: num(p.get(k)) for k in ("gflops", "em", "em_std", "f1", "tdl", "pgr")})
            row["tdl_random_matched"] = num(p.get("tdl_random_matched"))
            row.update(gflops_per_em=point_gflops_per_em(p), share_strong=share_of(p, results))
            rows.append(row)
    return pd.DataFrame(rows, columns=list(POINT_COLUMNS)).astype({"dense": bool, "sweep": bool})


TDL_CURVES = {"router": "this router", "matched": "random (same shares)", "uniform": "random (uniform)"}


def tdl_frame(results: Results) -> pd.DataFrame:
    """TDL per β₁ (``beta``: the key, in the order of ``beta_points``), long: columns router,
    label, kind, beta, curve, tdl. ``curve`` is one of :data:`TDL_CURVES`' values: the router's own TDL
    (``tdl`` of the results, not of its points: the zero router's is the best agent's), random
    allocation with the router's shares at its β₁ points, and uniform random (router None)."""
    betas = [beta_key(b) for b in results.get("beta_points") or [] if num(b) is not None]
    rnd = results.get("tdl_random") if isinstance(results.get("tdl_random"), dict) else {}
    rows = [
        {"router": None, "label": TDL_CURVES["uniform"], "kind": "reference", "beta": k}
        | {"curve": TDL_CURVES["uniform"], "tdl": num(rnd[k])}
        for k in betas
        if num(rnd.get(k)) is not None
    ]
    for rid, r in routers_of(results).items():
        head = {"router": rid, "label": router_label(rid), "kind": router_kind(rid)}
        tdl = r.get("tdl") if isinstance(r.get("tdl"), dict) else {}
        rows += [
            head | {"beta": k, "curve": TDL_CURVES["router"], "tdl": num(tdl[k])}
            for k in betas
            if num(tdl.get(k)) is not None
        ]
        rows += [
            head
            | {"beta": beta_key(p["beta1"]), "curve": TDL_CURVES["matched"]}
            | {"tdl": num(p["tdl_random_matched"])}
            for p in beta_points(r)
            if num(p.get("tdl_random_matched")) is not None
        ]
    return pd.DataFrame(rows, columns=["router", "label", "kind", "beta", "curve", "tdl"])


def _stackable(p: Point) -> bool:
    """Shares of one agent per query (not the ensemble's "every agent")."""
    a = p.get("allocation")
    return isinstance(a, dict) and abs(sum(num(v) or 0.0 for v in a.values()) - 1.0) < 1e-6


def allocation_frame(results: Results) -> pd.DataFrame:
    """Allocation over β₁ of the routers that learn it (not random / zero / single agents), long:
    router, label, beta (the β₁ key), agent, share — at the sweep points whose shares sum to 1."""
    rows, agents = [], results.get("agents") or []
    for rid in beta_routers(results):
        if router_role(rid) in NO_ALLOCATION:
            continue
        for p in filter(_stackable, beta_points(routers_of(results)[rid])):
            rows += [
                {"router": rid, "label": router_label(rid), "beta": beta_key(p["beta1"]), "agent": a}
                | {"share": num(p["allocation"].get(a))}
                for a in agents
            ]
    return pd.DataFrame(rows, columns=["router", "label", "beta", "agent", "share"])


def pgr_refs(results: Results) -> tuple[str, str, float, float] | None:
    """(weak agent, strong agent, weak EM, strong EM) of PGR, or None without two distinct EMs."""
    agents = results.get("agents") or []
    weak = results.get("pgr_weak") or (agents[0] if agents else None)
    strong = results.get("pgr_strong") or (agents[-1] if len(agents) > 1 else None)
    em_w, em_s = agent_em(results, weak), agent_em(results, strong)
    if em_w is None or em_s is None or em_s == em_w:
        return None
    return weak, strong, em_w, em_s


def pgr_frame(results: Results) -> pd.DataFrame:
    """PGR against the share of expert calls per router (not agents, zero, random or the
    ensemble, which calls every agent), long: router, label, share, pgr, curve — True for the
    vertices of the curve APGR averages (:func:`~l2d_core.evaluation.metrics.pgr_curve`), False
    for the router's own points. Empty when PGR is undefined (:func:`pgr_refs`)."""
    refs, rows = pgr_refs(results), []
    columns = ["router", "label", "share", "pgr", "curve"]
    if refs is None:
        return pd.DataFrame(rows, columns=columns).astype({"curve": bool})
    for rid, r in routers_of(results).items():
        if is_agent(rid) or router_role(rid) in (*NO_ALLOCATION, "all-agents"):
            continue
        share_em = [(share_of(p, results), num(p.get("em"))) for p in points_of(r)]
        share_em = [(share, em) for share, em in share_em if share is not None and em is not None]
        if not share_em:
            continue
        shares, ems = np.array(share_em).T
        weak_em, strong_em = refs[2], refs[3]
        try:
            curve_share, curve_pgr = M.pgr_curve(shares, ems, weak_em, strong_em)
        except ValueError:
            continue
        head = {"router": rid, "label": router_label(rid)}
        rows += [head | {"share": x, "pgr": y, "curve": True} for x, y in zip(curve_share, curve_pgr)]
        pgr = (ems - weak_em) / (strong_em - weak_em)
        rows += [head | {"share": x, "pgr": y, "curve": False} for x, y in zip(shares, pgr)]
    return pd.DataFrame(rows, columns=columns).astype({"curve": bool})
