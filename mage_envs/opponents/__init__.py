"""Opponent archetypes, populations and the registry users extend.

Example:
    >>> from mage_envs.opponents import list_opponents
    >>> list_opponents("kuhn_poker", split="heldout")
    ['bluffer', 'calling-station', 'maniac']
"""

from .base import BotOpponent, Opponent, PolicyOpponent, sample_action
from .population import OpponentSpec, Population, as_population
from .registry import (
    UnknownOpponentError,
    archetype,
    list_opponents,
    load_game,
    make_opponent,
    register_opponent,
    unregister_opponent,
)
from .table import TableOpponent, load_table, save_table

__all__ = [
    "BotOpponent",
    "Opponent",
    "OpponentSpec",
    "PolicyOpponent",
    "Population",
    "UnknownOpponentError",
    "TableOpponent",
    "archetype",
    "as_population",
    "list_opponents",
    "load_game",
    "load_table",
    "make_opponent",
    "register_opponent",
    "sample_action",
    "save_table",
    "unregister_opponent",
]
