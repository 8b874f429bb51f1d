"""Winnable fraction: the success ceiling of repeat-instance meta-episodes.

In repeat-instance mode every episode of a meta-episode replays the same deal and seat.
Against a deterministic opponent an agent that has learnt everything can, at best, win
exactly the instances on which *some* sequence of its actions ends with a positive return.

An instance is a full sequence of chance outcomes (a deal) and a seat. The env draws the
outcome of the k-th chance event from the instance alone, so this assumes chance outcomes
do not depend on the players' actions (true for the poker deals and trivially for
Tic-Tac-Toe, which has none).

:func:`instance_optimal_value` is the matching return ceiling: the expected return of an
agent that knows the deal (as it can after earlier episodes of the same instance revealed
it) and best-responds to the opponent's known move distribution.
:func:`best_response_instance_value` is the ceiling of a hand on a fresh deal: the best
response, which does not see the deal, played on that one deal.

Example:
    >>> round(winnable_fraction("kuhn_poker", "conservative", seat=0), 4)
    0.6667
    >>> round(instance_optimal_value("kuhn_poker", "conservative", seat=0), 4)
    0.3333
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterator

import pyspiel

from ..facts import load_game
from ..games.engine import ChanceStream
from ..opponents.base import Opponent
from ..opponents.registry import make_opponent
from .result import Seat, seats

Deal = tuple[int, ...]


def winnable_fraction(game: str, opponent: str | Opponent, seat: Seat = "random") -> float:
    """Probability (over deals and, for ``"random"``, both seats equally) that an instance
    can be won against the deterministic ``opponent``.

    Raises ``ValueError`` when the opponent is stochastic or has no closed-form policy.
    """
    g = load_game(game)
    opp = opponent if isinstance(opponent, Opponent) else make_opponent(game, opponent)
    deals = list(_deals(g))
    fractions = [
        sum(prob for deal, prob in deals if _can_win(g.new_initial_state(), deal, s, opp))
        for s in seats(seat)
    ]
    return sum(fractions) / len(fractions)


def instance_optimal_value(game: str, opponent: str | Opponent, seat: Seat = "random") -> float:
    """Expected return (over deals and, for ``"random"``, both seats) of the best play that
    knows the deal, against ``opponent``'s exact move distribution (stochastic allowed).

    The ceiling of the final episode of a repeat-instance meta-episode: above the best
    response value, which must play without knowing the opponent's cards. An opponent that
    draws a policy per meta-episode and keeps it (:meth:`~mage_envs.opponents.Opponent.meta_episode_draws`,
    e.g. Kuhn's ``random-style``) is met knowing the drawn policy too: the expectation of each
    draw's ceiling, which is above the ceiling against its one-episode move distribution.
    """
    g = load_game(game)
    opp = opponent if isinstance(opponent, Opponent) else make_opponent(game, opponent)
    deals = list(_deals(g))
    values = [sum(prob * _drawn_value(g, deal, s, opp) for deal, prob in deals) for s in seats(seat)]
    return sum(values) / len(values)


def _drawn_value(game: pyspiel.Game, deal: Deal, seat: int, opponent: Opponent) -> float:
    """The deal-known best return against ``opponent``, or the expectation over the policies it
    draws per meta-episode (each known)."""
    draws = opponent.meta_episode_draws() or [(1.0, opponent)]
    return sum(p * _value(game.new_initial_state(), deal, seat, drawn) for p, drawn in draws)


def _value(state: pyspiel.State, deal: Deal, seat: int, opponent: Opponent, *,
           play: Callable[[pyspiel.State], int] | None = None, drawn: int = 0) -> float:
    """``seat``'s expected return with chance following ``deal`` and the opponent's moves drawn
    from its distribution: playing ``play``'s moves, or the best ones knowing the deal (``None``:
    expectimax, max over ``seat``'s actions)."""
    if state.is_terminal():
        return state.returns()[seat]
    if state.is_chance_node():
        return _value(state.child(deal[drawn]), deal, seat, opponent, play=play, drawn=drawn + 1)
    if state.current_player() == seat:
        if play is not None:
            return _value(state.child(play(state)), deal, seat, opponent, play=play, drawn=drawn)
        return max(_value(state.child(a), deal, seat, opponent, drawn=drawn) for a in state.legal_actions())
    probs = opponent.action_probabilities(state)
    if probs is None:
        raise ValueError(f"opponent {opponent.name!r} has no closed-form move distribution")
    return sum(p * _value(state.child(a), deal, seat, opponent, play=play, drawn=drawn)
               for a, p in probs.items() if p > 0)


def _deals(game: pyspiel.Game) -> Iterator[tuple[Deal, float]]:
    """Every complete sequence of chance outcomes with its probability.

    Collected over all histories; a sequence that is a strict prefix of another (a hand
    that ended before a later card was dealt) is not a complete deal.
    """
    if game.get_type().chance_mode == pyspiel.GameType.ChanceMode.DETERMINISTIC:
        return iter([((), 1.0)])
    found: dict[Deal, float] = {}
    stack: list[tuple[pyspiel.State, Deal, float]] = [(game.new_initial_state(), (), 1.0)]
    while stack:
        state, deal, prob = stack.pop()
        if state.is_terminal():
            found[deal] = prob
        elif state.is_chance_node():
            stack.extend((state.child(a), deal + (a,), prob * p) for a, p in state.chance_outcomes())
        else:
            stack.extend((state.child(a), deal, prob) for a in state.legal_actions())
    prefixes = {deal[:k] for deal in found for k in range(len(deal))}
    return ((deal, prob) for deal, prob in found.items() if deal not in prefixes)


def _can_win(state: pyspiel.State, deal: Deal, seat: int, opponent: Opponent, drawn: int = 0) -> bool:
    """Whether some sequence of ``seat``'s actions wins from ``state`` with chance following ``deal``."""
    if state.is_terminal():
        return state.returns()[seat] > 0
    if state.is_chance_node():
        return _can_win(state.child(deal[drawn]), deal, seat, opponent, drawn + 1)
    if state.current_player() == seat:
        return any(_can_win(state.child(a), deal, seat, opponent, drawn) for a in state.legal_actions())
    return _can_win(state.child(_deterministic_move(opponent, state)), deal, seat, opponent, drawn)


def _deterministic_move(opponent: Opponent, state: pyspiel.State) -> int:
    probs = opponent.action_probabilities(state)
    if probs is None:
        raise ValueError(
            f"opponent {opponent.name!r} has no closed-form move distribution; "
            "winnable_fraction needs a deterministic opponent"
        )
    support = [a for a, p in probs.items() if p > 0]
    if len(support) != 1:
        raise ValueError(
            f"opponent {opponent.name!r} is stochastic (plays {dict(probs)} in "
            f"{state.information_state_string()!r}); winnable_fraction needs a deterministic opponent"
        )
    return support[0]


def instance_deal(game: str, instance: int) -> Deal:
    """The chance outcomes an env draws for ``instance`` (its :class:`ChanceStream`), in order.

    The game is walked along actions that keep it going, so every chance event of the
    instance is reached (the outcomes do not depend on the actions, as assumed above).

    Example:
        >>> instance_deal("kuhn_poker", 17), instance_deal("tic_tac_toe", 17)
        ((2, 0), ())
    """
    state = load_game(game).new_initial_state()
    stream = ChanceStream(instance)
    deal: list[int] = []
    while not state.is_terminal():
        if state.is_chance_node():
            action = stream.sample(state)
            deal.append(action)
        else:
            legal = state.legal_actions()
            action = next((a for a in legal if not state.child(a).is_terminal()), legal[0])
        state.apply_action(action)
    return tuple(deal)


def instance_value(game: str, opponent: str, instance: int, seat: int) -> float:
    """The deal-known best return of one instance (deal and seat) against ``opponent``:
    :func:`instance_optimal_value` on that instance alone.

    Example:
        >>> instance_value("kuhn_poker", "conservative", 17, seat=1)   # they hold the King, we the Jack
        -1.0
    """
    return _deal_value(game, opponent, instance_deal(game, instance), seat)


def best_response_instance_value(game: str, opponent: str, instance: int, seat: int) -> float:
    """The expected return of the best response to ``opponent`` (which plays without seeing
    the opponent's cards) on one instance: the deal fixed, the opponent's moves drawn from
    its distribution. Averaged over every instance equally it is the best-response value;
    averaged over the instances of fresh-deal hands it is their ceiling on that very sample.
    Where several moves are equally good over all deals, OpenSpiel's best response picks one,
    so on a given sample another equally good policy can score above it, by chance.

    Example (instance 17: we hold the Jack in seat 1, the conservative opponent the King):
        >>> best_response_instance_value("kuhn_poker", "conservative", 17, seat=1)
        -1.0
        >>> best_response_instance_value("kuhn_poker", "conservative", 0, seat=0)  # Jack against Queen: a bluff
        1.0
    """
    return _best_response_deal_value(game, opponent, instance_deal(game, instance), seat)


@functools.lru_cache(maxsize=65_536)
def _best_response_deal_value(game: str, opponent: str, deal: Deal, seat: int) -> float:
    play = _best_response(game, opponent, seat)
    return _value(load_game(game).new_initial_state(), deal, seat, _opponent(game, opponent), play=play)


@functools.lru_cache(maxsize=256)
def _best_response(game: str, opponent: str, seat: int) -> Callable[[pyspiel.State], int]:
    from .values import best_response_policy

    return best_response_policy(game, opponent, seat)


@functools.lru_cache(maxsize=65_536)
def _deal_value(game: str, opponent: str, deal: Deal, seat: int) -> float:
    return _drawn_value(load_game(game), deal, seat, _opponent(game, opponent))


@functools.lru_cache(maxsize=256)
def _opponent(game: str, name: str) -> Opponent:
    return make_opponent(game, name)


def stratified_instances(game: str, count: int, seed: int = 0, seat_from_instance: bool = True) -> list[int]:
    """``count`` instance numbers that cover every (deal, seat) cell of ``game`` in turn.

    An env with ``seat="random"`` takes the seat from the instance's lowest bit, so a cell
    is a deal and a seat; with a fixed seat (``seat_from_instance=False``) a cell is a deal.
    Cells come round in a seeded order, each round holding every cell once, so a count
    that is a multiple of the number of cells weighs every cell equally: returns and oracle
    values then share one sample without deal noise (Kuhn Poker: 6 deals x 2 seats).
    Instances are found by scanning numbers from ``seed * 2**32``.

    Example:
        >>> instances = stratified_instances("kuhn_poker", 12)
        >>> len({(instance_deal("kuhn_poker", k), k & 1) for k in instances})
        12
    """
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    deals = sorted(deal for deal, _ in _deals(load_game(game)))
    cells = [(deal, s) for deal in deals for s in ((0, 1) if seat_from_instance else (0,))]
    order = random.Random(seed).sample(cells, len(cells))
    rounds = -(-count // len(cells))
    found: dict[tuple[Deal, int], list[int]] = {cell: [] for cell in cells}
    missing = len(cells) * rounds
    number = seed * 2**32
    while missing:
        cell = (instance_deal(game, number), number & 1 if seat_from_instance else 0)
        if cell in found and len(found[cell]) < rounds:
            found[cell].append(number)
            missing -= 1
        number += 1
    return [found[cell][r] for r in range(rounds) for cell in order][:count]


def deal_known_action(game: str, opponent: str, state: pyspiel.State, instance: int, seat: int) -> int:
    """The best action in ``state`` (``seat`` to move) knowing the instance's deal and the
    opponent's move distribution: what :func:`instance_value` assumes the agent plays.

    Example (instance 17: we hold the Jack in seat 1, the conservative opponent the King and checks):
        >>> state = load_game("kuhn_poker").new_initial_state()
        >>> for action in (2, 0, 0):   # the deal (King, Jack), then the opponent's check
        ...     state.apply_action(action)
        >>> deal_known_action("kuhn_poker", "conservative", state, 17, seat=1)   # check: a bet gets called
        0
    """
    deal = instance_deal(game, instance)
    drawn = sum(1 for step in state.full_history() if step.player == pyspiel.PlayerId.CHANCE)
    opp = _opponent(game, opponent)
    return max(state.legal_actions(), key=lambda a: _value(state.child(a), deal, seat, opp, drawn=drawn))
