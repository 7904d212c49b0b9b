"""The reference routers every comparison draws: random allocation, the oracle (an upper bound),
the zero router (random mixing of single agents: the line a router must beat) and each agent
alone (``agent:<id>``). The zero router and single agents freeze into a router that always picks
one agent (its index saved as :class:`FixedConfig`)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import numpy as np
from pydantic import Field

from ..method.costs import BETA_POINTS, CostConfig, cost_matrix, paid_per_agent, query_costs
from ..method.mixing import upper_hull
from ..method.policies import oracle_policy, random_policy
from .base import DENSE_BETAS, Needs, OperatingPoint, Router, best_single_tdl
from .decision import Decision
from .registry import AGENT_PREFIX, register, register_agent_router
from .saved import SavedConfig

__all__ = ["RandomRouter", "OracleRouter", "ZeroRouter", "AgentRouter", "FixedConfig"]


class FixedConfig(SavedConfig):
    """What a router that always picks one agent saves: that agent's index in the pool."""

    agent: Annotated[int, Field(ge=0)]

    def problem(self, pool, agents) -> str | None:
        ids = pool.agent_ids
        if self.agent >= len(ids):
            return f"config.agent: {self.agent} is not an agent of pool {pool.name} (0 to {len(ids) - 1})"
        return super().problem(pool, agents)


def _fixed(router: Router, costs: CostConfig) -> Router:
    """``router`` frozen at ``costs``: it sends every query to the agent it picks there."""
    agent = int(router.decide(costs).choice[0])
    return router.deployed({"costs": asdict(costs), "agent": agent}, Needs(), 0.0)


def _fixed_route(router: Router, signals) -> Decision:
    """Every query to the agent a frozen ``router`` saved (``config["agent"]``, its index)."""
    return Decision(np.full(len(signals.records), int(router.deployed_.config["agent"])))


@register
class RandomRouter(Router):
    id = "random"
    label = "random (uniform)"
    description = "Sends each query to an agent drawn uniformly at random."
    family = "reference"
    role = "chance"

    def _fit(self) -> None:
        test = self.bench_.test
        self.choice_ = random_policy(len(test), test.n_agents, self.seed_)

    def decide(self, costs: CostConfig) -> Decision:
        return Decision(self.choice_)


@register
class OracleRouter(Router):
    id = "oracle"
    label = "oracle (knows the answers)"
    description = "Per query the cheapest agent that is right: an upper bound no router can reach."
    family = "reference"
    role = "bound"

    def decide(self, costs: CostConfig) -> Decision:
        test = self.bench_.test
        return Decision(oracle_policy(cost_matrix(test.errors, costs), test.gflops))

    def sweep(self):
        return [OperatingPoint(b, self.decide(self.bench_.costs(b))) for b in DENSE_BETAS]


@register
class ZeroRouter(Router):
    id = "zero"
    label = "zero router (mixing agents)"
    description = (
        "Mixes single agents at random in the best proportions: the line a router must beat to be "
        "worth anything (at a cost setting: the single agent of least loss)."
    )
    family = "reference"
    role = "floor"
    config_model = FixedConfig

    def decide(self, costs: CostConfig) -> Decision:
        test = self.bench_.test
        j = int(query_costs(cost_matrix(test.errors, costs)).mean(axis=0).argmin())
        return Decision(np.full(len(test), j))

    def operating_points(self, betas=BETA_POINTS, dense: bool = True, prices=()) -> list[OperatingPoint]:
        """Vertices of the single agents' upper hull (any mixture lies on the segments between), in
        the cost random mixing is matched on (GFLOPs, or dollars where every answer has a price),
        and in latency paid where every agent's is logged (the two may order agents differently),
        cheapest first in the former."""
        test = self.bench_.test
        g = self.bench_.mixing_cost("test")
        em = 100 * test.em.mean(axis=0)
        axes = [g, *([paid_per_agent(test.latency)] if test.has_latency else [])]
        on_hull = {
            int(np.flatnonzero(np.isclose(cost, c) & np.isclose(em, q))[0])
            for cost in axes
            for c, q in zip(*upper_hull(cost, em))
        }
        return [
            OperatingPoint(None, Decision(np.full(len(test), j)), None, {"agent": test.agent_ids[j]})
            for j in sorted(on_hull, key=lambda j: (g[j], em[j]))
        ]

    def rule_points(self, rule: str, values) -> list[OperatingPoint]:
        return []  # its points are the single agents' hull, whatever the price

    def tdl_vectors(self, settings: dict[str, CostConfig]) -> dict[str, np.ndarray]:
        """TDL is linear in the mixing weights: the zero router's is the best single agent's."""
        return best_single_tdl(self.bench_, settings)

    def freeze(self, costs: CostConfig, follower: dict | None = None) -> Router:
        return _fixed(self, costs)

    def route(self, signals) -> Decision:
        return _fixed_route(self, signals)


@register_agent_router
class AgentRouter(Router):
    """One agent answers every question (the paper's single-model rows): ``agent:<id>``."""

    family = "agent"
    config_model = FixedConfig

    def __init__(self, agent: str):
        super().__init__(agent=agent)
        self.agent = agent
        self.id = AGENT_PREFIX + agent

    def _fit(self) -> None:
        ids = self.bench_.test.agent_ids
        if self.agent not in ids:
            raise KeyError(f"agent {self.agent!r} is not in pool {self.bench_.pool.name}")
        self.index_ = ids.index(self.agent)

    def decide(self, costs: CostConfig) -> Decision:
        return Decision(np.full(len(self.bench_.test), self.index_))

    def freeze(self, costs: CostConfig, follower: dict | None = None) -> Router:
        return _fixed(self, costs)

    def route(self, signals) -> Decision:
        return _fixed_route(self, signals)
