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
import itertools
import random
from dataclasses import dataclass
from typing import Callable, ClassVar, Sequence, cast

import pyspiel

from ..facts import load_game
from ..facts.kuhn_poker import BET, GAME, PASS
from .base import ActionProbs, Archetype, Opponent, PolicyOpponent, Split, tabulate_policy

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

    @classmethod
    def from_bits(cls, bits: Sequence[float]) -> KuhnStrategy:
        """The strategy of twelve probabilities, three cards at a time in field order.

        >>> KuhnStrategy.from_bits([0, 0, 1] * 4) == KuhnStrategy.simple(bet=(0, 0, 1), call=(0, 0, 1))
        True
        """
        return cls(*(cast(CardProbs, tuple(bits[i:i + 3])) for i in range(0, 12, 3)))

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

class RandomStyle(Opponent):
    """A pure style drawn at random for each meta-episode: each of the twelve (decision point,
    card) choices of :class:`KuhnStrategy` is a coin flip, redrawn while the style is one of
    the held-out archetypes (so they stay unseen in training). The style is kept across the
    episodes of a meta-episode (:meth:`continue_episodes`) and redrawn at every other reset.
    Training against it asks the learner to read a style it has never met from the earlier
    hands, rather than to recognise a few.

    Example:
        >>> import random, pyspiel
        >>> opponent = RandomStyle()
        >>> opponent.reset(random.Random(3)); first = opponent.strategy
        >>> opponent.continue_episodes(random.Random(4)); opponent.strategy == first
        True
        >>> opponent.reset(random.Random(4)); opponent.strategy == first
        False
    """

    name = "random-style"
    stationary: ClassVar[bool] = False
    #: the held-out archetypes' styles, never drawn
    EXCLUDED = tuple(STRATEGIES[name][0] for name in ("bluffer", "calling-station", "maniac"))

    def __init__(self) -> None:
        self.strategy = STRATEGIES["conservative"][0]

    def reset(self, rng: random.Random) -> None:
        while True:
            strategy = KuhnStrategy.from_bits([float(rng.getrandbits(1)) for _ in range(12)])
            if strategy not in self.EXCLUDED:
                self.strategy = strategy
                return

    def continue_episodes(self, rng: random.Random) -> None:
        """Keep the style drawn for the meta-episode (a pure style draws nothing more)."""

    def action_probabilities(self, state: pyspiel.State) -> ActionProbs:
        """The move distribution of a style drawn afresh (what one episode against this
        opponent, before anything is known of its style, meets): among the styles that can be
        drawn and that took the opponent's own earlier moves of this hand, the share that
        bets. What the exact oracles use; :meth:`act` plays the drawn style."""
        return random_style_marginals()[state.information_state_string()]

    def act(self, state: pyspiel.State) -> int:
        return BET if self.strategy.bet_probability(state.information_state_string()) > 0.5 else PASS

    def meta_episode_draws(self) -> list[tuple[float, Opponent]]:
        """Each of the 4,093 styles, equally likely, as a deterministic opponent.

        Example:
            >>> draws = RandomStyle().meta_episode_draws()
            >>> len(draws), round(sum(p for p, _ in draws), 12)
            (4093, 1.0)
        """
        return list(_style_draws())


@functools.cache
def drawable_styles() -> tuple[KuhnStrategy, ...]:
    """The pure styles :class:`RandomStyle` draws from: every choice of the twelve bits but
    the held-out archetypes' styles (4,093)."""
    return tuple(style for bits in itertools.product((0.0, 1.0), repeat=12)
                 if (style := KuhnStrategy.from_bits(bits)) not in RandomStyle.EXCLUDED)


@functools.cache
def _style_draws() -> tuple[tuple[float, Opponent], ...]:
    """:meth:`RandomStyle.meta_episode_draws`, built once (each opponent keeps its move cache)."""
    styles = drawable_styles()
    return tuple((1.0 / len(styles), PolicyOpponent(RandomStyle.name, style.policy)) for style in styles)


@functools.cache
def random_style_marginals() -> dict[str, dict[int, float]]:
    """``{information state: {action: probability}}`` of :class:`RandomStyle` over one episode:
    the behaviour strategy equal to drawing one of its 4,093 styles, counted exactly.

    Example:
        >>> table = random_style_marginals()
        >>> {a: round(p, 4) for a, p in table["0"].items()}, table["1pb"][BET]   # Jack first; Queen after check-bet
        ({0: 0.5001, 1: 0.4999}, 0.5)
    """
    styles = drawable_styles()
    table = {}
    for card in range(3):
        for history in ("", "b", "p", "pb"):
            # at "pb" the opponent (first to act) checked before: only the styles that check this card
            drawn = [s for s in styles if history != "pb" or s.open[card] == 0.0]
            share = sum(s.bet_probability(f"{card}{history}") for s in drawn) / len(drawn)
            table[f"{card}{history}"] = {a: p for a, p in ((PASS, 1.0 - share), (BET, share)) if p > 0.0}
    return table


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
        "random-style",
        lambda game: RandomStyle(),
        "trainable",
        "a pure style drawn at random for each meta-episode (never a held-out one), kept for its episodes",
    ),
    Archetype(
        "cfr-argmax",
        functools.partial(_build, "cfr-argmax"),
        "trainable",
        "the deterministic argmax of OpenSpiel's CFR average policy (the paper's evaluation opponent)",
    ),
)
