"""What a deployed router reads about a query, computed now: the question/context embeddings of
an ex-ante router (never written to the embedding cache), or the main agent's (and helpers')
answers and confidence for a cascade, run as one batch."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..agents.cache import AgentCache
from ..agents.registry import AgentSpec, PoolSpec
from ..app_logic.live import RUNNABLE_KINDS, answer_with, runnable_agent
from ..data.records import QARecord
from ..routers.encoder import load_encoder
from ..routers.features import featurize, posthoc_matrix
from .artifact import ArtifactError, model_fingerprint

__all__ = [
    "QueryError",
    "RouteInputs",
    "check_query",
    "agent_answers",
    "main_answers",
    "query_features",
    "answer_chosen",
]

ANSWER_KINDS = ("posthoc", "staged")  # routers that read the main agent's (and helpers') answers


class QueryError(ValueError):
    """A query that cannot be routed (``field`` names what is wrong)."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


def check_query(question, context, index: int = 0) -> QARecord:
    """A query as a record; an empty or non-text field raises :class:`QueryError` naming it."""
    for name, value in (("question", question), ("context", context)):
        if not isinstance(value, str) or not value.strip():
            raise QueryError(f"query {index}: {name} must be non-empty text", name)
    return QARecord(qid=f"q{index}", title="", context=context, question=question, answers=())


@dataclass
class RouteInputs:
    """How a deployed router of ``kind`` computes its input (``features``: the artifact's record)."""

    kind: str
    features: dict
    specs: dict[str, AgentSpec]
    pool: PoolSpec
    _encoder: object = field(default=None, repr=False)

    @property
    def reads_answers(self) -> bool:
        return self.kind in ANSWER_KINDS

    @property
    def helpers(self) -> list[str]:
        return list(self.features.get("helpers", [])) if self.reads_answers else []

    def runs(self, agent: str) -> bool:
        return self.specs[agent].kind in RUNNABLE_KINDS

    def routes_new_text(self) -> bool:
        """Whether every agent read before deciding can run on new text (a cascade whose main agent
        or helpers are prediction files routes only the dataset's questions, by id; the expert a
        two-stage cascade asks is named where it cannot answer)."""
        return not self.reads_answers or all(self.runs(a) for a in (self.pool.main, *self.helpers))

    def already_ran(self, agent: str) -> bool:
        """Whether routing to ``agent`` costs nothing more (a cascade's main agent and helpers ran)."""
        return self.reads_answers and (agent == self.pool.main or agent in self.helpers)

    def check(self) -> None:
        """The models this router reads are the ones it was trained with (compared by content
        fingerprint); the encoder is loaded lazily, on the first query."""
        f = self.features
        if self.reads_answers and self.runs(self.pool.main):
            spec = self.specs[self.pool.main]
            got = model_fingerprint(str(spec.path))
            if got != f["main_fingerprint"]:
                raise ArtifactError(
                    f"the main agent {spec.id} at {spec.path} is not the model this router was "
                    f"calibrated on (fingerprint {got}, saved {f['main_fingerprint']}): its confidence "
                    "would mean something else; export the router again after training the agent"
                )
        if self.kind in ("plugin", "sdl"):
            enc = load_encoder(f["encoder"], f["pooling"], f["max_length"], lazy=True)
            got = model_fingerprint(enc.path)
            if got != f["encoder_fingerprint"]:
                raise ArtifactError(
                    f"the encoder {f['encoder']!r} here ({enc.path}) is not the one this router was "
                    f"trained on (fingerprint {got}, saved {f['encoder_fingerprint']}); export it again"
                )
            self._encoder = enc

    def signals(self, main: dict | None) -> dict:
        """What the decision read, for the response."""
        if self.reads_answers:
            return {
                "main_answer": main["answer"],
                "main_confidence": main["confidence"],
                "helper_answers": main["helpers"],
                "main_latency_ms": main["latency_ms"],
            }
        if self.kind in ("plugin", "sdl"):
            return {"reads": "question and context embeddings", "encoder": self.features["encoder"]}
        return {}


def agent_answers(inputs: RouteInputs, agent: str, records: list[QARecord], qids=None) -> list[tuple]:
    """``(answer, confidence, latency ms, why none)`` of ``agent`` for each record: its cached
    answers for dataset question ids ``qids``, else run now as one batch; an agent that cannot
    answer new text gives ``None`` with the reason (never a made-up answer)."""
    spec = inputs.specs[agent]
    if qids is not None:
        cache = AgentCache()  # one handle for every cached answer
        got = [answer_with(spec, r.question, r.context, q, cache) for r, q in zip(records, qids)]
        return [(g["answer"], g["confidence"], g["latency_ms"], g["message"]) for g in got]
    if inputs.runs(agent):
        preds = runnable_agent(spec).predict(records)
        return [(p.answer, p.extra.get("confidence"), p.latency_ms, p.extra.get("error")) for p in preds]
    why = "is known only by its prediction file and cannot answer new text"
    return [(None, None, None, why)] * len(records)


def main_answers(inputs: RouteInputs, records: list[QARecord], qids=None) -> list[dict]:
    """The main agent's and the helpers' answers to each record (:func:`agent_answers`); an
    agent without an answer raises."""
    table = {}
    for a in [inputs.pool.main, *inputs.helpers]:
        if qids is None and not inputs.runs(a):
            fix = (
                "or deploy a pool whose main agent answers new text (P3-quick after `python "
                "scripts/train_agent.py --profile quick`)"
                if a == inputs.pool.main
                else "or a router of this pool that reads no helper agent (l2d-cascade, l2d-staged)"
            )
            raise QueryError(
                f"this router reads the answer of {a}, which is known only by its prediction file and "
                f"cannot answer new text: send the qid of a question of the router's dataset, {fix}",
                "context",
            )
        table[a] = agent_answers(inputs, a, records, qids)
        for (ans, *_rest, why), r in zip(table[a], records):
            if ans is None:
                raise QueryError(f"{a} gave no answer to {r.qid}: {why}", "context")
    out = []
    for n in range(len(records)):
        ans, conf, ms, _ = table[inputs.pool.main][n]
        helpers = {h: table[h][n][0] for h in inputs.helpers}
        out.append({"answer": ans, "confidence": conf, "latency_ms": ms, "helpers": helpers})
    return out


def query_features(
    inputs: RouteInputs,
    records: list[QARecord],
    main: list[dict] | None = None,
    cached: bool = False,
    helpers: list[str] | None = None,
) -> np.ndarray:
    """The estimator's input for these records: answer features (of ``helpers``, default the
    router's), or embeddings — computed now, or read from the embedding cache when ``cached``
    (the dataset's questions, as in the benchmark)."""
    if inputs.reads_answers:
        f = inputs.features
        conf = [m["confidence"] for m in main] if f["confidence"] else None
        read = inputs.helpers if helpers is None else helpers
        helpers = [[m["helpers"][h] for h in read] for m in main]
        return posthoc_matrix([m["answer"] for m in main], helpers, records, f["set"], conf)
    return featurize(inputs._encoder, records, inputs.features["kind"], cached=cached)


def answer_chosen(
    inputs: RouteInputs, routed: dict, question: str, context: str, qid: str | None = None
) -> dict:
    """The chosen agent's answer: reused when it already ran (a cascade's main agent), its
    recorded answer for a dataset question ``qid``, run now when it can run, else ``status:
    cannot_answer`` with the reason (never made up)."""
    agent = routed["agent"]
    if inputs.reads_answers:
        s = routed["signals"]
        if agent == inputs.pool.main:
            return {
                "agent": agent,
                "status": "ran",
                "text": s["main_answer"],
                "latency_ms": s["main_latency_ms"],
            }
        if s["helper_answers"].get(agent) is not None:  # a helper, or the expert a staged router asked
            return {"agent": agent, "status": "ran", "text": s["helper_answers"][agent]}
    got = answer_with(inputs.specs[agent], question, context, qid)
    status = {"live": "ran", "cached": "recorded"}.get(got["status"], got["status"])
    return {"agent": agent, "status": status, "text": got["answer"], "latency_ms": got["latency_ms"]} | (
        {"message": got["message"]} if got["answer"] is None else {}
    )
