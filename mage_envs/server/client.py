"""``RemoteEnv``: a served env used exactly like the local one.

It opens one WebSocket session (one episode at a time, as many as you reset) and returns
what ``gym.make(env_id, **env_kwargs)`` would: ``reset`` gives ``(obs, info)``, ``step``
gives ``(obs, reward, terminated, truncated, info)``, with the same ``Text`` spaces.
Errors the server reports raise :class:`RemoteEnvError` with the server's code.

Example (with a server from ``mage serve`` or :class:`~mage_envs.server.run.ServerThread`)::

    env = RemoteEnv("http://127.0.0.1:8000", "mage/KuhnPoker-meta-v0", opponent="nash")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("<action>bet</action>")
    env.close()
"""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import gymnasium as gym
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect


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


class RemoteEnv(gym.Env[str, str]):
    """The env ``env_id`` made with ``env_kwargs`` on the server at ``url``.

    Args:
        url: the server, e.g. ``"http://127.0.0.1:8000"``.
        env_id: a registered ``mage/*`` text env id.
        token: the server's bearer token, if it has one.
        timeout: seconds to wait for the connection and for each answer.
        **env_kwargs: ``gym.make`` keyword arguments (JSON values), e.g. ``opponent="nash"``.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, url: str, env_id: str, *, token: str | None = None, timeout: float = 60.0, **env_kwargs: Any):
        self.env_id = env_id
        self.env_kwargs = env_kwargs
        self.timeout = timeout
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        http_base, ws_base = _urls(url)
        query = urllib.parse.urlencode({"env_id": env_id, "env_kwargs": json.dumps(env_kwargs)})
        schema = self._get(f"{http_base}/schema?{query}")
        self.observation_space = _space(schema["spaces"]["observation"])
        self.action_space = _space(schema["spaces"]["action"])
        self._connection = contextlib.ExitStack()
        self._socket: ClientConnection | None = self._connection.enter_context(
            connect(f"{ws_base}/ws", additional_headers=self._headers, open_timeout=timeout)
        )

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

    def _call(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        if self._socket is None:
            raise RemoteEnvError("SESSION_NOT_FOUND", "this RemoteEnv is closed")
        try:
            self._socket.send(json.dumps({"type": kind, "data": data}))
        except ConnectionClosed:
            pass  # a refused or expired session says why before it closes: read that below
        try:
            reply = json.loads(self._socket.recv(timeout=self.timeout))
        except ConnectionClosed as error:
            raise RemoteEnvError("SESSION_NOT_FOUND", f"the server closed the session: {error}") from None
        except TimeoutError:
            self.close()  # a late answer would be taken for the next request's
            raise
        if reply["type"] == "error":
            raise RemoteEnvError(reply["data"]["code"], reply["data"]["message"])
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
        self._connection.close()
        self._socket = None
