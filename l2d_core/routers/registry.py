"""The one registry of routers. Every surface — ``evaluate.py --policy``, ``benchmark_routers.py
--routers``, ``export_router.py``, the dashboard's menus, the routing API and the parametrised
tests — reads it, so a router module added here appears everywhere with no other change.

A router is one module (:class:`~l2d_core.routers.base.Router`: its estimator, how it decides at
a cost setting or a budget, how it freezes into an artifact and routes one query) that registers
its classes with :func:`register`. The registry imports, in this order (the menus' order):

1. the built-in modules of :data:`BUILTIN_MODULES`;
2. modules named in ``$L2D_ROUTERS`` (``os.pathsep``-separated module names or ``.py`` paths);
3. modules of installed packages' entry points in the group ``l2d_core.routers``.

A command's ``--help`` lists the routers without importing their modules (and torch with them):
:func:`router_ids` without a benchmark reads an index kept on disk under a content key — every
source file of this package, ``$L2D_ROUTERS`` and the entry points — written on first use.

Single agents come with every pool as ``agent:<id>``. ``l2d-…`` routers may be named without
their prefix (``sdl``, ``plugin``) where a short name is natural (the command line).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import json
import os
import sys
from importlib.metadata import entry_points
from pathlib import Path

from .base import Router, exportable, supports_budget, validated

__all__ = [
    "Router",
    "exportable",
    "supports_budget",
    "validated",
    "AGENT_PREFIX",
    "OURS_PREFIX",
    "BUILTIN_MODULES",
    "ROUTERS_ENV",
    "register",
    "register_agent_router",
    "routers",
    "make_router",
    "router_ids",
    "router_label",
    "router_class",
    "router_family",
    "router_role",
    "with_role",
]

AGENT_PREFIX = "agent:"
OURS_PREFIX = "l2d-"
ROUTERS_ENV = "L2D_ROUTERS"  # extra router modules: names or .py paths, os.pathsep-separated
ENTRY_POINTS = "l2d_core.routers"
BUILTIN_MODULES = (  # the menus' order: the L2D routers, the references, then the baselines
    "l2d_core.routers.sdl",
    "l2d_core.routers.plugin",
    "l2d_core.routers.posthoc",
    "l2d_core.routers.staged",
    "l2d_core.routers.references",
    "l2d_core.routers.hybrid",
    "l2d_core.routers.quality",
    "l2d_core.routers.ensemble",
    "l2d_core.routers.conf_threshold",
)

AGENT_ROUTER_MODULE = "l2d_core.routers.references"  # registers the router of ``agent:<id>``
_ROUTERS: dict[str, type[Router]] = {}
_AGENT_ROUTER: list[type[Router]] = []  # the single-agent router (``agent:<id>``), registered once
_LOADED: set[str] = set()  # module names and paths imported already
_PATH_SPECS: dict[str, str] = {}  # the module name given to a ``.py`` path → that path
_ALL: list[bool] = []  # [True] once every spec has been imported
_MEMO: dict[tuple[str, str], dict] = {}  # the index as read in this process, by ($L2D_ROUTERS, file)


def register(cls: type[Router]) -> type[Router]:
    """Class decorator: add a router under its ``id`` (an id is registered once)."""
    taken = _ROUTERS.get(cls.id)
    if not cls.id or cls.id.startswith(AGENT_PREFIX) or (taken is not None and taken is not cls):
        raise ValueError(f"router id {cls.id!r} is empty, reserved or already registered")
    _ROUTERS[cls.id] = cls
    return cls


def _spec_of(cls: type[Router], specs: set[str] | None = None) -> str:
    """What imports a router's module (a module name or a ``.py`` path of ``specs``, default
    :func:`_specs`); registered by code no spec names (a test's): its own module's name."""
    name = cls.__module__
    if name in _PATH_SPECS:
        return _PATH_SPECS[name]
    specs, parts = set(_specs()) if specs is None else specs, name.split(".")
    owner = (".".join(parts[:i]) for i in range(len(parts), 0, -1))  # a package's own modules
    return next((spec for spec in owner if spec in specs), name)


def register_agent_router(cls: type[Router]) -> type[Router]:
    """Class decorator: the router of ``agent:<id>`` (one agent answers every question)."""
    _AGENT_ROUTER[:] = [cls]
    return cls


def _import(spec: str) -> None:
    if spec in _LOADED:
        return
    _LOADED.add(spec)
    if spec.endswith(".py"):
        path = Path(spec).expanduser().resolve()
        if not path.is_file():
            raise ValueError(f"{ROUTERS_ENV} names {spec}, which is not a file")
        name = f"l2d_user_router_{path.stem}"
        _PATH_SPECS[name] = spec
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
    else:
        importlib.import_module(spec)


def _specs() -> list[str]:
    """Every module spec, in the menus' order: the built-ins, ``$L2D_ROUTERS``, then entry points."""
    extra = [spec.strip() for spec in os.environ.get(ROUTERS_ENV, "").split(os.pathsep) if spec.strip()]
    return [*BUILTIN_MODULES, *extra, *_entry_point_modules()]


def routers() -> dict[str, type[Router]]:
    """Every registered router class by id, in the order of the modules that register them (the
    menus' order; the modules are imported on first use), then any registered by other code."""
    specs = _specs()
    for spec in specs:
        _import(spec)
    _ALL[:] = [True]
    rank, known = {spec: i for i, spec in enumerate(specs)}, set(specs)
    order = sorted(_ROUTERS, key=lambda r: rank.get(_spec_of(_ROUTERS[r], known), len(rank)))
    return {r: _ROUTERS[r] for r in order}


@functools.cache
def _entry_point_modules() -> tuple[str, ...]:
    """The modules that installed packages name under ``l2d_core.routers`` (read once per process:
    scanning the installed packages takes tens of milliseconds, and every label lookup asks)."""
    return tuple(ep.value.split(":")[0] for ep in entry_points(group=ENTRY_POINTS))


def _resolve(router_id: str) -> str:
    known = routers()
    if router_id in known or router_id.startswith(AGENT_PREFIX):
        return router_id
    if OURS_PREFIX + router_id in known:
        return OURS_PREFIX + router_id
    raise KeyError(f"unknown router {router_id!r}; known: {', '.join([*known, f'{AGENT_PREFIX}<id>'])}")


def _lookup(router_id: str) -> type[Router] | None:
    """A router's class importing its module alone where the index on disk names it (a command
    or a server that runs one router does not import the others, nor torch with them)."""
    for rid in (router_id, OURS_PREFIX + router_id):
        if rid not in _ROUTERS and not _ALL:
            spec = _index_specs().get(rid)
            if spec is not None:
                _import(spec)
        if rid in _ROUTERS:
            return _ROUTERS[rid]
    return None


def make_router(router_id: str, **params) -> Router:
    """A new, unfitted router of the registry (or ``agent:<id>``) with constructor ``params``."""
    if router_id.startswith(AGENT_PREFIX):
        _import(AGENT_ROUTER_MODULE)
        return _AGENT_ROUTER[0](router_id[len(AGENT_PREFIX) :])
    return router_class(router_id)(**params)


def router_ids(bench=None, embeddings: bool = True, on_request: bool = False) -> list[str]:
    """Registered routers (without those that read embeddings when ``embeddings`` is False, those
    run only where named unless ``on_request``, and with ``bench``, those that cannot run on its
    pool), then ``agent:<id>`` for each agent of ``bench``'s pool. Without ``bench``, read from
    the index on disk when it is current (no router module is imported)."""
    if bench is None:
        known = _index().items()
        return [r for r, (emb, asked) in known if (embeddings or not emb) and (on_request or not asked)]
    ids = [
        r
        for r, cls in routers().items()
        if (embeddings or not cls.reads_embeddings)
        and (on_request or not cls.on_request)
        and cls.unavailable(bench) is None
    ]
    return ids + [AGENT_PREFIX + a for a in bench.test.agent_ids]


def _sources_key() -> str:
    """What the registered routers are a pure function of: this package's source files, the
    modules ``$L2D_ROUTERS`` names (and their files), and the installed entry points."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    extra = [spec.strip() for spec in os.environ.get(ROUTERS_ENV, "").split(os.pathsep) if spec.strip()]
    files = sorted(here.rglob("*.py")) + [Path(x).expanduser().resolve() for x in extra if x.endswith(".py")]
    for path in files:
        h.update(str(path).encode())
        h.update(path.read_bytes() if path.is_file() else b"-")
    h.update(json.dumps([extra, list(_entry_point_modules())]).encode())
    return h.hexdigest()


def _index() -> dict[str, tuple[bool, bool]]:
    """id → (reads embeddings, run only where named), from the index on disk when its key is
    current, else from the imported modules (and the index is written). A process that imported
    every router module already reads them (routers registered in it since are listed too)."""
    return {r: (e, a) for r, (e, a, _) in _entries().items()}


def _index_specs() -> dict[str, str]:
    """id → the spec of its module, from the index (see :func:`_index`)."""
    return {r: spec for r, (_, _, spec) in _entries().items() if spec}


def _entries() -> dict[str, tuple[bool, bool, str | None]]:
    def entry(c):
        return bool(c.reads_embeddings), bool(c.on_request), _spec_of(c)

    if _ALL:
        return {r: entry(c) for r, c in routers().items()}
    from ..paths import cache_dir

    try:
        path = cache_dir() / "router_index.json"
    except ValueError:  # no usable cache folder: the command says why where it needs one
        path = None
    memo_key = (os.environ.get(ROUTERS_ENV, ""), str(path))
    known = _MEMO.get(memo_key)
    if known is not None and set(_ROUTERS) <= set(known):
        return known  # read once per process: a short id asked for again reads no file
    _MEMO[memo_key] = known = _read_entries(path, entry)
    return known


def _read_entries(path: Path | None, entry) -> dict[str, tuple[bool, bool, str | None]]:
    key = _sources_key()
    try:
        stored = json.loads(path.read_text()) if path is not None else {}
        if stored.get("key") == key:
            found = {r: (bool(e), bool(a), spec) for r, e, a, spec in stored["routers"]}
            if set(_ROUTERS) <= set(found):  # else some were registered by code no spec names
                return found
    except (OSError, ValueError, KeyError, TypeError):
        pass  # none yet, or damaged: written again below
    known = {r: entry(c) for r, c in routers().items()}
    if path is None:
        return known
    specs = set(_specs())  # routers registered by other code (a test's) are not the key's
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        rows = [[r, *v] for r, v in known.items() if v[2] in specs]
        tmp.write_text(json.dumps({"key": key, "routers": rows}))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache: the index is only an optimisation
    return known


def router_label(router_id: str) -> str:
    """The human name of a router id (a single agent: its id)."""
    if router_id.startswith(AGENT_PREFIX):
        return router_id[len(AGENT_PREFIX) :]
    try:
        cls = router_class(router_id)
    except KeyError:
        return router_id
    return cls.label or router_id


def router_class(router_id: str) -> type[Router] | None:
    """The registered class of a router id (``None`` for ``agent:<id>``)."""
    if router_id.startswith(AGENT_PREFIX):
        return None
    return _lookup(router_id) or routers()[_resolve(router_id)]


def router_family(router_id: str) -> str | None:
    """The family of a router id (``agent`` for ``agent:<id>``; None for an id this registry
    does not know: results of another version)."""
    if router_id.startswith(AGENT_PREFIX):
        return "agent"
    try:
        return router_class(router_id).family
    except KeyError:
        return None


def router_role(router_id: str) -> str:
    """What a router stands for in a comparison (its class's ``role``; "" for none, an agent or
    an unknown id)."""
    if router_id.startswith(AGENT_PREFIX):
        return ""
    try:
        return router_class(router_id).role
    except KeyError:
        return ""


def with_role(router_ids, role: str) -> str | None:
    """The first of ``router_ids`` whose role is ``role``, or None."""
    return next((r for r in router_ids if router_role(r) == role), None)
