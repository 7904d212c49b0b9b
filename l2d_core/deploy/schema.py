"""What a router artifact's files must hold, checked when it is loaded: ``router.json``'s envelope
(:class:`Manifest`: versions, pool, agents, costs, budget, :class:`~l2d_core.routers.base.Needs`),
its ``config`` by the router's own model (:func:`check_config`; each router declares it in its
module, from :mod:`~l2d_core.routers.saved`), and each trained head's ``config.json``
(:class:`HeadConfig`). A hand-edited or damaged file is refused with one line naming the field
(:func:`check_manifest`, :func:`check_config`, :func:`check_head_configs`), never a traceback at
load time or on the first query.

Numbers are strict (``"0.5"`` is not a number here) and finite where a routing cost is meant;
fields this code does not read are left alone (a newer export may add some).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, ValidationError, model_validator

from ..agents.catalog import AgentSpec, PoolSpec
from ..data import safe_json
from ..routers.base import Needs
from ..routers.saved import Costs, Count, Finite, FollowerState, NonNegative, SavedConfig, Strict, Text
from .artifact import ESTIMATOR_DIR, EXPORT_HINT, MANIFEST, ArtifactError
from .integrity import check_files, copies_disagree

__all__ = ["Manifest", "HeadConfig", "check_manifest", "check_config", "check_head_configs", "first_problem"]


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
    config: dict  # the router's own settings: checked by its config model (:func:`check_config`)
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
    for name in ("alpha", "beta"):
        got = len(getattr(m.costs, name))
        if got != j:
            return f"costs.{name}: {got} values for the {j} expert(s) of pool {pool.name}"
    return None


def check_config(manifest: dict, model: type[SavedConfig], where: str = MANIFEST) -> SavedConfig:
    """``manifest["config"]`` validated by the router's own config ``model`` and consistent with
    the artifact's pool and agents (``manifest`` already passed :func:`check_manifest`);
    :class:`ArtifactError` naming the field otherwise."""
    try:
        config = model.model_validate(manifest["config"])
    except ValidationError as exc:
        raise _refuse(where, "config." + first_problem(exc)) from None
    pool = PoolSpec(**manifest["pool"])
    problem = config.problem(pool, manifest["agents"])
    problem = problem or copies_disagree(Manifest.model_validate(manifest), manifest, pool)
    if problem:  # facts written twice (the config's and the envelope's) must agree
        raise _refuse(where, problem)
    return config


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
