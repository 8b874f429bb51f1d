"""The registered text envs over OpenEnv's protocol (``pip install "mage-rl[serve]"``).

``mage serve`` (or :func:`serve`, or :class:`ServerThread` inside a process) runs
:func:`create_app` with uvicorn; :class:`~mage_envs.server.client.RemoteEnv` plays a
served env like a local one, and OpenEnv's own ``GenericEnvClient`` works too. See
``docs/server.md``. ``import mage_envs`` does not import this package (nor FastAPI).
"""

try:
    import fastapi  # noqa: F401
    import uvicorn  # noqa: F401
    import websockets  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the install
    raise ImportError(
        f'mage_envs.server needs the server dependencies ({error.name} is missing): pip install "mage-rl[serve]"'
    ) from error

from .app import create_app
from .client import RemoteEnv, RemoteEnvError
from .run import ServerThread, serve
from .settings import ServerSettings

__all__ = ["RemoteEnv", "RemoteEnvError", "ServerSettings", "ServerThread", "create_app", "serve"]
