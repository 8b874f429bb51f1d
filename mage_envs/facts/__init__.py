"""Game facts: what the OpenSpiel engines define, for the envs and the opponents alike.

One module per game (:mod:`~mage_envs.facts.kuhn_poker`,
:mod:`~mage_envs.facts.leduc_poker`, :mod:`~mage_envs.facts.tic_tac_toe`):
action ids, card names, board helpers. They import ``pyspiel`` and nothing else of MAGE,
so the envs (``mage_envs.games``) and the opponents (``mage_envs.opponents``) both read
them and dependencies point one way: opponents import game facts, never the reverse.

Example:
    >>> load_game("kuhn_poker") is load_game("kuhn_poker")
    True
"""

from __future__ import annotations

import functools

import pyspiel


@functools.cache
def load_game(game: str) -> pyspiel.Game:
    """``pyspiel.load_game`` cached per game string (games are immutable)."""
    return pyspiel.load_game(game)
