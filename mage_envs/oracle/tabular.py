"""Exact oracles for small imperfect-information games (Kuhn, Leduc) on OpenSpiel's solvers.

An opponent with a closed-form move distribution is turned into a table
``{information state: [(action, probability), ...]}`` over every information state of its
seat; OpenSpiel then does the work: ``pyspiel.TabularBestResponse`` (best response),
``PolicyAggregator`` (the realization-equivalent behaviour strategy of a mixture),
``pyspiel.nash_conv`` / ``pyspiel.exploitability`` / ``pyspiel.expected_returns``.

Example:
    >>> import pyspiel
    >>> from mage_envs.opponents import PolicyOpponent
    >>> game = pyspiel.load_game("kuhn_poker")
    >>> always_bet = PolicyOpponent("always-bet", lambda state: {1: 1.0})
    >>> table = opponent_table(game, always_bet, seat=1)
    >>> round(best_response(game, 0, table).value_from_state(game.new_initial_state()), 6)
    0.333333
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyspiel
from open_spiel.python.algorithms.policy_aggregator import PolicyAggregator

from ..opponents.base import Opponent, decision_states

#: ``{information state: [(action, probability), ...]}``, the form pyspiel's solvers take.
PolicyTable = dict[str, list[tuple[int, float]]]


def closed_form(opponent: Opponent, state: pyspiel.State) -> Mapping[int, float]:
    """``opponent.action_probabilities(state)``, or a ``ValueError`` when it has none."""
    probs = opponent.action_probabilities(state)
    if probs is None:
        raise ValueError(
            f"opponent {opponent.name!r} has no closed-form move distribution "
            "(action_probabilities returned None); an exact oracle needs one"
        )
    return probs


def opponent_table(game: pyspiel.Game, opponent: Opponent, seat: int) -> PolicyTable:
    """The move distribution of ``opponent`` playing ``seat`` at each of that seat's
    information states, listing every legal action (probability 0 included)."""
    table: PolicyTable = {}
    for state in decision_states(game):
        if state.current_player() != seat:
            continue
        key = state.information_state_string()
        if key not in table:
            probs = closed_form(opponent, state)
            table[key] = [(a, float(probs.get(a, 0.0))) for a in state.legal_actions()]
    return table


def archetype_table(game: pyspiel.Game, opponent: Opponent) -> dict[str, dict[int, float]]:
    """``opponent`` playing both seats, as ``{information state: {action: probability}}``:
    the form :func:`nash_conv` and :func:`exploitability` take."""
    return {
        key: dict(probs) for seat in (0, 1) for key, probs in opponent_table(game, opponent, seat).items()
    }


def complete_table(game: pyspiel.Game, policy: Mapping[str, Mapping[int, float]]) -> PolicyTable:
    """``policy`` checked against the game tree for both seats: every information state must
    be present, actions legal and probabilities summing to one; absent legal actions get 0.

    Raises ``ValueError`` naming the first problem found.
    """
    table: PolicyTable = {}
    for state in decision_states(game):
        key = state.information_state_string()
        if key in table:
            continue
        if key not in policy:
            raise ValueError(f"the policy has no entry for information state {key!r}")
        probs = {int(a): float(p) for a, p in policy[key].items()}
        legal = state.legal_actions()
        if not set(probs) <= set(legal) or abs(sum(probs.values()) - 1.0) > 1e-6:
            raise ValueError(
                f"policy at {key!r} is {probs}; expected probabilities over legal actions "
                f"{legal} summing to 1"
            )
        table[key] = [(a, probs.get(a, 0.0)) for a in legal]
    return table


class _OpponentAsPolicy:
    """An :class:`Opponent` in the ``action_probabilities(state, player_id)`` shape that
    OpenSpiel's Python algorithms call."""

    def __init__(self, opponent: Opponent) -> None:
        self._opponent = opponent

    def action_probabilities(self, state: pyspiel.State, player_id: int | None = None) -> dict[int, float]:
        return dict(closed_form(self._opponent, state))


def mixture_table(
    game: pyspiel.Game, opponents: Sequence[Opponent], weights: Sequence[float], seat: int
) -> PolicyTable:
    """The behaviour strategy realization-equivalent to drawing ``opponents[k]`` with
    probability ``weights[k]`` once, for the whole game, and playing it in ``seat``:
    ``mix(I, a) = sum_k w_k r_k(I) sigma_k(I, a) / sum_k w_k r_k(I)`` with ``r_k(I)`` the
    archetype's own reach probability of ``I`` (OpenSpiel's ``PolicyAggregator``)."""
    policies = [_OpponentAsPolicy(o) for o in opponents]
    aggregate = PolicyAggregator(game).aggregate(
        [seat], [policies, policies], [list(weights), list(weights)]
    )
    return {key: sorted(probs.items()) for key, probs in aggregate.policy[0].items()}


def best_response(game: pyspiel.Game, seat: int, opponent: PolicyTable) -> pyspiel.TabularBestResponse:
    """OpenSpiel's exact best response for ``seat`` against the other seat's ``opponent``
    table; ``value_from_state(root)`` is its value, ``get_best_response_actions()`` the
    policy."""
    return pyspiel.TabularBestResponse(game, seat, opponent)


def nash_conv(game: pyspiel.Game, policy: Mapping[str, Mapping[int, float]]) -> float:
    """``pyspiel.nash_conv`` of a policy given for both seats (sum of both best-response gains)."""
    return float(pyspiel.nash_conv(game, complete_table(game, policy)))


def exploitability(game: pyspiel.Game, policy: Mapping[str, Mapping[int, float]]) -> float:
    """``pyspiel.exploitability`` of a policy given for both seats: ``nash_conv / 2``."""
    return float(pyspiel.exploitability(game, complete_table(game, policy)))


def self_play_returns(game: pyspiel.Game, policy: Mapping[str, Mapping[int, float]]) -> list[float]:
    """Both seats' expected returns when ``policy`` plays both seats (``pyspiel.expected_returns``)."""
    joint = pyspiel.TabularPolicy(complete_table(game, policy))
    return list(pyspiel.expected_returns(game.new_initial_state(), joint, -1, True))
