"""Leduc Poker as a text environment (``mage/LeducPoker-v0``).

Six cards (two each of Jack < Queen < King), one private card each, ante 1 chip; two
betting rounds with bets of 2 then 4 chips and at most two bets per round; a public card
is dealt between the rounds. A card pairing the public card wins, else the higher card.
The reward is the chips won or lost in the hand (times ``reward_scale``).

The engine's actions are 0=fold, 1=call, 2=raise; the agent sees ``check``/``bet`` when
no bet is faced and ``fold``/``call``/``raise`` facing one (``raise`` only below the cap).

Example:
    >>> env = LeducPokerEnv(opponent="calling-station", seat=0)
    >>> obs, info = env.reset(seed=0)
    >>> info["legal_actions"]
    ['check', 'bet']
    >>> obs, reward, terminated, truncated, info = env.step("<action>bet</action>")
    >>> obs.split("Moves so far:")[1].splitlines()[1:3]
    ['- You bet 2 chips.', '- Opponent calls 2 chips.']
    >>> "Public card: the" in obs, info["legal_actions"]     # round 2: the board is dealt
    (True, ['check', 'bet'])
"""

from __future__ import annotations

import pyspiel

from ..facts.leduc_poker import CALL, FOLD, RAISE, RANK_NAMES, card_rank
from .base import OpenSpielTextEnv
from .text import GameText

ANTE = 1
#: Bet and raise size in round 1 and round 2.
BET_SIZES = (2, 4)

_RULES = """You are playing Leduc Poker, a two-player card game.
- The deck has six cards: two Jacks, two Queens and two Kings (Jack < Queen < King). Each player antes 1 chip and is dealt one private card.
- There are two betting rounds; Player 1 acts first in both. After round 1 one public card is dealt face up, shared by both players.
- With no bet to face you may check or bet. Facing a bet you may fold (give up the hand), call (match the bet) or raise (match it and bet again). Bets and raises are 2 chips in round 1 and 4 chips in round 2, at most two per round (a bet and one raise).
- A round ends when both players check or a bet is called. A fold ends the hand at once: the other player wins the pot.
- At showdown a card that pairs the public card wins; otherwise the higher card wins; equal ranks split the pot.
- The winner wins the chips the loser put in the pot (at most 13).
You are Player {player} ({order})."""


def committed(state: pyspiel.State) -> list[int]:
    """Chips each player has put in the pot so far, ante included (player 0 acts first
    in both rounds, the engine's default ``starting_player``).

    Example:
        >>> state = pyspiel.load_game("leduc_poker").new_initial_state()
        >>> for action in (0, 3, RAISE, RAISE):    # deal J, Q; bet 2, raise 2
        ...     state.apply_action(action)
        >>> committed(state)
        [3, 5]
    """
    chips = [ANTE, ANTE]
    for size, actions in zip(BET_SIZES, (state.round1(), state.round2())):
        for turn, action in enumerate(actions):
            player = turn % 2
            if action == CALL:
                chips[player] = max(chips)
            elif action == RAISE:
                chips[player] = max(chips) + size
    return chips


def _card(card: int) -> str:
    return f"the {RANK_NAMES[card_rank(card)]}"


def _chips(amount: float) -> str:
    return f"{abs(amount):g} chip{'' if abs(amount) == 1 else 's'}"


class LeducPokerText(GameText):
    """The text layer of Leduc Poker: rules, action names, views, move lines."""

    game_string = "leduc_poker"
    title = "Leduc Poker"
    max_observation_chars = 2048

    def rules(self, seat: int) -> str:
        order = "you act first in each round" if seat == 0 else "you act second in each round"
        return _RULES.format(player=seat + 1, order=order)

    def action_names(self, state: pyspiel.State) -> dict[str, int]:
        legal = state.legal_actions()
        if FOLD not in legal:
            return {"check": CALL, "bet": RAISE}
        names = {"fold": FOLD, "call": CALL}
        if RAISE in legal:
            names["raise"] = RAISE
        return names

    def private_view(self, state: pyspiel.State, seat: int) -> str:
        history = state.history()
        card = _card(history[seat]) if len(history) > seat else "not dealt yet"
        public = _card(state.public_card()) if state.public_card() >= 0 else "not dealt yet"
        chips = committed(state)
        mine, theirs = chips[seat], chips[1 - seat]
        lines = [
            f"Your card: {card}.",
            f"Public card: {public}.",
            f"Betting round: {state.round()} of 2.",
            f"Pot: {_chips(mine + theirs)} (you put in {mine}, the opponent {theirs}).",
        ]
        if theirs > mine and not state.is_terminal():
            lines.append(f"To call you must add {_chips(theirs - mine)}.")
        return "\n".join(lines)

    def describe_move(self, state: pyspiel.State, player: int, action: int, seat: int) -> str | None:
        if player == pyspiel.PlayerId.CHANCE:
            if len(state.history()) < 2:
                return None  # private deals: the agent's card is in the private view
            return f"The public card is {_card(action)}."
        name = {a: n for n, a in self.action_names(state).items()}[action]
        who, verb = ("You", name) if player == seat else ("Opponent", name + "s")
        size = _chips(BET_SIZES[state.round() - 1])
        if name == "bet":
            return f"{who} {verb} {size}."
        if name == "raise":
            return f"{who} {verb} by {size}."
        if name == "call":
            chips = committed(state)
            return f"{who} {verb} {_chips(max(chips) - chips[player])}."
        return f"{who} {verb}."

    def forfeit_payoff(self, state: pyspiel.State, seat: int) -> float:
        """Forfeiting folds: the agent loses the chips it has put in the pot."""
        return -float(committed(state)[seat])

    def describe_end(self, state: pyspiel.State, seat: int) -> str:
        payoff = state.returns()[seat]
        result = "Nobody wins any chips."
        if payoff:
            result = f"You {'win' if payoff > 0 else 'lose'} {_chips(payoff)}."
        history = state.history()
        if history[-1] == FOLD:
            who = "you" if payoff < 0 else "the opponent"
            return f"Hand over: {who} folded. {result}"
        mine, theirs, board = history[seat], history[1 - seat], state.public_card()
        return (
            f"Hand over: showdown. You hold {_card(mine)}, the opponent holds {_card(theirs)} "
            f"and the public card is {_card(board)}. {_verdict(mine, theirs, board)} {result}"
        )


def _verdict(mine: int, theirs: int, board: int) -> str:
    """Why the showdown went the way it did, from the agent's side."""
    mine, theirs, board = card_rank(mine), card_rank(theirs), card_rank(board)
    if mine == theirs:
        return "Equal ranks: the pot is split."
    if mine == board:
        return f"Your pair of {RANK_NAMES[mine]}s wins."
    if theirs == board:
        return f"The opponent's pair of {RANK_NAMES[theirs]}s wins."
    if mine > theirs:
        return f"Your {RANK_NAMES[mine]} is the higher card."
    return f"The opponent's {RANK_NAMES[theirs]} is the higher card."


class LeducPokerEnv(OpenSpielTextEnv):
    """One hand of Leduc Poker against an opponent archetype; see :class:`OpenSpielTextEnv`."""

    default_opponent = "trainable"
    text_class = LeducPokerText
