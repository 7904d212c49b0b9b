"""The JSON routing API of a deployed router (FastAPI; OpenAPI docs at ``/docs``).

- ``POST /v1/route`` ``{"question": …, "context": …}`` (or ``{"qid": …}``, a question of the router's
  dataset, read on the agents' recorded answers) or a list of them → the decision per query
  (:meth:`~l2d_core.deploy.deployed.DeployedRouter.route`);
- ``POST /v1/answer`` → the same plus the chosen agent's answer and the latency;
- ``GET /v1/agents`` → the router, its costs or budget and its agents; ``GET /healthz``.

A bad request gets a 4xx JSON answer naming the field (``loc``) and never a traceback: missing
fields, wrong types, empty or over-long text (422), a body over the limit (413), a body that does not
arrive whole within ``LIMITS["body_seconds"]`` of its headers (408). An agent behind a remote
endpoint that fails is its one line (:class:`~l2d_core.agents.endpoint.EndpointError`): 504 past
its deadline, 502 for an error status or a bad reply. Model work runs one request at a time per
process (a lock: torch already uses every core it is given). Where every agent runs in the process,
a request runs whole on the process's model thread (:func:`~l2d_core.runtime.model_executor`),
awaited by the event loop: one thread hand-off, not two. Where an agent is a remote endpoint, a
request runs on a request thread that lets the lock go while the endpoint is waited on, so a slow
endpoint delays only the requests that ask it. More processes come from uvicorn's ``--workers``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
import time

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter, ValidationError

from ..agents.catalog import ENDPOINT_KINDS
from ..agents.endpoint import EndpointError, released_while_waiting
from ..runtime import model_executor
from .api_models import BODY_TAGS, LIMITS, RESPONSES, Answered, Query, QueryBody, Routed
from .deployed import DeployedRouter, load_router
from .signals import QueryError

__all__ = ["LIMITS", "Query", "create_app", "app_from_env", "parse_queries", "ROUTER_ENV", "THREADS_ENV"]

ROUTER_ENV = "L2D_ROUTER"  # the artifact a worker process loads (scripts/serve.py sets it)
THREADS_ENV = "L2D_TORCH_THREADS"  # torch threads of a worker process
BODY = TypeAdapter(QueryBody)
EXAMPLE = {
    "question": "Who wrote Moby-Dick?",
    "context": "Moby-Dick is an 1851 novel by American writer Herman Melville.",
}
BODY_DOC = (
    f"a query object, or a list of up to {LIMITS['batch']} of them (answered as one batch); a query is "
    '{"question", "context"} or {"qid"} of a question of the router\'s dataset'
)
# The request body as /openapi.json states it: the handlers read the body's bytes and validate
# them once, in Rust (``BODY.validate_json``), not through FastAPI's JSON decoding and model
# validation first; the models it refers to go into the document's components.
_SCHEMA = BODY.json_schema(ref_template="#/components/schemas/{model}")
BODY_MODELS = _SCHEMA.pop("$defs")
REQUEST_BODY = {
    "required": True,
    "content": {
        "application/json": {
            "schema": {
                **_SCHEMA,
                "title": "Body",
                "description": BODY_DOC,
                "examples": [EXAMPLE, [EXAMPLE] * 2],
            }
        }
    },
}
log = logging.getLogger("uvicorn.error")


def problem_loc(loc) -> tuple:
    """An error's location without the body union's tags (``("body", "one", "question")`` →
    ``("body", "question")``)."""
    loc = tuple(loc)
    if len(loc) > 1 and loc[0] == "body" and loc[1] in BODY_TAGS:
        return (loc[0], *loc[2:])
    return loc


def parse_queries(body: bytes) -> tuple[list[Query], bool]:
    """``(queries, batched)`` from a request body's bytes (JSON), validated once through
    :data:`~l2d_core.deploy.api_models.QueryBody`; a 422 naming the field otherwise."""
    try:
        body = BODY.validate_json(body)
    except ValidationError as exc:
        raise RequestValidationError([problem(body, e) for e in exc.errors()]) from None
    queries, batched = (body, True) if isinstance(body, list) else ([body], False)
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


def problem(body: bytes, error) -> dict:
    """A validation error of ``body`` as the API states it: ``loc`` from ``body`` on, without
    the union's tags; a body that is not JSON because it is not UTF-8 text says so."""
    if not body:
        return {"loc": ("body",), "msg": "Field required", "type": "missing"}
    if error["type"] == "json_invalid" and not utf8(body):
        return {"loc": ("body",), "msg": "the body is not UTF-8 text", "type": "json_invalid"}
    return {"loc": problem_loc(("body", *error["loc"])), "msg": error["msg"], "type": error["type"]}


def utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes gets 413 before it is read whole —
    a declared ``content-length`` at once, a streamed (chunked) body as soon as the bytes
    received pass the limit — and one that is not whole ``seconds`` after its headers came gets
    408 (a client that sends a body slowly, or never, holds no worker). The app then sees a
    disconnect, and what it would answer is dropped."""

    def __init__(self, app, limit: int, seconds: float = math.inf):
        self.app, self.limit, self.seconds = app, limit, seconds

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await self.refuse(send)
        seen, refused, whole = 0, False, False
        deadline = asyncio.get_running_loop().time() + self.seconds
        deadline = deadline if math.isfinite(deadline) else None

        async def counted():
            nonlocal seen, refused, whole
            if refused:
                return {"type": "http.disconnect"}
            if whole:  # after the body the app only listens for a disconnect: no deadline
                return await receive()
            try:  # a timeout in place, not a task per message (asyncio.wait_for's)
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                refused = True
                await self.refuse(send, 408, f"request body not received whole within {self.seconds:g} s")
                return {"type": "http.disconnect"}
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                whole = not message.get("more_body", False)
                if seen > self.limit:
                    refused = True
                    await self.refuse(send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded(message):
            if not refused:
                await send(message)

        await self.app(scope, counted, guarded)

    async def refuse(self, send, status: int = 413, detail: str | None = None):
        detail = detail or f"request body over {self.limit} bytes"
        await JSONResponse({"detail": detail}, status_code=status)({"type": "http"}, None, send)


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
        errors = [
            {
                "loc": list(problem_loc(e.get("loc", ("body",)))),
                "msg": str(e.get("msg", "")).removeprefix("Value error, "),
                "type": e.get("type", ""),
            }
            for e in exc.errors()
        ]
        return JSONResponse({"detail": errors}, status_code=422)

    @app.exception_handler(QueryError)
    async def _bad_query(request: Request, exc: QueryError):
        problem = {"loc": ["body", exc.field], "msg": str(exc), "type": "value_error"}
        return JSONResponse({"detail": [problem]}, status_code=422)

    @app.exception_handler(EndpointError)
    async def _endpoint(request: Request, exc: EndpointError):
        # a remote agent's failure, said as it is: 504 past its deadline, 502 for any other bad answer
        log.warning("%s: %s", request.url.path, exc)
        return JSONResponse({"detail": str(exc)}, status_code=exc.http_status)

    @app.exception_handler(Exception)
    async def _failed(request: Request, exc: Exception):
        log.error("routing failed on %s", request.url.path, exc_info=exc)  # the reason, for the operator
        return JSONResponse({"detail": "routing failed: the server log says why"}, status_code=500)

    def run(body, answer: bool):
        parsed, batched = parse_queries(body)
        qids = [q.qid for q in parsed] if parsed[0].qid is not None else None
        t0 = time.perf_counter()
        with lock, released_while_waiting(lock):  # let go while a remote endpoint is asked
            queries = router.texts([(q.question, q.context) for q in parsed], qids)
            out = router.answer_batch(queries, qids) if answer else router.route_batch(queries, qids)
        ms = 1000.0 * (time.perf_counter() - t0)
        for r in out:
            r["request_ms"] = ms
        # plain JSON already (``finite``): written as it is, not walked again by FastAPI's encoder
        return JSONResponse(finite(out if batched else out[0]))

    def endpoint(answer: bool):
        if any(spec.kind in ENDPOINT_KINDS for spec in router.specs.values()):
            # on a request thread, which lets the lock go while a remote endpoint is waited on
            async def asks(request: Request):
                return await run_in_threadpool(run, await request.body(), answer)

            return asks

        async def local(request: Request):  # every agent runs here: the request on the model thread
            body = await request.body()
            return await asyncio.wrap_future(model_executor().submit(run, body, answer))

        return local

    app.post(
        "/v1/route",
        summary="Which agent should answer (the agents are not asked)",
        responses={200: {"model": Routed | list[Routed]}, **RESPONSES},
        openapi_extra={"requestBody": REQUEST_BODY},
    )(endpoint(answer=False))
    app.post(
        "/v1/answer",
        summary="Route, then ask the chosen agent when it can answer new text",
        responses={200: {"model": Answered | list[Answered]}, **RESPONSES},
        openapi_extra={"requestBody": REQUEST_BODY},
    )(endpoint(answer=True))

    def openapi() -> dict:  # FastAPI's document, with the models the request body refers to
        if app.openapi_schema is None:
            FastAPI.openapi(app).setdefault("components", {}).setdefault("schemas", {}).update(BODY_MODELS)
        return app.openapi_schema

    app.openapi = openapi

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

    app.add_middleware(BodyLimit, limit=LIMITS["body_bytes"], seconds=LIMITS["body_seconds"])
    return app


def app_from_env() -> FastAPI:
    """uvicorn factory for worker processes: the artifact named by ``$L2D_ROUTER``."""
    path = os.environ.get(ROUTER_ENV)
    if not path:
        raise RuntimeError(f"set {ROUTER_ENV} to a router artifact folder (scripts/serve.py does)")
    threads = int(os.environ[THREADS_ENV]) if os.environ.get(THREADS_ENV) else None
    return create_app(load_router(path).warm_up(threads))  # models loaded before the first request


def finite(value):
    """``value`` with every non-finite float (a threshold of ±inf: ask everybody or nobody) as
    None: JSON has no infinity, and a response must stay JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value
