"""The report's remote-call view of a pool (BENCHMARK.md, LLM pools): accuracy against the share
of calls to the remote agent — the request–accuracy plot of the external anchor (Weiss & Tonella),
every router and ``conf-threshold`` on it — and, where the agents' logs carry latency, the
latency price rule beside the GFLOPs rule: mean realised latency per query (the main agent always
paid, an expert's logged latency where it was called).

>>> res = {"agents": ["a", "b"], "agent_gflops": {"a": 1.0, "b": 9.0}, "routers": {"r": {"points": [
...     {"em": 50.0, "allocation": {"a": 0.8, "b": 0.2}}, {"em": 40.0, "allocation": {"a": 0.7, "b": 0.3}},
...     {"em": 60.0, "allocation": {"a": 0.5, "b": 0.5}}]}}}
>>> remote_agent(res)
'b'
>>> requests_frame(res)[["share", "em", "front"]].values.tolist()
[[0.2, 50.0, True], [0.3, 40.0, False], [0.5, 60.0, True]]
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from ..evaluation import metrics as M
from ..evaluation.results import Results
from .charts import color_scale, legend
from .frames import (
    beta_key,
    beta_points,
    fmt,
    is_agent,
    num,
    points_of,
    router_colors,
    router_label,
    routers_of,
)
from .tables import md_table

__all__ = ["remote_agent", "requests_frame", "request_accuracy_figure", "has_latency", "latency_tables"]

_WIDTH, _HEIGHT = 760, 420


def remote_agent(results: Results) -> str | None:
    """The remote agent: the pool's dearest (most GFLOPs per query)."""
    g = {a: num(v) for a, v in (results.get("agent_gflops") or {}).items() if num(v) is not None}
    return max(g, key=g.get) if g else None


def requests_frame(results: Results) -> pd.DataFrame:
    """Every router's points as (router, label, share of calls to the remote agent, EM, front):
    ``front`` marks the router's non-dominated points (fewer remote calls, higher EM)."""
    remote, rows = remote_agent(results), []
    for rid, r in routers_of(results).items():
        pts = [
            (num((p.get("allocation") or {}).get(remote)), num(p.get("em")))
            for p in points_of(r)
            if isinstance(p.get("allocation"), dict)
        ]
        pts = list(dict.fromkeys((s, e) for s, e in pts if s is not None and e is not None))  # distinct
        if not pts:
            continue
        share, em = np.array(pts, float).T
        front = set(M.pareto_front(share, em).tolist())
        label = router_label(rid)
        rows += [
            {"router": rid, "label": label, "share": s, "em": e, "front": i in front}
            for i, (s, e) in enumerate(pts)
        ]
    return pd.DataFrame(rows, columns=["router", "label", "share", "em", "front"])


def request_accuracy_figure(results: Results) -> alt.LayerChart | None:
    """Accuracy (EM) against the share of questions sent to the remote agent, per router: each
    router's non-dominated points joined (what an operator can pick), every point as a marker,
    the single agents as labelled stars. None when the pool has no remote agent."""
    remote = remote_agent(results)
    frame = requests_frame(results)
    if remote is None or frame.empty:
        return None
    agents = frame[frame["router"].map(is_agent)]
    routed = frame[~frame["router"].map(is_agent)]
    colors = {router_label(rid): c for rid, c in router_colors(results).items()}
    names = list(dict.fromkeys(routed["label"]))
    x = alt.X("share:Q", title=f"share of questions sent to {remote} (remote calls)")
    x = x.axis(format=".0%").scale(domain=[0, 1])
    y = alt.Y("em:Q", title="accuracy (EM, %)").scale(zero=False)
    color = alt.Color(
        "label:N", title="router", scale=color_scale(colors, names), legend=legend(len(set(names)), 320)
    )
    tip = [
        alt.Tooltip("label:N", title="router"),
        alt.Tooltip("share:Q", format=".1%"),
        alt.Tooltip("em:Q", format=".2f"),
    ]
    front = routed[routed["front"]].sort_values(["label", "share"])
    layers = [
        alt.Chart(front).mark_line().encode(x=x, y=y, color=color, detail="label:N", tooltip=tip),
        alt.Chart(routed).mark_point(size=18, opacity=0.5).encode(x=x, y=y, color=color, tooltip=tip),
    ]
    if len(agents):
        star = alt.Chart(agents).mark_point(shape="diamond", size=120, filled=True, color="#000")
        layers.append(star.encode(x=x, y=y, tooltip=tip))
        layers.append(alt.Chart(agents).mark_text(dx=8, dy=-8, align="left").encode(x=x, y=y, text="label:N"))
    sub = f"{results.get('dataset', '?')} {results.get('pool', '?')}, "
    sub += f"{results.get('n_test', '?')} test questions"
    title = alt.Title(
        "Request–accuracy: accuracy against the share of remote calls", subtitle=sub, anchor="start"
    )
    return alt.layer(*layers).properties(title=title, width=_WIDTH, height=_HEIGHT)


def has_latency(results: Results) -> bool:
    """Whether the results carry latency (the pool logs it): latency price points were run."""
    return bool(results.get("latency_points"))


def _cell(p: dict | None, remote: str | None) -> str:
    if p is None:
        return "n/a"
    share = num((p.get("allocation") or {}).get(remote)) if remote else None
    return f"{fmt(p.get('em'), 2)} / {fmt(p.get('latency_s'), 3)} s / {fmt(share, 3)}"


def latency_tables(results: Results) -> str:
    """Per router: EM, mean realised latency per query and share of remote calls at each latency
    price λ_s (errors per second; the latency rule), then the same at each β₁ of the GFLOPs rule,
    and each agent's mean latency alone."""
    keys = [beta_key(x) for x in results.get("latency_points") or []]
    betas = [beta_key(b) for b in results.get("beta_points") or []]
    remote, rows, brows, arows = remote_agent(results), [], [], []
    for rid, r in routers_of(results).items():
        if is_agent(rid):
            p = (points_of(r) or [None])[0]
            arows.append(
                [
                    rid.split(":", 1)[1],
                    fmt(p.get("em") if p else None, 2),
                    fmt(p.get("latency_s") if p else None, 3),
                ]
            )
            continue
        by = {
            beta_key(p["latency_price"]): p for p in points_of(r) if num(p.get("latency_price")) is not None
        }
        if by:
            rows.append([rid, *[_cell(by.get(k), remote) for k in keys]])
        bb = {beta_key(p["beta1"]): p for p in beta_points(r)}
        if bb and any(num(p.get("latency_s")) is not None for p in bb.values()):
            brows.append([rid, *[_cell(bb.get(k), remote) for k in betas]])
    head = f"Each cell: EM (%) / mean realised latency per query / share of calls to {remote}.\n\n"
    out = "### Latency price rule (λ_s errors per second of extra mean latency)\n\n" + head
    out += md_table(["router", *[f"λ_s={k}" for k in keys]], rows)
    out += "\n\n### GFLOPs rule (β₁), the same figures\n\n" + md_table(
        ["router", *[f"β₁={k}" for k in betas]], brows
    )
    if arows:
        out += "\n\n### Agents alone\n\n" + md_table(["agent", "EM", "mean latency (s)"], arows)
    return out
