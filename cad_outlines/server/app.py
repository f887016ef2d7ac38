"""The FastAPI application: routes, the API key, one log line per request, OpenAI error objects.

Routes: ``GET /health`` (no key needed), ``GET /v1/models``, ``GET /v1/models/{id}``,
``POST /v1/chat/completions``. Every error, including an unknown route, a wrong method and
a bug, is answered with ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import sys
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from .engine import Engine, Job, Outcome, api_error, check_queue
from .protocol import (APIError, ChatRequest, chunk, completion, load_json, new_id, parse_chat_request, sse,
                       total_usage)

#: How often a request waiting for its answer checks that its client is still there.
DISCONNECT_POLL_SECONDS = 0.25
#: The status logged for a request whose client left before the answer (nginx's convention).
CLIENT_CLOSED = 499

log = logging.getLogger("cad_outlines.server")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def create_app(engine: Engine, *, api_key: str | None = None,
               log_line: Callable[[str], None] = _stderr) -> Any:
    """The ASGI application serving ``engine`` (an :class:`~.engine.Engine`).

    ``api_key``: when set, every route but ``/health`` needs ``Authorization: Bearer KEY``.
    ``log_line`` receives one line per request: method, path, status, milliseconds.
    """

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        engine.close()  # after uvicorn has let the requests in flight finish

    app = FastAPI(title="cad-outlines", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(APIError)
    async def _api_error(_request: Request, err: APIError) -> JSONResponse:
        return JSONResponse(err.body(), status_code=err.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, err: StarletteHTTPException) -> JSONResponse:
        if err.status_code == 404:
            error = APIError(404, f"no route {request.method} {request.url.path}", code="not_found")
        elif err.status_code == 405:
            error = APIError(405, f"{request.method} is not allowed on {request.url.path}",
                             code="method_not_allowed")
        else:
            error = APIError(err.status_code, str(err.detail))
        return JSONResponse(error.body(), status_code=error.status)

    @app.exception_handler(Exception)
    async def _bug(_request: Request, err: Exception) -> JSONResponse:
        error = api_error(err)  # logs the traceback
        return JSONResponse(error.body(), status_code=error.status)

    def model_card() -> dict[str, Any]:
        return {"id": engine.model_id, "object": "model", "created": 0, "owned_by": "cad-outlines"}

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": engine.model_id, "pending": engine.pending}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str) -> dict[str, Any]:
        if model_id != engine.model_id:
            raise _unknown_model(model_id, engine.model_id, "model")
        return model_card()

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        request_body = parse_chat_request(load_json(await request.body()))
        if request_body.model != engine.model_id:
            raise _unknown_model(request_body.model, engine.model_id, "model")
        jobs = _submit(engine, request_body)
        streaming = False
        try:
            first = await _next_event(request, jobs[0])
            if first is None:
                return Response(status_code=CLIENT_CLOSED)
            if first[0] == "error":
                raise first[1]
            if request_body.stream:
                streaming = True  # from here the stream's own clean-up cancels the decodes
                return StreamingResponse(_sse(jobs, first, request_body, engine.model_id),
                                         media_type="text/event-stream",
                                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
            outcomes = []
            for job in jobs:  # the non-streaming answer waits for the end of every decode
                event = first if job is jobs[0] else await _next_event(request, job)
                while event is not None and event[0] == "chunk":
                    event = await _next_event(request, job)
                if event is None:
                    return Response(status_code=CLIENT_CLOSED)
                if event[0] == "error":
                    raise event[1]
                outcomes.append(event[1])
            if len(outcomes) < request_body.n:  # greedy: one decode answers every choice
                outcomes *= request_body.n
            return JSONResponse(completion(new_id(), engine.model_id,
                                           [(o.content, o.finish_reason, o.cad) for o in outcomes],
                                           total_usage([o.usage for o in outcomes])))
        finally:
            if not streaming:  # an answer, an error, a client gone: no decode of this request goes on
                for job in jobs:
                    job.cancel.set()

    return _AccessLog(_Auth(app, api_key), log_line)


def _unknown_model(name: str, served: str, param: str) -> APIError:
    return APIError(404, f"the model {name!r} does not exist here; this server serves {served!r}",
                    param=param, code="model_not_found")


async def _next_event(request: Request, job: Job) -> tuple[str, Any] | None:
    """The job's next event, or ``None`` (and the job cancelled) once the client has gone."""
    getter = asyncio.ensure_future(job.events.get())
    try:
        while True:
            # By the clock, not only when no event comes: a stream of events must not
            # hide a client that has left.
            if time.monotonic() - job.checked_at >= DISCONNECT_POLL_SECONDS:
                job.checked_at = time.monotonic()
                if await request.is_disconnected():
                    job.cancel.set()
                    return None
            done, _ = await asyncio.wait({getter}, timeout=DISCONNECT_POLL_SECONDS)
            if done:
                return getter.result()
    finally:
        if not getter.done():
            getter.cancel()


def _submit(engine: Engine, request: ChatRequest) -> list[Job]:
    """Queue the decodes of the request's choices (:meth:`ChatRequest.choices`): all of
    them, or none and a 429 when they do not all fit the queue."""
    decodes = request.choices()
    check_queue(engine.pending + len(decodes) - 1, engine.max_queue)
    return [engine.submit(choice) for choice in decodes]


async def _sse(jobs: list[Job], first: tuple[str, Any], body: ChatRequest, model: str) -> AsyncIterator[bytes]:
    """The stream of ``chat.completion.chunk`` events, ending ``data: [DONE]``.

    Choices stream one after another (the engine decodes them in turn), each chunk naming
    its choice's ``index``; a greedy request's one decode is sent as every choice.
    Starlette cancels this generator when the client disconnects; ``finally`` then sets
    the jobs' cancel flags, so the decodes stop at their next step.
    """
    request_id = new_id()
    outcomes: list[Outcome] = []
    try:
        for index in range(body.n):
            yield sse(chunk(request_id, model, {"role": "assistant", "content": ""}, index=index))
            if index >= len(jobs):  # greedy: the first choice again, as one chunk
                outcome = outcomes[0]
                if outcome.content:
                    yield sse(chunk(request_id, model, {"content": outcome.content}, index=index))
            else:
                event = first if index == 0 else await jobs[index].events.get()
                while event[0] == "chunk":
                    yield sse(chunk(request_id, model, {"content": event[1]}, index=index))
                    event = await jobs[index].events.get()
                if event[0] == "error":  # past the headers, an error can only be an event
                    yield sse(event[1].body())
                    break
                outcome = event[1]
            outcomes.append(outcome)
            extra = {"cad": outcome.cad} if outcome.cad is not None else {}
            yield sse(chunk(request_id, model, {}, outcome.finish_reason, index=index, **extra))
        else:
            if body.include_usage:
                yield sse({**chunk(request_id, model, {}), "choices": [],
                           "usage": total_usage([o.usage for o in outcomes])})
        yield sse("[DONE]")
    finally:
        for job in jobs:
            job.cancel.set()


class _Auth:
    """ASGI middleware: with an API key, every route but ``/health`` needs ``Bearer KEY``."""

    def __init__(self, app: Any, api_key: str | None):
        self.app = app
        self.key = api_key.encode("utf-8") if api_key else None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if self.key is None or scope["type"] != "http" or scope["path"] == "/health":
            return await self.app(scope, receive, send)
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        scheme, _, token = given.partition(b" ")
        # Constant-time comparison: the time taken says nothing about how much of the key matched.
        if scheme.lower() == b"bearer" and hmac.compare_digest(token.strip(), self.key):
            return await self.app(scope, receive, send)
        message = ("missing API key: send the header 'Authorization: Bearer KEY'" if not given
                   else "incorrect API key")
        error = APIError(401, message, code="invalid_api_key")
        await JSONResponse(error.body(), status_code=401)(scope, receive, send)


class _AccessLog:
    """ASGI middleware: one line per request, ``METHOD PATH STATUS MS``."""

    def __init__(self, app: Any, log_line: Callable[[str], None]):
        self.app, self.log_line = app, log_line

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start = time.perf_counter()
        status = [CLIENT_CLOSED]  # no answer started: the client left first

        async def send_status(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            elapsed = (time.perf_counter() - start) * 1000
            self.log_line(f"{scope['method']} {scope['path']} {status[0]} {elapsed:.0f} ms")
