"""``report.md`` of a router-comparison results dict: run facts, targets and every table.

>>> md = report_markdown({"dataset": "squad11", "pool": "P2"})
>>> md.splitlines()[0], md.count("\\n## ")
('# Router benchmark — squad11 P2', 8)
"""

from __future__ import annotations

from collections.abc import Sequence

from ..evaluation.results import Results
from .frames import fmt, fmt_ci
from .money import has_money, money_tables
from .requests import has_latency, latency_tables
from .tables import (
    agents_table,
    beta_table,
    paper_table,
    pareto_table,
    price_table,
    summary_table,
    tdl_table,
)
from .targets import targets_markdown

__all__ = ["report_markdown"]


def report_markdown(
    results: Results,
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
        f"- AIQ over {results.get('aiq_cost', 'GFLOPs')}, the agents' range: "
        f"{fmt_ci(results.get('aiq_range', results.get('gflops_range')), 2)}",
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
        f"## Routers\n\nAIQ: area under the router's non-decreasing upper convex hull of (cost, EM), cost "
        f"in {results.get('aiq_cost', 'GFLOPs')}, over the agents' range / that range (RouterBench; zero "
        "left of the router's cheapest point). APGR: mean PGR over the share of expert calls (RouteLLM); "
        "CPT(p%): smallest share reaching p% PGR. ± std over seeds, [bootstrap 95% interval].\n\n"
        + summary_table(results),
        "## TDL per β₁ (paper Fig. 2)\n\n" + tdl_table(results),
        "## TDL per per-TFLOP price λ (errors per TFLOP; every expert's β grows with its compute)\n\n"
        + price_table(results),
        "## EM, GFLOPs/EM and expert share per β₁ (paper Fig. 3)\n\n" + beta_table(results),
        "## Single-expert table (paper Tables 1–2)\n\n" + paper_table(results),
        "## Pareto front (every router but the oracle)\n\n" + pareto_table(results),
    ]
    if has_latency(results):  # the pool logs latency: the latency rule beside the GFLOPs rule
        parts.insert(7, "## Latency (mean realised latency per query)\n\n" + latency_tables(results))
    if has_money(results):  # every answer has its price: the money rule
        title = "## Money (λ$ errors per dollar of an expert's extra mean price per question)"
        parts.insert(7, f"{title}\n\n" + money_tables(results))
    if plots:
        links = "\n".join(f"- [{p}]({p})" for p in plots if not p.endswith(".png"))
        images = "\n\n".join(f"![{p}]({p})" for p in plots if p.endswith(".png"))
        parts.append("## Plots\n\n" + "\n\n".join(x for x in (links, images) if x))
    return "\n\n".join(parts) + "\n"
