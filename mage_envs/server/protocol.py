"""The wire format: OpenEnv's messages, with a text action and a text observation.

HTTP bodies and WebSocket ``data`` use the same models. A WebSocket message is
``{"type": "reset" | "step" | "state" | "close", "data": {...}}``; the answer is
``{"type": "observation" | "state" | "error", "data": {...}}``. An observation payload is
``{"observation": {"prompt", "terminated", "truncated", "info"}, "reward", "done",
"metadata"}``, which OpenEnv's ``GenericEnvClient`` reads as a ``StepResult``.

Example:
    >>> ResetRequest.model_validate({"env_id": "mage/KuhnPoker-v0", "seed": 3}).seed
    3
    >>> TextAction(message="<action>bet</action>").model_dump()
    {'message': '<action>bet</action>', 'metadata': {}}
    >>> ServerError("UNKNOWN_ENV", "no such id").status
    404
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import JSONResponse

#: HTTP status of each error code; WebSocket errors carry the code only.
STATUS: dict[str, int] = {
    "INVALID_JSON": 400,
    "UNKNOWN_TYPE": 400,
    "UNAUTHORIZED": 401,
    "UNKNOWN_ENV": 404,
    "SESSION_NOT_FOUND": 404,
    "NO_EPISODE": 409,
    "EXECUTION_ERROR": 409,
    "PAYLOAD_TOO_LARGE": 413,
    "VALIDATION_ERROR": 422,
    "FACTORY_ERROR": 422,
    "CLIENT_LIMIT": 429,
    "CAPACITY_REACHED": 503,
}


class ServerError(Exception):
    """A request the server refuses: an error code (a key of :data:`STATUS`) and a sentence."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = STATUS[code]

    def payload(self) -> dict[str, str]:
        """``{"code": ..., "message": ...}``: the ``data`` of a WebSocket error message."""
        return {"code": self.code, "message": self.message}

    def response(self) -> JSONResponse:
        """The HTTP answer: ``{"detail": message, "code": code}`` with the code's status."""
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else None
        return JSONResponse({"detail": self.message, "code": self.code}, status_code=self.status, headers=headers)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ResetRequest(_Strict):
    """Start an episode; ``env_id`` / ``env_kwargs`` choose (or change) the session's env."""

    seed: int | None = Field(default=None, ge=0, lt=2**63, description="seed for env.reset")
    options: dict[str, Any] | None = Field(default=None, description='env.reset options, e.g. {"instance": 7}')
    env_id: str | None = Field(default=None, max_length=200, description="a registered mage/* text env id")
    env_kwargs: dict[str, Any] | None = Field(default=None, description="gym.make keyword arguments")
    episode_id: str | None = Field(default=None, max_length=255, description="your name for the episode")


class HttpResetRequest(ResetRequest):
    """``POST /reset``: without ``session_id`` it opens a new HTTP session."""

    session_id: str | None = Field(default=None, max_length=64)


class TextAction(_Strict):
    """The agent's answer: whatever the model wrote (the env clips it at 8,192 characters)."""

    message: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class HttpStepRequest(_Strict):
    """``POST /step`` on an HTTP session (``None``: OpenEnv's stateless step, refused with a reason)."""

    session_id: str | None = Field(default=None, max_length=64)
    action: TextAction


class TextObservation(_Strict):
    """What ``reset`` and ``step`` observe: the prompt, the episode flags and ``info``."""

    prompt: str
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class SessionState(_Strict):
    """``state``: which env the session holds and how far its episode is."""

    session_id: str
    env_id: str | None
    env_kwargs: dict[str, Any]
    episode_id: str | None
    step_count: int
    done: bool


class WSMessage(_Strict):
    """One client message on the WebSocket."""

    type: str
    data: dict[str, Any] | None = None


def explain(errors: Sequence[Any]) -> str:
    """One readable line for pydantic's ``errors()``, e.g. ``"seed: Input should be greater than or equal to 0"``."""
    return "; ".join(f"{'.'.join(str(p) for p in item['loc']) or 'body'}: {item['msg']}" for item in errors)
