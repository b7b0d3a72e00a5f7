"""The HTTP app: ``GET /v1/models``, ``GET /v1/models/{id}`` and ``POST /v1/chat/completions``.

Thin over furnace: the model ids come from :class:`~furnace.server.catalogue.Catalogue`, the answer
from :func:`furnace.adapters.mlflow_answers.traced_answer` (the path ``furnace agent answer`` takes) on
the runtime's model, so every call is in the call ledger under the response's id as ``run_id`` and each
answer is an MLflow trace (written in the background: the response never waits for it). The answer
runs on a worker thread (the store and the model client block).

With ``FURNACE_SERVE_KEY`` set, every ``/v1`` request needs ``Authorization: Bearer <key>`` (401
otherwise). Errors are OpenAI-style bodies (:class:`~furnace.server.wire.ApiError`).
"""

from __future__ import annotations

import copy
import hmac
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from furnace.adapters.mlflow_answers import AnswerTraces, traced_answer
from furnace.arena.speaker import ContextBuilder, token_aware_context
from furnace.domain.errors import (
    FurnaceError,
    InputError,
    LineageError,
    LLMError,
    LLMRateLimit,
    LLMTimeout,
    StoreError,
)
from furnace.fusion.answers import AgentAnswer
from furnace.runtime import Runtime
from furnace.server import wire
from furnace.server.catalogue import Catalogue
from furnace.server.wire import ApiError

log = logging.getLogger("furnace.server")


def _answer_error(err: FurnaceError) -> ApiError:
    """An error met while answering, as the HTTP error a client is shown (one line, no secret)."""
    message = str(err).splitlines()[0] if str(err) else err.__class__.__name__
    if isinstance(err, LLMRateLimit):
        return ApiError(429, f"the model is rate limited: {message}", type="rate_limit_error", code="rate_limited")
    if isinstance(err, LLMTimeout):
        return ApiError(504, f"the model timed out: {message}", type="api_error", code="model_timeout")
    if isinstance(err, LLMError):
        return ApiError(502, f"the model failed: {message}", type="api_error", code="model_error")
    if isinstance(err, InputError):
        return ApiError(400, message, param=err.field, code="invalid_value")
    if isinstance(err, LineageError):
        return ApiError(409, message, type="invalid_request_error", code="lineage_error")
    if isinstance(err, StoreError):
        return ApiError(503, message, type="api_error", code="store_busy")
    return ApiError(500, message, type="server_error", code=None)


def create_app(runtime: Runtime, *, key: str | None = None, trace: bool = True) -> FastAPI:
    """The OpenAI-compatible app on ``runtime``. ``key``: the bearer key clients must send (default
    ``FURNACE_SERVE_KEY``; None or empty: no key asked). ``trace``: each answer traced to MLflow (in the
    background, see :mod:`furnace.adapters.mlflow_answers`). Pre-warms every agent when it starts."""
    if key is None and runtime.settings.serve_key is not None:
        key = runtime.settings.serve_key.get_secret_value()
    catalogue = Catalogue(runtime)
    traces = AnswerTraces(runtime.settings.tracking_uri) if trace else None
    # earlier turns fitted to the configured model's context, counted by its own tokenizer (extractive compression)
    context = token_aware_context(context_limit=runtime.settings.context_limit, count=runtime.token_counter)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(catalogue.warm_all)
        yield
        if traces is not None:
            await run_in_threadpool(traces.close)  # the traces of the last answers written before it stops

    app = FastAPI(title="furnace", summary="furnace agents over the OpenAI protocol", lifespan=lifespan)
    app.state.catalogue = catalogue
    app.state.traces = traces

    @app.exception_handler(ApiError)
    async def api_error(request: Request, err: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if err.status == 401 else None
        return JSONResponse(err.body(), status_code=err.status, headers=headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, err: StarletteHTTPException) -> JSONResponse:
        code = "not_found" if err.status_code == 404 else None
        body = ApiError(err.status_code, str(err.detail), code=code).body()
        return JSONResponse(body, status_code=err.status_code)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, err: Exception) -> JSONResponse:
        log.error("internal error on %s: %s", request.url.path, err.__class__.__name__)
        body = ApiError(500, f"internal error: {err.__class__.__name__}", type="server_error").body()
        return JSONResponse(body, status_code=500)

    def bearer_key(request: Request) -> None:
        if not key:
            return
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if not given:
            raise _unauthorized("You didn't provide an API key (Authorization: Bearer <FURNACE_SERVE_KEY>)")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), key.encode()):
            raise _unauthorized("Incorrect API key provided")

    v1 = APIRouter(prefix="/v1", dependencies=[Depends(bearer_key)])

    @v1.get("/models")
    def list_models() -> dict[str, object]:
        return {"object": "list", "data": catalogue.models()}

    @v1.get("/models/{model_id:path}")
    def get_model(model_id: str) -> dict[str, object]:
        for model in catalogue.models():
            if model["id"] == model_id:
                return model
        raise wire.model_not_found(model_id)

    @v1.post("/chat/completions", response_model=None)
    async def chat_completions(request: Request) -> JSONResponse | StreamingResponse:
        chat = wire.parse_chat_request(await request.body())
        cid = wire.completion_id()
        answer = await run_in_threadpool(_answer, catalogue, chat, cid, context, traces)
        if chat.stream:
            events = wire.stream_events(cid, chat.model, answer, include_usage=chat.include_usage)
            return StreamingResponse(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        return JSONResponse(wire.completion(cid, chat.model, answer))

    app.include_router(v1)
    return app


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, message, code="invalid_api_key")


def _answer(
    catalogue: Catalogue, chat: wire.ChatRequest, cid: str, context: ContextBuilder, traces: AnswerTraces | None
) -> AgentAnswer:
    """Resolve the model id and answer (on a worker thread), traced as ``furnace agent answer`` is (the
    trace is written in the background, tagged with the response id); furnace errors become API errors."""
    runtime = catalogue.runtime
    try:
        speaker = catalogue.resolve(chat.model)
    except InputError:  # NotFound included: an id that names nothing
        raise wire.model_not_found(chat.model) from None
    except FurnaceError as err:
        raise _answer_error(err) from None
    try:
        answer = traced_answer(
            traces,
            speaker,
            chat.message,
            runtime.llm.for_run(cid),
            model_id=chat.model,
            tags={"furnace.response_id": cid, "furnace.face": "serve"},
            store=runtime.store,
            cache=runtime.synthesis_cache,
            history=chat.history,
            context=context,
            seed=chat.seed,
            embedder=runtime.embedder,  # a committee routes by meaning, as `furnace agent answer` does
        )
    except FurnaceError as err:
        raise _answer_error(err) from None
    log.info(
        "%s answered as %s (%s): %d call(s), %d tokens",
        cid,
        chat.model,
        answer.model,
        answer.calls,
        answer.usage.total_tokens,
    )
    return answer


def build_server(
    runtime: Runtime,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    key: str | None = None,
    log_level: str = "info",
    trace: bool = True,
) -> uvicorn.Server:
    """A uvicorn server for :func:`create_app` on ``host:port`` (``run()`` it; port 0 picks a free one), its
    log (uvicorn's, and one ``furnace.server`` line per answer) at ``log_level``; ``trace``: answers traced
    to MLflow."""
    log_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    log_config["loggers"]["furnace.server"] = {"handlers": ["default"], "level": log_level.upper(), "propagate": False}
    app = create_app(runtime, key=key, trace=trace)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, log_config=log_config, lifespan="on")
    return uvicorn.Server(config)
