"""Leduc Poker archetypes.

OpenSpiel's Leduc Poker (its facts: :mod:`mage_envs.facts.leduc_poker`): six cards, card ``c`` has rank ``c // 2`` (0=J, 1=Q, 2=K) and
suit ``c % 2``; actions 0=fold, 1=call (a check when no bet is faced), 2=raise (a bet
when no bet is faced). Fold is legal only when facing a bet and raise only while the
round has had fewer than two bets. Each archetype reads what its information state
holds (the engine's ``LeducState`` exposes it): its card, the public card once dealt
and the legal actions, which tell whether it faces a bet and may raise.

Archetypes (train): ``nash`` (the shipped CFR+ policy, sampled), ``cfr-argmax`` (its
deterministic argmax), ``random``, ``conservative``, ``aggressive``, ``intermediate``;
(heldout): ``calling-station``, ``maniac``, ``bluffer``.

Example:
    >>> import pyspiel
    >>> state = pyspiel.load_game("leduc_poker").new_initial_state()
    >>> state.apply_action(0); state.apply_action(5)    # Jack for player 0, King for player 1
    >>> hand_view(state)
    HandView(rank=0, board=None, facing_bet=False, can_raise=True)
    >>> make_opponent_policy("conservative")(state)  # a lone Jack checks
    {1: 1.0}
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

import pyspiel

from ..facts.leduc_poker import CALL, FOLD, JACK, KING, NO_CARD, QUEEN, RAISE, card_rank
from .base import ActionProbs, Archetype, PolicyOpponent, Split

POLICY_FILE = "leduc_cfr_policy.json"


@dataclass(frozen=True)
class HandView:
    """What the player to move knows that the heuristic archetypes use."""

    rank: int
    board: int | None  # rank of the public card, None in round 1
    facing_bet: bool
    can_raise: bool

    @property
    def paired(self) -> bool:
        return self.board == self.rank

    @property
    def strong(self) -> bool:
        """A pair with the board or a King."""
        return self.paired or self.rank == KING


def hand_view(state: pyspiel.State) -> HandView:
    """The :class:`HandView` of the player to move (a decision node of Leduc Poker)."""
    legal = state.legal_actions()
    public = state.public_card()
    return HandView(
        rank=card_rank(state.private_card(state.current_player())),
        board=None if public == NO_CARD else card_rank(public),
        facing_bet=FOLD in legal,
        can_raise=RAISE in legal,
    )


def raise_or_call(view: HandView) -> int:
    """Raise (or bet) when allowed, otherwise call."""
    return RAISE if view.can_raise else CALL


def check_or_fold(view: HandView) -> int:
    """Fold facing a bet, otherwise check."""
    return FOLD if view.facing_bet else CALL


def conservative(view: HandView) -> int:
    """Bets, raises and calls with a strong hand only; otherwise checks or folds."""
    return raise_or_call(view) if view.strong else check_or_fold(view)


def aggressive(view: HandView) -> int:
    """Raises whenever allowed, else calls; folds an unpaired Jack facing a bet."""
    if view.facing_bet and view.rank == JACK and not view.paired:
        return FOLD
    return raise_or_call(view)


def intermediate(view: HandView) -> int:
    """Strong hand: raise/call; unpaired Queen: bets when unopposed, calls a bet; Jack: check/fold."""
    if view.strong:
        return raise_or_call(view)
    if view.rank == QUEEN:
        return CALL if view.facing_bet else RAISE
    return check_or_fold(view)


def calling_station(view: HandView) -> int:
    """Never bets or raises; checks or calls."""
    return CALL


def maniac(view: HandView) -> int:
    """Raises whenever allowed, otherwise calls; never folds."""
    return raise_or_call(view)


def bluffer(view: HandView) -> int:
    """Raises a strong hand or an unpaired Jack whenever allowed (past the cap the strong
    hand calls, the Jack folds); an unpaired Queen checks or folds."""
    if view.strong:
        return raise_or_call(view)
    if view.rank == JACK and view.can_raise:
        return RAISE
    return check_or_fold(view)


def random_policy(state: pyspiel.State) -> ActionProbs:
    """Uniform over the legal actions."""
    legal = state.legal_actions()
    return {a: 1.0 / len(legal) for a in legal}


@functools.cache
def load_cfr_file() -> dict[str, Any]:
    """The shipped CFR+ solution (``metadata`` and ``policy``), read once per process.

    Made by ``scripts/solve_leduc.py``; ``policy`` maps information state strings to
    ``{action: probability}`` with string action keys as stored.
    """
    text = resources.files("mage_envs").joinpath("data").joinpath(POLICY_FILE).read_text()
    return json.loads(text)


@functools.cache
def cfr_policy_table() -> dict[str, dict[int, float]]:
    """The CFR+ average policy as ``{information state: {action: probability}}``.

    Example:
        >>> cfr_policy_table()["[Observer: 0][Private: 0][Round 1][Player: 0][Pot: 2][Money: 99 99][Round1: ][Round2: ]"]
        {1: 0.9272, 2: 0.0728}
    """
    policy = load_cfr_file()["policy"]
    return {key: {int(a): p for a, p in probs.items()} for key, probs in policy.items()}


def nash_policy(state: pyspiel.State) -> ActionProbs:
    """The shipped CFR+ average policy (NashConv ~6e-4 chips)."""
    return cfr_policy_table()[state.information_state_string()]


def cfr_argmax_policy(state: pyspiel.State) -> ActionProbs:
    """The deterministic argmax (ties to the lowest action) of the shipped CFR+ policy."""
    probs = nash_policy(state)
    best = max(sorted(probs), key=lambda a: probs[a])
    return {best: 1.0}


def pure(rule: Callable[[HandView], int]) -> Callable[[pyspiel.State], ActionProbs]:
    """A pure policy from a rule on the :class:`HandView`."""

    def policy(state: pyspiel.State) -> ActionProbs:
        return {rule(hand_view(state)): 1.0}

    policy.__doc__ = rule.__doc__
    return policy


#: id -> (policy, split, description)
ARCHETYPES: dict[str, tuple[Callable[[pyspiel.State], ActionProbs], Split, str]] = {
    "nash": (nash_policy, "trainable", "the shipped CFR+ equilibrium, sampled as a mixed strategy"),
    "cfr-argmax": (cfr_argmax_policy, "trainable", "the deterministic argmax of the shipped CFR+ policy"),
    "random": (random_policy, "trainable", "uniform over the legal actions"),
    "conservative": (
        pure(conservative),
        "trainable",
        "bets, raises and calls only with a pair or a King; otherwise checks or folds",
    ),
    "aggressive": (
        pure(aggressive),
        "trainable",
        "raises whenever allowed, else calls; folds only an unpaired Jack facing a bet",
    ),
    "intermediate": (
        pure(intermediate),
        "trainable",
        "pair or King: raise/call; Queen: bets when unopposed, calls a bet; Jack: check/fold",
    ),
    "calling-station": (pure(calling_station), "heldout", "never bets or raises, always checks or calls"),
    "maniac": (pure(maniac), "heldout", "raises whenever allowed, otherwise calls; never folds"),
    "bluffer": (
        pure(bluffer),
        "heldout",
        "raises with a pair, a King or a Jack (folding the Jack to a re-raise); checks/folds a Queen",
    ),
}


def make_opponent_policy(name: str) -> Callable[[pyspiel.State], ActionProbs]:
    """The move distribution of archetype ``name`` as a function of the state."""
    return ARCHETYPES[name][0]


def _build(name: str, game: pyspiel.Game) -> PolicyOpponent:
    return PolicyOpponent(name, make_opponent_policy(name))


#: The archetypes the registry loads for ``leduc_poker``, in registration order.
ARCHETYPE_TABLE: tuple[Archetype, ...] = tuple(
    Archetype(name, functools.partial(_build, name), split, description)
    for name, (_, split, description) in ARCHETYPES.items()
)
