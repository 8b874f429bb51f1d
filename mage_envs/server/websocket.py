"""The WebSocket session: OpenEnv's ``reset`` / ``step`` / ``state`` / ``close`` messages.

Each message gets one answer (``observation``, ``state`` or ``error``). A bad message gets
an ``error`` answer and the session goes on; ``close``, a disconnect (however it comes:
a closed socket, a killed client, or a peer that misses the server's pings, which uvicorn
drops after ``ws_ping_timeout``) or ``idle_timeout`` seconds without a message end it.

Example (no socket needed to answer one message):
    >>> import asyncio, mage_envs
    >>> from mage_envs.server.session import SessionManager
    >>> session = SessionManager(1, 60, "mage/KuhnPoker-v0").open("ws")
    >>> asyncio.run(answer(session, '{"type": "dance"}'))["data"]["code"]
    'UNKNOWN_TYPE'
    >>> asyncio.run(answer(session, '{"type": "step", "data": {"message": "bet"}}'))["data"]["code"]
    'NO_EPISODE'
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic import ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect

from .protocol import ResetRequest, ServerError, TextAction, WSMessage, explain
from .security import client_of
from .session import Session, SessionManager

#: Close codes: 1001 going away (idle), 1013 try again later (server full).
IDLE_CLOSE, FULL_CLOSE = 1001, 1013


async def _dispatch(session: Session, raw: str) -> dict[str, Any] | None:
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError) as error:
        raise ServerError("INVALID_JSON", f"the message is not JSON: {error}") from None
    try:
        message = WSMessage.model_validate(parsed)
        if message.type == "reset":
            return {"type": "observation", "data": await session.reset(ResetRequest.model_validate(message.data or {}))}
        if message.type == "step":
            return {"type": "observation", "data": await session.step(TextAction.model_validate(message.data or {}))}
    except ValidationError as error:
        raise ServerError("VALIDATION_ERROR", explain(error.errors())) from None
    if message.type == "state":
        return {"type": "state", "data": session.state()}
    if message.type == "close":
        return None
    raise ServerError("UNKNOWN_TYPE", f"unknown message type {message.type!r}: use reset, step, state or close")


async def answer(session: Session, raw: str) -> dict[str, Any] | None:
    """The answer to one raw message (``None`` for ``close``); errors become ``error`` answers."""
    try:
        return await _dispatch(session, raw)
    except ServerError as error:
        return {"type": "error", "data": error.payload()}


async def _receive(websocket: WebSocket, timeout: float) -> str | None:
    """The next text (or UTF-8 binary) message; ``None`` when the client has gone."""
    message = await asyncio.wait_for(websocket.receive(), timeout)
    if message["type"] == "websocket.disconnect":
        return None
    if message.get("text") is not None:
        return message["text"]
    return message.get("bytes", b"").decode("utf-8", errors="replace")


async def run_session(websocket: WebSocket, sessions: SessionManager) -> None:
    """Accept the socket, open its session and answer its messages until it ends."""
    await websocket.accept()
    try:
        session = sessions.open("ws", client_of(websocket))
    except ServerError as error:
        await websocket.send_json({"type": "error", "data": error.payload()})
        await websocket.close(FULL_CLOSE)
        return
    try:
        while True:
            try:
                raw = await _receive(websocket, sessions.idle_timeout)
            except asyncio.TimeoutError:
                await sessions.close(session.id)
                expired = ServerError("SESSION_NOT_FOUND", f"session closed after {sessions.idle_timeout:g} s idle")
                await websocket.send_json({"type": "error", "data": expired.payload()})
                await websocket.close(IDLE_CLOSE)
                return
            if raw is None:
                return
            reply = await answer(session, raw)
            if reply is None:
                await websocket.close()
                return
            await websocket.send_json(reply)
    except WebSocketDisconnect:
        return
    finally:
        await sessions.close(session.id)
