"""Entry-point strings, ``"package.module:attr"``, as Gymnasium's ``register`` takes them.

The env registry (:mod:`mage_envs.registration`) and the opponent registry
(:mod:`mage_envs.opponents.registry`) name what they build this way, so that a module is
imported only when it is needed and never has to import the registry that lists it.

Example:
    >>> load_entry_point("mage_envs.facts.kuhn_poker:CARD_NAMES")
    ('Jack', 'Queen', 'King')
"""

from __future__ import annotations

import importlib
from typing import Any


def load_entry_point(entry_point: str) -> Any:
    """Import ``"package.module:attr"`` and return the attribute."""
    module, _, attr = entry_point.partition(":")
    return getattr(importlib.import_module(module), attr)
