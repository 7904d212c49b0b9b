"""The agent and pool registry: BENCHMARK.md's agents (``builtin.json``) plus the user's own.

User additions (imported prediction files, trained live agents, custom pools) live in
``<cache>/registry.json`` so that the package folder is never written to.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

from ..paths import cache_dir, data_path
from .measured import agent_gflops
from .registry_file import agent_lock, read_user_registry, registry_lock, write_registry

__all__ = [
    "AgentSpec",
    "PoolSpec",
    "AGENT_KINDS",
    "RUNNABLE_KINDS",
    "ENDPOINT_KINDS",
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
    "check_new_pool",
    "agent_lock",
    "MADE_BY",
]

BUILTIN = Path(__file__).with_name("builtin.json")
AGENT_KINDS = ("prediction_file", "extractive", "generative", "openai_chat", "outcome_log", "abstain")
# kinds that answer new text (agents.runners runs them; openai_chat: a live chat endpoint)
RUNNABLE_KINDS = ("extractive", "generative", "openai_chat")
ENDPOINT_KINDS = ("openai_chat",)  # kinds whose answers come from a remote endpoint, waited on
TEXTLESS_KINDS = ("outcome_log", "abstain")  # no answer text to compare (or always the same)
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
    description: str = ""  # one line: what the agent is and what it is known by
    # sha256 of the prediction file the agent was registered with (its answers in the agent cache
    # must come from it: checked on read); empty for built-in agents and model agents
    source_sha256: str = ""

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
        """The file or model directory (:func:`~l2d_core.paths.data_path`)."""
        return data_path(self.path)

    @property
    def live_model(self) -> str | None:
        """The local LLM (``agents.llm_server.MODELS``) an outcome log was recorded from and that
        answers new text in its place (``options["live_model"]``); None for any other agent."""
        live = (self.options or {}).get("live_model") if self.kind == "outcome_log" else None
        return str(live) if live else None

    @property
    def answers_new_text(self) -> bool:
        """Whether the agent answers text outside its dataset: a model this tool runs, or a log
        recorded from a local LLM the tool can start (:attr:`live_model`)."""
        return self.kind in RUNNABLE_KINDS or self.live_model is not None


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


@cache
def _builtin() -> dict:
    return json.loads(BUILTIN.read_text(encoding="utf-8"))


def _user() -> dict:
    """The user's valid entries, read lazily (only where the cache folder would be: reading never
    makes it); a damaged registry is set aside and repaired (``registry_file``)."""
    return read_user_registry(cache_dir(create=False) / "registry.json", (AgentSpec, PoolSpec))


def _load() -> tuple[dict[str, AgentSpec], dict[str, PoolSpec]]:
    agents: dict[str, AgentSpec] = {}
    pools: dict[str, PoolSpec] = {}
    for builtin, doc in ((True, _builtin()), (False, _user())):
        # a user entry never shadows a built-in one (older registries may hold such entries)
        for a in doc.get("agents", []):
            if builtin or a["id"] not in agents:
                agents[a["id"]] = AgentSpec(**a)
        for p in doc.get("pools", []):
            if builtin or p["name"] not in pools:
                pools[p["name"]] = PoolSpec(**p)
    return agents, pools


def builtin_agent_ids() -> frozenset[str]:
    """The ids of BENCHMARK.md's agents (``builtin.json``), whatever the user registered."""
    return frozenset(a["id"] for a in _builtin().get("agents", []))


def cheap_builtin_agents(dataset: str, main: str, max_gflops: float = 5.0) -> tuple[str, ...]:
    """BENCHMARK.md's agents of ``dataset`` (``builtin.json``: user imports never change what the
    benchmark reads) other than ``main``, at most ``max_gflops`` each: a post-hoc router's helpers.
    Agents ``builtin.json`` lists under ``not_default_helpers`` never are (agents added to the
    benchmark later: adding them changes no existing pool's figures)."""
    builtin = builtin_agent_ids()
    left_out = set(_builtin().get("not_default_helpers", {}).get("agents", ()))
    return tuple(
        a.id
        for a in list_agents(dataset)
        if a.id in builtin
        and a.id not in left_out
        and a.id != main
        and a.kind not in TEXTLESS_KINDS
        and agent_gflops(a) <= max_gflops  # last: measuring an architecture builds it (once)
    )


def builtin_pool_names() -> frozenset[str]:
    """The names of BENCHMARK.md's pools (``builtin.json``)."""
    return frozenset(p["name"] for p in _builtin().get("pools", []))


def list_agents(dataset: str | None = None) -> list[AgentSpec]:
    return [a for a in _load()[0].values() if dataset is None or a.dataset == dataset]


def get_agent(agent_id: str) -> AgentSpec:
    agents = _load()[0]
    if agent_id not in agents:
        raise KeyError(f"unknown agent {agent_id!r}; known: {', '.join(sorted(agents))}")
    return agents[agent_id]


def list_pools(dataset: str | None = None) -> list[PoolSpec]:
    return [p for p in _load()[1].values() if dataset is None or p.dataset == dataset]


# pools a command makes (the live agents of scripts/train_agent.py's profiles, per dataset: the
# profiles' own table is agents.profiles.PROFILES, which imports torch; a test keeps the two equal)
MADE_BY = {
    "P3-quick": "python scripts/train_agent.py --profile quick",
    "Plocal-quick": "python scripts/train_agent.py --profile quick",
    "P3-live": "python scripts/train_agent.py",
    "P2-live": "python scripts/train_agent.py",
    "Plocal-live": "python scripts/train_agent.py",
    "P3v2-quick": "python scripts/train_agent.py --dataset squad20 --profile quick",
    "P3v2-live": "python scripts/train_agent.py --dataset squad20",
    "P2v2-live": "python scripts/train_agent.py --dataset squad20",
}


def get_pool(name: str) -> PoolSpec:
    pools = _load()[1]
    if name not in pools:
        made = f" (`{MADE_BY[name]}` makes it)" if name in MADE_BY else ""
        raise KeyError(f"unknown pool {name!r}{made}; known: {', '.join(sorted(pools))}")
    return pools[name]


def _same(section: str, old: dict, new: dict) -> bool:
    """Whether registering ``new`` over ``old`` changes nothing that matters: the same prediction
    file (same sha256), dataset, kind and GFLOPs for an agent (a retry of the same import); the
    same members for a pool."""
    if section == "agents":
        keys = ("source_sha256", "dataset", "kind", "gflops", "gflops_source")
        return bool(new.get("source_sha256")) and all(old.get(k) == new.get(k) for k in keys)
    keys = ("dataset", "main", "experts")
    return all(json.dumps(old.get(k)) == json.dumps(new.get(k)) for k in keys)


def _check_new(section: str, key: str, entry: dict, entries: list[dict], replace: bool) -> None:
    what = "agent" if section == "agents" else "pool"
    value = entry[key]
    builtin = builtin_agent_ids() if section == "agents" else builtin_pool_names()
    if value in builtin:
        raise ValueError(
            f"{what} {value!r} is one of the benchmark's built-in {section} and is never replaced; "
            f"choose another {'id' if key == 'id' else key}"
        )
    old = next((e for e in entries if e[key] == value), None)
    if not replace and old is not None and not _same(section, old, entry):
        raise ValueError(
            f"you already have {'an' if what == 'agent' else 'a'} {what} {value!r}: "
            f"choose another {'id' if key == 'id' else key}, "
            "or ask to replace it (--replace on the command line)"
        )


def check_new_agent(agent_id: str, replace: bool = False, spec: AgentSpec | None = None) -> None:
    """Raise ValueError when ``agent_id`` may not be registered (a built-in agent, or a user
    agent without ``replace`` — unless ``spec`` is that agent again, from the same prediction
    file): call it before writing anything for a new agent."""
    entry = asdict(spec) if spec is not None else {"id": agent_id}
    _check_new("agents", "id", entry, _user()["agents"], replace)


def check_new_pool(spec: PoolSpec, replace: bool = False, also: tuple[AgentSpec, ...] = ()) -> None:
    """Raise ValueError (KeyError for an unknown member) when ``spec`` may not be registered: a
    built-in pool's name, a user pool's without ``replace`` (unless the same members), a member
    that is not a known agent of the pool's dataset (``also``: agents about to be registered with
    it) — call it before writing anything."""
    agents = {**_load()[0], **{a.id: a for a in also}}
    for a in spec.agent_ids:
        if a not in agents:
            raise KeyError(f"pool {spec.name}: unknown agent {a!r}")
        if agents[a].dataset != spec.dataset:
            raise ValueError(f"pool {spec.name}: agent {a} answers {agents[a].dataset}, not {spec.dataset}")
    _check_new("pools", "name", _pool_entry(spec), _user()["pools"], replace)


def _pool_entry(spec: PoolSpec) -> dict:
    entry = asdict(spec)
    entry["experts"] = list(spec.experts)
    return entry


def _write_user(section: str, key: str, entry: dict, replace: bool) -> None:
    """Add one entry to the user registry under a file lock (two processes registering at
    once both land), replacing the file atomically (a crash never leaves half a registry)."""
    path = user_registry_path()
    with registry_lock(path):
        doc = {k: list(v) for k, v in read_user_registry(path, (AgentSpec, PoolSpec)).items()}
        entries = doc[section]
        _check_new(section, key, entry, entries, replace)
        doc[section] = [e for e in entries if e[key] != entry[key]] + [entry]
        write_registry(path, doc)


def register_agent(spec: AgentSpec, replace: bool = False) -> AgentSpec:
    """Add a user agent (``replace=True`` replaces a user agent of the same id; the benchmark's
    built-in agents are never replaced)."""
    _write_user("agents", "id", asdict(spec), replace)
    return spec


def register_pool(spec: PoolSpec, replace: bool = False) -> PoolSpec:
    """Add a user pool (``replace`` as for agents); every member must be a known agent of its dataset."""
    check_new_pool(spec, replace)
    _write_user("pools", "name", _pool_entry(spec), replace)
    return spec
