"""Gymnasium registration of every MAGE environment id.

``mage/<Game>-v0`` is one episode; ``mage/<Game>-meta-v0`` is the same game inside a
:class:`~mage_envs.MetaEpisodeWrapper`. ``gym.make`` passes the wrapper's options and the
game's options alike; :func:`make_meta_env` splits them.

Example:
    >>> import gymnasium as gym, mage_envs
    >>> env = gym.make("mage/KuhnPoker-meta-v0", num_episodes=2, opponent="nash", seat=1)
    >>> env.get_wrapper_attr("num_episodes"), env.unwrapped.seat_option
    (2, 1)
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any, Iterable

import gymnasium as gym

from .core.entry_points import load_entry_point
from .core.meta import MetaEpisodeWrapper
from .core.meta_tracker import MetaOptions

__all__ = ["GAMES", "TASKS", "TENSOR_GAMES", "check_env_id", "check_env_options", "did_you_mean", "env_options",
           "game_of", "load_entry_point", "make_meta_env", "register_envs"]

#: id stem -> (entry point of the single-episode env, default meta options)
GAMES: dict[str, tuple[str, dict[str, Any]]] = {
    "KuhnPoker": ("mage_envs.games.kuhn_poker:KuhnPokerEnv", {"repeat_instance": True}),
    "TicTacToe": ("mage_envs.games.tic_tac_toe:TicTacToeEnv", {"repeat_instance": True}),
    "LeducPoker": ("mage_envs.games.leduc_poker:LeducPokerEnv", {"repeat_instance": True}),
}

#: id stem -> (entry point, default meta options) of the single-agent tasks (no opponent);
#: their meta ids replay the same level in every episode, as MAGE and LaMer do.
TASKS: dict[str, tuple[str, dict[str, Any]]] = {
    "Sokoban": ("mage_envs.tasks.sokoban:SokobanEnv", {"repeat_instance": True}),
    "WebShop": ("mage_envs.tasks.webshop:WebShopEnv", {"repeat_instance": True}),
    "WebShop-OOD": ("mage_envs.tasks.webshop:make_ood_env", {"repeat_instance": True}),
    "Household": ("mage_envs.tasks.household:HouseholdEnv", {"repeat_instance": True}),
}


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the candidate closest to ``word``, or ``""``.

    Example:
        >>> did_you_mean("learning_rte", ["learning_rate", "seed"])
        " (did you mean 'learning_rate'?)"
        >>> did_you_mean("zzz", ["learning_rate"])
        ''
    """
    close = difflib.get_close_matches(str(word), [str(c) for c in candidates], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_env_id(env_id: str) -> None:
    """``ValueError`` naming the closest registered id unless Gymnasium knows ``env_id``.

    Example:
        >>> import mage_envs
        >>> check_env_id("mage/KunhPoker-meta-v0")
        Traceback (most recent call last):
        ValueError: unknown env_id 'mage/KunhPoker-meta-v0' (did you mean 'mage/KuhnPoker-meta-v0'?); `mage envs` lists the registered ids
    """
    try:
        gym.spec(env_id)
    except gym.error.Error:
        raise ValueError(f"unknown env_id {env_id!r}{did_you_mean(env_id, gym.registry)}; "
                         "`mage envs` lists the registered ids") from None


def env_options(env_id: str) -> tuple[str, ...] | None:
    """The ``gym.make`` arguments ``env_id`` accepts (the env's own, then a meta id's meta
    options), or ``None`` where its entry point takes any keyword.

    Example:
        >>> env_options("mage/TicTacToe-tensor-meta-v0")
        ('opponent', 'seat', 'invalid_action', 'reward_scale', 'render_mode', 'num_episodes', 'reward_mode', 'repeat_instance')
    """
    spec = gym.spec(env_id)
    base = spec.kwargs.get("base")
    entry = spec.entry_point if base is None else base
    target = load_entry_point(entry) if isinstance(entry, str) else entry
    assert callable(target), f"{env_id} has no entry point"
    parameters = inspect.signature(target).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    names = tuple(p.name for p in parameters if p.kind is not p.VAR_POSITIONAL)
    if base is None:
        return names
    if spec.entry_point == "mage_envs.numeric.meta:make_tensor_meta_env":
        from .numeric.meta import TENSOR_OPTIONS

        return names + TENSOR_OPTIONS
    return names + MetaOptions.names()


def check_env_options(env_id: str, options: Iterable[str]) -> None:
    """``ValueError`` naming the closest accepted one for an option ``env_id`` does not take,
    so that a misspelt key fails where it is written rather than when the env is built.

    Example:
        >>> check_env_options("mage/Sokoban-meta-v0", ["max_steps", "num_boxs"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: mage/Sokoban-meta-v0 takes no option 'num_boxs' (did you mean 'num_boxes'?); its options: width, height, num_boxes, max_steps, ..., num_episodes, reward_mode, reflection, memory_budget, repeat_instance, include_summaries
    """
    accepted = env_options(env_id)
    if accepted is None:
        return
    for name in options:
        if name not in accepted:
            raise ValueError(f"{env_id} takes no option {name!r}{did_you_mean(name, accepted)}; "
                             f"its options: {', '.join(accepted)}")


def game_of(env_id: str) -> str | None:
    """The OpenSpiel game behind a registered id (its env's ``game_string``), or ``None``
    for a single-agent task. Works for the text, meta and ``-tensor-`` ids alike.

    Example:
        >>> game_of("mage/KuhnPoker-meta-v0"), game_of("mage/TicTacToe-tensor-v0"), game_of("mage/Sokoban-meta-v0")
        ('kuhn_poker', 'tic_tac_toe', None)
    """
    spec = gym.spec(env_id)
    entry = spec.kwargs.get("base", spec.entry_point)
    env_class = load_entry_point(entry) if isinstance(entry, str) else entry
    return getattr(env_class, "game_string", None)


def make_meta_env(base: str, **kwargs: Any) -> MetaEpisodeWrapper:
    """Build ``base`` (an entry point) with its options, wrapped with the meta options."""
    meta = MetaOptions.take(kwargs)
    env = load_entry_point(base)(**kwargs)
    return MetaEpisodeWrapper(env, **meta.as_kwargs())


def register_envs() -> None:
    """Register ``mage/<Name>-v0`` and ``mage/<Name>-meta-v0`` for every game and task, and
    the numeric ``-tensor-`` ids of the games (idempotent)."""
    _register_pairs({**GAMES, **TASKS}, "", "mage_envs.registration:make_meta_env")
    _register_pairs(TENSOR_GAMES, "-tensor", "mage_envs.numeric.meta:make_tensor_meta_env")


def _register_pairs(entries: dict[str, tuple[str, dict[str, Any]]], infix: str, meta_entry_point: str) -> None:
    """``mage/<stem><infix>-v0`` for each entry point and ``...-meta-v0`` built by ``meta_entry_point``."""
    for stem, (entry_point, meta_defaults) in entries.items():
        single, meta = f"mage/{stem}{infix}-v0", f"mage/{stem}{infix}-meta-v0"
        if single not in gym.registry:
            gym.register(id=single, entry_point=entry_point, disable_env_checker=False)
        if meta not in gym.registry:
            gym.register(id=meta, entry_point=meta_entry_point, kwargs={"base": entry_point, **meta_defaults})


#: id stem -> (entry point of the numeric view, default meta options); see mage_envs.numeric.
TENSOR_GAMES: dict[str, tuple[str, dict[str, Any]]] = {
    "KuhnPoker": ("mage_envs.numeric.games:KuhnPokerTensorEnv", {"repeat_instance": True}),
    "LeducPoker": ("mage_envs.numeric.games:LeducPokerTensorEnv", {"repeat_instance": True}),
    "TicTacToe": ("mage_envs.numeric.games:TicTacToeTensorEnv", {"repeat_instance": True}),
}

