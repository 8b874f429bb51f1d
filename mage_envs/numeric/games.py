"""The numeric view of each game: ``mage/<Game>-tensor-v0``.

Each class names its OpenSpiel game, takes the forfeit payoff of the game's text layer (a
fold in poker) and says which card a showdown reveals.

Example:
    >>> env = LeducPokerTensorEnv(opponent="calling-station", seat=0)
    >>> obs, info = env.reset(seed=0)
    >>> obs, reward, terminated, truncated, info = env.step(1)    # check
    >>> obs, reward, terminated, truncated, info = env.step(1)    # check: showdown
    >>> terminated, float(env.episode_summary()[-6:].sum())       # the opponent's card shown
    (True, 1.0)
"""

from __future__ import annotations

import pyspiel

from ..facts.kuhn_poker import BET, PASS
from ..facts.leduc_poker import FOLD
from ..games.kuhn_poker import KuhnPokerText
from ..games.leduc_poker import LeducPokerText
from .env import OpenSpielTensorEnv


class KuhnPokerTensorEnv(OpenSpielTensorEnv):
    """Kuhn Poker (observation 11 floats, actions 0=check/fold, 1=bet/call)."""

    game_string = "kuhn_poker"
    revealed_size = 3
    forfeit_payoff = KuhnPokerText.forfeit_payoff

    def revealed_card(self, state: pyspiel.State, seat: int) -> int | None:
        history = state.history()
        return None if history[-2:] == [BET, PASS] else history[1 - seat]


class LeducPokerTensorEnv(OpenSpielTensorEnv):
    """Leduc Poker (observation 30 floats, actions 0=fold, 1=check/call, 2=bet/raise)."""

    game_string = "leduc_poker"
    revealed_size = 6
    forfeit_payoff = LeducPokerText.forfeit_payoff

    def revealed_card(self, state: pyspiel.State, seat: int) -> int | None:
        history = state.history()
        return None if history[-1] == FOLD else history[1 - seat]


class TicTacToeTensorEnv(OpenSpielTensorEnv):
    """Tic-Tac-Toe (observation: seat one-hot + 27 floats of empty/O/X planes; action = cell 0..8)."""

    game_string = "tic_tac_toe"
    keep_first_view = False  # random play shows most histories once
