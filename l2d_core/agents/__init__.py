"""Agents: the registry of agents and pools, and the ways an agent's answers reach the cache
(reading them in on first use, in child processes too: :mod:`.read_in`).

The runnable agents (``ExtractiveAgent``, ``GenerativeAgent``, ``PredictionFileAgent``,
``load_agent``, ``run_into_cache``, … from :mod:`.runners`), the prediction-file import and the
uploads are exported lazily, so that importing the registry imports neither torch nor pandas.
"""

from .catalog import (
    AGENT_KINDS,
    AgentSpec,
    PoolSpec,
    get_agent,
    get_pool,
    list_agents,
    list_pools,
    register_agent,
    register_pool,
    user_registry_path,
)

_LAZY = {
    "ImportReport": "prediction_file",
    "import_predictions": "prediction_file",
    "read_prediction_file": "prediction_file",
    "add_agent_from_upload": "uploads",
    "add_upload": "uploads",
}
_RUNNERS = (
    "Prediction",
    "ModelLoadError",
    "ExtractiveAgent",
    "GenerativeAgent",
    "PredictionFileAgent",
    "load_agent",
    "agent_gflops_at",
    "run_into_cache",
)

__all__ = [
    "AGENT_KINDS",
    "AgentSpec",
    "PoolSpec",
    "get_agent",
    "get_pool",
    "list_agents",
    "list_pools",
    "register_agent",
    "register_pool",
    "user_registry_path",
    "ImportReport",
    "add_agent_from_upload",
    "import_predictions",
    "add_upload",
    "read_prediction_file",
    *_RUNNERS,
]


def __getattr__(name: str):
    if name in _RUNNERS:
        from . import runners

        return getattr(runners, name)
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
