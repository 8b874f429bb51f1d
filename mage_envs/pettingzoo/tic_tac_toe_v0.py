"""Tic-Tac-Toe for two agents: ``player_0`` plays X (moves first), ``player_1`` plays O.

The PettingZoo classic layout: :func:`env` (the raw env with order enforcement),
:class:`raw_env` and :func:`parallel_env`. See :class:`~mage_envs.pettingzoo.text_game.TextGameAEC`.

Example:
    >>> from mage_envs.pettingzoo import tic_tac_toe_v0
    >>> env = tic_tac_toe_v0.env()
    >>> env.reset(seed=0)
    >>> print(env.observe("player_0")["prompt"].splitlines()[-2])
    Legal actions: 1, 2, 3, 4, 5, 6, 7, 8, 9
"""

from __future__ import annotations

from typing import Any, ClassVar

from pettingzoo.utils.conversions import parallel_wrapper_fn
from pettingzoo.utils.wrappers import OrderEnforcingWrapper

from ..games.tic_tac_toe import TicTacToeEnv
from .text_game import TextGameAEC


class raw_env(TextGameAEC):  # PettingZoo's name
    """Tic-Tac-Toe, both seats agents."""

    text_env = TicTacToeEnv
    metadata: ClassVar[dict[str, Any]] = {**TextGameAEC.metadata, "name": "tic_tac_toe_v0"}


def env(**kwargs: Any) -> OrderEnforcingWrapper:
    """:class:`raw_env` (same arguments) wrapped in PettingZoo's ``OrderEnforcingWrapper``."""
    return OrderEnforcingWrapper(raw_env(**kwargs))


parallel_env = parallel_wrapper_fn(env)
