"""A two-stage cascade out of the benchmark: what it saves (:class:`StagedConfig`, its own config
model), how the two steps are named where a decision is explained (:func:`staged_stages`), and
how the frozen router routes new queries, asking the expert only where it doubts
(:func:`staged_route`, what ``StagedRouter.route`` runs)."""

from __future__ import annotations

import math

import numpy as np
from pydantic import model_validator

from ...method.costs import CostConfig
from ..base import Deployed
from ..budget import PriceFollower, PriceGrid
from ..decision import Decision, Stage
from ..posthoc import PosthocConfig, answer_matrix
from ..saved import PriceGridState, Text
from .rule import main_doubt, second_stage_choice, staged_values

__all__ = ["StagedConfig", "staged_route", "staged_stages"]


def staged_stages(asked: str, follower=None) -> tuple[Stage, Stage]:
    """The two steps of a two-stage cascade that asks ``asked``, as explanations name them, at the
    costs or under a budget's ``follower`` (a threshold's, or a price's for GFLOPs)."""
    when, priced = "at these costs", ""
    if isinstance(follower, PriceFollower):
        when = f"at the price λ in force, which follows the budget of {follower.target:g} GFLOPs per question"
        priced = " (experts priced at the λ in force)"
    elif follower is not None:
        unit = "{:g} GFLOPs per question" if follower.spend else "{:.0%} of questions"
        when = f"that follows the budget of {unit.format(follower.target)}"
    return (
        Stage(
            "first stage",
            "expected cost",
            f"the expected cost of keeping the main answer (the router's doubt in it) against the "
            f"threshold for asking {asked} {when}",
        ),
        Stage(
            "second stage",
            "expected cost",
            f"{asked} has answered: every agent's expected cost, with {asked}'s price already paid{priced}",
        ),
    )


class StagedConfig(PosthocConfig):
    """What a frozen two-stage cascade saves besides the first stage's settings: the expert it
    asks, the doubt threshold at the costs (None under a budget), and under a GFLOPs budget the
    grid of prices it follows on."""

    asked: Text
    threshold: float | None = None  # ±inf: ask everybody / nobody
    price_grid: PriceGridState | None = None

    @model_validator(mode="after")
    def _threshold_is_a_number(self) -> StagedConfig:
        if self.threshold is not None and math.isnan(self.threshold):
            raise ValueError("threshold is not a number")
        return self

    def problem(self, pool, agents) -> str | None:
        j, grid, follower = len(pool.experts), self.price_grid, self.follower
        if follower is not None and follower.log_price is not None and grid is None:
            return "config.price_grid: missing; a two-stage cascade under a GFLOPs budget decides on it"
        bad = [len(row) for row in grid.beta if len(row) != j] if grid is not None else []
        if bad:
            row = f"a row of {bad[0]} values for the {j} expert(s) of pool {pool.name}"
            return f"config.price_grid.beta: {row}"
        return super().problem(pool, agents)


def staged_route(dep: Deployed, signals) -> Decision:
    """A frozen two-stage cascade's decision for a batch of new queries: its two heads
    (``dep.heads``: ``first``, ``second``), the doubt threshold at the costs or a budget's
    follower, and the expert it asks (``config["asked"]``)."""
    cfg, records, follower = dep.config, signals.records, dep.follower
    answers = signals.answers()
    p = dep.heads["first"].predict_proba(answer_matrix(cfg, answers, records))
    doubt = main_doubt(p)
    n, parts = len(records), []
    if follower is None:
        parts = [_second(dep, signals, answers, p, doubt, np.full(n, float(cfg["threshold"])), range(n))]
    for i in range(n) if follower is not None else ():  # in order: the threshold moves
        tau, costs = PriceGrid.in_force(cfg, follower)
        one = _second(dep, signals, answers, p, doubt, np.array([tau]), [i], costs)
        parts.append(one)
        spent = dep.overhead_gflops + _spent(dep, one)
        if isinstance(follower, PriceFollower):
            follower.observe(spent)
        else:
            follower.observe(bool(one["ask"][0]), spent if follower.spend else None)
    cat = {k: np.concatenate([q[k] for q in parts]) for k in ("choice", "p", "ask", "tau", "values", "stage")}
    listed = {k: [x for q in parts for x in q[k]] for k in ("answers", "notes")}
    asked = cfg["asked"]
    return Decision(
        cat["choice"],
        dep.overhead_gflops,
        expected=cat["values"],
        scores=cat["p"],
        score_label="chance wrong",
        per_query={"share": cat["ask"].astype(float), "doubt": doubt, "threshold": cat["tau"]},
        extra={"asked": asked, "asked_answers": listed["answers"], "notes": listed["notes"]},
        stage=cat["stage"],
        stages=staged_stages(asked, follower),
    )


def _spent(dep: Deployed, one: dict) -> float:
    """GFLOPs one routed query spent beyond what always runs: the asked expert where it ran, and
    a dearer expert where it was kept."""
    gflops, asked = dep.config["agent_gflops"], dep.config["asked"]
    spent = gflops[asked] if one["ask"][0] and one["answers"][0] is not None else 0.0
    kept = list(gflops)[int(one["choice"][0])]
    return spent + (gflops[kept] if kept not in (asked, *dep.needs.answers) else 0.0)


def _second(dep: Deployed, signals, answers, p, doubt, tau, rows, costs=None) -> dict:
    """Both stages for ``rows``: the expert asked where the doubt is above ``tau``; the second
    stage at ``costs`` (None: the saved costs)."""
    cfg, rows = dep.config, list(rows)
    asked, k = cfg["asked"], list(cfg["agent_gflops"]).index(cfg["asked"])
    costs = costs or CostConfig(**cfg["costs"])
    p = p[rows].copy()
    ask = doubt[rows] > tau
    n = len(rows)
    choice, got_answers, notes = np.zeros(n, dtype=int), [None] * n, [None] * n
    where = np.flatnonzero(ask).tolist()
    for m, (answer, *_rest, why) in zip(where, signals.ask(asked, [rows[m] for m in where])):
        got_answers[m] = answer
        if answer is None:
            choice[m] = k
            notes[m] = (
                f"the router doubts the main answer and would ask {asked}, which {why}; with its "
                "answer it would keep one of the two or defer to a dearer expert"
            )
    known = [m for m in where if got_answers[m] is not None]
    if known:
        both = [
            answers[rows[m]] | {"helpers": {**answers[rows[m]]["helpers"], asked: got_answers[m]}}
            for m in known
        ]
        recs = [signals.records[rows[m]] for m in known]
        p2 = dep.heads["second"].predict_proba(
            answer_matrix(cfg, both, recs, [*cfg["helpers"], asked], asked=True)
        )
        p[known] = p2
        choice[known] = second_stage_choice(p2, costs, k)
    answered = np.zeros(n, dtype=bool)
    answered[known] = True  # where it asked but got no answer, the first stage decided ("would ask")
    values, stage = staged_values(doubt[rows], tau, answered, p, costs, k)
    return dict(
        choice=choice, p=p, ask=ask, tau=tau, values=values, stage=stage, answers=got_answers, notes=notes
    )
