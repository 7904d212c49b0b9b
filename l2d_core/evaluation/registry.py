"""The one registry of routers: every surface (``evaluate.py --policy``, ``benchmark_routers.py
--routers``, the dashboard's menus, the parametrised tests) reads it, so a router added with
:func:`~l2d_core.evaluation.router.register` appears everywhere with no other change.

A router has :class:`~l2d_core.evaluation.router.Router`'s interface:

- ``fit(bench, seed)`` learns what does not depend on a cost setting, and returns ``self``;
- ``decide(costs)`` allocates the benchmark's test questions at one cost setting of SPEC §3
  (a :class:`~l2d_core.evaluation.points.Decision`);
- ``sweep()`` gives its other operating points (thresholds, λ, a dense β grid), if any;
- ``points(betas)`` evaluates it at the given β₁ (and its sweep) as curve points.

Single agents come with every pool as ``agent:<id>``. ``l2d-…`` routers may be named without
their prefix (``sdl``, ``plugin``) where a short name is natural (the command line).
"""

from __future__ import annotations

# isort: off
# registration order is the menus' order: the L2D routers and references, then the baselines
from . import builtin_routers  # noqa: F401
from . import staged_router  # noqa: F401
from . import baseline_routers  # noqa: F401

# isort: on
from .benchmark import Benchmark
from .router import AGENT_PREFIX, OURS_PREFIX, ROUTERS, AgentRouter, Router

__all__ = ["ROUTERS", "make_router", "router_ids", "router_label", "router_class"]


def _resolve(router_id: str) -> str:
    if router_id in ROUTERS or router_id.startswith(AGENT_PREFIX):
        return router_id
    if OURS_PREFIX + router_id in ROUTERS:
        return OURS_PREFIX + router_id
    known = ", ".join([*ROUTERS, f"{AGENT_PREFIX}<id>"])
    raise KeyError(f"unknown router {router_id!r}; known: {known}")


def make_router(router_id: str, **params) -> Router:
    """A new, unfitted router of the registry (or ``agent:<id>``) with constructor ``params``."""
    rid = _resolve(router_id)
    if rid.startswith(AGENT_PREFIX):
        return AgentRouter(rid[len(AGENT_PREFIX) :])
    return ROUTERS[rid](**params)


def router_ids(bench: Benchmark | None = None, embeddings: bool = True) -> list[str]:
    """Registered routers (without those that read embeddings when ``embeddings`` is False),
    then ``agent:<id>`` for each agent of ``bench``'s pool."""
    ids = [r for r, cls in ROUTERS.items() if embeddings or not cls.reads_embeddings]
    return ids + ([AGENT_PREFIX + a for a in bench.test.agent_ids] if bench is not None else [])


def router_label(router_id: str) -> str:
    """The human name of a router id (a single agent: its id)."""
    if router_id.startswith(AGENT_PREFIX):
        return router_id[len(AGENT_PREFIX) :]
    cls = ROUTERS.get(router_id) or ROUTERS.get(OURS_PREFIX + router_id)
    return cls.label if cls is not None and cls.label else router_id


def router_class(router_id: str) -> type[Router] | None:
    """The registered class of a router id (``None`` for ``agent:<id>``)."""
    rid = _resolve(router_id)
    return None if rid.startswith(AGENT_PREFIX) else ROUTERS[rid]
