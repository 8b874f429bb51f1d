"""What :class:`~mage_envs.server.client.RemoteEnv` may replay after a dropped connection.

A served env is deterministic given the seed of a reset and the messages sent since (the
property ``tests/test_server.py`` checks for every text id), and a dropped socket takes its
server session with it. So the calls since the last reset *with a seed*, replayed in a new
session, rebuild the same state, and the call in flight is then sent once. Nothing is safe
to replay before a seeded reset (the server seeded the env from entropy), nor after an error
answer (a failed reset or step may have left the env in a state no replay reproduces). Each
replayed answer must equal the recorded one byte for byte, or the replay is refused.

Example:
    >>> log = ReplayLog()
    >>> log.record("reset", {"seed": None}, '{"type": "observation"}')
    >>> log.replayable, log.needs_no_replay("reset", {"seed": 3})
    (False, True)
    >>> log.record("reset", {"seed": 3}, "a")
    >>> log.record("step", {"message": "bet"}, "b")
    >>> [kind for kind, _, _ in log.calls], log.replayable
    (['reset', 'step'], True)
    >>> log.matches(1, "b"), log.matches(1, "c")
    (True, False)
"""

from __future__ import annotations

import hashlib
from typing import Any


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


class ReplayLog:
    """The calls since the last seeded reset, each with a digest of its answer."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], bytes]] = []
        self.replayable = False

    @staticmethod
    def needs_no_replay(kind: str, data: dict[str, Any]) -> bool:
        """Whether the call starts afresh (a reset with a seed), so a new session can take it as is."""
        return kind == "reset" and data.get("seed") is not None

    def record(self, kind: str, data: dict[str, Any], answer: str) -> None:
        """Log a call the server answered with ``answer`` (its raw text)."""
        if self.needs_no_replay(kind, data):
            self.calls, self.replayable = [], True
        if self.replayable:
            self.calls.append((kind, data, _digest(answer)))

    def forget(self) -> None:
        """After an error answer: nothing is replayable until the next seeded reset."""
        self.calls, self.replayable = [], False

    def matches(self, index: int, answer: str) -> bool:
        """Whether a replayed call's ``answer`` equals the one recorded at ``index``."""
        return self.calls[index][2] == _digest(answer)
