"""The JSON routing API of a deployed router (FastAPI; OpenAPI docs at ``/docs``).

- ``POST /v1/route`` ``{"question": …, "context": …}`` (or ``{"qid": …}``, a question of the router's
  dataset, read on the agents' recorded answers) or a list of them → the decision per query
  (:meth:`~l2d_core.deploy.deployed.DeployedRouter.route`);
- ``POST /v1/answer`` → the same plus the chosen agent's answer and the latency;
- ``GET /v1/agents`` → the router, its costs or budget and its agents; ``GET /healthz``.

A bad request gets a 4xx JSON answer naming the field (``loc``) and never a traceback: missing
fields, wrong types, empty or over-long text (422), a body over the limit (413). Model work runs
one request at a time per process (a lock: torch already uses every core it is given); more
processes come from uvicorn's ``--workers``.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Annotated, Any

from fastapi import Body, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from .deployed import DeployedRouter, load_router
from .signals import QueryError

__all__ = ["LIMITS", "Query", "create_app", "app_from_env", "ROUTER_ENV", "THREADS_ENV"]

ROUTER_ENV = "L2D_ROUTER"  # the artifact a worker process loads (scripts/serve.py sets it)
THREADS_ENV = "L2D_TORCH_THREADS"  # torch threads of a worker process
LIMITS = {
    "question_chars": 2_000,
    "context_chars": 60_000,
    "qid_chars": 200,
    "batch": 64,
    "body_bytes": 4 * 2**20,
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
    def _not_blank(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("must contain text, not only spaces")
        return v

    @model_validator(mode="after")
    def _text_or_id(self) -> Query:
        if self.qid is None and (self.question is None or self.context is None):
            raise ValueError(
                "give a question and a context, or the qid of a question of the router's dataset"
            )
        return self


ONE, MANY = (
    TypeAdapter(Query),
    TypeAdapter(Annotated[list[Query], Field(min_length=1, max_length=LIMITS["batch"])]),
)
EXAMPLE = {
    "question": "Who wrote Moby-Dick?",
    "context": "Moby-Dick is an 1851 novel by American writer Herman Melville.",
}
BODY_DOC = (
    f"a query object, or a list of up to {LIMITS['batch']} of them (answered as one batch); a query is "
    '{"question", "context"} or {"qid"} of a question of the router\'s dataset'
)


def parse_queries(body: Any) -> tuple[list[Query], bool]:
    """``(queries, batched)`` from a request body; a 422 naming the field otherwise."""
    try:
        if isinstance(body, list):
            queries, batched = MANY.validate_python(body), True
        else:
            queries, batched = [ONE.validate_python(body)], False
    except ValidationError as exc:
        raise RequestValidationError(
            [{"loc": ("body", *e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        ) from None
    if len({q.qid is None for q in queries}) > 1:
        raise RequestValidationError(
            [
                {
                    "loc": ("body",),
                    "msg": "give a qid for every query of a batch, or for none",
                    "type": "value_error",
                }
            ]
        )
    return queries, batched


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes gets 413 before it is read whole."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await self._refuse(send)
        seen = 0

        async def counted():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _TooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except _TooLarge:
            await self._refuse(send)

    async def _refuse(self, send):
        await JSONResponse({"detail": f"request body over {self.limit} bytes"}, status_code=413)(
            {"type": "http"}, None, send
        )


class _TooLarge(Exception):
    pass


def create_app(router: DeployedRouter) -> FastAPI:
    """The API around one deployed router."""
    app = FastAPI(
        title="L2D query router",
        version=str(router.manifest["versions"].get("l2d_core")),
        description=f"Routes extractive-QA queries of pool {router.pool.name} with {router.router_id} "
        f"({router.manifest['router']['label']}).",
    )
    lock = threading.Lock()

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        errors = [{k: e[k] for k in ("loc", "msg", "type") if k in e} for e in exc.errors()]
        return JSONResponse({"detail": errors}, status_code=422)

    @app.exception_handler(QueryError)
    async def _bad_query(request: Request, exc: QueryError):
        return JSONResponse({"detail": [{"loc": ["body", exc.field], "msg": str(exc)}]}, status_code=422)

    @app.exception_handler(Exception)
    async def _failed(request: Request, exc: Exception):
        return JSONResponse({"detail": f"routing failed: {str(exc)[:300]}"}, status_code=500)

    def run(body, answer: bool):
        parsed, batched = parse_queries(body)
        qids = [q.qid for q in parsed] if parsed[0].qid is not None else None
        t0 = time.perf_counter()
        with lock:
            queries = router.texts([(q.question, q.context) for q in parsed], qids)
            out = router.answer_batch(queries, qids) if answer else router.route_batch(queries, qids)
        ms = 1000.0 * (time.perf_counter() - t0)
        for r in out:
            r["request_ms"] = ms
        return out if batched else out[0]

    @app.post("/v1/route", summary="Which agent should answer (the agents are not asked)")
    def route(body: Annotated[Any, Body(description=BODY_DOC, examples=[EXAMPLE, [EXAMPLE, EXAMPLE]])]):
        return run(body, answer=False)

    @app.post("/v1/answer", summary="Route, then ask the chosen agent when it can answer new text")
    def answer(body: Annotated[Any, Body(description=BODY_DOC, examples=[EXAMPLE])]):
        return run(body, answer=True)

    @app.get("/v1/agents", summary="The router, its cost setting and its agents")
    def agents():
        return router.describe()

    @app.get("/healthz")
    def healthz():
        return {
            "status": "ok",
            "router": router.router_id,
            "pool": router.pool.name,
            "routes_new_text": router.routes_new_text(),
        }

    app.add_middleware(BodyLimit, limit=LIMITS["body_bytes"])
    return app


def app_from_env() -> FastAPI:
    """uvicorn factory for worker processes: the artifact named by ``$L2D_ROUTER``."""
    path = os.environ.get(ROUTER_ENV)
    if not path:
        raise RuntimeError(f"set {ROUTER_ENV} to a router artifact folder (scripts/serve.py does)")
    if os.environ.get(THREADS_ENV):
        import torch

        torch.set_num_threads(int(os.environ[THREADS_ENV]))
    router = load_router(path)
    if router.routes_new_text():
        router.warm_up()  # models loaded before the first request, not during it
    return create_app(router)
