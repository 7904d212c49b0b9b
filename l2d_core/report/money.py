"""The report's money section, where every answer of the pool has its price in dollars: per router,
EM, dollars paid per 1,000 questions (the main agent's price on every question, the chosen
expert's on top) and the share of questions an expert answered, at each money price λ$ (errors
per dollar of an expert's extra mean price) — and each agent alone.

>>> res = {"money_points": [0.0, 50.0], "routers": {
...     "agent:a": {"points": [{"em": 60.0, "usd_per_1k": 0.02}]},
...     "r": {"points": [{"em": 70.0, "usd_per_1k": 1.5, "answered_by_expert": 0.4, "money_price": 0.0},
...                      {"em": 65.0, "usd_per_1k": 0.6, "answered_by_expert": 0.1, "money_price": 50.0}]}}}
>>> print(money_tables(res).splitlines()[4])
| r | 70.00 / $1.5 / 0.400 | 65.00 / $0.6 / 0.100 |
"""

from __future__ import annotations

from ..agents.prices import dollars
from ..evaluation.results import Results
from .frames import beta_key, fmt, is_agent, num, points_of, routers_of
from .tables import md_table

__all__ = ["has_money", "money_tables"]


def has_money(results: Results) -> bool:
    """Whether the results carry prices (every answer of the pool has one): money points were run."""
    return bool(results.get("money_points"))


def _dollars(x) -> str:
    return "n/a" if num(x) is None else dollars(num(x))


def _cell(p: dict | None) -> str:
    if p is None:
        return "n/a"
    return f"{fmt(p.get('em'), 2)} / {_dollars(p.get('usd_per_1k'))} / {fmt(p.get('answered_by_expert'), 3)}"


def money_tables(results: Results) -> str:
    """Per router, EM / dollars per 1,000 questions / share answered by an expert at each money
    price λ$ of the results; then each agent alone."""
    keys = [beta_key(x) for x in results.get("money_points") or []]
    rows, agents = [], []
    for rid, r in routers_of(results).items():
        if is_agent(rid):
            p = (points_of(r) or [{}])[0]
            agents.append([rid.split(":", 1)[1], fmt(p.get("em"), 2), _dollars(p.get("usd_per_1k"))])
            continue
        by = {beta_key(p["money_price"]): p for p in points_of(r) if num(p.get("money_price")) is not None}
        if by:
            rows.append([rid, *[_cell(by.get(k)) for k in keys]])
    out = "Each cell: EM (%) / dollars per 1,000 questions / share answered by an expert.\n\n"
    out += md_table(["router", *[f"λ$={k}" for k in keys]], rows)
    if agents:
        out += "\n\n### Agents alone\n\n" + md_table(["agent", "EM", "$ per 1,000 questions"], agents)
    return out
