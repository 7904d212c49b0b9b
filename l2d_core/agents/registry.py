"""The agent and pool registry: BENCHMARK.md's agents (``builtin.json``) plus the user's own.

User additions (imported prediction files, trained live agents, custom pools) live in
``<cache>/registry.json`` so that the package folder is never written to.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..paths import cache_dir, data_dir

__all__ = [
    "AgentSpec",
    "PoolSpec",
    "AGENT_KINDS",
    "list_agents",
    "get_agent",
    "list_pools",
    "get_pool",
    "register_agent",
    "register_pool",
    "user_registry_path",
    "builtin_agent_ids",
]

BUILTIN = Path(__file__).with_name("builtin.json")
AGENT_KINDS = ("prediction_file", "extractive", "generative")


@dataclass(frozen=True)
class AgentSpec:
    """A QA agent. ``gflops`` is per query; ``gflops_source`` says declared or measured."""

    id: str
    dataset: str
    kind: str = "prediction_file"
    gflops: float = 0.0
    gflops_source: str = "declared"
    path: str = ""  # prediction file (relative to the data dir) or model path/id
    name: str = ""
    params: int | None = None
    options: dict = field(default_factory=dict)  # kind-specific settings (batch size, prompt, …)

    def __post_init__(self) -> None:
        if not self.id or "|" in self.id:
            raise ValueError(f"agent id must be non-empty and without '|': {self.id!r}")
        if self.kind not in AGENT_KINDS:
            raise ValueError(f"agent {self.id}: unknown kind {self.kind!r}; known: {AGENT_KINDS}")
        if isinstance(self.gflops, bool) or not (
            isinstance(self.gflops, int | float) and math.isfinite(self.gflops) and self.gflops >= 0
        ):
            raise ValueError(f"agent {self.id}: GFLOPs must be a finite number >= 0, got {self.gflops!r}")

    def resolved_path(self) -> Path:
        p = Path(self.path).expanduser()
        return p if p.is_absolute() else data_dir() / p


@dataclass(frozen=True)
class PoolSpec:
    """Agents ``(main, *experts)``: agent 0 is the main model, 1..J the experts (SPEC §1)."""

    name: str
    dataset: str
    main: str
    experts: tuple[str, ...]
    description: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.experts, str):
            raise TypeError(f"pool {self.name}: experts must be a list of agent ids, got a string")
        object.__setattr__(self, "experts", tuple(self.experts))
        if not self.experts:
            raise ValueError(f"pool {self.name}: needs at least one expert (J >= 1)")
        if len(set(self.agent_ids)) != len(self.agent_ids):
            raise ValueError(f"pool {self.name}: an agent appears twice in {self.agent_ids}")

    @property
    def agent_ids(self) -> tuple[str, ...]:
        return (self.main, *self.experts)


def user_registry_path() -> Path:
    return cache_dir() / "registry.json"


def _read(path: Path) -> dict:
    if not path.is_file():
        return {"agents": [], "pools": []}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"agent registry {path} is corrupt: {exc}") from None


def _load() -> tuple[dict[str, AgentSpec], dict[str, PoolSpec]]:
    agents: dict[str, AgentSpec] = {}
    pools: dict[str, PoolSpec] = {}
    for path in (BUILTIN, user_registry_path()):  # user entries override
        doc = _read(path)
        try:
            for a in doc.get("agents", []):
                agents[a["id"]] = AgentSpec(**a)
            for p in doc.get("pools", []):
                pools[p["name"]] = PoolSpec(**p)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"agent registry {path} is malformed: {exc}") from None
    return agents, pools


def builtin_agent_ids() -> frozenset[str]:
    """The ids of BENCHMARK.md's agents (``builtin.json``), whatever the user registered."""
    return frozenset(a["id"] for a in _read(BUILTIN).get("agents", []))


def list_agents(dataset: str | None = None) -> list[AgentSpec]:
    return [a for a in _load()[0].values() if dataset is None or a.dataset == dataset]


def get_agent(agent_id: str) -> AgentSpec:
    agents = _load()[0]
    if agent_id not in agents:
        raise KeyError(f"unknown agent {agent_id!r}; known: {', '.join(sorted(agents))}")
    return agents[agent_id]


def list_pools(dataset: str | None = None) -> list[PoolSpec]:
    return [p for p in _load()[1].values() if dataset is None or p.dataset == dataset]


def get_pool(name: str) -> PoolSpec:
    pools = _load()[1]
    if name not in pools:
        raise KeyError(f"unknown pool {name!r}; known: {', '.join(sorted(pools))}")
    return pools[name]


def _write_user(section: str, key: str, entry: dict) -> None:
    path = user_registry_path()
    doc = _read(path)
    doc[section] = [e for e in doc.get(section, []) if e[key] != entry[key]] + [entry]
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(tmp, path)  # atomic: a crash never leaves a half-written registry


def register_agent(spec: AgentSpec) -> AgentSpec:
    """Add or replace a user agent."""
    _write_user("agents", "id", asdict(spec))
    return spec


def register_pool(spec: PoolSpec) -> PoolSpec:
    """Add or replace a user pool; every member must be a known agent of its dataset."""
    agents = _load()[0]
    for a in spec.agent_ids:
        if a not in agents:
            raise KeyError(f"pool {spec.name}: unknown agent {a!r}")
        if agents[a].dataset != spec.dataset:
            raise ValueError(f"pool {spec.name}: agent {a} answers {agents[a].dataset}, not {spec.dataset}")
    entry = asdict(spec)
    entry["experts"] = list(spec.experts)
    _write_user("pools", "name", entry)
    return spec
