"""ASGI middlewares: a bearer token on every route but the open ones, and a body size cap.

Both answer before the application reads anything: a wrong token gets 401 (a WebSocket
handshake too), a body over the cap 413.

Example:
    >>> from starlette.applications import Starlette
    >>> app = BodySizeLimit(BearerToken(Starlette(), token="s3cret"), max_bytes=1 << 20)
    >>> token_matches("Bearer s3cret", "s3cret"), token_matches("bearer guess", "s3cret"), token_matches(None, "s3cret")
    (True, False, False)
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import HTTPConnection
from starlette.websockets import WebSocket

from .protocol import ServerError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def token_matches(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header value is ``Bearer <token>`` (compared in constant time)."""
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


def client_of(connection: HTTPConnection) -> str:
    """The client's address, which ``--max-sessions-per-client`` counts by (``""`` if unknown)."""
    return connection.client.host if connection.client else ""


class BearerToken:
    """Require ``Authorization: Bearer <token>`` on HTTP and WebSocket requests, but ``open_paths``."""

    def __init__(self, app: ASGIApp, token: str, open_paths: frozenset[str] = frozenset({"/health"})) -> None:
        self.app = app
        self.token = token
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in self.open_paths:
            return await self.app(scope, receive, send)
        header = Headers(scope=scope).get("authorization")
        if token_matches(header, self.token):
            return await self.app(scope, receive, send)
        message = "wrong bearer token" if header else "this server needs a token: send 'Authorization: Bearer <token>'"
        response = ServerError("UNAUTHORIZED", message).response()
        if scope["type"] == "http":
            return await response(scope, receive, send)
        websocket = WebSocket(scope, receive, send)
        if "websocket.http.response" in scope.get("extensions", {}):
            return await websocket.send_denial_response(response)
        await websocket.close(code=1008)  # servers without the denial extension answer 403


class BodySizeLimit:
    """Answer 413 to an HTTP request whose body is larger than ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        too_large = ServerError("PAYLOAD_TOO_LARGE", f"the request body is larger than {self.max_bytes} bytes")
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return await too_large.response()(scope, receive, send)
        received: list[Message] = []
        size, more = 0, True
        while more:
            message = await receive()
            received.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                return await too_large.response()(scope, receive, send)
            more = message.get("more_body", False)

        async def replay() -> Message:
            return received.pop(0) if received else await receive()

        await self.app(scope, replay, send)
