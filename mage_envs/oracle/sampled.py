"""Estimates against opponents without a closed form (search bots such as MCTS).

:class:`EmpiricalModel` turns a bot into a move model by running it with several seeds in
every position the best-response search asks about; :func:`monte_carlo_value` then plays
the resulting policy against the *real* bot over seeded games and reports mean ± standard
error.

Example:
    >>> import pyspiel
    >>> from mage_envs.opponents import BotOpponent
    >>> game = pyspiel.load_game("tic_tac_toe")
    >>> bot = BotOpponent("uniform", lambda seed: pyspiel.make_uniform_random_bot(1, seed))
    >>> model = EmpiricalModel(bot, samples=4, seed=0)
    >>> sum(model(game.new_initial_state().child(4)).values())
    1.0
"""

from __future__ import annotations

import copy
import math
import random
from collections import Counter

import pyspiel

from ..opponents.base import Opponent
from .expectimax import Expectimax, Model


class EmpiricalModel:
    """The move frequencies of ``opponent`` over ``samples`` freshly seeded runs per position.

    Works on a shallow copy of ``opponent`` so that sampling never disturbs a game the
    original is playing. Seeds derive from ``seed`` and the position, so results repeat.
    """

    def __init__(self, opponent: Opponent, samples: int, seed: int) -> None:
        if samples < 1:
            raise ValueError(f"samples must be at least 1, got {samples}")
        self._opponent = copy.copy(opponent)
        self._samples = samples
        self._seed = seed
        self._cache: dict[str, dict[int, float]] = {}

    def __call__(self, state: pyspiel.State) -> dict[int, float]:
        key = str(state)
        probs = self._cache.get(key)
        if probs is None:
            counts: Counter[int] = Counter()
            for i in range(self._samples):
                self._opponent.reset(random.Random(f"{self._seed}/{key}/{i}"))
                counts[self._opponent.act(state)] += 1
            probs = self._cache[key] = {a: c / self._samples for a, c in counts.items()}
        return probs


def opponent_model(
    game: pyspiel.Game, opponent: Opponent, player: int, samples: int, seed: int
) -> tuple[Model, bool]:
    """``opponent``'s move model when it plays ``player``, and whether it is exact: its
    ``action_probabilities`` when it has them (probed at the first position where ``player``
    moves), else an :class:`EmpiricalModel` with ``samples`` seeds per position."""
    state = game.new_initial_state()
    while not state.is_terminal() and state.current_player() != player:
        state.apply_action(state.legal_actions()[0])
    if state.is_terminal() or opponent.action_probabilities(state) is not None:
        return opponent.action_probabilities, True  # type: ignore[return-value]
    return EmpiricalModel(opponent, samples, seed), False


def play_returns(
    game: pyspiel.Game, solver: Expectimax, opponent: Opponent, games: int, seed: int
) -> list[float]:
    """``solver``'s return in each of ``games`` games against the real ``opponent``, game
    ``i`` seeded with ``(seed, i)`` for the opponent and chance."""
    returns = []
    for i in range(games):
        rng = random.Random(f"{seed}/game/{i}")
        opponent.reset(rng)
        state, belief = game.new_initial_state(), solver.prior
        while not state.is_terminal():
            if state.is_chance_node():
                actions, probs = zip(*state.chance_outcomes())
                action = rng.choices(actions, probs)[0]
            elif state.current_player() == solver.seat:
                action = solver.best_action(state, belief)
            else:
                action = opponent.act(state)
                belief = solver.update(state, action, belief)
            state.apply_action(action)
        returns.append(state.returns()[solver.seat])
    return returns


def monte_carlo_value(
    game: pyspiel.Game, solver: Expectimax, opponent: Opponent, games: int, seed: int
) -> tuple[float, float]:
    """Mean and standard error of ``solver``'s policy against the real ``opponent`` over
    ``games`` games (:func:`play_returns`)."""
    if games < 2:
        raise ValueError(f"need at least 2 games for a standard error, got {games}")
    returns = play_returns(game, solver, opponent, games, seed)
    mean = sum(returns) / games
    variance = sum((r - mean) ** 2 for r in returns) / (games - 1)
    return mean, math.sqrt(variance / games)
