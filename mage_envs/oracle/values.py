"""The value oracles: best response, best non-adaptive policy, equilibrium, exploitability.

Values are expected returns in game units (chips; ±1 per Tic-Tac-Toe game) for the agent
in ``seat``, before any env ``reward_scale``. Imperfect-information games (Kuhn, Leduc)
use OpenSpiel's tabular solvers; perfect-information games (Tic-Tac-Toe) use expectimax
over the opponent's known move distribution, or an estimate when the opponent is a search
bot without one (``exact=False``).

Example:
    >>> v = best_response_value("kuhn_poker", "aggressive", seat=0)
    >>> v.exact, round(v.value, 4)
    (True, 0.3333)
    >>> round(equilibrium_value("kuhn_poker", 0), 6)
    -0.055556
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence

import pyspiel
from open_spiel.python.algorithms import minimax

from ..facts import load_game
from ..opponents.base import Opponent
from ..opponents.population import OpponentSpec, as_population
from ..opponents.registry import make_opponent
from . import tabular
from .expectimax import Expectimax
from .result import OracleValue, Seat, seats
from .sampled import monte_carlo_value, opponent_model

#: An equilibrium table whose NashConv exceeds this is rejected by :func:`equilibrium_value`.
NASH_CONV_TOLERANCE = 1e-3


def best_response_value(
    game: str,
    opponent: str | Opponent,
    seat: Seat = "random",
    *,
    model_samples: int = 8,
    eval_games: int = 200,
    seed: int = 0,
) -> OracleValue:
    """Expected return of the best response to ``opponent`` for the agent in ``seat``.

    Exact for opponents with ``action_probabilities``: ``pyspiel.TabularBestResponse``
    against the opponent's table in poker, expectimax in Tic-Tac-Toe. Against a search bot
    in a perfect-information game it is an estimate (``exact=False``): the bot is modelled
    by ``model_samples`` seeded runs per position, the model is best-responded to by
    expectimax, and that policy plays ``eval_games`` seeded games per seat against the real
    bot (mean ± standard error). Being the value of one concrete policy, the estimate is,
    up to its standard error, a lower bound on the true best-response value; more
    ``model_samples`` tighten it.

    Example:
        >>> from mage_envs.opponents import PolicyOpponent
        >>> always_bet = PolicyOpponent("always-bet", lambda state: {1: 1.0})
        >>> round(best_response_value("kuhn_poker", always_bet, seat=0).value, 6)
        0.333333
    """
    return best_nonadaptive_value(
        game, [_resolve(game, opponent)], seat,
        model_samples=model_samples, eval_games=eval_games, seed=seed,
    )


def best_response_policy(
    game: str,
    opponent: str | Opponent,
    seat: int,
    *,
    model_samples: int = 8,
    seed: int = 0,
) -> Callable[[pyspiel.State], int]:
    """The best response itself: a function from a live state (``seat`` to move) to an
    action id. Poker: ``pyspiel.TabularBestResponse``'s actions per information state;
    Tic-Tac-Toe: expectimax moves (against a sampled model for a search bot).

    Example:
        >>> import pyspiel
        >>> play = best_response_policy("kuhn_poker", "conservative", seat=0)
        >>> state = pyspiel.load_game("kuhn_poker").new_initial_state()
        >>> state.apply_action(0); state.apply_action(1)   # we hold the Jack
        >>> play(state)   # bluff: the conservative opponent folds everything but the King
        1
    """
    g = load_game(game)
    opp = _resolve(game, opponent)
    if _perfect_information(g):
        model, _ = opponent_model(g, opp, 1 - seat, model_samples, seed)
        return Expectimax(seat, [model], [1.0], max_value=g.max_utility()).best_action
    table = tabular.opponent_table(g, opp, 1 - seat)
    actions = tabular.best_response(g, seat, table).get_best_response_actions()
    return lambda state: actions[state.information_state_string()]


def best_nonadaptive_value(
    game: str,
    population: OpponentSpec,
    seat: Seat = "random",
    *,
    model_samples: int = 8,
    eval_games: int = 200,
    seed: int = 0,
) -> OracleValue:
    """Value of the best *fixed* policy against an archetype drawn once from ``population``
    (a :class:`~mage_envs.opponents.Population`, list or dict of ids, or opponents) and
    never revealed: the ceiling for an agent that does not learn within a meta-episode.

    Poker: best response to the realization-equivalent mixture behaviour strategy.
    Tic-Tac-Toe: expectimax carrying the posterior over archetypes. Search bots in the
    population make it an estimate, as in :func:`best_response_value`.

    Example:
        >>> v = best_nonadaptive_value("kuhn_poker", ["conservative", "aggressive", "intermediate"])
        >>> round(v.value, 4)
        0.1111
    """
    members = as_population(game, population)
    opponents = [members.build(game, opponent_id) for opponent_id in members.ids]
    return OracleValue.average(
        [
            _value_against(game, opponents, members.weights, s, model_samples, eval_games, seed)
            for s in seats(seat)
        ]
    )


@functools.cache
def equilibrium_value(game: str, seat: Seat = 0) -> float:
    """The equilibrium (game) value for ``seat``; cached.

    Poker: the registered ``nash`` archetype playing both seats (``pyspiel.expected_returns``),
    after checking its ``pyspiel.nash_conv`` is below :data:`NASH_CONV_TOLERANCE` — exact
    for Kuhn (-1/18 for seat 0); for Leduc the shipped CFR+ policy gives ≈ -0.0856.
    Perfect-information games: alpha-beta search (Tic-Tac-Toe: 0).

    Example:
        >>> equilibrium_value("tic_tac_toe", 0)
        0.0
    """
    g = load_game(game)
    values = []
    for s in seats(seat):
        if _perfect_information(g):
            values.append(float(minimax.alpha_beta_search(g, maximizing_player_id=s)[0]))
        else:
            values.append(tabular.self_play_returns(g, _nash_table(game))[s])
    return sum(values) / len(values)


def exploitability(game: str, policy_table: Mapping[str, Mapping[int, float]]) -> float:
    """``pyspiel.exploitability`` of an agent policy ``{information state: {action: prob}}``
    covering both seats: the mean of the two best responders' gains (``nash_conv / 2``).

    Example:
        >>> import pyspiel
        >>> from mage_envs.opponents.base import tabulate_policy
        >>> uniform = tabulate_policy(pyspiel.load_game("kuhn_poker"),
        ...     pyspiel.UniformRandomPolicy(pyspiel.load_game("kuhn_poker")))
        >>> round(exploitability("kuhn_poker", uniform), 6)   # 11/24
        0.458333
    """
    return tabular.exploitability(load_game(game), policy_table)


def nash_conv(game: str, policy_table: Mapping[str, Mapping[int, float]]) -> float:
    """``pyspiel.nash_conv`` of a policy covering both seats (the sum of both best-response gains).

    Example:
        >>> from mage_envs.opponents.kuhn_poker import cfr_average_policy
        >>> nash_conv("kuhn_poker", cfr_average_policy()) < 0.01
        True
    """
    return tabular.nash_conv(load_game(game), policy_table)


# ---------------------------------------------------------------------- internals
def _resolve(game: str, opponent: str | Opponent) -> Opponent:
    return opponent if isinstance(opponent, Opponent) else make_opponent(game, opponent)


def _perfect_information(game: pyspiel.Game) -> bool:
    return game.get_type().information == pyspiel.GameType.Information.PERFECT_INFORMATION


@functools.cache
def _nash_table(game: str) -> dict[str, dict[int, float]]:
    """The ``nash`` archetype over both seats, checked by NashConv."""
    g = load_game(game)
    table = tabular.archetype_table(g, make_opponent(game, "nash"))
    gap = tabular.nash_conv(g, table)
    if gap > NASH_CONV_TOLERANCE:
        raise RuntimeError(f"the {game!r} 'nash' archetype has NashConv {gap:.3g}; not an equilibrium")
    return table


def _value_against(
    game: str,
    opponents: Sequence[Opponent],
    weights: Sequence[float],
    seat: int,
    model_samples: int,
    eval_games: int,
    seed: int,
) -> OracleValue:
    g = load_game(game)
    if _perfect_information(g):
        return _expectimax_value(g, opponents, weights, seat, model_samples, eval_games, seed)
    if len(opponents) == 1:
        table = tabular.opponent_table(g, opponents[0], 1 - seat)
        method = "pyspiel.TabularBestResponse to the opponent's table"
    else:
        table = tabular.mixture_table(g, opponents, weights, 1 - seat)
        method = "pyspiel.TabularBestResponse to the realization-equivalent mixture"
    value = tabular.best_response(g, seat, table).value_from_state(g.new_initial_state())
    return OracleValue(float(value), method=method)


def _expectimax_value(
    game: pyspiel.Game,
    opponents: Sequence[Opponent],
    weights: Sequence[float],
    seat: int,
    model_samples: int,
    eval_games: int,
    seed: int,
) -> OracleValue:
    models, exact = zip(*(opponent_model(game, o, 1 - seat, model_samples, seed) for o in opponents))
    solver = Expectimax(seat, models, weights, max_value=game.max_utility())
    root = game.new_initial_state()
    if all(exact):
        return OracleValue(solver.value(root), method="expectimax over the opponent's move distribution")
    value = variance = 0.0
    for opponent, model, known, weight in zip(opponents, models, exact, solver.prior):
        if weight == 0:
            continue
        if known:
            mean, stderr = solver.policy_value(root, model), 0.0
        else:
            mean, stderr = monte_carlo_value(game, solver, opponent, eval_games, seed)
        value += weight * mean
        variance += (weight * stderr) ** 2
    method = (
        f"estimate: expectimax vs a {model_samples}-seed empirical bot model, "
        f"then {eval_games} seeded games vs the real bot"
    )
    return OracleValue(value, math.sqrt(variance), exact=False, method=method)

