"""The server's limits, and the rule that keeps an unauthenticated server on loopback.

Example:
    >>> ServerSettings(max_sessions=8).idle_timeout
    600.0
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
        max_sessions: open sessions (WebSocket and HTTP together) at most; one more is refused.
        idle_timeout: seconds without a message after which a session is closed.
        max_body_bytes: the largest HTTP body or WebSocket message accepted.
        default_env: the env a ``reset`` without ``env_id`` gets.
    """

    token: str | None = None
    max_sessions: int = 64
    idle_timeout: float = 600.0
    max_body_bytes: int = 1 << 20
    default_env: str = "mage/KuhnPoker-v0"

    def __post_init__(self) -> None:
        if self.token is not None and not self.token.strip():
            raise ValueError("token must be a non-empty string (or None for no token)")
        if self.max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {self.max_sessions}")
        if not self.idle_timeout > 0:
            raise ValueError(f"idle_timeout must be positive, got {self.idle_timeout}")
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
