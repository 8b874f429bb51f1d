"""Named opponent archetypes per game, extendable by users.

Every archetype has a stable id, a split (``"train"`` or ``"heldout"``) and a factory that
builds an :class:`~mage_envs.opponents.base.Opponent` for a ``pyspiel.Game``.

Example:
    >>> from mage_envs.opponents import (PolicyOpponent, list_opponents, make_opponent,
    ...     register_opponent, unregister_opponent)
    >>> register_opponent("kuhn_poker", "always-pass",
    ...     lambda game: PolicyOpponent("always-pass", lambda state: {0: 1.0}),
    ...     split="heldout", description="never bets, folds to every bet", overwrite=True)
    >>> make_opponent("kuhn_poker", "always-pass").name
    'always-pass'
    >>> unregister_opponent("kuhn_poker", "always-pass")   # leave the registry as found
    >>> "always-pass" in list_opponents("kuhn_poker")
    False
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Literal

import pyspiel

from .base import Opponent

Split = Literal["train", "heldout"]
OpponentFactory = Callable[[pyspiel.Game], Opponent]


@dataclass(frozen=True)
class ArchetypeSpec:
    """What the registry knows about one archetype."""

    game: str
    name: str
    factory: OpponentFactory
    split: Split
    description: str


_REGISTRY: dict[str, dict[str, ArchetypeSpec]] = {}


def register_opponent(
    game: str,
    name: str,
    factory: OpponentFactory,
    *,
    split: Split = "train",
    description: str = "",
    overwrite: bool = False,
) -> None:
    """Register archetype ``name`` for OpenSpiel game ``game`` (e.g. ``"kuhn_poker"``)."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
    if name in RESERVED_POPULATION_NAMES:
        raise ValueError(f"{name!r} names a population split; choose another archetype id")
    games = _REGISTRY.setdefault(game, {})
    if name in games and not overwrite:
        raise ValueError(f"opponent {name!r} is already registered for {game!r} (pass overwrite=True)")
    games[name] = ArchetypeSpec(game, name, factory, split, description)


def unregister_opponent(game: str, name: str) -> None:
    """Remove archetype ``name`` of ``game`` from the registry (``KeyError`` if unknown).

    The inverse of :func:`register_opponent`, for tests and examples that must leave the
    global registry as they found it (as Gymnasium's registry tests delete their ids).
    """
    archetype(game, name)  # loads the built-in archetypes and raises a helpful KeyError
    del _REGISTRY[game][name]


def archetype(game: str, name: str) -> ArchetypeSpec:
    """The spec of a registered archetype, with a helpful error for unknown names."""
    _load_builtin()
    try:
        return _REGISTRY[game][name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY.get(game, {}))) or "none"
        raise KeyError(f"no opponent {name!r} for game {game!r}; known: {known}") from None


def make_opponent(game: str, name: str) -> Opponent:
    """Build a fresh instance of archetype ``name`` for ``game``."""
    spec = archetype(game, name)
    return spec.factory(load_game(game))


def list_opponents(game: str, split: Split | None = None) -> list[str]:
    """Archetype ids for ``game`` in registration order, optionally only one split."""
    _load_builtin()
    return [s.name for s in _REGISTRY.get(game, {}).values() if split is None or s.split == split]


#: Names understood as populations rather than archetypes.
RESERVED_POPULATION_NAMES = ("train", "heldout", "all")


@functools.cache
def load_game(game: str) -> pyspiel.Game:
    """``pyspiel.load_game`` cached per game string (games are immutable)."""
    return pyspiel.load_game(game)


@functools.cache
def _load_builtin() -> None:
    from . import kuhn_poker, leduc_poker, tic_tac_toe  # noqa: F401  (registers archetypes)
