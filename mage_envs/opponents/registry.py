"""Named opponent archetypes per game, extendable by users.

Every archetype has a stable id, a split (``"trainable"``: a training population may hold
it, or ``"heldout"``: for evaluation only; ``"train"`` is the deprecated name of
``"trainable"``) and a factory that
builds an :class:`~mage_envs.opponents.base.Opponent` for a ``pyspiel.Game``. The built-in
ones are tables (:class:`~mage_envs.opponents.base.Archetype` rows) that the registry
loads by entry-point string, :data:`BUILTIN_TABLES`, the first time it is asked; the
modules that define them do not import the registry.

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

import difflib
import functools
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..core.entry_points import load_entry_point
from ..facts import load_game
from .base import Archetype, Opponent, OpponentFactory, Split
from .table import TableOpponent, load_table

__all__ = [
    "BUILTIN_TABLES",
    "RESERVED_POPULATION_NAMES",
    "ArchetypeSpec",
    "OpponentFactory",
    "Split",
    "UnknownOpponentError",
    "archetype",
    "list_opponents",
    "load_game",
    "make_opponent",
    "register_opponent",
    "split_of",
    "unregister_opponent",
]

#: OpenSpiel game -> the entry point of its built-in archetype table.
BUILTIN_TABLES: dict[str, str] = {
    "kuhn_poker": "mage_envs.opponents.kuhn_poker:ARCHETYPE_TABLE",
    "leduc_poker": "mage_envs.opponents.leduc_poker:ARCHETYPE_TABLE",
    "tic_tac_toe": "mage_envs.opponents.tic_tac_toe:ARCHETYPE_TABLE",
}


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
    split: Split | str = "trainable",
    description: str = "",
    overwrite: bool = False,
) -> None:
    """Register archetype ``name`` for OpenSpiel game ``game`` (e.g. ``"kuhn_poker"``).

    The built-in archetypes are registered first, so a user's come after them.
    """
    _load_builtin()
    _add(game, name, factory, split, description, overwrite)


def split_of(name: str) -> Split:
    """``name`` as a split; ``"train"``, its name before, with a ``DeprecationWarning``.

    Example:
        >>> split_of("heldout")
        'heldout'
        >>> split_of("seen")
        Traceback (most recent call last):
        ValueError: split must be 'trainable' or 'heldout', got 'seen'
    """
    if name == "train":
        warnings.warn("the archetype split 'train' is now named 'trainable' (a training population may hold it; "
                      "a run's population is the archetypes it trains against)", DeprecationWarning, stacklevel=3)
        return "trainable"
    if name not in ("trainable", "heldout"):
        raise ValueError(f"split must be 'trainable' or 'heldout', got {name!r}")
    return "trainable" if name == "trainable" else "heldout"


def _add(game: str, name: str, factory: OpponentFactory, split: Split | str, description: str,
         overwrite: bool) -> None:
    split = split_of(split)
    if name in RESERVED_POPULATION_NAMES:
        raise ValueError(f"{name!r} names a population split; choose another archetype id")
    games = _REGISTRY.setdefault(game, {})
    if name in games and not overwrite:
        raise ValueError(f"opponent {name!r} is already registered for {game!r} (pass overwrite=True)")
    games[name] = ArchetypeSpec(game, name, factory, split_of(split), description)


def unregister_opponent(game: str, name: str) -> None:
    """Remove archetype ``name`` of ``game`` from the registry (``KeyError`` if unknown).

    The inverse of :func:`register_opponent`, for tests and examples that must leave the
    global registry as they found it (as Gymnasium's registry tests delete their ids).
    """
    archetype(game, name)  # loads the built-in archetypes and raises a helpful KeyError
    del _REGISTRY[game][name]


class UnknownOpponentError(KeyError, ValueError):
    """An archetype id (or game) the registry does not know; its message names the closest
    registered ones. A ``KeyError`` for the registry's callers, a ``ValueError`` for
    ``gym.make``'s, and printed as a plain sentence (a bare ``KeyError`` shows its quotes)."""

    def __str__(self) -> str:
        return str(self.args[0])


#: The prefix of an opponent id that names a saved policy table: ``table:PATH``, a JSON file
#: of :func:`~mage_envs.opponents.table.save_table` (``mage exploitability`` writes the
#: learner's ``policy.json`` and its ``best_response.json``, the ``best-response-to`` archetype).
TABLE_PREFIX = "table:"


def archetype(game: str, name: str) -> ArchetypeSpec:
    """The spec of a registered archetype, or of the saved table ``table:PATH`` names (a
    held-out opponent that plays it); an unknown name raises :class:`UnknownOpponentError`
    with the closest registered names.

    Example:
        >>> archetype("kuhn_poker", "agressive")
        Traceback (most recent call last):
        mage_envs.opponents.registry.UnknownOpponentError: no opponent 'agressive' for game 'kuhn_poker' (did you mean 'aggressive'?); known: aggressive, bluffer, calling-station, cfr-argmax, conservative, intermediate, maniac, nash, random, random-style
    """
    if name.startswith(TABLE_PREFIX):
        return _table_spec(game, name)
    _load_builtin()
    if game not in _REGISTRY:
        raise UnknownOpponentError(f"no opponents are registered for game {game!r}{_closest(game, _REGISTRY)}; "
                                   f"games with opponents: {', '.join(sorted(_REGISTRY))}")
    try:
        return _REGISTRY[game][name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY[game])) or "none"
        raise UnknownOpponentError(f"no opponent {name!r} for game {game!r}{_closest(name, _REGISTRY[game])}; "
                                   f"known: {known}") from None


def _table_spec(game: str, name: str) -> ArchetypeSpec:
    """The spec of ``table:PATH``: a :class:`~mage_envs.opponents.table.TableOpponent` of the file's table."""
    path = Path(name[len(TABLE_PREFIX):])
    if not path.is_file():
        raise UnknownOpponentError(f"opponent {name!r}: no policy table at {path} (mage exploitability writes "
                                   "policy.json and best_response.json)")
    table = load_table(path)
    return ArchetypeSpec(game, name, lambda _: TableOpponent(name, table), "heldout", f"the policy table in {path}")


def _closest(word: str, names: Iterable[str]) -> str:
    """``" (did you mean 'a' or 'b'?)"`` for up to three names close to ``word``, else ``""``."""
    close = difflib.get_close_matches(str(word), list(names), n=3, cutoff=0.5)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def make_opponent(game: str, name: str) -> Opponent:
    """Build a fresh instance of archetype ``name`` for ``game``."""
    spec = archetype(game, name)
    return spec.factory(load_game(game))


def list_opponents(game: str, split: Split | str | None = None) -> list[str]:
    """Archetype ids for ``game`` in registration order, optionally only one split.

    Example:
        >>> list_opponents("kuhn_poker", "heldout")
        ['bluffer', 'calling-station', 'maniac']
    """
    _load_builtin()
    wanted = None if split is None else split_of(split)
    return [s.name for s in _REGISTRY.get(game, {}).values() if wanted is None or s.split == wanted]


#: Names understood as splits of the registry rather than archetypes (``"train"``: the
#: deprecated name of ``"trainable"``).
RESERVED_POPULATION_NAMES = ("trainable", "heldout", "all", "train")


@functools.cache
def _load_builtin() -> None:
    """Register the rows of every :data:`BUILTIN_TABLES` table (once per process)."""
    for game, entry_point in BUILTIN_TABLES.items():
        row: Archetype
        for row in load_entry_point(entry_point):
            _add(game, row.name, row.factory, row.split, row.description, overwrite=False)
