"""What a router decided (:class:`Decision`): where each question went, and what the step that
decided it compared per agent (:class:`Stage`) — the one object every page, chart, sentence,
metric and API response about a decision reads. The benchmark's decisions and a deployed router's
are the same kind of object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # a type only: the routing data is built by the agents layer
    from ..agents.routing_data import RoutingData

__all__ = ["Stage", "Decision", "BudgetStart"]


@dataclass(frozen=True)
class Stage:
    """One step of a router's decision, as its explanation names it: ``name`` (empty for a router
    that decides in one step), what its values are (``quantity``) and one plain sentence of what
    is compared (``note``)."""

    name: str = ""
    quantity: str = "expected cost"
    note: str = ""


@dataclass(frozen=True, eq=False)
class Decision:
    """One router's allocation of the test questions at one operating setting.

    ``choice`` (N,) is the agent each question went to. ``overhead_gflops`` is paid on every
    question (a rejector's encoder, or a cascade's main agent and helpers, which always run);
    ``data`` replaces the benchmark's test data for the accounting (a cascade's main agent then
    costs nothing more when chosen). ``expected`` (N, A) is what the router compared per agent
    for each question — NaN where an agent was not an option at the step that decided — and the
    chosen agent always has the least of them (checked here: every page, chart and sentence that
    explains a decision reads these numbers). ``stage`` (N,) says which of ``stages`` decided
    each question (all the first when None). ``scores`` (N, 2, A) is the router's per-endpoint
    view (``score_label`` says which), when it has one. ``per_query`` overrides per-question
    vectors the choice implies (``em``, ``f1``, ``gflops``, ``tdl``, ``share``: whether an
    expert was consulted, paid, whatever answer was kept); ``extra`` fields are copied into the
    curve point.
    """

    choice: np.ndarray
    overhead_gflops: float = 0.0
    data: RoutingData | None = None
    expected: np.ndarray | None = None
    scores: np.ndarray | None = None
    score_label: str = ""
    per_query: dict[str, np.ndarray] | None = None
    extra: dict = field(default_factory=dict)
    stage: np.ndarray | None = None
    stages: tuple[Stage, ...] = ()

    def __post_init__(self) -> None:
        if self.expected is None:
            return
        choice = np.asarray(self.choice, dtype=int)
        values = np.asarray(self.expected, dtype=float)
        if values.shape[0] != len(choice):
            raise ValueError(f"a decision compares {values.shape[0]} questions but chose for {len(choice)}")
        if len(choice) == 0:
            return
        picked = values[np.arange(len(choice)), choice]
        with np.errstate(invalid="ignore"):
            least = np.nanmin(np.where(np.isnan(values), np.inf, values), axis=1)
            bad = np.isnan(picked) | (picked > least + 1e-9 * np.maximum(1.0, np.abs(least)))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"decision of question {i}: agent {choice[i]} was chosen but the values compared are "
                f"{values[i].round(4).tolist()} — what a router shows must be what it decided"
            )

    def on(self, test: RoutingData) -> RoutingData:
        """The data this decision is accounted on."""
        return test if self.data is None else self.data

    def paid_gflops(self, test: RoutingData) -> np.ndarray:
        """GFLOPs each question paid (N,): what always runs plus the chosen agent's, unless
        ``per_query`` says otherwise (a cascade pays an asked expert whatever answer it kept)."""
        if self.per_query and "gflops" in self.per_query:
            return np.asarray(self.per_query["gflops"], dtype=float)
        data, choice = self.on(test), np.asarray(self.choice, dtype=int)
        return self.overhead_gflops + data.gflops[np.arange(len(choice)), choice].astype(float)

    def stage_of(self, i: int) -> Stage:
        """The step that decided question ``i``."""
        stages = self.stages or (
            Stage("", "expected cost" if self.score_label == "chance wrong" else "score"),
        )
        return stages[0 if self.stage is None else int(self.stage[i])]

    def compared(self, i: int) -> dict | None:
        """What decided question ``i``: the step (:class:`Stage`), the value of each agent there
        (NaN: not an option at that step) and the agent chosen — the least of those values.
        ``None`` for a router that compares no values per agent (it is named, not explained)."""
        if self.expected is None:
            return None
        return {
            "stage": self.stage_of(i),
            "values": np.asarray(self.expected[i], float),
            "chosen": int(self.choice[i]),
        }

    def explain(self, i: int, ids) -> dict | None:
        """What decided question ``i``, as the routing API and the pages' charts show it:
        ``step``, ``quantity``, ``note`` and ``values`` per agent id (None where that step did
        not weigh the agent); None for a router that compares no values.

        >>> d = Decision(np.array([1]), expected=np.array([[0.4, 0.2, np.nan]]))
        >>> d.explain(0, ("g", "m1", "m2"))["values"]
        {'g': 0.4, 'm1': 0.2, 'm2': None}
        """
        c = self.compared(i)
        if c is None:
            return None
        stage = c["stage"]
        values = {a: (None if np.isnan(v) else float(v)) for a, v in zip(ids, c["values"].tolist())}
        return {"step": stage.name, "quantity": stage.quantity, "note": stage.note, "values": values}


@dataclass(frozen=True)
class BudgetStart:
    """What a router's ``calibrate_budget`` says besides its decision: where its follower started
    (a threshold for ``share``, a price λ for ``gflops``: calibrated on the training articles) and
    where it ended on the test articles, what that start spends on the training articles (share of
    questions sent to an expert, mean GFLOPs), the ``reachable`` range of the budget's figure,
    why a target outside it is not met (``note``) and the follower's starting state (what a
    deployment starts from)."""

    start: float
    end: float
    training_share: float
    training_gflops: float
    reachable: tuple[float, float]
    note: str = ""
    follower: dict = field(default_factory=dict)
