"""The agent and pool registry: BENCHMARK.md's agents (``builtin.json``) plus the user's own.

User additions (imported prediction files, trained live agents, custom pools) live in
``<cache>/registry.json`` so that the package folder is never written to.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from filelock import FileLock

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
    "builtin_pool_names",
    "check_new_agent",
]

BUILTIN = Path(__file__).with_name("builtin.json")
AGENT_KINDS = ("prediction_file", "extractive", "generative")
# an agent id names folders and cache keys: short, and letters, digits, '.', '_', '+', '-' only
AGENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
MAX_POOL_NAME = 64


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
        if not isinstance(self.id, str) or not AGENT_ID.fullmatch(self.id):
            shown = (
                self.id if len(str(self.id)) <= 40 else f"{str(self.id)[:40]}… ({len(self.id)} characters)"
            )
            raise ValueError(
                f"agent id {shown!r} is not allowed: use 1 to 64 letters, digits, '.', '_', '+' or '-', "
                "starting with a letter or digit"
            )
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
        if not self.name or len(self.name) > MAX_POOL_NAME or any(c in self.name for c in "|/\\\n"):
            raise ValueError(
                f"pool name {self.name[:40]!r} is not allowed: 1 to {MAX_POOL_NAME} characters, "
                "without '|', '/', '\\' or line breaks"
            )
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
    for path in (BUILTIN, user_registry_path()):
        doc = _read(path)
        builtin = path == BUILTIN
        try:  # a user entry never shadows a built-in one (older registries may hold such entries)
            for a in doc.get("agents", []):
                if builtin or a["id"] not in agents:
                    agents[a["id"]] = AgentSpec(**a)
            for p in doc.get("pools", []):
                if builtin or p["name"] not in pools:
                    pools[p["name"]] = PoolSpec(**p)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"agent registry {path} is malformed: {exc}") from None
    return agents, pools


def builtin_agent_ids() -> frozenset[str]:
    """The ids of BENCHMARK.md's agents (``builtin.json``), whatever the user registered."""
    return frozenset(a["id"] for a in _read(BUILTIN).get("agents", []))


def cheap_builtin_agents(dataset: str, main: str, max_gflops: float = 5.0) -> tuple[str, ...]:
    """BENCHMARK.md's agents of ``dataset`` (``builtin.json``: user imports never change what the
    benchmark reads) other than ``main``, at most ``max_gflops`` each: a post-hoc router's helpers."""
    builtin = builtin_agent_ids()
    return tuple(
        a.id for a in list_agents(dataset) if a.id in builtin and a.id != main and a.gflops <= max_gflops
    )


def builtin_pool_names() -> frozenset[str]:
    """The names of BENCHMARK.md's pools (``builtin.json``)."""
    return frozenset(p["name"] for p in _read(BUILTIN).get("pools", []))


def list_agents(dataset: str | None = None) -> list[AgentSpec]:
    return [a for a in _load()[0].values() if dataset is None or a.dataset == dataset]


def get_agent(agent_id: str) -> AgentSpec:
    agents = _load()[0]
    if agent_id not in agents:
        raise KeyError(f"unknown agent {agent_id!r}; known: {', '.join(sorted(agents))}")
    return agents[agent_id]


def list_pools(dataset: str | None = None) -> list[PoolSpec]:
    return [p for p in _load()[1].values() if dataset is None or p.dataset == dataset]


# pools a command makes (the live agents of scripts/train_agent.py's profiles), and that command
MADE_BY = {
    "P3-quick": "python scripts/train_agent.py --profile quick",
    "P3-live": "python scripts/train_agent.py",
    "P2-live": "python scripts/train_agent.py",
}


def get_pool(name: str) -> PoolSpec:
    pools = _load()[1]
    if name not in pools:
        made = f" (`{MADE_BY[name]}` makes it)" if name in MADE_BY else ""
        raise KeyError(f"unknown pool {name!r}{made}; known: {', '.join(sorted(pools))}")
    return pools[name]


def _check_new(section: str, key: str, value: str, entries: list[dict], replace: bool) -> None:
    what = "agent" if section == "agents" else "pool"
    builtin = builtin_agent_ids() if section == "agents" else builtin_pool_names()
    if value in builtin:
        raise ValueError(
            f"{what} {value!r} is one of the benchmark's built-in {section} and is never replaced; "
            f"choose another {'id' if key == 'id' else key}"
        )
    if not replace and any(e[key] == value for e in entries):
        raise ValueError(
            f"you already have {'an' if what == 'agent' else 'a'} {what} {value!r}: "
            f"choose another {'id' if key == 'id' else key}, "
            "or ask to replace it (--replace on the command line)"
        )


def check_new_agent(agent_id: str, replace: bool = False) -> None:
    """Raise ValueError when ``agent_id`` may not be registered (a built-in agent, or a user
    agent without ``replace``): call it before writing anything for a new agent."""
    _check_new("agents", "id", agent_id, _read(user_registry_path()).get("agents", []), replace)


def _write_user(section: str, key: str, entry: dict, replace: bool) -> None:
    """Add one entry to the user registry under a file lock (two processes registering at
    once both land), replacing the file atomically (a crash never leaves half a registry)."""
    path = user_registry_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{path}.lock", timeout=60):
        doc = _read(path)
        entries = doc.get(section, [])
        _check_new(section, key, entry[key], entries, replace)
        doc[section] = [e for e in entries if e[key] != entry[key]] + [entry]
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(tmp, path)


def register_agent(spec: AgentSpec, replace: bool = False) -> AgentSpec:
    """Add a user agent (``replace=True`` replaces a user agent of the same id; the benchmark's
    built-in agents are never replaced)."""
    _write_user("agents", "id", asdict(spec), replace)
    return spec


def register_pool(spec: PoolSpec, replace: bool = False) -> PoolSpec:
    """Add a user pool (``replace`` as for agents); every member must be a known agent of its dataset."""
    agents = _load()[0]
    for a in spec.agent_ids:
        if a not in agents:
            raise KeyError(f"pool {spec.name}: unknown agent {a!r}")
        if agents[a].dataset != spec.dataset:
            raise ValueError(f"pool {spec.name}: agent {a} answers {agents[a].dataset}, not {spec.dataset}")
    entry = asdict(spec)
    entry["experts"] = list(spec.experts)
    _write_user("pools", "name", entry, replace)
    return spec
