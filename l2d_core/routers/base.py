"""What every router of the registry is (:class:`Router`), from fitting on a benchmark to routing
one new query.

A router's whole life is in its own module: it is fitted on a benchmark (``fit``), decides at a
cost setting (``decide``) or under a budget (``calibrate_budget``), gives its operating points
(``operating_points``), and leaves the benchmark frozen at one setting (``freeze``: the same
class, holding what an artifact saves as :class:`Deployed`), which routes new queries from the
signals the deployment computes for them (``route``; :class:`Needs` says which), is saved
(``save``) and read back (``restore``). The registry (:mod:`~l2d_core.routers.registry`) finds the modules;
every surface — the command line, the benchmark, the pages, export and the API — reads it.

The benchmark a router fits on is duck-typed (``l2d_core.evaluation.benchmark.Benchmark``: the
split's routing data, features and cost settings), so that this layer stays below evaluation.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, NamedTuple

import numpy as np
from pydantic import BaseModel, ConfigDict, field_validator

from ..method.costs import BETA_POINTS, RULE_FIELDS, CostConfig, cost_matrix, query_costs
from .budget import Follower, follower_from_state
from .decision import Decision
from .saved import SavedConfig, Text

__all__ = [
    "DENSE_BETAS",
    "TARGET_SHARES",
    "Needs",
    "OperatingPoint",
    "NotExportable",
    "Deployed",
    "Router",
    "best_single_tdl",
    "exportable",
    "supports_budget",
    "validated",
]

# Dense sweeps of the instant routers: β₁ on a grid, and target shares of expert calls.
DENSE_BETAS: tuple[float, ...] = tuple(float(b) for b in np.linspace(0.0, 2.0, 40))
TARGET_SHARES: tuple[float, ...] = tuple(float(s) for s in np.linspace(0.0, 1.0, 21))


class Needs(BaseModel):
    """What a router reads about a query before it decides: the question/context ``embeddings``
    (its encoder runs on every query), the ``answers`` of agents that answer first (the main
    agent, then helpers: they run on every query), and an expert it may ``ask`` midway. Saved as
    it is in ``router.json`` (``needs``), and checked there strictly when an artifact is loaded."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    embeddings: bool = False
    answers: tuple[Text, ...] = ()
    ask: Text | None = None

    @field_validator("answers", mode="before")
    @classmethod
    def _json_list(cls, value):
        return tuple(value) if isinstance(value, list) else value

    @property
    def reads(self) -> tuple[str, ...]:
        """Every agent whose answer the router reads before its decision is final."""
        return (*self.answers, *((self.ask,) if self.ask else ()))


class OperatingPoint(NamedTuple):
    """One point of a router's cost curve: the BENCHMARK.md β₁ it was decided at (None for a
    sweep's own points), the decision, the cost setting when it is not a β₁'s, extra fields, and
    whether it belongs to a dense sweep (kept out of the per-β₁ summaries)."""

    beta1: float | None
    decision: Decision
    costs: CostConfig | None = None
    fields: dict = {}
    dense: bool = True


class NotExportable(ValueError):
    """A router that cannot route a new query on its own (the message says why)."""


@dataclass
class Deployed:
    """What a frozen router routes new queries with, out of the benchmark: ``config`` (JSON: the
    cost setting, a threshold, a budget's follower state, feature settings; checked by the
    router's ``config_model``), ``needs`` (what the deployment computes per query),
    ``overhead_gflops`` (what every query pays: the encoder, or the agents that answer first),
    its trained ``heads`` by name (``""`` for a router of one head), a budget's ``follower``
    (each process follows the budget on its own stream of queries) and, where made at load
    (:meth:`Router.tabulate`), a ``table`` of what it reads of each dataset question, by qid."""

    config: dict
    needs: Needs = field(default_factory=Needs)
    overhead_gflops: float = 0.0
    heads: dict = field(default_factory=dict)
    follower: Follower | None = None
    table: dict | None = None


class Router:
    """A router on a benchmark. Subclasses set the class attributes and implement
    :meth:`_fit` and :meth:`decide`; ``__init__`` stores constructor arguments only."""

    id: ClassVar[str] = ""
    label: ClassVar[str] = ""  # the name people read in menus and legends
    description: ClassVar[str] = ""  # one plain sentence: what it looks at, what it pays
    family: ClassVar[str] = "baseline"  # l2d | baseline | reference | agent
    # what it stands for in a comparison (the report and the paper's table read it, never ids):
    # "bound" (beyond reach: the oracle), "floor" (the line to beat: the zero router), "chance"
    # (random allocation), "all-agents" (asks every agent), "paper" (the paper's rejector, the
    # reference column of its tables), "paper-baseline" (the paper's r_* columns), "" none
    role: ClassVar[str] = ""
    reads_embeddings: ClassVar[bool] = False  # needs the benchmark's question/context embeddings
    reads_answers: ClassVar[bool] = False  # reads the main agent's answer (a cascade) before deciding
    instant: ClassVar[bool] = True  # a new cost setting needs no training
    on_request: ClassVar[bool] = False  # hours of training: run only where named, in no default list
    config_model: ClassVar[type[SavedConfig]] = SavedConfig  # checks what ``freeze`` saves (``config``)

    def __init__(self, **params):
        self.params = params

    def fit(self, bench, seed: int = 0) -> Router:
        if self.reads_embeddings and not bench.has_embeddings:
            raise ValueError(f"router {self.id} reads embeddings: prepare the benchmark with them")
        if reason := self.unavailable(bench):
            raise ValueError(reason)
        self.bench_, self.seed_ = bench, int(seed)
        self._fit()
        return self

    def _fit(self) -> None:
        """Learn what does not depend on the cost setting (``self.bench_``, ``self.seed_``)."""

    @classmethod
    def unavailable(cls, bench) -> str | None:
        """Why this router cannot run on ``bench``'s pool (one line), or None when it can
        (``router_ids(bench)`` leaves such routers out; ``fit`` raises the reason)."""
        return None

    def needs(self, bench) -> Needs:
        """What this router reads about a query on ``bench``'s pool (no fit needed)."""
        return Needs(embeddings=self.reads_embeddings)

    def agents_to_import(self, bench) -> tuple[str, ...]:
        """Agents beyond the pool whose answers this router reads and that are not read in yet
        (the first fit imports them: seconds each); none by default."""
        return ()

    def decide(self, costs: CostConfig) -> Decision:
        raise NotImplementedError

    def needs_training(self, costs: CostConfig) -> bool:
        """Whether :meth:`decide` at ``costs`` will train something (seconds) first."""
        return False

    def sweep(self) -> list[OperatingPoint]:
        """Operating points beyond the β₁ points (thresholds, λ, a dense β grid)."""
        return []

    def operating_points(self, betas=BETA_POINTS, dense: bool = True, prices=()) -> list[OperatingPoint]:
        """At each β₁ of ``betas`` (the BENCHMARK.md cost setting), then the sweep, then one point
        at each per-TFLOP price λ of ``prices`` (field ``price``; kept with the sweep's points,
        out of the β₁ summaries). :func:`~l2d_core.evaluation.points.router_points` scores them."""
        bench = self.bench_
        pts = [OperatingPoint(b, self.decide(bench.costs(b)), dense=False) for b in betas]
        if dense:
            pts += self.sweep()
        for lam in prices:
            costs = bench.price_costs(lam)
            pts.append(OperatingPoint(None, self.decide(costs), costs, {"price": lam}))
        return pts

    def rule_points(self, rule: str, values) -> list[OperatingPoint]:
        """One point at each price of ``rule`` in ``values``: the latency price λ_s (errors per
        second; field ``latency_price``) or the money price λ$ (errors per dollar; field
        ``money_price``), kept with the sweep's points. The zero router has none (its points are
        the single agents')."""
        bench, key = self.bench_, RULE_FIELDS[rule]
        return [
            OperatingPoint(None, self.decide(c := bench.rule_costs(rule, x)), c, {key: x}) for x in values
        ]

    def tdl_vectors(self, settings: dict[str, CostConfig]) -> dict[str, np.ndarray] | None:
        """Per-question TDL at each named cost setting when it is not that of the router's own
        points at that setting (the zero router's: the best single agent's)."""
        return None

    def export_problem(self) -> str | None:
        """Why this router cannot be saved as an artifact, said before fitting (None: it can)."""
        return None if exportable(self) else f"{self.id} cannot route a new query on its own"

    # Out of the benchmark: a frozen router (``freeze``, or ``restore`` from an artifact).

    def deployed(self, config: dict, needs: Needs, overhead: float, heads: dict | None = None) -> Router:
        """A copy of this router frozen at one setting (what :meth:`freeze` returns): ``config`` is
        what an artifact saves (a budget's follower starts from its ``follower`` state), and it
        routes with ``heads`` (name → trained estimator)."""
        frozen = copy.copy(self)
        follower = follower_from_state(config.get("follower"))
        frozen.deployed_ = Deployed(config, needs, float(overhead), dict(heads or {}), follower)
        return frozen

    def route(self, signals) -> Decision:
        """The frozen router's decision for a batch of new queries from their ``signals``
        (``embeddings()``, ``answers()``, ``ask(agent, rows)``:
        :class:`~l2d_core.deploy.signals.QuerySignals`)."""
        raise NotImplementedError(f"{self.id} does not route new queries")

    def tabulate(self, signals) -> bool:
        """Work out once, at load, what routing reads of the dataset questions of ``signals``
        (every one, on recorded answers), so a query by qid reads it in :attr:`Deployed.table`
        instead; whether this router keeps such a table (none by default)."""
        return False

    def tabulated(self, signals, compute) -> np.ndarray:
        """``compute(signals)``, its rows read from :attr:`Deployed.table` where every query is a
        dataset question sent as recorded and tabulated."""
        table = self.deployed_.table
        rows = [table.get(q) for q in signals.qids] if table is not None and signals.as_recorded else [None]
        return np.stack(rows) if all(r is not None for r in rows) else compute(signals)

    def save(self, directory: Path) -> None:
        """Write the frozen router's trained heads into ``directory`` (its config is the
        artifact's): a head named ``""`` in ``directory`` itself, others in subfolders."""
        for name, head in self.deployed_.heads.items():
            head.save(Path(directory) / name if name else directory)

    def load_heads(self, directory: Path) -> dict:
        """The trained heads :meth:`save` wrote into ``directory``, by name (none by default)."""
        return {}

    def restore(self, config: dict, directory: Path, needs: Needs, overhead: float) -> Router:
        """This router frozen as an artifact saved it: ``config`` (checked already by
        :attr:`config_model`), its heads read from ``directory``."""
        return self.deployed(config, needs, overhead, self.load_heads(Path(directory)))

    # Capabilities are methods a router has (scikit-learn's way: ``hasattr(est, "predict_proba")``):
    #
    # def calibrate_budget(self, costs, kind, target) -> tuple[Decision, BudgetStart]:
    #     ``(decision on test, what the budget did)`` under a budget (``kind`` ``share`` or
    #     ``gflops``) followed on the test articles from a start calibrated on the training
    #     articles (:class:`~l2d_core.routers.decision.BudgetStart`;
    #     :func:`~l2d_core.evaluation.budget_results.budget_decision` reads it);
    # def freeze(self, costs, follower=None) -> Router:
    #     this fitted router at ``costs`` (and a budget's ``follower`` starting state), out of
    #     the benchmark (:meth:`deployed`): it routes new queries on its own (:meth:`route`);
    #     :class:`NotExportable` when this instance cannot;
    # def oof_outcome(self, costs, paid="gflops") -> tuple[np.ndarray, np.ndarray]:
    #     (GFLOPs — ``paid="usd"``: dollars, as the money rule counts them — and EM) per training
    #     question at ``costs``, each routed by what never saw its article (out-of-fold): what
    #     the validation ranking reads.


def exportable(router) -> bool:
    """Whether a router (class or instance) freezes into an artifact: it has ``freeze``."""
    return callable(getattr(router, "freeze", None))


def validated(router) -> bool:
    """Whether a router (class or instance) is ranked on the training articles: it has
    ``oof_outcome``."""
    return callable(getattr(router, "oof_outcome", None))


def supports_budget(router) -> bool:
    """Whether a router (class or instance) follows a share / GFLOPs budget: it has
    ``calibrate_budget``."""
    return callable(getattr(router, "calibrate_budget", None))


def best_single_tdl(bench, settings: dict[str, CostConfig]) -> dict[str, np.ndarray]:
    """Per named cost setting the per-question TDL of the single agent of least mean TDL on the
    test articles."""
    out = {}
    for key, costs in settings.items():
        qc = query_costs(cost_matrix(bench.test.errors, costs))  # (N, A)
        out[key] = qc[:, int(qc.mean(axis=0).argmin())]
    return out
