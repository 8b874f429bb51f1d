"""Sessions: one env per client, a cap on how many, and who yields when the server is full.

A WebSocket connection owns one session for its lifetime: its handler closes it when the
socket drops (a frozen or cut-off peer misses the server's pings and is dropped too) or
goes quiet for ``idle_timeout``. An HTTP session is a lease: it lives until ``DELETE
/sessions/{id}``, until ``http_idle_timeout`` s without a request, or until a new session
needs its slot. So a client that never closes cannot lock others out: when the server is
full, or a client is at ``max_per_client``, the least recently used HTTP session that is
not in a call makes room. Calls on one session are serialized and the env code runs in a
worker thread, so a slow env never blocks the others.

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
from collections import OrderedDict
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

    def __init__(self, session_id: str, kind: Kind, default_env: str, client: str = "") -> None:
        self.id = session_id
        self.kind = kind
        self.client = client
        self.default_env = default_env
        self.env: gym.Env | None = None
        self.env_id: str | None = None
        self.env_kwargs: dict[str, Any] = {}
        self.episode_id: str | None = None
        self.step_count = 0
        self.done = False
        self.closed: str | None = None  # why, once closed
        self.lock = asyncio.Lock()
        self.last_active = time.monotonic()

    def _check_open(self) -> None:
        if self.closed is not None:
            raise ServerError("SESSION_NOT_FOUND", f"session {self.id} {self.closed}")
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

    def close_now(self, reason: str) -> None:
        """Close the env at once: only for a session that is not in a call."""
        assert not self.lock.locked(), "close_now during a call"
        self.closed = reason
        self._close_env()

    async def close(self, reason: str = "was closed") -> None:
        """Close the env once the call in progress, if any, has finished."""
        async with self.lock:
            self.closed = reason
            self._close_env()


#: How many ended HTTP session ids are remembered, to say why a late request finds none.
_REMEMBERED = 4096


class SessionManager:
    """At most ``max_sessions`` sessions, ``max_per_client`` per client address (``None``: no cap).

    HTTP sessions idle for ``http_idle_timeout`` s are reaped, and one makes room (least
    recently used first) when a new session would be refused.
    """

    def __init__(
        self,
        max_sessions: int,
        idle_timeout: float,
        default_env: str,
        *,
        http_idle_timeout: float | None = None,
        max_per_client: int | None = None,
    ) -> None:
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.http_idle_timeout = idle_timeout if http_idle_timeout is None else http_idle_timeout
        self.max_per_client = max_per_client
        self.default_env = default_env
        self._sessions: dict[str, Session] = {}
        self._ended: OrderedDict[str, str] = OrderedDict()  # HTTP session id -> why it ended

    @property
    def active(self) -> int:
        """How many sessions are open."""
        return len(self._sessions)

    def count(self, kind: Kind) -> int:
        """How many sessions of ``kind`` are open."""
        return sum(session.kind == kind for session in self._sessions.values())

    def _evictable(self, client: str | None = None) -> Session | None:
        """The least recently used HTTP session not in a call (of ``client``, if given)."""
        candidates = [
            s for s in self._sessions.values()
            if s.kind == "http" and not s.lock.locked() and (client is None or s.client == client)
        ]
        return min(candidates, key=lambda s: s.last_active, default=None)

    def _evict(self, session: Session, reason: str) -> None:
        del self._sessions[session.id]
        self._remember(session.id, reason)
        session.close_now(reason)

    def _remember(self, session_id: str, reason: str) -> None:
        self._ended[session_id] = reason
        while len(self._ended) > _REMEMBERED:
            self._ended.popitem(last=False)

    def open(self, kind: Kind, client: str = "") -> Session:
        """A new session for ``client``, after evicting an HTTP session if one must make room.

        Raises ``CLIENT_LIMIT`` when ``client`` holds ``max_per_client`` sessions none of
        which can yield, ``CAPACITY_REACHED`` when the server is full of such sessions.
        """
        held = [s for s in self._sessions.values() if s.client == client]
        if self.max_per_client is not None and len(held) >= self.max_per_client:
            own = self._evictable(client)
            if own is None:
                raise ServerError(
                    "CLIENT_LIMIT",
                    f"client {client} holds {len(held)} sessions, its limit (--max-sessions-per-client "
                    f"{self.max_per_client}); close one first",
                )
            self._evict(own, f"was evicted: its client opened more than {self.max_per_client} sessions")
        if len(self._sessions) >= self.max_sessions:
            oldest = self._evictable()
            if oldest is None:
                raise ServerError(
                    "CAPACITY_REACHED",
                    f"the server is full: {len(self._sessions)} of {self.max_sessions} sessions in use, none of "
                    f"them an idle HTTP session; close one, or start the server with a larger --max-sessions",
                )
            self._evict(oldest, "was evicted: the server was full and it was the least recently used")
        session = Session(secrets.token_urlsafe(16), kind, self.default_env, client)
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str) -> Session:
        """The open HTTP session ``session_id`` (a WebSocket's session is its connection's alone)."""
        session = self._sessions.get(session_id)
        if session is None or session.kind != "http":
            why = self._ended.get(session_id)
            detail = f"it {why}" if why else "it was never opened, or it was closed or reaped"
            raise ServerError("SESSION_NOT_FOUND", f"no open HTTP session {session_id!r}: {detail}")
        return session

    async def close(self, session_id: str, reason: str = "was closed") -> None:
        """Close and forget a session (no-op if it is gone already)."""
        session = self._sessions.pop(session_id, None)
        if session is not None:
            if session.kind == "http":
                self._remember(session_id, reason)
            await session.close(reason)

    async def close_all(self) -> None:
        """Close every session (server shutdown)."""
        for session_id in list(self._sessions):
            await self.close(session_id, "was closed: the server shut down")

    async def reap(self) -> None:
        """Close the HTTP sessions idle for longer than ``http_idle_timeout``."""
        now = time.monotonic()
        for session in list(self._sessions.values()):
            idle = now - session.last_active
            if session.kind == "http" and not session.lock.locked() and idle > self.http_idle_timeout:
                await self.close(session.id, f"expired after {self.http_idle_timeout:g} s without a request")

    async def reap_forever(self) -> None:
        """Call :meth:`reap` every quarter of the HTTP idle timeout (at most every 30 s)."""
        while True:
            await asyncio.sleep(min(self.http_idle_timeout / 4, 30.0))
            await self.reap()
