"""Kuhn Poker for two agents: ``player_0`` acts first, ``player_1`` second.

The PettingZoo classic layout: :func:`env` (the raw env with order enforcement),
:class:`raw_env` and :func:`parallel_env`. See :class:`~mage_envs.pettingzoo.text_game.TextGameAEC`.

Example:
    >>> from mage_envs.pettingzoo import kuhn_poker_v0
    >>> env = kuhn_poker_v0.env()
    >>> env.reset(seed=0)
    >>> print(env.observe("player_0")["prompt"].splitlines()[-2])
    Legal actions: check, bet
"""

from __future__ import annotations

from typing import Any, ClassVar

from pettingzoo.utils.conversions import parallel_wrapper_fn
from pettingzoo.utils.wrappers import OrderEnforcingWrapper

from ..games.kuhn_poker import KuhnPokerEnv
from .text_game import TextGameAEC


class raw_env(TextGameAEC):  # PettingZoo's name
    """Kuhn Poker, both seats agents."""

    text_env = KuhnPokerEnv
    metadata: ClassVar[dict[str, Any]] = {**TextGameAEC.metadata, "name": "kuhn_poker_v0"}


def env(**kwargs: Any) -> OrderEnforcingWrapper:
    """:class:`raw_env` (same arguments) wrapped in PettingZoo's ``OrderEnforcingWrapper``."""
    return OrderEnforcingWrapper(raw_env(**kwargs))


parallel_env = parallel_wrapper_fn(env)
