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

Example:
    >>> round(winnable_fraction("kuhn_poker", "conservative", seat=0), 4)
    0.6667
    >>> round(instance_optimal_value("kuhn_poker", "conservative", seat=0), 4)
    0.3333
"""

from __future__ import annotations

from collections.abc import Iterator

import pyspiel

from ..games.facts import load_game
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
    response value, which must play without knowing the opponent's cards.
    """
    g = load_game(game)
    opp = opponent if isinstance(opponent, Opponent) else make_opponent(game, opponent)
    deals = list(_deals(g))
    values = [sum(prob * _best_value(g.new_initial_state(), deal, s, opp) for deal, prob in deals) for s in seats(seat)]
    return sum(values) / len(values)


def _best_value(state: pyspiel.State, deal: Deal, seat: int, opponent: Opponent, drawn: int = 0) -> float:
    """Expectimax with the deal known: max over ``seat``'s actions, expectation over the opponent's."""
    if state.is_terminal():
        return state.returns()[seat]
    if state.is_chance_node():
        return _best_value(state.child(deal[drawn]), deal, seat, opponent, drawn + 1)
    if state.current_player() == seat:
        return max(_best_value(state.child(a), deal, seat, opponent, drawn) for a in state.legal_actions())
    probs = opponent.action_probabilities(state)
    if probs is None:
        raise ValueError(f"opponent {opponent.name!r} has no closed-form move distribution")
    return sum(p * _best_value(state.child(a), deal, seat, opponent, drawn) for a, p in probs.items() if p > 0)


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
