"""The overview page without UI: the agents of a pool, as people read them."""

from __future__ import annotations

import pandas as pd

from ..agents.cache import AgentCache
from ..agents.read_in import ensure_cached
from ..agents.registry import get_agent
from ..data import load_dataset

__all__ = ["agent_table"]


def agent_table(dataset: str, agent_ids: tuple[str, ...], cache: AgentCache) -> pd.DataFrame:
    """One row per agent of a pool (main first): role, name, EM, F1, GFLOPs per query and whether
    they are declared or measured, parameters (empty when unknown), questions answered, source.
    Prediction-file agents not cached yet are imported first."""
    ensure_cached(load_dataset(dataset), [get_agent(a) for a in agent_ids], cache)
    df = cache.summary(dataset, list(agent_ids))
    specs = [get_agent(a) for a in agent_ids]
    df["role"] = ["main" if i == 0 else f"expert {i}" for i in range(len(df))]
    df["name"] = [s.name or s.id for s in specs]
    df["params"] = [f"{s.params / 1e6:,.0f} M" if s.params else "" for s in specs]
    return df
