"""Run the server with uvicorn: in the foreground (``mage serve``) or in a background thread.

Example (``ServerThread`` binds a free loopback port and serves until the block ends)::

    with ServerThread() as server:
        env = RemoteEnv(server.url, "mage/KuhnPoker-v0", seat=0)
        obs, info = env.reset(seed=0)
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from .app import create_app
from .settings import ServerSettings, check_bind


def _config(settings: ServerSettings, host: str, port: int, log_level: str) -> uvicorn.Config:
    return uvicorn.Config(
        create_app(settings),
        host=host,
        port=port,
        ws_max_size=settings.max_body_bytes,
        ws_ping_interval=settings.ws_ping_interval,
        ws_ping_timeout=settings.ws_ping_timeout,
        log_level=log_level,
        server_header=False,
    )


def serve(
    settings: ServerSettings | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    allow_unauthenticated: bool = False,
    log_level: str = "info",
) -> None:
    """Serve until interrupted. A non-loopback ``host`` needs a token (or ``allow_unauthenticated``)."""
    settings = settings or ServerSettings()
    check_bind(host, settings.token, allow_unauthenticated)
    uvicorn.Server(_config(settings, host, port, log_level)).run()


class ServerThread:
    """A server in a daemon thread of this process, for notebooks, scripts and docs.

    ``port=0`` picks a free port; :attr:`url` says which. Use it as a context manager, or
    call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        settings: ServerSettings | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        allow_unauthenticated: bool = False,
        log_level: str = "warning",
    ) -> None:
        settings = settings or ServerSettings()
        check_bind(host, settings.token, allow_unauthenticated)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.create_server((host, port), family=family)
        bound = self._socket.getsockname()[1]
        self.url = f"http://[{host}]:{bound}" if ":" in host else f"http://{host}:{bound}"
        self._server = uvicorn.Server(_config(settings, host, bound, log_level))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)

    def start(self, timeout: float = 30.0) -> None:
        """Start serving; return once the server accepts connections."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server at {self.url} did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        """Close every session and stop serving."""
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._socket.close()

    def __enter__(self) -> ServerThread:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
