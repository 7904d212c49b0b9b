"""What a deployed router reads about a batch of queries (:class:`QuerySignals`), computed when the
frozen router asks for it: the question/context embeddings (never written to the embedding
cache for new text), the answers and confidence of the agents it reads first (the main agent,
helpers), and the answers of an expert it asks midway — run now, or read from the agent cache
for the dataset's questions by id. What a router reads is its :class:`~l2d_core.routers.base.Needs`.
"""

from __future__ import annotations

import unicodedata

from ..agents.answering import answer_with, runnable_agent
from ..agents.cache import AgentCache
from ..agents.catalog import AgentSpec
from ..agents.kind_words import no_new_text
from ..data.records import QARecord
from ..routers.base import Needs
from ..routers.encoder import load_encoder
from ..routers.features import featurize
from ..stores import model_fingerprint
from .artifact import ArtifactError

__all__ = [
    "QueryError",
    "QuerySignals",
    "check_query",
    "visible",
    "agent_answers",
    "answer_chosen",
    "check_models",
    "paid_gflops",
]


class QueryError(ValueError):
    """A query that cannot be routed (``field`` names what is wrong)."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


# characters that show nothing: spaces, controls, format characters (zero-width spaces and
# joiners, direction marks, the BOM, …), unassigned or private code points, lone surrogates,
# combining marks, and letters drawn blank (Hangul fillers, the braille blank)
INVISIBLE_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn", "Mn", "Me"})
BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800\u180e")


def visible(text: str) -> bool:
    """Whether ``text`` has at least one character that shows (not only spaces, zero-width or
    other invisible characters).

    >>> visible("Who?"), visible(" \u200b\u2060\ufeff "), visible("\u3164\u0301")
    (True, False, False)
    """
    return any(
        not c.isspace() and c not in BLANK_LETTERS and unicodedata.category(c) not in INVISIBLE_CATEGORIES
        for c in text
    )


def check_query(question, context, index: int = 0, passage: bool = True) -> QARecord:
    """A query as a record; an empty, invisible or non-text field raises :class:`QueryError`
    naming it (``passage=False``: a question of the router's dataset by its id, which may come
    without a passage — a log's prompts)."""
    for name, value in (("question", question), ("context", context)):
        if name == "context" and not passage and value == "":
            continue
        if not isinstance(value, str) or not visible(value):
            raise QueryError(f"query {index}: {name} must be non-empty text (with a visible character)", name)
    return QARecord(qid=f"q{index}", title="", context=context, question=question, answers=())


def runs(spec: AgentSpec) -> bool:
    """Whether an agent answers new text here (it is a model this tool runs)."""
    return spec.answers_new_text


def check_models(needs: Needs, config: dict, specs: dict[str, AgentSpec]):
    """The models a frozen router reads are the ones it was trained with (compared by content
    fingerprint): the main agent whose answers and confidence it reads, and its encoder, which
    is returned (loaded lazily, on the first query); None when it reads no embeddings."""
    if needs.answers and runs(specs[needs.answers[0]]) and "main_fingerprint" in config:
        spec = specs[needs.answers[0]]
        got = model_fingerprint(str(spec.path))
        if got != config["main_fingerprint"]:
            raise ArtifactError(
                f"the main agent {spec.id} at {spec.path} is not the model this router was "
                f"calibrated on (fingerprint {got}, saved {config['main_fingerprint']}): its confidence "
                "would mean something else; export the router again after training the agent"
            )
    if not needs.embeddings:
        return None
    e = config["encoder"]
    enc = load_encoder(e["name"], e["pooling"], e["max_length"], lazy=True)
    got = model_fingerprint(enc.path)
    if got != e["fingerprint"]:
        raise ArtifactError(
            f"the encoder {e['name']!r} here ({enc.path}) is not the one this router was trained on "
            f"(fingerprint {got}, saved {e['fingerprint']}); export it again"
        )
    return enc


def agent_answers(spec: AgentSpec, records: list[QARecord], qids=None, cache=None) -> list[tuple]:
    """``(answer, confidence, latency ms, why none)`` of an agent for each record: its cached
    answers for dataset question ids ``qids`` (read through ``cache``, the agent cache a deployed
    router opened once; default a new handle), else run now as one batch; an agent that cannot
    answer new text gives ``None`` with the reason (never a made-up answer)."""
    if qids is not None:
        cache = cache if cache is not None else AgentCache()  # one handle for every cached answer
        got = [answer_with(spec, r.question, r.context, q, cache) for r, q in zip(records, qids)]
        # a recorded outcome without text (an outcome log: right/wrong only) is an answer, not a gap
        why = [None if g["status"] == "cached" else g["message"] for g in got]
        return [(g["answer"], g["confidence"], g["latency_ms"], w) for g, w in zip(got, why)]
    if runs(spec):
        preds = runnable_agent(spec).predict(records)
        return [(p.answer, p.extra.get("confidence"), p.latency_ms, p.extra.get("error")) for p in preds]
    why = no_new_text(spec.kind)
    return [(None, None, None, why)] * len(records)


class QuerySignals:
    """What a frozen router may read about ``records`` (``qids``: the dataset's questions, read
    on the agents' recorded answers — through ``cache``, an agent cache opened once — and the
    embedding cache, as on the benchmark; ``as_recorded``: with the dataset's own text, so what
    the router tabulated of them at load holds)."""

    def __init__(
        self,
        needs: Needs,
        config: dict,
        specs: dict,
        records: list[QARecord],
        qids=None,
        encoder=None,
        cache=None,
        as_recorded: bool = False,
    ):
        self.needs, self.config, self.specs = needs, config, specs
        self.records, self.qids, self.encoder, self.cache = records, qids, encoder, cache
        self.as_recorded = as_recorded and qids is not None
        self._answers: list[dict] | None = None

    def embeddings(self):
        """The question/context features of the records, (N, d)."""
        return featurize(
            self.encoder, self.records, self.config["encoder"]["features"], cached=self.qids is not None
        )

    def answers(self) -> list[dict]:
        """The main agent's and the helpers' answers to each record: ``answer``, ``confidence``,
        ``latency_ms`` (the main agent's) and ``helpers`` by id; an agent without an answer
        raises :class:`QueryError` saying what to do instead."""
        if self._answers is None:
            table = {}
            main = self.needs.answers[0]
            for a in self.needs.answers:
                if self.qids is None and not runs(self.specs[a]):
                    fix = (
                        "or deploy a pool whose main agent answers new text (`python "
                        "scripts/train_agent.py --profile quick` makes one)"
                        if a == main
                        else "or a router of this pool that reads no helper agent (l2d-cascade, l2d-staged)"
                    )
                    raise QueryError(
                        f"this router reads the answer of {a}, which is known only by its prediction "
                        "file and cannot answer new text: send the qid of a question of the router's "
                        f"dataset, {fix}",
                        "context",
                    )
                table[a] = agent_answers(self.specs[a], self.records, self.qids, self.cache)
                for (ans, *_rest, why), r in zip(table[a], self.records):
                    if ans is None and why is not None:
                        raise QueryError(f"{a} gave no answer to {r.qid}: {why}", "context")
            self._answers = [
                {
                    "answer": table[main][n][0],
                    "confidence": table[main][n][1],
                    "latency_ms": table[main][n][2],
                    "helpers": {h: table[h][n][0] for h in self.needs.answers[1:]},
                }
                for n in range(len(self.records))
            ]
        return self._answers

    def ask(self, agent: str, rows: list[int]) -> list[tuple]:
        """``agent``'s answers to the records ``rows`` (only those: it runs where asked)."""
        qids = [self.qids[i] for i in rows] if self.qids is not None else None
        return agent_answers(self.specs[agent], [self.records[i] for i in rows], qids, self.cache)


def answer_chosen(
    needs: Needs, specs: dict, routed: dict, question: str, context: str, qid=None, cache=None
) -> dict:
    """The chosen agent's answer: reused when it already ran (the main agent, a helper, the
    expert a two-stage cascade asked), its recorded answer for a dataset question ``qid`` (read
    through ``cache`` when given), run now when it can run, else ``status: cannot_answer`` with
    the reason (never made up)."""
    agent = routed["agent"]
    s = routed["signals"]
    if agent in needs.answers or (s.get("asked") or {}).get("agent") == agent:
        if agent == needs.answers[0]:
            return {
                "agent": agent,
                "status": "ran",
                "text": s["main_answer"],
                "latency_ms": s["main_latency_ms"],
            }
        if s["helper_answers"].get(agent) is not None:
            return {"agent": agent, "status": "ran", "text": s["helper_answers"][agent]}
    got = answer_with(specs[agent], question, context, qid, cache)
    status = {"live": "ran", "cached": "recorded"}.get(got["status"], got["status"])
    return {"agent": agent, "status": status, "text": got["answer"], "latency_ms": got["latency_ms"]} | (
        {"message": got["message"]} if got["answer"] is None else {}
    )


def paid_gflops(
    overhead: float, specs: dict, needs: Needs, chosen: str, asked: str | None, asks: bool, recorded: bool
) -> dict:
    """GFLOPs of one query, counting only what runs: what the router pays on every query
    (``overhead``), the expert a two-stage cascade ``asked`` and that answered (routers that ask:
    ``asks``), and the chosen agent when it has not run yet and can answer (it runs on new text, or
    the query is a dataset question whose answer it ``recorded``). A chosen agent that cannot
    answer is not paid: its cost is under ``unpaid``."""
    paid = float(overhead)
    extra = {"asked": float(specs[asked].gflops) if asked else 0.0} if asks else {}
    ran = chosen in needs.answers or chosen == asked
    can = recorded or runs(specs[chosen])
    again = 0.0 if ran or not can else float(specs[chosen].gflops)
    out = {"router": paid, **extra, "chosen_agent": again, "total": paid + sum(extra.values()) + again}
    if not ran and not can:
        out["unpaid"] = {chosen: float(specs[chosen].gflops)}
    return out
