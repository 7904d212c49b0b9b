"""The routing API's contract as pydantic models: what ``POST /v1/route`` and ``/v1/answer``
accept (:data:`QueryBody`: one :class:`Query` or a list of them) and what they answer
(:class:`Routed`, :class:`Answered`, :class:`Invalid`, :class:`Refused`), so that
``/openapi.json`` states it and the handlers validate through it."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from .signals import visible

__all__ = [
    "LIMITS",
    "Query",
    "QueryBody",
    "Routed",
    "Answered",
    "Invalid",
    "Refused",
    "BODY_TAGS",
    "RESPONSES",
]

LIMITS = {
    "question_chars": 2_000,
    "context_chars": 60_000,
    "qid_chars": 200,
    "batch": 64,
    "body_bytes": 4 * 2**20,
    "body_seconds": 10.0,  # for a request body to arrive whole once its headers came
}


class Query(BaseModel):
    """One query: a question about a context passage — or a question of the router's dataset by
    its id (``qid``), routed on the agents' recorded answers (question and context may then be
    left out: they are the dataset's)."""

    model_config = ConfigDict(extra="forbid")
    question: str | None = Field(None, min_length=1, max_length=LIMITS["question_chars"])
    context: str | None = Field(None, min_length=1, max_length=LIMITS["context_chars"])
    qid: str | None = Field(
        None,
        min_length=1,
        max_length=LIMITS["qid_chars"],
        description="the id of a question of the router's dataset: its agents' recorded answers are read "
        "(the only way a router that reads an agent known by its prediction file can route)",
    )

    @field_validator("question", "context")
    @classmethod
    def _visible(cls, v: str | None) -> str | None:
        if v is not None and not visible(v):
            raise ValueError("must contain visible text, not only spaces or invisible characters")
        return v

    @model_validator(mode="after")
    def _text_or_id(self) -> Query:
        if self.qid is None and (self.question is None or self.context is None):
            raise ValueError(
                "give a question and a context, or the qid of a question of the router's dataset"
            )
        return self


def _kind(body: Any) -> str:
    return "many" if isinstance(body, list) else "one"


BODY_TAGS = ("one", "many")  # the union's tags, left out of an error's ``loc``
QueryBody = Annotated[
    Annotated[Query, Tag("one")]
    | Annotated[list[Query], Field(min_length=1, max_length=LIMITS["batch"]), Tag("many")],
    Discriminator(_kind),
]


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class AgentAnswer(Open):
    """The chosen agent's answer: ``ran`` now, ``recorded`` (a dataset question's cached answer)
    or ``cannot_answer`` (with a ``message``); ``text`` is None when it gave none."""

    agent: str
    status: str
    text: str | None = None
    latency_ms: float | None = None
    message: str | None = None


class Routed(Open):
    """The decision for one query: the chosen agent, what decided it, the signals read, the
    GFLOPs paid (only what ran) and the time taken."""

    agent: str
    agent_index: int = Field(ge=0)
    deferred: bool
    router: str
    compared: dict[str, Any] | None
    chance_wrong: dict[str, dict[str, float]] | None
    signals: dict[str, Any]
    gflops: dict[str, Any]
    latency_ms: float
    request_ms: float


class Answered(Routed):
    """The decision and the chosen agent's answer."""

    answer: AgentAnswer


class Problem(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class Invalid(BaseModel):
    """A request that cannot be routed: each problem names its field (``loc``)."""

    detail: list[Problem]


class Refused(BaseModel):
    """A request refused whole (a body over the limit) or a routing failure."""

    detail: str


RESPONSES: dict[int | str, dict[str, Any]] = {
    408: {
        "model": Refused,
        "description": f"a request body not whole {LIMITS['body_seconds']:g} s after its headers",
    },
    413: {"model": Refused, "description": f"a request body over {LIMITS['body_bytes']} bytes"},
    422: {"model": Invalid, "description": "a query that cannot be routed, the field named in loc"},
    500: {"model": Refused, "description": "routing failed (the server log says why)"},
    502: {"model": Refused, "description": "an agent's remote endpoint failed or sent a bad reply (named)"},
    504: {"model": Refused, "description": "an agent's remote endpoint missed its deadline (named)"},
}
