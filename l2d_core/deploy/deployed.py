"""A router ready to put in front of its agents: :func:`deploy` freezes a fitted router of the
registry at one cost setting (or budget), :meth:`DeployedRouter.save` writes it as an artifact
(:mod:`~l2d_core.deploy.artifact`), :func:`load_router` reads it back.

``route(question, context)`` gives the decision — the chosen agent, every agent's expected cost,
the signals behind it (the main agent's answer and confidence for a cascade, and for the
two-stage cascade whether it asked its cheapest expert; the query's embeddings for an ex-ante
router), and the GFLOPs it pays. ``answer(question, context)`` also
runs the chosen agent when it can run; an agent known only by its prediction file is reported
as unable to answer new text, never faked.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
from safetensors import SafetensorError

from ..agents.registry import AgentSpec, PoolSpec, get_agent
from ..app_logic.live import RUNNABLE_KINDS
from ..data import load_dataset
from ..evaluation.benchmark import encoder_for
from ..evaluation.budget import (
    budget_decision,
    budget_stage,
    price_choice,
    surcharge_choice,
)
from ..evaluation.builtin_routers import SDL_STAGES, PluginRouter, PosthocRouter, SDLRouter, ZeroRouter
from ..evaluation.plugin_router import PLUGIN_STAGES
from ..evaluation.registry import router_label
from ..evaluation.router import AgentRouter, Router
from ..evaluation.staged_router import StagedRouter
from ..method.costs import CostConfig
from ..method.policies import expected_costs, learned_policy, plugin_policy
from ..routers.posthoc import PosthocRejector
from ..routers.rejector import PluginRejector, SDLRejector
from .artifact import (
    ESTIMATOR_DIR,
    ArtifactError,
    model_fingerprint,
    now_iso,
    read_manifest,
    versions,
    write_manifest,
)
from .decided import Decided, follower_from
from .signals import QueryError, RouteInputs, answer_chosen, check_query, main_answers, query_features
from .staged import StagedHeads, route_staged

__all__ = ["EXPORTABLE", "DeployedRouter", "deploy", "load_router", "export_problem", "new_text_problem"]

# what each kind of saved router keeps: its estimator class (None: a fixed agent)
ESTIMATORS = {
    "plugin": PluginRejector,
    "sdl": SDLRejector,
    "posthoc": PosthocRejector,
    "staged": StagedHeads,
    "fixed": None,
}
EXPORTABLE = (
    "the L2D routers (l2d-plugin, l2d-sdl, l2d-posthoc, l2d-cascade, l2d-staged), the zero router "
    "and single agents"
)


def export_problem(router: Router) -> str | None:
    """Why ``router`` cannot be saved as an artifact (``None``: it can)."""
    if isinstance(router, SDLRouter) and router.mode != "fast":
        return "l2d-sdl in full mode fine-tunes its own encoder: only the fast mode (a head) is exported"
    if isinstance(router, PosthocRouter) and router.features.endswith("+emb"):
        return f"{router.id} with features {router.features!r} reads embeddings besides the answer"
    if isinstance(router, PosthocRouter | StagedRouter | PluginRouter | SDLRouter | ZeroRouter | AgentRouter):
        return None
    return f"{router.id} cannot route a new query on its own; exportable: {EXPORTABLE}"


def new_text_problem(router: Router) -> str | None:
    """Why a fitted router, once saved, cannot route a question it has never seen (``None``: it
    can): it reads the answer of an agent known only by its prediction file. It still routes the
    dataset's questions by id."""
    posthoc = router if isinstance(router, PosthocRouter) else getattr(router, "first_", None)
    if posthoc is None or not isinstance(posthoc, PosthocRouter):
        return None
    bench = router.bench_
    needs = [bench.pool.main, *posthoc.helpers_]
    dead = [a for a in needs if get_agent(a).kind not in RUNNABLE_KINDS]
    if not dead:
        return None
    return (
        f"it reads the answers of {', '.join(dead)}, known only by {'its' if len(dead) == 1 else 'their'} "
        "prediction file: it routes this dataset's questions by id, not new text"
    )


def deploy(router: Router, costs: CostConfig, budget: tuple[str, float] | None = None) -> DeployedRouter:
    """Freeze a fitted router of the registry at ``costs`` (and a ``budget`` ``(kind, target)``,
    calibrated on the training articles' out-of-fold estimates) into a :class:`DeployedRouter`."""
    problem = export_problem(router)
    if problem:
        raise ArtifactError(problem)
    bench = router.bench_
    ids = bench.pool.agent_ids
    if costs.n_experts != len(ids) - 1:
        raise ValueError(f"costs have {costs.n_experts} experts, pool {bench.pool.name} has {len(ids) - 1}")
    specs = {a: get_agent(a) for a in ids}
    features: dict = {}
    fixed, estimator, threshold, budget_info = None, None, None, None
    overhead = float(bench.rejector_gflops)
    if isinstance(router, PosthocRouter | StagedRouter):
        posthoc = router if isinstance(router, PosthocRouter) else router.first_
        specs.update({h: get_agent(h) for h in posthoc.helpers_})
        features = {
            "set": posthoc.features,
            "helpers": list(posthoc.helpers_),
            "confidence": bool(posthoc.confidence_),
            "main_fingerprint": model_fingerprint(str(specs[ids[0]].path)),
        }
        overhead = float(posthoc.overhead_)
        if posthoc is router:
            kind, estimator = "posthoc", router.estimator_
        else:
            kind, estimator = "staged", StagedHeads(router.first_.estimator_, router.second_.estimator_)
            features["asked"] = ids[router.asked_]
    elif isinstance(router, PluginRouter | SDLRouter):
        kind = "plugin" if isinstance(router, PluginRouter) else "sdl"
        estimator = router.estimator_ if kind == "plugin" else router.estimator(costs)
        enc = encoder_for(bench.encoder_name)
        features = {
            "encoder": bench.encoder_name,
            "encoder_path": enc.path,
            "encoder_fingerprint": model_fingerprint(enc.path),
            "kind": bench.features,
            "pooling": enc.pooling,
            "max_length": enc.max_length,
        }
    else:
        kind, overhead = "fixed", 0.0
        fixed = int(router.decide(costs).choice[0])
    if kind == "staged" and budget is None:
        threshold = router.threshold(costs)
    if budget is not None:
        if kind not in ("plugin", "posthoc", "staged"):
            raise ValueError(f"{router.id} has no error estimates: a budget needs l2d-plugin or a cascade")
        _, result = budget_decision(router, costs, *budget)
        budget_info = asdict(result)  # with the follower's starting state: a deployment starts there
    manifest = {
        "versions": versions(),
        "created": now_iso(),
        "router": {"id": router.id, "label": router_label(router.id), "kind": kind, "seed": router.seed_},
        "dataset": bench.dataset.name,
        "pool": asdict(bench.pool),
        "agents": {a: asdict(s) for a, s in specs.items()},
        "costs": {"alpha": list(costs.alpha), "beta": list(costs.beta)},
        "budget": budget_info,
        "threshold": threshold,
        "fixed_agent": fixed,
        "features": features,
        "overhead_gflops": overhead,
        "trained_on": {"benchmark": bench.cache_key(router.reads_embeddings), "questions": len(bench.train)},
    }
    return DeployedRouter(manifest, estimator)


def load_router(folder: str | Path) -> DeployedRouter:
    """The router saved in ``folder`` (:meth:`DeployedRouter.save`), versions checked; a damaged or
    missing estimator file is named."""
    folder = Path(folder).expanduser()
    manifest = read_manifest(folder)
    try:
        kind = manifest["router"]["kind"]
        cls = ESTIMATORS[kind]
    except (KeyError, TypeError):
        raise ArtifactError(f"{folder}/router.json names no known router kind ({list(ESTIMATORS)})") from None
    estimator = None
    if cls is not None:
        est_dir = folder / ESTIMATOR_DIR
        try:
            estimator = cls.load(est_dir)
        except (FileNotFoundError, SafetensorError, KeyError, ValueError, RuntimeError) as exc:
            raise ArtifactError(
                f"the trained head in {est_dir} cannot be read ({str(exc)[:200]}): copy the whole "
                "artifact folder again, or export it again"
            ) from None
    return DeployedRouter(manifest, estimator, source=folder)


class DeployedRouter:
    """A router frozen at one cost setting; see the module docstring."""

    def __init__(self, manifest: dict, estimator=None, source: Path | None = None):
        self.manifest, self.estimator, self.source = manifest, estimator, source
        self.router_id = manifest["router"]["id"]
        self.kind = manifest["router"]["kind"]
        self.pool = PoolSpec(**manifest["pool"])
        self.specs = {a: AgentSpec(**s) for a, s in manifest["agents"].items()}
        self.costs = CostConfig(tuple(manifest["costs"]["alpha"]), tuple(manifest["costs"]["beta"]))
        self.threshold = manifest.get("threshold")
        self.budget = manifest.get("budget")
        self.follower = follower_from(self.budget)  # a budget followed query by query, per process
        self._records = None  # the dataset's questions by id, read on the first qid
        self.inputs = RouteInputs(self.kind, manifest["features"], self.specs, self.pool)
        self.inputs.check()

    @property
    def agent_ids(self) -> tuple[str, ...]:
        return self.pool.agent_ids

    def save(self, folder: str | Path) -> Path:
        """Write the artifact: the estimator first, ``router.json`` last (atomically), so a folder
        with a manifest is always complete."""
        folder = Path(folder).expanduser()
        if self.estimator is not None:
            self.estimator.save(folder / ESTIMATOR_DIR)
        write_manifest(folder, self.manifest)
        return folder

    def warm_up(self) -> DeployedRouter:
        """Load what the first query would load (the encoder, the main agent) by routing one."""
        self.route_batch([("Who wrote it?", "It was written by the router's warm-up.")])
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
            "routes_new_text": self.inputs.routes_new_text(),
            "agents": self.agents(),
            "versions": m["versions"],
        }

    def agents(self) -> list[dict]:
        """Every agent the router may call or reads, with its role and whether it answers new text."""
        helpers = self.manifest["features"].get("helpers", []) if self.kind == "posthoc" else []
        out = []
        for a, spec in self.specs.items():
            role = "main" if a == self.pool.main else "expert" if a in self.pool.experts else "helper"
            out.append(
                {
                    "id": a,
                    "role": role + (" + helper" if role != "helper" and a in helpers else ""),
                    "kind": spec.kind,
                    "gflops": spec.gflops,
                    "answers_new_text": self.inputs.runs(a),
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
        answers a cascade reads instead of running its main agent, and whose cached embeddings an
        ex-ante router reads — the benchmark's own inputs)."""
        return self.route_batch([(question, context)], [qid] if qid is not None else None)[0]

    def route_batch(self, queries, qids=None) -> list[dict]:
        """The decisions for a list of ``(question, context)`` (featurized and scored as one batch;
        under a budget the queries are decided in order, each moving the budget's follower)."""
        records = [check_query(q, c, i) for i, (q, c) in enumerate(queries)]
        t0 = time.perf_counter()
        main = main_answers(self.inputs, records, qids) if self.inputs.reads_answers else None
        ids = self.agent_ids
        staged = None
        if self.kind == "staged":
            base = float(self.manifest["overhead_gflops"])
            staged = route_staged(
                self.inputs,
                self.estimator,
                self.threshold,
                self.costs,
                records,
                main,
                qids,
                self.follower,
                base,
            )
            decided = Decided(staged.choice, staged.values, staged.p_err, staged.stage, staged.stages)
        else:
            decided = self._decide(records, main, qids)
        ms = 1000.0 * (time.perf_counter() - t0)
        out = []
        for n, j in enumerate(decided.choice.tolist()):
            r = {
                "agent": ids[j],
                "agent_index": j,
                "deferred": j != 0,
                "router": self.router_id,
                "compared": decided.compared(n, ids),
                "chance_wrong": None
                if decided.p_err is None
                else {
                    a: {"start": float(decided.p_err[n, 0, k]), "end": float(decided.p_err[n, 1, k])}
                    for k, a in enumerate(ids)
                },
                "signals": self.inputs.signals(main[n] if main is not None else None),
                "gflops": self._gflops(ids[j], recorded=qids is not None),
                "latency_ms": ms / len(records),
            }
            if staged is not None:
                asked = staged.signals(n, self.manifest["features"]["asked"])
                r["signals"]["asked"] = asked
                if asked["answer"] is not None:
                    r["signals"]["helper_answers"] = {
                        **r["signals"]["helper_answers"],
                        asked["agent"]: asked["answer"],
                    }
                ran = asked["agent"] if asked["asked"] and asked["answer"] is not None else None
                r["gflops"] = self._gflops(ids[j], ran, recorded=qids is not None)
            out.append(r)
        return out

    def _decide(self, records, main, qids) -> Decided:
        """The one-stage routers: a fixed agent, the rejector's scores, or the plug-in rule on error
        estimates — at the costs, or under the budget's follower."""
        n = len(records)
        if self.kind == "fixed":
            return Decided(np.full(n, int(self.manifest["fixed_agent"])))
        if self.kind == "sdl":
            scores = self.estimator.scores(query_features(self.inputs, records, cached=qids is not None))
            return Decided(learned_policy(scores), -scores.sum(axis=1), None, None, SDL_STAGES)
        F = query_features(self.inputs, records, main, cached=qids is not None)
        p_err = self.estimator.error_proba(F)
        if self.follower is None:
            values = expected_costs(p_err, self.costs)
            return Decided(plugin_policy(p_err, self.costs), values, p_err, None, PLUGIN_STAGES)
        stages = (budget_stage(self.budget["kind"], self.budget["target"]),)
        if self.budget["kind"] == "share":
            choice, values, _ = surcharge_choice(p_err, self.costs, self.follower)
            return Decided(choice, values, p_err, None, stages)
        own = [0.0 if self.inputs.already_ran(a) else self.specs[a].gflops for a in self.agent_ids]
        extra = np.repeat(np.array([own]) - own[0], n, axis=0)
        base = np.full(n, float(self.manifest["overhead_gflops"]) + own[0])
        choice, values, _ = price_choice(p_err, self.costs.alpha, self.follower, extra, base)
        return Decided(choice, values, p_err, None, stages)

    def _gflops(self, chosen: str, asked: str | None = None, recorded: bool = False) -> dict:
        """GFLOPs of one query, counting only what runs: what the router pays on every query, the
        expert a two-stage cascade ``asked`` and that answered (staged routers only), and the chosen
        agent when it has not run yet and can answer (it runs on new text, or the query is a dataset
        question whose answer it ``recorded``). A chosen agent that cannot answer is not paid: its
        cost is under ``unpaid``."""
        paid = float(self.manifest["overhead_gflops"])
        extra = {} if self.kind != "staged" else {"asked": float(self.specs[asked].gflops) if asked else 0.0}
        ran = self.inputs.already_ran(chosen) or chosen == asked
        can = recorded or self.inputs.runs(chosen)
        again = 0.0 if ran or not can else float(self.specs[chosen].gflops)
        out = {"router": paid, **extra, "chosen_agent": again, "total": paid + sum(extra.values()) + again}
        if not ran and not can:
            out["unpaid"] = {chosen: float(self.specs[chosen].gflops)}
        return out

    def answer(self, question: str, context: str, qid: str | None = None) -> dict:
        """:meth:`route`, then the chosen agent's answer (its recorded answer for a dataset
        question ``qid``; else run now when it can run)."""
        return self.answer_batch([(question, context)], [qid] if qid is not None else None)[0]

    def answer_batch(self, queries, qids=None) -> list[dict]:
        t0 = time.perf_counter()
        routed = self.route_batch(queries, qids)
        for n, (r, (q, c)) in enumerate(zip(routed, queries)):
            r["answer"] = answer_chosen(self.inputs, r, q, c, qids[n] if qids is not None else None)
        ms = 1000.0 * (time.perf_counter() - t0)
        for r in routed:
            r["latency_ms"] = ms / len(routed)
        return routed
