"""A log of prompts with one column per model (RouterBench's layout: ``sample_id``, ``prompt``,
``eval_name``, then for each model ``<model>`` = 1 right / 0 wrong and ``<model>|total_cost`` =
dollars for that answer; a score between 0 and 1, a share of samples right, counts as right from
0.5) becomes a dataset of its own, an agent per model and a pool — no passage,
no SQuAD id: the log is all there is (:func:`import_wide_log`).

The dataset (:mod:`l2d_core.data.user_datasets`) holds one question per prompt, its article the
prompt's group (``--group``: e.g. the task) or the prompt itself; each model becomes an agent known
by its outcome log (right/wrong and its price per answer), so the money rule applies at once; the
pool's main agent is the cheapest model, its experts the others from the cheapest up.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import DATASETS, DataFormatError, QARecord, held_out_titles, load_dataset
from ..data.user_datasets import check_dataset_name, save_user_dataset
from ..paths import cache_dir
from .cache import AgentCache
from .catalog import AgentSpec, PoolSpec, agent_lock, check_new_pool, register_agent, register_pool
from .log_table import read_table
from .outcome_log import import_log
from .prices import dollars

__all__ = ["WideLogReport", "import_wide_log", "prompt_text"]

COST_SUFFIX = "|total_cost"
ID_COLUMNS = ("sample_id", "id", "qid")
PROMPT_COLUMNS = ("prompt", "question")


@dataclass
class WideLogReport:
    dataset: str
    pool: str
    questions: int
    test_questions: int
    agents: list[tuple[str, float, float]]  # agent id, accuracy %, dollars per 1,000 questions
    partial: int = 0  # answers scored between 0 and 1 (a share of samples right): right from 0.5

    def lines(self) -> list[str]:
        out = [
            f"dataset {self.dataset}: {self.questions} prompts ({self.test_questions} in its test articles)"
        ]
        if self.partial:
            out.append(f"  {self.partial} answers scored between 0 and 1 count as right from 0.5")
        out += [f"  {a}: {acc:.1f}% right, {dollars(usd)} per 1,000 questions" for a, acc, usd in self.agents]
        experts = ", ".join(a for a, *_ in self.agents[1:])
        return [*out, f"pool {self.pool}: main {self.agents[0][0]}; experts {experts}"]


def prompt_text(value) -> str:
    """A prompt as text: a list of turns written as a Python list (RouterBench) joined by blank lines.

    >>> prompt_text("['Q: 2+2?', 'A:']"), prompt_text("plain"), prompt_text(float("nan"))
    ('Q: 2+2?\\n\\nA:', 'plain', '')
    """
    if not isinstance(value, str):
        return ""
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        try:
            turns = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return text
        if isinstance(turns, list) and all(isinstance(t, str) for t in turns):
            return "\n\n".join(turns)
    return text


def _slug(model: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", model.lower()).strip("-.")


def _column(table: pd.DataFrame, names: tuple[str, ...], what: str, label: str) -> str:
    hit = next((c for c in names if c in table.columns), None)
    if hit is None:
        raise DataFormatError(f"log {label}: no {what} column ({', '.join(names)})")
    return hit


def import_wide_log(
    path: str | Path,
    name: str,
    pool: str | None = None,
    group: str | None = None,
    gflops: float = 1.0,
    label: str | None = None,
    replace: bool = False,
) -> WideLogReport:
    """Register ``path`` (see the module) as dataset ``name``, one outcome-log agent per model
    (id ``<name>-<model>``, ``gflops`` declared per query) and pool ``pool`` (default ``name``).
    Everything is checked before anything is written; a bad log is one DataFormatError."""
    label = label or str(path)
    name = check_dataset_name(name, tuple(DATASETS))
    table = read_table(Path(path), label, ".csv")
    ids = table[_column(table, ID_COLUMNS, "id", label)].astype(str).str.strip()
    prompts = table[_column(table, PROMPT_COLUMNS, "prompt", label)].map(prompt_text)
    if (empty := prompts.str.strip() == "").any():
        raise DataFormatError(
            f"log {label}: row {int(np.flatnonzero(empty.to_numpy())[0]) + 1} has no prompt"
        )
    if ids.duplicated().any():
        raise DataFormatError(f"log {label}: id {ids[ids.duplicated()].iloc[0]!r} appears twice")
    if group is not None and group not in table.columns:
        raise DataFormatError(f"log {label}: no group column {group!r}")
    models = [c[: -len(COST_SUFFIX)] for c in table.columns if c.endswith(COST_SUFFIX)]
    models = [m for m in models if m in table.columns]
    if len(models) < 2:
        raise DataFormatError(
            f"log {label}: needs two models or more, each a score <model> (0 to 1) and <model>{COST_SUFFIX}"
        )
    outcomes, partial = {}, 0
    for m in models:
        score = pd.to_numeric(table[m], errors="coerce")
        usd = pd.to_numeric(table[m + COST_SUFFIX], errors="coerce")
        bad = ~score.between(0, 1) | ~np.isfinite(usd) | (usd < 0)
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0]) + 1
            raise DataFormatError(
                f"log {label}: row {row}, model {m}: needs a score from 0 to 1 and dollars >= 0"
            )
        partial += int((~score.isin([0, 1])).sum())  # a share of samples right: right from one half
        outcomes[m] = pd.DataFrame({"id": ids, "correct": (score >= 0.5).astype(int), "cost_usd": usd})
    titles = table[group].astype(str) if group else ids
    records = [QARecord(q, t, "", p, ()) for q, t, p in zip(ids, titles, prompts)]
    order = sorted(models, key=lambda m: (outcomes[m]["cost_usd"].mean(), m))  # the cheapest first
    agent_ids = {m: f"{name}-{_slug(m)}" for m in models}
    pool_spec = PoolSpec(pool or name, name, agent_ids[order[0]], tuple(agent_ids[m] for m in order[1:]))
    specs = {
        m: AgentSpec(
            id=agent_ids[m],
            dataset=name,
            kind="outcome_log",
            gflops=gflops,
            path=str(cache_dir() / "uploads" / f"{agent_ids[m]}.csv"),
            name=m,
            description=f"known by its column of {Path(label).name}",
        )
        for m in models
    }
    check_new_pool(pool_spec, replace, also=tuple(specs.values()))
    save_user_dataset(name, records, f"{len(records)} prompts of {Path(label).name}, no passages")
    dataset, cache = load_dataset(name), AgentCache()
    for m in order:
        with agent_lock(specs[m].id):
            Path(specs[m].path).parent.mkdir(parents=True, exist_ok=True)
            outcomes[m].to_csv(specs[m].path, index=False)
            import_log(specs[m], dataset, cache, label=f"{label} ({m})")
            register_agent(specs[m], replace=True)
    register_pool(pool_spec, replace=True)
    test = sum(1 for r in records if r.title in held_out_titles(dataset))
    rows = [
        (agent_ids[m], 100 * outcomes[m]["correct"].mean(), 1000 * outcomes[m]["cost_usd"].mean())
        for m in order
    ]
    return WideLogReport(name, pool_spec.name, len(records), test, rows, partial)
