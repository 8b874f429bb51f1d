"""The server's limits, and the rule that keeps an unauthenticated server on loopback.

Example:
    >>> ServerSettings(max_sessions=8).idle_timeout, ServerSettings().http_idle_timeout
    (600.0, 60.0)
    >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
    (True, True, False)
    >>> check_bind("0.0.0.0", token=None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: refusing to serve on 0.0.0.0 without a token: ...
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


@dataclass(frozen=True)
class ServerSettings:
    """What :func:`~mage_envs.server.create_app` enforces.

    Args:
        token: if set, every route but ``/health`` needs ``Authorization: Bearer <token>``.
        max_sessions: open sessions (WebSocket and HTTP together) at most. When full, the
            least recently used HTTP session not in a call is evicted for a new one; with none
            to evict, the new one is refused (``CAPACITY_REACHED``).
        max_sessions_per_client: open sessions per client address at most (``None``: no cap).
            A client at its cap that opens another session evicts its own least recently used
            HTTP session not in a call; with none, it is refused (``CLIENT_LIMIT``).
        idle_timeout: seconds without a message after which a WebSocket session is closed.
        http_idle_timeout: seconds without a request after which an HTTP session is reaped.
        ws_ping_interval: seconds between the server's pings on each WebSocket.
        ws_ping_timeout: seconds a ping waits for its pong before the socket (and its session)
            is dropped: what ends a half-open connection or a frozen client.
        max_body_bytes: the largest HTTP body or WebSocket message accepted.
        default_env: the env a ``reset`` without ``env_id`` gets.
    """

    token: str | None = None
    max_sessions: int = 64
    max_sessions_per_client: int | None = None
    idle_timeout: float = 600.0
    http_idle_timeout: float = 60.0
    ws_ping_interval: float = 20.0
    ws_ping_timeout: float = 20.0
    max_body_bytes: int = 1 << 20
    default_env: str = "mage/KuhnPoker-v0"

    def __post_init__(self) -> None:
        if self.token is not None and not self.token.strip():
            raise ValueError("token must be a non-empty string (or None for no token)")
        if self.max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {self.max_sessions}")
        if self.max_sessions_per_client is not None and self.max_sessions_per_client < 1:
            raise ValueError(f"max_sessions_per_client must be at least 1 (or None), got {self.max_sessions_per_client}")
        for name in ("idle_timeout", "http_idle_timeout", "ws_ping_interval", "ws_ping_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes must be at least 1024, got {self.max_body_bytes}")


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None, allow_unauthenticated: bool = False) -> None:
    """Refuse a non-loopback ``host`` without a token unless explicitly allowed."""
    if token is None and not allow_unauthenticated and not is_loopback(host):
        raise ValueError(
            f"refusing to serve on {host} without a token: anyone who can reach it could run envs. "
            "Pass --token (or set MAGE_SERVE_TOKEN), or --allow-unauthenticated if the network is yours alone."
        )
