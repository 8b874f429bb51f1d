"""Which environments the server makes, with which arguments, and how they look in JSON.

Only registered ``mage/*`` ids whose observations and actions are text are served, and
``gym.make`` receives only the keyword arguments the env (and, for ``-meta-`` ids, the
:class:`~mage_envs.MetaEpisodeWrapper`) declares, less those that name code to import
(``base``) or a file to read (``*_path``, ``*_dir``, ``*_file``, ``*_root``).

Example:
    >>> import mage_envs
    >>> "opponent" in accepted_kwargs("mage/KuhnPoker-meta-v0"), "base" in accepted_kwargs("mage/KuhnPoker-meta-v0")
    (True, False)
    >>> "mage/KuhnPoker-meta-v0" in text_ids(), "mage/KuhnPoker-tensor-v0" in text_ids()
    (True, False)
    >>> to_json({"returns": (1.0, float("nan")), 2: None})
    {'returns': [1.0, None], '2': None}
"""

from __future__ import annotations

import inspect
import math
from functools import cache
from typing import Any

import gymnasium as gym
import numpy as np

from ..core.meta_tracker import MetaOptions
from ..registration import load_entry_point
from .protocol import ServerError

#: Parameters never taken from a client: ``base`` names the class to import, ``env`` is an
#: object; nor any that names a file or folder (a client must not choose what the server reads).
_REFUSED = frozenset({"base", "env", "render_mode", "path"})
_REFUSED_SUFFIXES = ("_path", "_dir", "_file", "_root")
#: A schema probe plays at most this many steps to see the final ``info``.
_PROBE_STEPS = 10_000


def mage_ids() -> list[str]:
    """Every registered ``mage/*`` id, sorted."""
    return sorted(env_id for env_id in gym.registry if env_id.startswith("mage/"))


def _parameters(target: Any) -> set[str]:
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name for p in inspect.signature(target).parameters.values() if p.kind in kinds}


def _load(entry_point: Any) -> Any:
    return load_entry_point(entry_point) if isinstance(entry_point, str) else entry_point


def accepted_kwargs(env_id: str) -> frozenset[str]:
    """The ``gym.make`` keyword arguments a client may pass for ``env_id``."""
    spec = gym.spec(env_id)
    if "base" in spec.kwargs:  # a meta id: the game's options and the wrapper's
        names = _parameters(_load(spec.kwargs["base"])) | set(MetaOptions.names())
    else:
        names = _parameters(_load(spec.entry_point))
    return frozenset(n for n in names if n not in _REFUSED and not n.endswith(_REFUSED_SUFFIXES))


def text_ids() -> list[str]:
    """The ids the server serves: every registered ``mage/*`` id whose spaces are ``Text``, sorted."""
    return [env_id for env_id in mage_ids() if _is_text(env_id)]


@cache
def _is_text(env_id: str) -> bool:
    env = gym.make(env_id)
    try:
        return isinstance(env.observation_space, gym.spaces.Text) and isinstance(env.action_space, gym.spaces.Text)
    finally:
        env.close()


def error_reason(error: Exception) -> str:
    """``"KeyError: no opponent ..."``: the exception type and its message, for a client."""
    message = error.args[0] if len(error.args) == 1 else str(error)
    return f"{type(error).__name__}: {message}"


def make_env(env_id: str, env_kwargs: dict[str, Any]) -> gym.Env:
    """``gym.make(env_id, **env_kwargs)`` after checking the id and the argument names."""
    if env_id not in gym.registry or not env_id.startswith("mage/"):
        raise ServerError("UNKNOWN_ENV", f"unknown env id {env_id!r}; registered: {', '.join(mage_ids())}")
    if not _is_text(env_id):
        raise ServerError("UNKNOWN_ENV", f"{env_id} is not a text environment; this server serves text envs only")
    accepted = accepted_kwargs(env_id)
    unknown = sorted(set(env_kwargs) - accepted)
    if unknown:
        raise ServerError(
            "VALIDATION_ERROR", f"{env_id} does not take {', '.join(unknown)}; it takes {', '.join(sorted(accepted))}"
        )
    try:
        return gym.make(env_id, **env_kwargs)
    except Exception as error:  # the env's own validation: a bad seat, an unknown opponent...
        message = f"gym.make({env_id!r}, **{env_kwargs!r}) failed: {error_reason(error)}"
        raise ServerError("FACTORY_ERROR", message) from error


def space_to_json(space: gym.Space) -> dict[str, Any]:
    """A ``Text`` space as ``{"type": "Text", "min_length", "max_length", "charset"}``."""
    assert isinstance(space, gym.spaces.Text), space
    return {"type": "Text", "min_length": space.min_length, "max_length": space.max_length, "charset": space.characters}


def describe(env_id: str, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The env's spaces and the ``info`` keys after ``reset`` and at the end of an episode.

    The final keys come from a probe episode that always plays the first legal action.
    """
    env = make_env(env_id, env_kwargs)
    try:
        _, info = env.reset(seed=0)
        reset_keys, done, steps = sorted(info), False, 0
        while not done and steps < _PROBE_STEPS:
            legal = info.get("legal_actions") or [""]
            _, _, terminated, truncated, info = env.step(legal[0])
            done, steps = terminated or truncated, steps + 1
        return {
            "env_id": env_id,
            "env_kwargs": to_json(env_kwargs),
            "spaces": {"observation": space_to_json(env.observation_space), "action": space_to_json(env.action_space)},
            "info_keys": {"reset": reset_keys, "final": sorted(info)},
        }
    finally:
        env.close()


def to_json(value: Any) -> Any:
    """``value`` with JSON types only: numpy values unwrapped, tuples as lists, NaN as None."""
    if isinstance(value, dict):
        return {str(key): to_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [to_json(item) for item in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)
