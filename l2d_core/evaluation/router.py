"""The interface every router of the registry has (:class:`Router`), and the registration of
a router class under its id (:func:`register`). The registry itself — lookup, menus, labels —
is :mod:`l2d_core.evaluation.registry`.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..method.costs import CostConfig, cost_matrix, query_costs
from .benchmark import BETA_POINTS, Benchmark
from .points import Decision, make_point

__all__ = [
    "AGENT_PREFIX",
    "Calibrated",
    "OURS_PREFIX",
    "DENSE_BETAS",
    "TARGET_SHARES",
    "Router",
    "ROUTERS",
    "register",
    "AgentRouter",
    "beta_key",
    "best_single_tdl",
]

AGENT_PREFIX = "agent:"
OURS_PREFIX = "l2d-"
# Dense sweeps of the instant routers: β₁ on a grid, and target shares of expert calls.
DENSE_BETAS: tuple[float, ...] = tuple(float(b) for b in np.linspace(0.0, 2.0, 40))
TARGET_SHARES: tuple[float, ...] = tuple(float(s) for s in np.linspace(0.0, 1.0, 21))


# a decision under a budget and what :class:`~l2d_core.evaluation.budget.BudgetResult` takes
# besides the realised figures (start, end, training share, training GFLOPs, reachable, note)
Calibrated = tuple[Decision, dict]


def beta_key(beta1: float) -> str:
    """The key of a β₁ point in results files.

    >>> beta_key(0.05), beta_key(0.0)
    ('0.05', '0')
    """
    return f"{beta1:g}"


class Router:
    """A router on a benchmark. Subclasses set the class attributes and implement
    :meth:`_fit` and :meth:`decide`; ``__init__`` stores constructor arguments only."""

    id: ClassVar[str] = ""
    label: ClassVar[str] = ""  # the name people read in menus and legends
    description: ClassVar[str] = ""  # one plain sentence: what it looks at, what it pays
    family: ClassVar[str] = "baseline"  # l2d | baseline | reference | agent
    reads_embeddings: ClassVar[bool] = False  # needs the benchmark's question/context embeddings
    instant: ClassVar[bool] = True  # a new cost setting needs no training
    validated: ClassVar[bool] = False  # ranked on the training articles (``oof_outcome``)
    supports_budget: ClassVar[bool] = False  # meets a share / GFLOPs budget (``calibrate_budget``)

    def __init__(self, **params):
        self.params = params

    def fit(self, bench: Benchmark, seed: int = 0) -> Router:
        if self.reads_embeddings and not bench.has_embeddings:
            raise ValueError(f"router {self.id} reads embeddings: prepare the benchmark with them")
        self.bench_, self.seed_ = bench, int(seed)
        self._fit()
        return self

    def _fit(self) -> None:
        """Learn what does not depend on the cost setting (``self.bench_``, ``self.seed_``)."""

    def agents_to_import(self, bench: Benchmark) -> tuple[str, ...]:
        """Agents beyond the pool whose answers this router reads and that are not read in yet
        (the first fit imports them: seconds each); none by default."""
        return ()

    def decide(self, costs: CostConfig) -> Decision:
        raise NotImplementedError

    def oof_outcome(self, costs: CostConfig) -> tuple[np.ndarray, np.ndarray]:
        """(GFLOPs, EM) per training question at ``costs``, each routed by what never saw its
        article (out-of-fold): what the validation ranking reads (routers with ``validated``)."""
        raise NotImplementedError(f"{self.id} is not ranked on validation")

    def calibrate_budget(self, costs: CostConfig, kind: str, target: float) -> Calibrated:
        """``(decision on test, what the budget did)`` under a budget (``kind`` ``share`` or
        ``gflops``) followed on the test articles from a start calibrated on the training articles
        (routers with ``supports_budget``; :func:`~l2d_core.evaluation.budget.budget_decision`
        reads it)."""
        raise ValueError(f"router {self.id} has no error estimates to calibrate a budget on")

    def needs_training(self, costs: CostConfig) -> bool:
        """Whether :meth:`decide` at ``costs`` will train something (seconds) first."""
        return False

    def sweep(self) -> list[tuple[float | None, Decision, dict]]:
        """Operating points beyond the β₁ points: ``(β₁ or None, decision, fields)``."""
        return []

    def points(self, betas=BETA_POINTS, dense: bool = True, prices=()) -> list[dict]:
        """Curve points at each β₁ of ``betas`` (BENCHMARK.md cost setting), then the sweep, then
        one point at each per-TFLOP price λ of ``prices`` (field ``price``; kept with the sweep's
        points, out of the β₁ summaries)."""
        bench = self.bench_
        pts = [make_point(bench, self.decide(bench.costs(b)), b, dense=False) for b in betas]
        if dense:
            pts += [make_point(bench, d, b, dense=True, **f) for b, d, f in self.sweep()]
        for lam in prices:
            costs = bench.price_costs(lam)
            pts.append(make_point(bench, self.decide(costs), None, costs=costs, dense=True, price=lam))
        return pts

    def tdl_vectors(self, settings: dict[str, CostConfig]) -> dict[str, np.ndarray] | None:
        """Per-question TDL at each named cost setting when it is not that of the router's own
        points at that setting (the zero router's: the best single agent's)."""
        return None


ROUTERS: dict[str, type[Router]] = {}


def register(cls: type[Router]) -> type[Router]:
    """Class decorator: add a router under its ``id`` (an id is registered once)."""
    if not cls.id or cls.id.startswith(AGENT_PREFIX) or cls.id in ROUTERS:
        raise ValueError(f"router id {cls.id!r} is empty, reserved or already registered")
    ROUTERS[cls.id] = cls
    return cls


class AgentRouter(Router):
    """One agent answers every question (the paper's single-model rows)."""

    family = "agent"

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


def best_single_tdl(bench: Benchmark, settings: dict[str, CostConfig]) -> dict[str, np.ndarray]:
    """Per named cost setting the per-question TDL of the single agent of least mean TDL on the
    test articles."""
    out = {}
    for key, costs in settings.items():
        qc = query_costs(cost_matrix(bench.test.errors, costs))  # (N, A)
        out[key] = qc[:, int(qc.mean(axis=0).argmin())]
    return out
