"""A router ready to put in front of its agents: :func:`deploy` freezes a fitted router of the
registry at one cost setting (or budget) — the router's own ``freeze`` —, :meth:`DeployedRouter.save`
writes it as an artifact (:mod:`~l2d_core.deploy.artifact`), :func:`load_router` reads it back
through the registry (the router's own frozen class: no router is special here).

``route(question, context)`` gives the decision — the chosen agent, what decided it (the step and
each agent's value: the least is chosen), the signals behind it, and the GFLOPs paid for what ran.
``answer(question, context)`` also asks the chosen agent when it can answer; an agent known only
by its prediction file is reported as unable to answer new text, never faked."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, replace
from pathlib import Path

from pydantic import ValidationError
from safetensors import SafetensorError

from ..agents.answering import runnable_agent
from ..agents.cache import AgentCache
from ..agents.catalog import AgentSpec, PoolSpec, get_agent
from ..agents.kind_words import known_only_by
from ..agents.measured import agent_gflops
from ..data import load_dataset
from ..evaluation.budget_results import budget_decision
from ..method.costs import CostConfig
from ..routers.base import Needs, NotExportable, Router, supports_budget
from ..routers.features import answer_context, reads_answer_context
from ..routers.registry import make_router, router_label
from ..runtime import limit_threads
from .artifact import (
    ESTIMATOR_DIR,
    MANIFEST,
    ArtifactError,
    now_iso,
    read_manifest,
    versions,
    write_manifest,
)
from .schema import check_config, check_head_configs, check_manifest, first_problem
from .signals import QueryError, QuerySignals, answer_chosen, check_models, check_query, paid_gflops, runs

__all__ = ["DeployedRouter", "deploy", "load_router", "export_problem", "new_text_problem"]


def export_problem(router: Router) -> str | None:
    """Why ``router`` cannot be saved as an artifact, said before trying (``None``: it can)."""
    return router.export_problem()


def new_text_problem(router: Router) -> str | None:
    """Why a fitted router, once saved, cannot route a question it has never seen (``None``: it
    can): it reads the answer of an agent known only by its prediction file. It still routes the
    dataset's questions by id."""
    dead = [get_agent(a) for a in router.needs(router.bench_).answers]
    dead = [a for a in dead if not runs(a)]
    if not dead:
        return None
    return (
        f"it reads the answers of {', '.join(a.id for a in dead)}, known only by "
        f"{known_only_by([a.kind for a in dead])}: it routes this dataset's questions by id, not new text"
    )


def deploy(router: Router, costs: CostConfig, budget: tuple[str, float] | None = None) -> DeployedRouter:
    """Freeze a fitted router of the registry at ``costs`` (and a ``budget`` ``(kind, target)``,
    followed from where it starts on the training articles) into a :class:`DeployedRouter`."""
    problem = export_problem(router)
    if problem:
        raise ArtifactError(problem)
    bench = router.bench_
    ids = bench.pool.agent_ids
    if costs.n_experts != len(ids) - 1:
        raise ValueError(f"costs have {costs.n_experts} experts, pool {bench.pool.name} has {len(ids) - 1}")
    budget_info, follower = None, None
    if budget is not None:
        if not supports_budget(router):
            raise ValueError(f"{router.id} has no error estimates: a budget needs l2d-plugin or a cascade")
        _, result = budget_decision(router, costs, *budget)
        budget_info, follower = asdict(result), result.follower
    try:
        frozen = router.freeze(costs, follower)
    except NotExportable as exc:
        raise ArtifactError(str(exc)) from None
    dep = frozen.deployed_
    specs = {a: get_agent(a) for a in dict.fromkeys([*ids, *dep.needs.reads])}
    # the GFLOPs the benchmark charged: an agent's measured figure where it has one (its spec says 0)
    specs = {a: replace(s, gflops=agent_gflops(s)) for a, s in specs.items()}
    manifest = {
        "versions": versions(),
        "created": now_iso(),
        "router": {"id": router.id, "label": router_label(router.id), "seed": router.seed_},
        "dataset": bench.dataset.name,
        "pool": asdict(bench.pool),
        "agents": {a: asdict(s) for a, s in specs.items()},
        "costs": {"alpha": list(costs.alpha), "beta": list(costs.beta)},
        "budget": budget_info,
        "needs": dep.needs.model_dump(mode="json"),
        "config": dep.config,
        "overhead_gflops": dep.overhead_gflops,
        "trained_on": {"benchmark": bench.cache_key(router.reads_embeddings), "questions": len(bench.train)},
    }
    try:  # what load_router will check: the router's own config model reads back what it froze
        frozen.config_model.model_validate(json.loads(json.dumps(dep.config)))
    except ValidationError as exc:
        raise ValueError(f"{router.id} froze a config its own model refuses: {first_problem(exc)}") from None
    return DeployedRouter(manifest, frozen)


def load_router(folder: str | Path) -> DeployedRouter:
    """The router saved in ``folder`` (:meth:`DeployedRouter.save`), versions checked; a damaged or
    missing estimator file is named."""
    folder = Path(folder).expanduser()
    manifest = read_manifest(folder)
    where = str(folder / MANIFEST)
    checked = check_manifest(manifest, where)
    rid, needs = checked.router.id, checked.needs
    try:
        router = make_router(rid)
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactError(
            f"{folder}/router.json names no router of this registry ({str(exc)[:120]})"
        ) from None
    check_config(manifest, router.config_model, where)
    check_head_configs(folder, len(checked.pool.experts) + 1)
    est_dir = folder / ESTIMATOR_DIR
    try:
        frozen = router.restore(manifest["config"], est_dir, needs, float(manifest["overhead_gflops"]))
    except (FileNotFoundError, SafetensorError, KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise ArtifactError(
            f"the trained head in {est_dir} cannot be read ({str(exc)[:200]}): copy the whole "
            "artifact folder again, or export it again"
        ) from None
    return DeployedRouter(manifest, frozen, source=folder)


class DeployedRouter:
    """A router frozen at one cost setting (or budget); see the module docstring."""

    def __init__(self, manifest: dict, router: Router, source: Path | None = None):
        self.manifest, self.router, self.source = manifest, router, source
        self.router_id = manifest["router"]["id"]
        self.needs: Needs = router.deployed_.needs
        self.pool = PoolSpec(**manifest["pool"])
        self.specs = {a: AgentSpec(**s) for a, s in manifest["agents"].items()}
        self.costs = CostConfig(tuple(manifest["costs"]["alpha"]), tuple(manifest["costs"]["beta"]))
        self.budget = manifest.get("budget")
        self.encoder = check_models(self.needs, router.deployed_.config, self.specs)
        self._records = None  # the dataset's questions by id (prepare(), or the first qid)
        self.recorded: AgentCache | None = None  # the agents' recorded answers, opened once

    @property
    def agent_ids(self) -> tuple[str, ...]:
        return self.pool.agent_ids

    def routes_new_text(self) -> bool:
        """Whether every agent it reads before deciding answers new text (an expert a two-stage
        cascade asks midway is named where it cannot)."""
        return all(runs(self.specs[a]) for a in self.needs.answers)

    def save(self, folder: str | Path) -> Path:
        """Write the artifact, estimator first, ``router.json`` last (atomically): then it is whole."""
        folder = Path(folder).expanduser()
        (folder / ESTIMATOR_DIR).mkdir(parents=True, exist_ok=True)
        self.router.save(folder / ESTIMATOR_DIR)
        write_manifest(folder, self.manifest)
        return folder

    def prepare(self) -> DeployedRouter:
        """Read once what a query by ``qid`` reads: the dataset's questions by id, and every
        agent's recorded answers through one agent cache whose stores are opened, checked and read
        here — not per request. Where this machine has no copy of the dataset, a router that routes
        new text still serves it (a ``qid`` then gets the dataset's own error)."""
        if self._records is None:
            try:
                self._records = {r.qid: r for r in load_dataset(self.manifest["dataset"])}
            except FileNotFoundError:  # paths.DataNotFoundError: no copy of the dataset here
                if not self.routes_new_text():
                    raise
                return self
        if self.recorded is None:
            cache = AgentCache(snapshot=True)  # read once: no disk access per query
            for a, spec in self.specs.items():
                cache.get(spec.dataset, a, "")  # opens the agent's store and reads its records in
            self.recorded = cache
            self.tabulate()
        return self

    def tabulate(self) -> bool:
        """Let a router that routes dataset questions only, on recorded answers, work out at once
        what it reads of each question every agent it reads has answered (a query by qid then
        costs a look-up: :meth:`Router.tabulate`); whether it did."""
        if self.routes_new_text() or self.needs.embeddings or not self._records:
            return False
        done = set(self._records)
        for a in self.needs.answers:
            done &= self.recorded.done_ids(self.specs[a].dataset, a)
        qids = [q for q in self._records if q in done]
        records = [self._records[q] for q in qids]
        config = self.router.deployed_.config
        signals = QuerySignals(self.needs, config, self.specs, records, qids, None, self.recorded, True)
        try:
            return bool(qids) and self.router.tabulate(signals)
        except QueryError:  # a recorded question without an answer: each query says so itself
            return False

    def _as_recorded(self, queries, qids) -> bool:
        """Whether a table was made at load and every query is a dataset question with its text."""
        if qids is None or self.router.deployed_.table is None:  # a table: prepare() read the records
            return False
        return all(
            (r := self._records.get(q)) and (r.question, r.context) == t for q, t in zip(qids, queries)
        )

    def warm_up(self, threads: int | None = None) -> DeployedRouter:
        """Load what the first query would load (the encoder, the main agent, the recorded answers:
        :meth:`prepare`) by routing one — new text, or the first question of its dataset for a
        router that routes those only — and let the agents that run warm up at every input shape
        on ``threads`` torch threads (a worker's share; default: as torch has them). An artifact
        that loads but cannot route raises :class:`ArtifactError` here, before it serves anyone."""
        try:
            self.prepare()
            if new_text := self.routes_new_text():
                self.route_batch([("Who wrote it?", "It was written by the router's warm-up.")])
            else:
                first = next(iter(load_dataset(self.manifest["dataset"])))
                self.route_batch([(first.question, first.context)], [first.qid])
            if threads is not None:
                limit_threads(threads)  # once torch is in (where it is): the models are loaded
            for a in self.needs.answers if new_text else ():  # every input shape's kernels built now
                if hasattr(agent := runnable_agent(self.specs[a]), "warm_up"):
                    agent.warm_up()
        except ArtifactError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever it is, the artifact cannot be served
            said = " ".join(str(exc).split())[:200] or "no reason given"
            where = self.source if self.source is not None else "this router"
            raise ArtifactError(
                f"{where} loads but fails on a first query ({said}): export it again"
            ) from None
        return self

    def describe(self) -> dict:
        """What this router is, for people and for ``GET /v1/agents``."""
        m = self.manifest
        return {
            "router": m["router"],
            "dataset": m["dataset"],
            "pool": m["pool"]["name"],
            "costs": m["costs"],
            "budget": m["budget"],
            "paid_on_every_query_gflops": m["overhead_gflops"],
            "routes_new_text": self.routes_new_text(),
            "agents": self.agents(),
            "versions": m["versions"],
        }

    def agents(self) -> list[dict]:
        """Every agent the router may call or reads, with its role and whether it answers new text."""
        helpers = self.needs.answers[1:]
        out = []
        for a, spec in self.specs.items():
            role = "main" if a == self.pool.main else "expert" if a in self.pool.experts else "helper"
            out.append(
                {
                    "id": a,
                    "role": role + (" + helper" if role != "helper" and a in helpers else ""),
                    "kind": spec.kind,
                    "gflops": spec.gflops,
                    "answers_new_text": runs(spec),
                }
            )
        return out

    # --- routing ------------------------------------------------------------------------------

    def texts(self, queries, qids=None) -> list[tuple[str, str]]:
        """The ``(question, context)`` of each query: as given, or the dataset's for a ``qid``
        (an unknown id raises :class:`~l2d_core.deploy.signals.QueryError` naming it)."""
        if qids is None:
            return list(queries)
        if self._records is None:
            self._records = {r.qid: r for r in load_dataset(self.manifest["dataset"])}
        out = []
        for (q, c), qid in zip(queries, qids):
            rec = self._records.get(qid)
            if rec is None:
                raise QueryError(
                    f"qid {str(qid)[:80]!r} is not a question of {self.manifest['dataset']}", "qid"
                )
            out.append((q if q is not None else rec.question, c if c is not None else rec.context))
        return out

    def route(self, question: str, context: str, qid: str | None = None) -> dict:
        """The decision for one query (``qid``: a question of the router's dataset, whose cached
        answers and embeddings are read — the benchmark's own inputs)."""
        return self.route_batch([(question, context)], [qid] if qid is not None else None)[0]

    def route_batch(self, queries, qids=None) -> list[dict]:
        """The decisions for a list of ``(question, context)`` (featurized and scored as one batch;
        under a budget the queries are decided in order, each moving the budget's follower)."""
        records = [check_query(q, c, i, passage=qids is None) for i, (q, c) in enumerate(queries)]
        t0 = time.perf_counter()
        signals = QuerySignals(
            self.needs,
            self.router.deployed_.config,
            self.specs,
            records,
            qids,
            self.encoder,
            self.recorded,
            self._as_recorded(queries, qids),
        )
        d = self.router.route(signals)
        ms = 1000.0 * (time.perf_counter() - t0)
        ids = self.agent_ids
        main = signals.answers() if self.needs.answers else None
        places = reads_answer_context(self.router.deployed_.config)
        out = []
        for n, j in enumerate(d.choice.tolist()):
            said = {}
            if main is not None:
                m = main[n]
                said = {
                    "main_answer": m["answer"],
                    "main_confidence": m["confidence"],
                    "helper_answers": dict(m["helpers"]),
                    "main_latency_ms": m["latency_ms"],
                }
                if places and (near := answer_context(m["answer"], records[n].question, records[n].context)):
                    said["main_answer_context"] = near
            elif self.needs.embeddings:
                said = {
                    "reads": "question and context embeddings",
                    "encoder": self.router.deployed_.config["encoder"]["name"],
                }
            ran = None
            if "asked" in d.extra:  # a router that asks an expert midway
                pq = d.per_query
                asked = {
                    "agent": d.extra["asked"],
                    "asked": bool(pq["share"][n]),
                    "doubt": float(pq["doubt"][n]),
                    "threshold": float(pq["threshold"][n]),
                    "answer": d.extra["asked_answers"][n],
                    "note": d.extra["notes"][n],
                }
                said["asked"] = asked
                if asked["answer"] is not None:
                    said["helper_answers"] = {
                        **said.get("helper_answers", {}),
                        asked["agent"]: asked["answer"],
                    }
                    ran = asked["agent"]
            scored = d.score_label == "chance wrong" and d.scores is not None
            out.append(
                {
                    "agent": ids[j],
                    "agent_index": j,
                    "deferred": j != 0,
                    "router": self.router_id,
                    "compared": d.explain(n, ids),
                    "chance_wrong": {
                        a: {"start": float(d.scores[n, 0, k]), "end": float(d.scores[n, 1, k])}
                        for k, a in enumerate(ids)
                    }
                    if scored
                    else None,
                    "signals": said,
                    "gflops": paid_gflops(
                        self.manifest["overhead_gflops"],
                        self.specs,
                        self.needs,
                        ids[j],
                        ran,
                        "asked" in d.extra,
                        qids is not None,
                    ),
                    "latency_ms": ms / len(records),
                }
            )
        return out

    def answer(self, question: str, context: str, qid: str | None = None) -> dict:
        """:meth:`route`, then the chosen agent's answer (its recorded answer for a dataset
        question ``qid``; else run now when it can run)."""
        return self.answer_batch([(question, context)], [qid] if qid is not None else None)[0]

    def answer_batch(self, queries, qids=None) -> list[dict]:
        t0 = time.perf_counter()
        routed = self.route_batch(queries, qids)
        for n, (r, (q, c)) in enumerate(zip(routed, queries)):
            qid = qids[n] if qids is not None else None
            r["answer"] = answer_chosen(self.needs, self.specs, r, q, c, qid, self.recorded)
        ms = 1000.0 * (time.perf_counter() - t0)
        for r in routed:
            r["latency_ms"] = ms / len(routed)
        return routed
