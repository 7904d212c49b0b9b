"""What a frozen router saves in ``router.json``'s ``config``, as pydantic models: the pieces that
several routers share (:class:`Costs`, a budget's :class:`FollowerState`, the :class:`Encoder` an
embedding router reads, a two-stage cascade's :class:`PriceGridState`), and :class:`SavedConfig`,
the base every router's own config model extends in its own module (the router class names it:
``Router.config_model``). The artifact's envelope (:mod:`~l2d_core.deploy.schema`) holds the
config as it is; loading validates it with the router's own model, and a hand-edited or damaged
field is named in one line.

Numbers are strict (``"0.5"`` is not a number here) and finite where a routing cost is meant;
fields a model does not name are left alone (a newer export may add some).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "Finite",
    "NonNegative",
    "Positive",
    "Count",
    "Text",
    "Strict",
    "Costs",
    "FollowerState",
    "Encoder",
    "PriceGridState",
    "SavedConfig",
]

Finite = Annotated[float, Field(allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=1)]
Text = Annotated[str, Field(min_length=1)]


class Strict(BaseModel):
    """Strict types; fields it does not name are allowed (and left as they are)."""

    model_config = ConfigDict(strict=True, extra="allow")


class Costs(Strict):
    alpha: Annotated[list[NonNegative], Field(min_length=1)]
    beta: Annotated[list[Finite], Field(min_length=1)]


class FollowerState(Strict):
    """A budget's follower: a threshold on a score, or a price (``log_price``)."""

    model_config = ConfigDict(strict=True, extra="forbid")
    threshold: Finite | None = None
    log_price: Finite | None = None
    target: Finite
    step: Finite | None = None
    lo: Finite | None = None
    hi: Finite | None = None
    spend: bool | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> FollowerState:
        if (self.threshold is None) == (self.log_price is None):
            raise ValueError("give either threshold or log_price")
        if self.threshold is not None and None in (self.step, self.lo, self.hi):
            raise ValueError("a threshold follower needs step, lo and hi")
        if self.lo is not None and self.hi is not None and self.lo > self.hi:
            raise ValueError(f"lo {self.lo} is above hi {self.hi}")
        if self.step is not None and not self.step > 0:
            raise ValueError(f"step {self.step} is not above 0")
        share = self.threshold is not None and not self.spend  # a share of queries, else a spend
        if not (0 <= self.target <= 1 if share else self.target > 0):
            raise ValueError(f"target {self.target} is not {'a share in [0, 1]' if share else 'above 0'}")
        return self


class Encoder(Strict):
    name: Text
    fingerprint: str
    pooling: Text
    max_length: Count
    features: Text


class PriceGridState(Strict):
    """A two-stage cascade's grid of prices under a GFLOPs budget: at each price (log-spaced over
    ``range``, errors per TFLOP) its doubt threshold and the experts' β."""

    threshold: Annotated[list[Finite], Field(min_length=2)]
    beta: Annotated[list[Annotated[list[Finite], Field(min_length=1)]], Field(min_length=2)]
    # None: saved before the range was (on the price range of that version, 1e-4 to 1e4)
    range: Annotated[list[Positive], Field(min_length=2, max_length=2)] | None = None

    @model_validator(mode="after")
    def _one_row_a_price(self) -> PriceGridState:
        if len(self.beta) != len(self.threshold):
            raise ValueError(f"{len(self.threshold)} thresholds but {len(self.beta)} rows of β")
        if self.range is not None and self.range[0] >= self.range[1]:
            raise ValueError(f"range {self.range} does not run from a lower to a higher price")
        return self


class SavedConfig(Strict):
    """A frozen router's saved settings: every router's own model extends this one (in its own
    module) with the fields it writes. The shared fields' consistency with the artifact's pool is
    :meth:`problem`'s; a model adds its own checks by extending it."""

    costs: Costs | None = None
    follower: FollowerState | None = None
    agent_gflops: dict[str, NonNegative] | None = None

    def problem(self, pool, agents) -> str | None:
        """What in these settings does not fit ``pool`` (a ``PoolSpec``) and the described
        ``agents`` (ids), as ``config.<field>: why``; None when all fits."""
        j = len(pool.experts)
        for name in ("alpha", "beta"):
            got = len(getattr(self.costs, name)) if self.costs is not None else j
            if got != j:
                return f"config.costs.{name}: {got} values for the {j} expert(s) of pool {pool.name}"
        unknown = sorted(set(self.agent_gflops or {}) - set(agents))
        if unknown:
            return f"config.agent_gflops: {unknown[0]!r} is not described under agents"
        return None
