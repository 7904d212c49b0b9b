"""What a router artifact's files must hold, checked when it is loaded: ``router.json``
(:class:`Manifest`) and each trained head's ``config.json`` (:class:`HeadConfig`). A hand-edited
or damaged file is refused with one line naming the field (:func:`check_manifest`,
:func:`check_head_configs`), never a traceback at load time or on the first query.

Numbers are strict (``"0.5"`` is not a number here) and finite where a routing cost is meant;
fields this code does not read are left alone (a newer export may add some).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..agents.registry import AgentSpec, PoolSpec
from ..data import safe_json
from .artifact import ESTIMATOR_DIR, EXPORT_HINT, MANIFEST, ArtifactError
from .integrity import check_files, copies_disagree

__all__ = ["Manifest", "HeadConfig", "check_manifest", "check_head_configs", "first_problem"]

Finite = Annotated[float, Field(allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=1)]
Text = Annotated[str, Field(min_length=1)]


class Strict(BaseModel):
    """Strict types; fields it does not name are allowed (and left as they are)."""

    model_config = ConfigDict(strict=True, extra="allow")


class Versions(Strict):
    format: int
    features: int | None = None
    scoring: int | None = None
    l2d_core: str | None = None


class RouterInfo(Strict):
    id: Text
    label: str = ""
    seed: int = 0


class Pool(Strict):
    name: Text
    dataset: Text
    main: Text
    experts: Annotated[list[Text], Field(min_length=1)]
    description: str = ""


class Agent(Strict):
    id: Text
    dataset: Text
    kind: Text  # one of the registry's kinds (checked by AgentSpec)
    gflops: NonNegative
    gflops_source: str = "declared"
    path: str = ""
    name: str = ""
    params: int | None = None
    options: dict = {}


class Costs(Strict):
    alpha: Annotated[list[NonNegative], Field(min_length=1)]
    beta: Annotated[list[Finite], Field(min_length=1)]


class Needs(Strict):
    model_config = ConfigDict(strict=True, extra="forbid")
    embeddings: bool = False
    answers: list[Text] = []
    ask: Text | None = None


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


class Budget(Strict):
    kind: Literal["share", "gflops"]
    target: Finite
    follower: FollowerState | None = None

    @model_validator(mode="after")
    def _target_in_range(self) -> Budget:
        if not (0 <= self.target <= 1 if self.kind == "share" else self.target > 0):
            what = "a share in [0, 1]" if self.kind == "share" else "GFLOPs per query above 0"
            raise ValueError(f"target {self.target} is not {what}")
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


class FrozenConfig(Strict):
    """The frozen router's settings (each router reads its own subset)."""

    costs: Costs | None = None
    follower: FollowerState | None = None
    agent_gflops: dict[str, NonNegative] | None = None
    threshold: float | None = None  # ±inf: ask everybody / nobody
    agent: Annotated[int, Field(ge=0)] | None = None
    asked: Text | None = None
    set: Text | None = None
    helpers: list[Text] | None = None
    confidence: bool | None = None
    main_fingerprint: str | None = None
    encoder: Encoder | None = None
    price_grid: PriceGridState | None = None

    @model_validator(mode="after")
    def _threshold_is_a_number(self) -> FrozenConfig:
        if self.threshold is not None and math.isnan(self.threshold):
            raise ValueError("threshold is not a number")
        return self


class Manifest(Strict):
    """``router.json``."""

    versions: Versions
    router: RouterInfo
    dataset: Text
    pool: Pool
    agents: Annotated[dict[str, Agent], Field(min_length=1)]
    costs: Costs
    budget: Budget | None = None
    needs: Needs
    config: FrozenConfig
    overhead_gflops: NonNegative


class Train(Strict):
    model_config = ConfigDict(strict=True, extra="forbid")
    lr: Finite = 2e-3
    epochs: Annotated[int, Field(ge=0)] = 15
    batch_size: Count = 256
    dropout: Annotated[float, Field(ge=0, lt=1)] = 0.1
    warmup_ratio: Annotated[float, Field(ge=0, le=1)] = 0.1
    weight_decay: Finite = 1e-3
    hidden: Annotated[int, Field(ge=0)] = 64
    nu: Finite = 1.0
    seed: int = 0
    max_grad_norm: Finite = 1.0
    solver: Literal["adamw", "lbfgs"] = "adamw"
    rank: Annotated[int, Field(ge=0)] = 0


class HeadConfig(Strict):
    """A trained head's ``config.json``."""

    estimator: Text
    in_dim: Count
    out_shape: Annotated[list[Count], Field(min_length=2, max_length=2)]
    train: Train
    posthoc_calibration: Literal["none", "platt"] | None = None
    calibration_fraction: Annotated[float, Field(gt=0, lt=1)] | None = None
    calibration_folds: Annotated[int, Field(ge=1, le=64)] | None = None
    heads: Annotated[int, Field(ge=1, le=64)] | None = None
    costs: Costs | None = None


def first_problem(exc: ValidationError) -> str:
    """The first error of a validation as ``field.path: what is wrong`` (and how many more)."""
    errors = exc.errors()
    e = errors[0]
    where = ".".join(str(p) for p in e["loc"]) or "the whole file"
    msg = e["msg"].removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {msg}{more}"


def _refuse(where: str, problem: str) -> ArtifactError:
    return ArtifactError(f"{where} is damaged or hand-edited: {problem}; {EXPORT_HINT}")


def check_manifest(manifest: dict, where: str = MANIFEST) -> Manifest:
    """``manifest`` validated, and its parts consistent with each other (the pool's agents are
    described, one α and one β per expert, …); :class:`ArtifactError` naming the field otherwise."""
    try:
        m = Manifest.model_validate(manifest)
    except ValidationError as exc:
        raise _refuse(where, first_problem(exc)) from None
    problem = _inconsistency(m, manifest)
    if problem:
        raise _refuse(where, problem)
    return m


def _inconsistency(m: Manifest, raw: dict) -> str | None:
    for key, spec in raw["agents"].items():
        try:
            agent = AgentSpec(**spec)
        except (TypeError, ValueError) as exc:
            return f"agents.{key}: {exc}"
        if agent.id != key:
            return f"agents.{key}: its id is {agent.id!r}"
    try:
        pool = PoolSpec(**raw["pool"])
    except (TypeError, ValueError) as exc:
        return f"pool: {exc}"
    ids = pool.agent_ids
    for field, agent in [("pool", a) for a in ids] + [("needs", a) for a in m.needs.answers]:
        if agent not in m.agents:
            return f"{field}: agent {agent!r} is not described under agents"
    if m.needs.ask is not None and m.needs.ask not in m.agents:
        return f"needs.ask: agent {m.needs.ask!r} is not described under agents"
    j = len(pool.experts)
    for field, costs in (("costs", m.costs), ("config.costs", m.config.costs)):
        for name in ("alpha", "beta"):
            got = len(getattr(costs, name)) if costs is not None else j
            if got != j:
                return f"{field}.{name}: {got} values for the {j} expert(s) of pool {pool.name}"
    if m.config.agent is not None and m.config.agent >= len(ids):
        return f"config.agent: {m.config.agent} is not an agent of pool {pool.name} (0 to {len(ids) - 1})"
    grid, follower = m.config.price_grid, m.config.follower
    if (
        m.config.asked is not None
        and follower is not None
        and follower.log_price is not None
        and grid is None
    ):
        return "config.price_grid: missing; a two-stage cascade under a GFLOPs budget decides on it"
    bad = [len(row) for row in grid.beta if len(row) != j] if grid is not None else []
    if bad:
        return f"config.price_grid.beta: a row of {bad[0]} values for the {j} expert(s) of pool {pool.name}"
    unknown = sorted(set(m.config.agent_gflops or {}) - set(m.agents))
    if unknown:
        return f"config.agent_gflops: {unknown[0]!r} is not described under agents"
    return copies_disagree(m, raw, pool)


def check_head_configs(folder: Path, n_agents: int) -> None:
    """Every ``config.json`` of the estimator folder is a head configuration for ``n_agents``
    agents, and every file there a regular file under the size cap; :class:`ArtifactError` naming
    the file and the field otherwise (a missing folder is left to the router that reads it)."""
    est = folder / ESTIMATOR_DIR
    bad = check_files(est) if est.is_dir() else None
    if bad:  # read before anything opens them: a FIFO would block, a huge file fill the memory
        raise _refuse(Path(bad[0]).relative_to(folder).as_posix(), bad[1])
    for path in sorted(est.rglob("config.json")) if est.is_dir() else []:
        where = path.relative_to(folder).as_posix()
        try:
            raw = safe_json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, safe_json.JSONNestingError) as exc:
            raise _refuse(where, f"it is not readable JSON ({exc})") from None
        try:
            head = HeadConfig.model_validate(raw)
        except ValidationError as exc:
            raise _refuse(where, first_problem(exc)) from None
        if head.out_shape != [2, n_agents]:
            raise _refuse(where, f"out_shape: {head.out_shape}, not [2, {n_agents}] (two endpoints × agents)")
