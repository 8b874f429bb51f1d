"""Kuhn Poker archetypes.

OpenSpiel's Kuhn Poker (its facts: :mod:`mage_envs.facts.kuhn_poker`): cards 0=J,
1=Q, 2=K; actions 0=pass (check/fold), 1=bet (bet/call); an information state string is the card followed by the betting so far
(``"2pb"``: holding the King, I passed and the opponent bet). Every archetype is a
behaviour strategy over the four decision points of the game:

* ``open``: first to act (history ``""``) — probability of betting;
* ``check_raise_call``: first player after check–bet (``"pb"``) — probability of calling;
* ``bet_when_checked``: second player after a check (``"p"``) — probability of betting;
* ``call``: second player facing a bet (``"b"``) — probability of calling.

Example:
    >>> import pyspiel
    >>> game = pyspiel.load_game("kuhn_poker")
    >>> state = game.new_initial_state(); state.apply_action(0); state.apply_action(2)
    >>> make_opponent_policy("aggressive")(state)    # Jack, first to act: bets
    {0: 0.0, 1: 1.0}
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import pyspiel

from ..facts import load_game
from ..facts.kuhn_poker import BET, GAME, PASS
from .base import ActionProbs, Archetype, PolicyOpponent, Split, tabulate_policy

CardProbs = tuple[float, float, float]  # indexed by card J, Q, K


@dataclass(frozen=True)
class KuhnStrategy:
    """Bet/call probabilities per card at each of Kuhn's four decision points."""

    open: CardProbs
    check_raise_call: CardProbs
    bet_when_checked: CardProbs
    call: CardProbs

    @classmethod
    def simple(cls, bet: CardProbs, call: CardProbs) -> KuhnStrategy:
        """The same betting rule whether first or checked to; the same calling rule."""
        return cls(open=bet, check_raise_call=call, bet_when_checked=bet, call=call)

    def bet_probability(self, info_state: str) -> float:
        card, history = int(info_state[0]), info_state[1:]
        table = {
            "": self.open,
            "pb": self.check_raise_call,
            "p": self.bet_when_checked,
            "b": self.call,
        }[history]
        return table[card]

    def policy(self, state: pyspiel.State) -> ActionProbs:
        p_bet = self.bet_probability(state.information_state_string())
        return {PASS: 1.0 - p_bet, BET: float(p_bet)}


#: The equilibrium family's member with alpha = 1/6 (Kuhn 1950): the first player
#: bluffs the Jack with alpha, bets the King with 3*alpha, calls a check-raise with the
#: Queen with alpha + 1/3; the second player bluffs the Jack and calls with the Queen 1/3.
NASH_ALPHA = 1.0 / 6.0
NASH = KuhnStrategy(
    open=(NASH_ALPHA, 0.0, 3 * NASH_ALPHA),
    check_raise_call=(0.0, NASH_ALPHA + 1.0 / 3.0, 1.0),
    bet_when_checked=(1.0 / 3.0, 0.0, 1.0),
    call=(0.0, 1.0 / 3.0, 1.0),
)

STRATEGIES: dict[str, tuple[KuhnStrategy, Split, str]] = {
    "conservative": (
        KuhnStrategy.simple(bet=(0, 0, 1), call=(0, 0, 1)),
        "trainable",
        "bets or calls only with the King",
    ),
    "aggressive": (
        KuhnStrategy.simple(bet=(1, 1, 1), call=(0, 1, 1)),
        "trainable",
        "always bets when first or checked to; calls unless holding the Jack",
    ),
    "intermediate": (
        KuhnStrategy.simple(bet=(0, 1, 1), call=(0, 0, 1)),
        "trainable",
        "King: bet/call; Queen: bets when nobody has bet, folds to a bet; Jack: pass/fold",
    ),
    "random": (
        KuhnStrategy.simple(bet=(0.5, 0.5, 0.5), call=(0.5, 0.5, 0.5)),
        "trainable",
        "bets and calls with probability 1/2 whatever the card",
    ),
    "nash": (NASH, "trainable", "the exact equilibrium (alpha = 1/6), sampled as a mixed strategy"),
    "bluffer": (
        KuhnStrategy.simple(bet=(1, 0, 1), call=(0, 0, 1)),
        "heldout",
        "bets the Jack and the King, checks the Queen; calls only with the King",
    ),
    "calling-station": (
        KuhnStrategy.simple(bet=(0, 0, 0), call=(1, 1, 1)),
        "heldout",
        "never bets, always calls",
    ),
    "maniac": (
        KuhnStrategy.simple(bet=(1, 1, 1), call=(1, 1, 1)),
        "heldout",
        "always bets and always calls",
    ),
}

#: CFR iterations behind ``cfr-argmax`` (the argmax is stable from ~100 iterations on).
CFR_ITERATIONS = 2000


@functools.cache
def cfr_average_policy() -> dict[str, dict[int, float]]:
    """OpenSpiel's C++ CFR average policy after :data:`CFR_ITERATIONS`, solved once per process.

    Returned as ``{information state: {action: probability}}``.
    """
    game = load_game(GAME)
    solver = pyspiel.CFRSolver(game)
    for _ in range(CFR_ITERATIONS):
        solver.evaluate_and_update_policy()
    return tabulate_policy(game, solver.average_policy())


def cfr_argmax_policy(state: pyspiel.State) -> ActionProbs:
    """The deterministic argmax (ties to the lowest action) of the solved CFR policy."""
    probs = cfr_average_policy()[state.information_state_string()]
    best = max(sorted(probs), key=lambda a: probs[a])
    return {best: 1.0}


def make_opponent_policy(name: str) -> Callable[[pyspiel.State], ActionProbs]:
    """The move distribution of archetype ``name`` as a function of the state."""
    if name == "cfr-argmax":
        return cfr_argmax_policy
    return STRATEGIES[name][0].policy


def _build(name: str, game: pyspiel.Game) -> PolicyOpponent:
    return PolicyOpponent(name, make_opponent_policy(name))


#: The archetypes the registry loads for ``kuhn_poker``, in registration order.
ARCHETYPE_TABLE: tuple[Archetype, ...] = (
    *(
        Archetype(name, functools.partial(_build, name), split, description)
        for name, (_, split, description) in STRATEGIES.items()
    ),
    Archetype(
        "cfr-argmax",
        functools.partial(_build, "cfr-argmax"),
        "trainable",
        "the deterministic argmax of OpenSpiel's CFR average policy (the paper's evaluation opponent)",
    ),
)
