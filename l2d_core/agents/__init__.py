"""Agents: the registry of agents and pools, and the ways an agent's answers reach the cache
(reading them in on first use, in child processes too: :mod:`.read_in`).

The runnable agents (``ExtractiveAgent``, ``GenerativeAgent``, ``PredictionFileAgent``,
``load_agent``, ``run_into_cache``, … from :mod:`.runners`) are exported lazily, so that
importing the registry does not import torch.
"""

from .prediction_file import ImportReport, import_predictions, read_prediction_file
from .registry import (
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
from .uploads import add_agent_from_upload, add_upload

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
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
