"""Agents: the registry of agents and pools, and the ways an agent's answers reach the cache."""

from .prediction_file import ImportReport, add_agent_from_upload, import_predictions, read_prediction_file
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
    "read_prediction_file",
]
