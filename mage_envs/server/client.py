"""``RemoteEnv``: a served env used exactly like the local one.

It opens one WebSocket session (one episode at a time, as many as you reset) and returns
what ``gym.make(env_id, **env_kwargs)`` would: ``reset`` gives ``(obs, info)``, ``step``
gives ``(obs, reward, terminated, truncated, info)``, with the same ``Text`` spaces.
Errors the server reports raise :class:`RemoteEnvError` with the server's code.

A dropped connection (a server restart, a network cut) is retried ``retries`` times with
exponential backoff. The server session went with the socket, so ``RemoteEnv`` opens a new
one and replays the calls since the last ``reset(seed=...)`` (checking that every answer is
the one it got before, see :mod:`~mage_envs.server.replay`), then sends the call in flight:
the episode goes on as if nothing happened. Where that is not safe (the episode began with
``reset()`` without a seed, or an error answer came since) it raises ``CONNECTION_LOST``
and says so; the next ``reset`` reconnects. A late answer (``timeout``) is not retried.

Example (with a server from ``mage serve`` or :class:`~mage_envs.server.run.ServerThread`)::

    env = RemoteEnv("http://127.0.0.1:8000", "mage/KuhnPoker-meta-v0", opponent="nash")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("<action>bet</action>")
    env.close()
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

import gymnasium as gym
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from .replay import ReplayLog


class RemoteEnvError(RuntimeError):
    """The server refused a request; :attr:`code` is its error code (e.g. ``UNKNOWN_ENV``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{message} [{code}]")
        self.code = code


def _space(description: dict[str, Any]) -> gym.spaces.Text:
    return gym.spaces.Text(
        max_length=description["max_length"], min_length=description["min_length"], charset=description["charset"]
    )


def _urls(url: str) -> tuple[str, str]:
    """``(http_base, ws_base)`` for an ``http(s)://`` or ``ws(s)://`` server URL."""
    base = url.rstrip("/")
    scheme, sep, rest = base.partition("://")
    if not sep or scheme not in ("http", "https", "ws", "wss"):
        raise ValueError(f"expected an http://, https://, ws:// or wss:// URL, got {url!r}")
    secure = scheme in ("https", "wss")
    return f"{'https' if secure else 'http'}://{rest}", f"{'wss' if secure else 'ws'}://{rest}"


_T = TypeVar("_T")


class _Dropped(Exception):
    """The connection went without the server saying why."""


class RemoteEnv(gym.Env[str, str]):
    """The env ``env_id`` made with ``env_kwargs`` on the server at ``url``.

    Args:
        url: the server, e.g. ``"http://127.0.0.1:8000"``.
        env_id: a registered ``mage/*`` text env id.
        token: the server's bearer token, if it has one.
        timeout: seconds to wait for the connection and for each answer.
        retries: reconnections tried after a dropped connection (or a refused first one).
        backoff: seconds before the first retry, doubled for each next one (at most 10 s).
        **env_kwargs: ``gym.make`` keyword arguments (JSON values), e.g. ``opponent="nash"``.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        url: str,
        env_id: str,
        *,
        token: str | None = None,
        timeout: float = 60.0,
        retries: int = 5,
        backoff: float = 0.5,
        **env_kwargs: Any,
    ):
        if retries < 0 or backoff < 0:
            raise ValueError(f"retries and backoff must be non-negative, got {retries} and {backoff}")
        self.env_id = env_id
        self.env_kwargs = env_kwargs
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        http_base, self._ws_base = _urls(url)
        query = urllib.parse.urlencode({"env_id": env_id, "env_kwargs": json.dumps(env_kwargs)})
        schema = self._with_retries(lambda: self._get(f"{http_base}/schema?{query}"), "reach")
        self.observation_space = _space(schema["spaces"]["observation"])
        self.action_space = _space(schema["spaces"]["action"])
        self._log = ReplayLog()
        self._closed = False
        self._connection = contextlib.ExitStack()
        self._socket: ClientConnection | None = self._with_retries(self._connect, "connect to")

    def _get(self, url: str) -> dict[str, Any]:
        request = urllib.request.Request(url, headers=self._headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.load(response)
        except urllib.error.HTTPError as error:
            try:
                body = json.loads(error.read())
            except ValueError:
                body = {}
            raise RemoteEnvError(body.get("code", str(error.code)), body.get("detail", error.reason)) from None
        except OSError as error:  # refused, reset: the server is not (yet) there
            raise _Dropped(str(error)) from None

    def _connect(self) -> ClientConnection:
        try:
            opening = connect(f"{self._ws_base}/ws", additional_headers=self._headers, open_timeout=self.timeout)
            return self._connection.enter_context(opening)
        except InvalidStatus as error:
            status = error.response.status_code
            if status < 500:  # a refusal (a wrong token): retrying cannot help
                raise RemoteEnvError("UNAUTHORIZED" if status == 401 else str(status), str(error)) from None
            raise _Dropped(str(error)) from None
        except (OSError, InvalidHandshake) as error:
            raise _Dropped(str(error)) from None

    def _wait(self, attempt: int) -> None:
        time.sleep(min(self.backoff * 2**attempt, 10.0))

    def _with_retries(self, attempt_once: Callable[[], _T], what: str) -> _T:
        attempt = 0
        while True:
            try:
                return attempt_once()
            except _Dropped as error:
                if attempt == self.retries:
                    raise RemoteEnvError(
                        "CONNECTION_LOST", f"could not {what} {self._ws_base} after {self.retries} retries: {error}"
                    ) from None
                self._wait(attempt)
                attempt += 1

    def _exchange(self, kind: str, data: dict[str, Any]) -> str:
        """Send one message and return the raw answer; :class:`_Dropped` if the socket went silently."""
        assert self._socket is not None
        try:
            self._socket.send(json.dumps({"type": kind, "data": data}))
        except ConnectionClosed:
            pass  # a refused or expired session says why before it closes: read that below
        except OSError as error:
            raise _Dropped(str(error)) from None
        try:
            answer = self._socket.recv(timeout=self.timeout)
        except TimeoutError:  # before OSError, its base class
            self.close()  # a late answer would be taken for the next request's
            raise
        except (ConnectionClosed, OSError) as error:
            raise _Dropped(str(error)) from None
        return answer if isinstance(answer, str) else answer.decode()

    def _resume(self, kind: str, data: dict[str, Any]) -> None:
        """A new session in the state the dropped one had before this call."""
        self._socket = self._connect()
        if self._log.needs_no_replay(kind, data):
            return
        for index, (replayed_kind, replayed_data, _) in enumerate(self._log.calls):
            answer = self._exchange(replayed_kind, replayed_data)
            reply = json.loads(answer)
            if reply["type"] == "error" and reply["data"]["code"] == "CAPACITY_REACHED":
                raise _Dropped(reply["data"]["message"])
            if not self._log.matches(index, answer):
                self._log.forget()
                raise RemoteEnvError(
                    "REPLAY_MISMATCH",
                    f"after a dropped connection, replaying call {index} ({replayed_kind}) gave another answer "
                    "than before: the episode cannot be resumed; call reset()",
                )

    def _drop(self) -> None:
        self._connection.close()
        self._socket = None

    def _call(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        if self._closed:
            raise RemoteEnvError("SESSION_NOT_FOUND", "this RemoteEnv is closed")
        for attempt in range(self.retries + 1):
            try:
                if self._socket is None:  # dropped before this call
                    self._resume(kind, data)
                answer = self._exchange(kind, data)
                break
            except _Dropped as error:
                self._drop()
                if not (self._log.replayable or self._log.needs_no_replay(kind, data)):
                    raise RemoteEnvError(
                        "CONNECTION_LOST",
                        f"the connection to {self._ws_base} dropped ({error}) and this episode cannot be replayed "
                        "safely: it was started by reset() without a seed, or an error answer came since. "
                        "reset() starts a new one (with a seed, a later drop is replayed).",
                    ) from None
                if attempt == self.retries:
                    raise RemoteEnvError(
                        "CONNECTION_LOST", f"the connection to {self._ws_base} dropped and {self.retries} "
                        f"reconnections failed: {error}"
                    ) from None
                self._wait(attempt)
        reply = json.loads(answer)
        if reply["type"] == "error":
            self._log.forget()
            raise RemoteEnvError(reply["data"]["code"], reply["data"]["message"])
        self._log.record(kind, data, answer)
        return reply["data"]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start an episode on the server: ``(obs, info)``."""
        super().reset(seed=seed)
        data = self._call(
            "reset", {"env_id": self.env_id, "env_kwargs": self.env_kwargs, "seed": seed, "options": options}
        )
        return data["observation"]["prompt"], data["observation"]["info"]

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Send the agent's answer: ``(obs, reward, terminated, truncated, info)``."""
        data = self._call("step", {"message": action})
        observation = data["observation"]
        return (
            observation["prompt"],
            float(data["reward"]),
            observation["terminated"],
            observation["truncated"],
            observation["info"],
        )

    def close(self) -> None:
        """End the session on the server."""
        self._drop()
        self._closed = True
