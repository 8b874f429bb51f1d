"""The players of ``benchmarks/server_load.py``: one policy, a WebSocket and an HTTP client, digests.

Every client plays whole meta-episodes with the same deterministic policy (the legal moves
in turn, a fixed reflection where none is asked), so the served transcript of a client must
equal the local one under the same seeds; both are reduced to a SHA-256 over the JSON text
of every ``reset`` and ``step`` result, so "byte for byte" is one comparison per client.

Example (in-process, no server):
    >>> import gymnasium as gym, mage_envs
    >>> played = play(gym.make("mage/KuhnPoker-meta-v0"), [3])
    >>> played.steps > 0, len(played.digest), played == play(gym.make("mage/KuhnPoker-meta-v0"), [3])
    (True, 64, True)
"""

from __future__ import annotations

import hashlib
import http.client
import json
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from mage_envs.server.catalog import to_json

#: The games each client plays, by name: (env id, env kwargs).
GAMES: dict[str, tuple[str, dict[str, Any]]] = {
    "kuhn": ("mage/KuhnPoker-meta-v0", {}),
    "tictactoe": ("mage/TicTacToe-meta-v0", {}),
    "webshop": ("mage/WebShop-meta-v0", {}),
}
REFLECTION = "<reflection>Try what worked before, and watch how the opponent answers.</reflection>"


class Player(Protocol):
    """What a local env, ``RemoteEnv`` and :class:`HttpEnv` have in common."""

    def reset(self, *, seed: int | None = None) -> tuple[Any, dict[str, Any]]: ...

    def step(self, action: str) -> tuple[Any, ...]: ...


def answer(info: dict[str, Any], turn: int) -> str:
    """The policy: legal move ``turn`` modulo their number, or the reflection."""
    legal = info.get("legal_actions") or []
    return f"<action>{legal[turn % len(legal)]}</action>" if legal else REFLECTION


@dataclass(eq=False)
class Played:
    """One client's meta-episodes: a digest of everything it was answered, its steps, its latencies."""

    digest: str
    steps: int
    latencies: list[float] = field(default_factory=list)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Played) and (self.digest, self.steps) == (other.digest, other.steps)


def play(env: Player, seeds: list[int], pause: float = 0.0) -> Played:
    """Whole meta-episodes from ``reset(seed=s)`` for each seed; ``pause`` s before each step."""
    digest, steps, latencies = hashlib.sha256(), 0, []
    for seed in seeds:
        start = time.perf_counter()
        result: tuple[Any, ...] = env.reset(seed=seed)
        latencies.append(time.perf_counter() - start)
        digest.update(json.dumps(to_json(result)).encode())
        info, done, turn = result[1], False, 0
        while not done:
            time.sleep(pause)
            start = time.perf_counter()
            result = env.step(answer(info, turn))
            latencies.append(time.perf_counter() - start)
            digest.update(json.dumps(to_json(result)).encode())
            info, done, turn, steps = result[4], result[2] or result[3], turn + 1, steps + 1
    return Played(digest.hexdigest(), steps, latencies)


class HttpEnv:
    """An env played over ``POST /reset`` and ``POST /step`` on one kept-alive connection.

    Its first reset opens an HTTP session, the next ones reset it; :meth:`close` deletes it.
    """

    def __init__(self, url: str, env_id: str, env_kwargs: dict[str, Any], token: str | None = None,
                 source: str | None = None) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        source_address = (source, 0) if source else None
        self._connection = http.client.HTTPConnection(host, int(port), timeout=60, source_address=source_address)
        self._headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
        self.env_id, self.env_kwargs = env_id, env_kwargs
        self.session_id: str | None = None

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        """``(status, JSON answer)`` of one request on the connection."""
        self._connection.request(method, path, None if body is None else json.dumps(body), self._headers)
        response = self._connection.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else None

    def _checked(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        status, data = self.call("POST", path, body)
        if status != 200:
            raise RuntimeError(f"{path} answered {status}: {data}")
        return data

    def reset(self, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        body = {"env_id": self.env_id, "env_kwargs": self.env_kwargs, "seed": seed, "session_id": self.session_id}
        data = self._checked("/reset", body)
        self.session_id = data["metadata"]["session_id"]
        return data["observation"]["prompt"], data["observation"]["info"]

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        data = self._checked("/step", {"session_id": self.session_id, "action": {"message": action}})
        observation = data["observation"]
        return (observation["prompt"], float(data["reward"]), observation["terminated"], observation["truncated"],
                observation["info"])

    def close(self) -> None:
        if self.session_id is not None:
            self.call("DELETE", f"/sessions/{self.session_id}")
        self._connection.close()


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
