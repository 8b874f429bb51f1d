"""Sessions: one env per client, a cap on how many, and the reaping of idle ones.

A WebSocket connection owns one session for its lifetime (its handler closes it when the
socket goes quiet for ``idle_timeout``); an HTTP session lives until ``DELETE
/sessions/{id}`` or until the reaper finds it idle. Calls on one session are serialized
and the env code runs in a worker thread, so a slow env never blocks the others.

Example:
    >>> import asyncio, mage_envs
    >>> from mage_envs.server.protocol import ResetRequest, TextAction
    >>> async def episode():
    ...     sessions = SessionManager(max_sessions=1, idle_timeout=60, default_env="mage/KuhnPoker-v0")
    ...     session = sessions.open("ws")
    ...     first = await session.reset(ResetRequest(seed=0, env_kwargs={"seat": 0}))
    ...     step = await session.step(TextAction(message="<action>bet</action>"))
    ...     await sessions.close_all()
    ...     return first["observation"]["info"]["legal_actions"], step["done"], sessions.active
    >>> asyncio.run(episode())
    (['check', 'bet'], True, 0)
"""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from typing import Any, Literal

import gymnasium as gym
from starlette.concurrency import run_in_threadpool

from .catalog import error_reason, make_env, to_json
from .protocol import ResetRequest, ServerError, SessionState, TextAction

Kind = Literal["ws", "http"]


def observation_payload(
    obs: str, reward: float | None, terminated: bool, truncated: bool, info: dict[str, Any], env_id: str
) -> dict[str, Any]:
    """The ``data`` of an ``observation`` message (and the body of ``/reset``, ``/step``)."""
    terminated, truncated = bool(terminated), bool(truncated)
    return {
        "observation": {"prompt": obs, "terminated": terminated, "truncated": truncated, "info": to_json(info)},
        "reward": None if reward is None else to_json(float(reward)),
        "done": terminated or truncated,
        "metadata": {"env_id": env_id},
    }


class Session:
    """One client's env and its current episode."""

    def __init__(self, session_id: str, kind: Kind, default_env: str) -> None:
        self.id = session_id
        self.kind = kind
        self.default_env = default_env
        self.env: gym.Env | None = None
        self.env_id: str | None = None
        self.env_kwargs: dict[str, Any] = {}
        self.episode_id: str | None = None
        self.step_count = 0
        self.done = False
        self.closed = False
        self.lock = asyncio.Lock()
        self.last_active = time.monotonic()

    def _check_open(self) -> None:
        if self.closed:
            raise ServerError("SESSION_NOT_FOUND", f"session {self.id} is closed")
        self.last_active = time.monotonic()

    async def reset(self, request: ResetRequest) -> dict[str, Any]:
        """Make (or keep) the env the request names, then ``env.reset(seed, options)``."""
        async with self.lock:
            self._check_open()
            env_id = request.env_id or self.env_id or self.default_env
            same_env = env_id == self.env_id
            kwargs = request.env_kwargs if request.env_kwargs is not None else (self.env_kwargs if same_env else {})
            self.episode_id = None
            if self.env is None or not same_env or kwargs != self.env_kwargs:
                env = await run_in_threadpool(make_env, env_id, kwargs)
                self._close_env()
                self.env, self.env_id, self.env_kwargs = env, env_id, kwargs
            try:
                obs, info = await run_in_threadpool(self.env.reset, seed=request.seed, options=request.options)
            except Exception as error:
                raise ServerError("VALIDATION_ERROR", f"reset failed: {error_reason(error)}") from error
            self.episode_id = request.episode_id or uuid.uuid4().hex
            self.step_count, self.done = 0, False
            self.last_active = time.monotonic()
            return observation_payload(obs, None, False, False, info, env_id)

    async def step(self, action: TextAction) -> dict[str, Any]:
        """``env.step(action.message)``."""
        async with self.lock:
            self._check_open()
            if self.env is None or self.episode_id is None or self.env_id is None:
                raise ServerError("NO_EPISODE", "no episode in this session yet: send reset first")
            try:
                obs, reward, terminated, truncated, info = await run_in_threadpool(self.env.step, action.message)
            except Exception as error:  # e.g. stepping an episode that is over
                raise ServerError("EXECUTION_ERROR", f"step failed: {error_reason(error)}") from error
            self.step_count += 1
            self.done = bool(terminated or truncated)
            self.last_active = time.monotonic()
            return observation_payload(obs, float(reward), terminated, truncated, info, self.env_id)

    def state(self) -> dict[str, Any]:
        """The session's :class:`~mage_envs.server.protocol.SessionState` as a dict."""
        self._check_open()
        return SessionState(
            session_id=self.id,
            env_id=self.env_id,
            env_kwargs=to_json(self.env_kwargs),
            episode_id=self.episode_id,
            step_count=self.step_count,
            done=self.done,
        ).model_dump()

    def _close_env(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None

    async def close(self) -> None:
        """Close the env once the call in progress, if any, has finished."""
        async with self.lock:
            self.closed = True
            self._close_env()


class SessionManager:
    """At most ``max_sessions`` sessions; HTTP sessions idle for ``idle_timeout`` s are reaped."""

    def __init__(self, max_sessions: int, idle_timeout: float, default_env: str) -> None:
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.default_env = default_env
        self._sessions: dict[str, Session] = {}

    @property
    def active(self) -> int:
        """How many sessions are open."""
        return len(self._sessions)

    def open(self, kind: Kind) -> Session:
        """A new session, or ``CAPACITY_REACHED`` when the server is full."""
        if len(self._sessions) >= self.max_sessions:
            raise ServerError(
                "CAPACITY_REACHED",
                f"the server is full: {len(self._sessions)} of {self.max_sessions} sessions in use; close one, "
                f"wait for idle ones to expire ({self.idle_timeout:g} s) or start it with a larger --max-sessions",
            )
        session = Session(secrets.token_urlsafe(16), kind, self.default_env)
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str) -> Session:
        """The open HTTP session ``session_id`` (a WebSocket's session is its connection's alone)."""
        session = self._sessions.get(session_id)
        if session is None or session.kind != "http":
            raise ServerError("SESSION_NOT_FOUND", f"no open HTTP session {session_id!r}: it was closed or reaped")
        return session

    async def close(self, session_id: str) -> None:
        """Close and forget a session (no-op if it is gone already)."""
        session = self._sessions.pop(session_id, None)
        if session is not None:
            await session.close()

    async def close_all(self) -> None:
        """Close every session (server shutdown)."""
        for session_id in list(self._sessions):
            await self.close(session_id)

    async def reap(self) -> None:
        """Close the HTTP sessions idle for longer than ``idle_timeout``."""
        now = time.monotonic()
        for session in list(self._sessions.values()):
            if session.kind == "http" and not session.lock.locked() and now - session.last_active > self.idle_timeout:
                await self.close(session.id)

    async def reap_forever(self) -> None:
        """Call :meth:`reap` every quarter of the idle timeout (at most every 30 s)."""
        while True:
            await asyncio.sleep(min(self.idle_timeout / 4, 30.0))
            await self.reap()
