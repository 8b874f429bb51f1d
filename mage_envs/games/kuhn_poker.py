"""Kuhn Poker as a text environment (``mage/KuhnPoker-v0``).

Three cards (Jack < Queen < King), one each, ante 1 chip; one betting round with bets
of 1 chip. The reward is the chips won or lost in the hand (times ``reward_scale``).

Example:
    >>> env = KuhnPokerEnv(opponent="conservative", seat=0)
    >>> obs, info = env.reset(seed=3)
    >>> info["legal_actions"]
    ['check', 'bet']
    >>> obs, reward, terminated, truncated, info = env.step("<action>check</action>")
"""

from __future__ import annotations

import pyspiel

from ..facts.kuhn_poker import BET, CARD_NAMES, PASS
from .base import OpenSpielTextEnv
from .text import GameText

_RULES = """You are playing Kuhn Poker, a two-player card game.
- The deck has three cards: Jack < Queen < King. Each player antes 1 chip and gets one card; the third card is unseen.
- Player 1 acts first: check or bet 1 chip. If Player 1 checks, Player 2 may check (showdown) or bet 1 chip.
- Facing a bet you may fold (lose the chips you put in) or call (match the bet and go to showdown).
- At showdown the higher card wins the pot. Payoffs: check-check wins 1 chip, bet-call wins 2 chips, a fold loses what the folder put in (1 chip).
You are Player {player} ({order})."""


def _facing_bet(state: pyspiel.State) -> bool:
    return BET in state.history()[2:]


class KuhnPokerText(GameText):
    """The text layer of Kuhn Poker: rules, action names, views, move lines."""

    game_string = "kuhn_poker"
    title = "Kuhn Poker"
    max_observation_chars = 2048

    def rules(self, seat: int) -> str:
        order = "you act first" if seat == 0 else "you act second"
        return _RULES.format(player=seat + 1, order=order)

    def action_names(self, state: pyspiel.State) -> dict[str, int]:
        if _facing_bet(state):
            return {"fold": PASS, "call": BET}
        return {"check": PASS, "bet": BET}

    def private_view(self, state: pyspiel.State, seat: int) -> str:
        history = state.history()
        card = CARD_NAMES[history[seat]] if len(history) > seat else "no card yet"
        return f"Your card: {card}."

    def describe_move(self, state: pyspiel.State, player: int, action: int, seat: int) -> str | None:
        if player == pyspiel.PlayerId.CHANCE:
            return None  # the agent's card is in the private view; the opponent's is hidden
        who = "You" if player == seat else "Opponent"
        facing = _facing_bet(state)
        verb = ("call" if action == BET else "fold") if facing else ("bet" if action == BET else "check")
        if who == "Opponent":
            verb += "s"
        return f"{who} {verb}."

    def forfeit_payoff(self, state: pyspiel.State, seat: int) -> float:
        """Forfeiting folds: the agent loses its ante and any bet it made."""
        bets = state.history()[2 + seat :: 2]
        return -(1.0 + bets.count(BET))

    def describe_end(self, state: pyspiel.State, seat: int) -> str:
        history = state.history()
        payoff = state.returns()[seat]
        chips = f"{abs(payoff):g} chip{'s' if abs(payoff) != 1 else ''}"
        result = f"You win {chips}." if payoff > 0 else f"You lose {chips}."
        folded = history[-2:] == [BET, PASS]
        if folded:
            return f"Hand over: a player folded. {result}"
        mine, theirs = CARD_NAMES[history[seat]], CARD_NAMES[history[1 - seat]]
        return f"Hand over: showdown, you hold the {mine} and the opponent holds the {theirs}. {result}"


class KuhnPokerEnv(OpenSpielTextEnv):
    """One hand of Kuhn Poker against an opponent archetype; see :class:`OpenSpielTextEnv`."""

    text_class = KuhnPokerText
