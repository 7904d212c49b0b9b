"""What a deployed router decided for a batch of queries (:class:`Decided`), in the routing API's
words, and the budget's follower it starts from (:func:`follower_from`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..evaluation.budget import Follower, PriceFollower
from ..evaluation.points import Stage
from .artifact import ArtifactError

__all__ = ["Decided", "follower_from"]


@dataclass
class Decided:
    """What a deployed router decided for a batch: the agents, what it compared per agent (NaN:
    not an option at the step that decided; the chosen agent has the least), its error
    estimates, which step decided each query and those steps."""

    choice: np.ndarray
    values: np.ndarray | None = None
    p_err: np.ndarray | None = None
    stage: np.ndarray | None = None
    stages: tuple[Stage, ...] = ()

    def compared(self, n: int, ids) -> dict | None:
        """The response's account of query ``n``: the step, what its values are, and the value of
        each agent (None: not an option at that step)."""
        if self.values is None:
            return None
        stage = self.stages[0 if self.stage is None else int(self.stage[n])]
        row = self.values[n]
        return {
            "step": stage.name,
            "quantity": stage.quantity,
            "note": stage.note,
            "values": {a: (None if np.isnan(v) else float(v)) for a, v in zip(ids, row.tolist())},
        }


def follower_from(budget: dict | None):
    """The budget's follower, from the starting state saved in the artifact (None: no budget)."""
    if not budget:
        return None
    state = budget.get("follower") or {}
    cls = PriceFollower if "log_price" in state else Follower  # a price, or a threshold on a score
    try:
        return cls(**state)
    except TypeError:
        raise ArtifactError(
            "the artifact's budget has no follower state (exported by an older version): export it again"
        ) from None
