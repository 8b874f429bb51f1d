"""``create_app``: the registered text envs over OpenEnv's HTTP and WebSocket protocol.

Routes: ``GET /health`` (open), ``GET /schema``, ``WS /ws`` (one session per connection),
and HTTP sessions ``POST /reset``, ``POST /step``, ``GET /state``, ``DELETE
/sessions/{id}``. See ``docs/server.md``.

Example (routes only; serving needs uvicorn, see :mod:`mage_envs.server.run`):
    >>> app = create_app(ServerSettings(max_sessions=4))
    >>> sorted(route.path for route in app.routes)
    ['/health', '/reset', '/schema', '/sessions/{session_id}', '/state', '/step', '/ws']
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request, Response, WebSocket
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from .catalog import describe, make_env
from .protocol import (
    HttpResetRequest,
    HttpStepRequest,
    ServerError,
    SessionState,
    TextAction,
    TextObservation,
    explain,
)
from .security import BearerToken, BodySizeLimit, client_of
from .session import SessionManager
from .settings import ServerSettings
from .websocket import run_session


def _validation_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    if any(item["type"] == "json_invalid" for item in error.errors()):
        return ServerError("INVALID_JSON", "the request body is not valid JSON").response()
    return ServerError("VALIDATION_ERROR", explain(error.errors())).response()


def _http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, StarletteHTTPException)
    if error.status_code == 400:  # FastAPI could not parse the body: nesting too deep, a 5,000-digit number...
        return ServerError("INVALID_JSON", "the request body is not valid JSON").response()
    return JSONResponse({"detail": error.detail}, status_code=error.status_code, headers=error.headers)


def _server_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, ServerError)
    return error.response()


def _parse_kwargs(raw: str | None) -> dict[str, Any]:
    try:
        kwargs = json.loads(raw) if raw else {}
    except (ValueError, RecursionError):
        raise ServerError("INVALID_JSON", "env_kwargs must be a JSON object") from None
    if not isinstance(kwargs, dict):
        raise ServerError("VALIDATION_ERROR", "env_kwargs must be a JSON object")
    return kwargs


def create_app(settings: ServerSettings | None = None) -> FastAPI:
    """A FastAPI app serving every registered ``mage/*`` text env under ``settings``."""
    settings = settings or ServerSettings()
    try:  # fail now rather than at the first reset
        make_env(settings.default_env, {}).close()
    except ServerError as error:
        raise ValueError(f"default_env: {error.message}") from None
    sessions = SessionManager(
        settings.max_sessions,
        settings.idle_timeout,
        settings.default_env,
        http_idle_timeout=settings.http_idle_timeout,
        max_per_client=settings.max_sessions_per_client,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        reaper = asyncio.create_task(sessions.reap_forever())
        yield
        reaper.cancel()
        await sessions.close_all()

    app = FastAPI(title="mage_envs", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    if settings.token is not None:
        app.add_middleware(BearerToken, token=settings.token)  # added last: runs first
    app.add_exception_handler(ServerError, _server_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {
            "status": "healthy",
            "active_sessions": sessions.active,
            "max_sessions": sessions.max_sessions,
            "ws_sessions": sessions.count("ws"),
            "http_sessions": sessions.count("http"),
        }

    @app.get("/schema")
    async def schema(env_id: str | None = None, env_kwargs: str | None = None) -> dict[str, Any]:
        described = await run_in_threadpool(describe, env_id or settings.default_env, _parse_kwargs(env_kwargs))
        return {
            "action": TextAction.model_json_schema(),
            "observation": TextObservation.model_json_schema(),
            "state": SessionState.model_json_schema(),
            **described,
        }

    @app.post("/reset")
    async def reset(request: HttpResetRequest, http: Request) -> dict[str, Any]:
        session = sessions.get(request.session_id) if request.session_id else sessions.open("http", client_of(http))
        try:
            payload = await session.reset(request)
        except ServerError:
            if not request.session_id:  # a session whose first reset failed holds no slot
                await sessions.close(session.id)
            raise
        payload["metadata"]["session_id"] = session.id
        return payload

    @app.post("/step")
    async def step(request: HttpStepRequest) -> dict[str, Any]:
        if request.session_id is None:
            raise ServerError(
                "NO_EPISODE",
                "POST /step needs the session_id that POST /reset answered (in metadata.session_id): a game is "
                "played in a session, a stateless step has no episode to act on (or use the WebSocket at /ws)",
            )
        payload = await sessions.get(request.session_id).step(request.action)
        payload["metadata"]["session_id"] = request.session_id
        return payload

    @app.get("/state")
    async def state(session_id: str) -> dict[str, Any]:
        return sessions.get(session_id).state()

    @app.delete("/sessions/{session_id}", status_code=204)
    async def close(session_id: str) -> Response:
        await sessions.close(sessions.get(session_id).id)
        return Response(status_code=204)

    @app.websocket("/ws")
    async def ws_session(websocket: WebSocket) -> None:
        await run_session(websocket, sessions)

    return app
