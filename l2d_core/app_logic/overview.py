"""The overview page without UI: the agents of a pool, as people read them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..agents.answering import can_answer_new_text
from ..agents.cache import AgentCache
from ..agents.catalog import get_agent
from ..agents.measured import agent_gflops
from ..agents.prices import answer_prices
from ..agents.read_in import ensure_cached
from ..data import load_dataset
from .answers import cost_words, f1_note, kind_words

if TYPE_CHECKING:
    import pandas as pd


__all__ = ["agent_table", "textless_note"]


def agent_table(dataset: str, agent_ids: tuple[str, ...], cache: AgentCache) -> pd.DataFrame:
    """One row per agent of a pool (main first): role, name, what it is (``kind``: prediction
    file, outcome log, model, abstains), how its cost is known (``cost``: measured or declared
    GFLOPs, latency logged or not), whether it answers new text, EM, F1, GFLOPs per query,
    parameters (empty when unknown), questions answered, source, dollars per 1,000 questions
    (``usd_per_1k``, None where the agent has no price), and ``text`` (whether it has
    answer text: an outcome log without it is known as right/wrong only). Agents not cached yet
    are read in first."""
    ensure_cached(load_dataset(dataset), [get_agent(a) for a in agent_ids], cache)
    df = cache.summary(dataset, list(agent_ids))
    specs = [get_agent(a) for a in agent_ids]
    tables = [cache.table(dataset, a) for a in agent_ids]
    latency = [bool(len(t)) and bool(t["latency_ms"].notna().all()) for t in tables]
    df["gflops"] = [  # measured from its configuration where the agent gives one
        agent_gflops(s) if isinstance(s.options, dict) and s.options.get("architecture") else g
        for s, g in zip(specs, df["gflops"])
    ]
    df["role"] = ["main" if i == 0 else f"expert {i}" for i in range(len(df))]
    df["name"] = [s.name or s.id for s in specs]
    df["kind"] = [kind_words(s.kind) for s in specs]
    df["cost"] = [cost_words(src, lat) for src, lat in zip(df["gflops_source"], latency)]
    df["new text"] = ["yes" if can_answer_new_text(s) else "no" for s in specs]
    df["text"] = [bool(len(t)) and bool(t["answer"].notna().any()) for t in tables]
    df["params"] = [f"{s.params / 1e6:,.0f} M" if s.params else "" for s in specs]
    df["usd_per_1k"] = [_usd_per_1000(s, t) for s, t in zip(specs, tables)]
    return df


def _usd_per_1000(spec, table: pd.DataFrame) -> float | None:
    """An agent's mean price per 1,000 questions — recorded per answer, or its one price per
    answer — where every answer has one (the money rule needs it), else None."""
    import pandas as pd  # here, not at the top: the first view's tiles import no pandas

    recorded = pd.to_numeric(table["usd"] if "usd" in table else pd.Series(dtype=float), errors="coerce")
    usd = answer_prices(recorded, spec.options, f"agent {spec.id}")
    return 1000.0 * float(usd.mean()) if len(usd) and usd.notna().all() else None


def textless_note(table: pd.DataFrame) -> str | None:
    """What the page says under :func:`agent_table` of agents known by their log only (None: none)."""
    return f1_note(list(table.loc[~table["text"], "agent"]))
