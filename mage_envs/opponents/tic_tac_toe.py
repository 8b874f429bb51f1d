"""Tic-Tac-Toe archetypes.

The game's facts (cells, marks, the *board key*, lines) are in
:mod:`mage_envs.facts.tic_tac_toe`. Every policy here depends on the board only, so :class:`~mage_envs.opponents.base.PolicyOpponent`
caches it per board key (5,478 positions rather than ~300k move orders).

Archetypes: ``random``; ``greedy`` (win, else block, else random); ``minimax`` (perfect
play, uniform among the optimal moves); ``preferred-cell-<order>`` (the first free cell
of a fixed order); ``mcts-100`` / ``mcts-1000`` (OpenSpiel's C++ MCTS with random
rollouts; ``mcts-1000`` is held out, the paper's unseen opponent).

Example:
    >>> import pyspiel
    >>> state = pyspiel.load_game("tic_tac_toe").new_initial_state()
    >>> for cell in (0, 4, 1):
    ...     state.apply_action(cell)
    >>> board_key(state)
    'xx..o....'
    >>> greedy_policy(state)            # o must block the top row
    {2: 1.0}
    >>> minimax_policy(state)
    {2: 1.0}
"""

from __future__ import annotations

import functools
from typing import Callable

import pyspiel

from ..facts.tic_tac_toe import EMPTY, board_key, free_cells, mark_to_move, optimal_cells, place, winning_line
from .base import ActionProbs, Archetype, BotOpponent, OpponentFactory, PolicyOpponent, Split

#: ``preferred-cell-<name>``: (cell order, split, description).
PREFERRED_ORDERS: dict[str, tuple[tuple[int, ...], Split, str]] = {
    "center-first": ((4, 0, 2, 6, 8, 1, 3, 5, 7), "trainable", "center, then corners, then edges"),
    "corners-first": ((0, 2, 6, 8, 4, 1, 3, 5, 7), "trainable", "corners, then center, then edges"),
    "edges-first": ((1, 3, 5, 7, 4, 0, 2, 6, 8), "trainable", "edges, then center, then corners"),
    "row-major": ((0, 1, 2, 3, 4, 5, 6, 7, 8), "trainable", "cells left to right, top to bottom"),
    "column-major": ((0, 3, 6, 1, 4, 7, 2, 5, 8), "trainable", "cells top to bottom, left to right"),
    "diagonal": ((0, 4, 8, 2, 6, 1, 3, 5, 7), "trainable", "main diagonal, other corners, edges"),
    "anti-diagonal": ((2, 4, 6, 0, 8, 1, 3, 5, 7), "heldout", "anti-diagonal, other corners, edges"),
    "spiral": ((0, 1, 2, 5, 8, 7, 6, 3, 4), "heldout", "clockwise around the rim, center last"),
}

#: MCTS settings (OpenSpiel's C++ ``MCTSBot``).
MCTS_UCT_C = 1.4
MCTS_MAX_MEMORY_MB = 64
MCTS_SIMULATIONS: dict[str, tuple[int, Split, str]] = {
    "mcts-100": (100, "trainable", "MCTS, 100 simulations, random rollouts (the paper's training opponent)"),
    "mcts-1000": (1000, "heldout", "MCTS, 1000 simulations, random rollouts (the paper's unseen opponent)"),
}


def completing_cells(board: str, mark: str) -> list[int]:
    """Free cells where ``mark`` would complete a line at once.

    Example:
        >>> completing_cells("xx.oo....", "o")
        [5]
    """
    return [cell for cell in free_cells(board) if winning_line(place(board, cell, mark)) is not None]


def uniform(cells: list[int]) -> dict[int, float]:
    """The uniform distribution over ``cells``.

    Example:
        >>> uniform([2, 6])
        {2: 0.5, 6: 0.5}
    """
    return {cell: 1.0 / len(cells) for cell in cells}


# ---------------------------------------------------------------------- policies
def random_policy(state: pyspiel.State) -> ActionProbs:
    """Uniform over the legal moves."""
    return uniform(list(state.legal_actions()))


def minimax_policy(state: pyspiel.State) -> ActionProbs:
    """Perfect play: uniform among the moves that keep the game value."""
    return uniform(list(optimal_cells(board_key(state))))


def greedy_policy(state: pyspiel.State) -> ActionProbs:
    """Uniform among winning moves; else among blocking moves; else among all moves."""
    board = board_key(state)
    mark = mark_to_move(board)
    for candidate in (mark, "o" if mark == "x" else "x"):
        cells = completing_cells(board, candidate)
        if cells:
            return uniform(cells)
    return uniform(free_cells(board))


def preferred_cell_policy(order: tuple[int, ...]) -> Callable[[pyspiel.State], ActionProbs]:
    """The pure strategy playing the first free cell of ``order``.

    Example:
        >>> state = pyspiel.load_game("tic_tac_toe").new_initial_state()
        >>> preferred_cell_policy((4, 0))(state)
        {4: 1.0}
    """

    def policy(state: pyspiel.State) -> ActionProbs:
        board = board_key(state)
        return {next(cell for cell in order if board[cell] == EMPTY): 1.0}

    return policy


def make_mcts_bot(game: pyspiel.Game, simulations: int, seed: int) -> pyspiel.Bot:
    """OpenSpiel's C++ MCTS bot with one random rollout per leaf, seeded by ``seed``.

    Example:
        >>> game = pyspiel.load_game("tic_tac_toe")
        >>> bot = make_mcts_bot(game, 100, seed=0)
        >>> bot.step(game.new_initial_state()) in range(9)
        True
    """
    return pyspiel.MCTSBot(
        game,
        pyspiel.RandomRolloutEvaluator(1, seed),
        uct_c=MCTS_UCT_C,
        max_simulations=simulations,
        max_memory_mb=MCTS_MAX_MEMORY_MB,
        solve=True,
        seed=seed,
        verbose=False,
    )


# ---------------------------------------------------------------------- registration
def _policy_factory(name: str, policy: Callable[[pyspiel.State], ActionProbs]) -> OpponentFactory:
    return lambda game: PolicyOpponent(name, policy, key=board_key)


def _mcts_factory(name: str, simulations: int) -> OpponentFactory:
    return lambda game: BotOpponent(name, functools.partial(make_mcts_bot, game, simulations))


def _table() -> tuple[Archetype, ...]:
    policies = {
        "random": (random_policy, "uniformly random over the free cells"),
        "greedy": (greedy_policy, "wins if it can, else blocks an immediate loss, else random"),
        "minimax": (minimax_policy, "perfect play, uniformly random among the optimal moves"),
    }
    table = [Archetype(name, _policy_factory(name, policy), "trainable", description)
             for name, (policy, description) in policies.items()]
    for order_name, (order, split, description) in PREFERRED_ORDERS.items():
        name = f"preferred-cell-{order_name}"
        factory = _policy_factory(name, preferred_cell_policy(order))
        table.append(Archetype(name, factory, split, f"plays the first free cell: {description}"))
    for name, (simulations, split, description) in MCTS_SIMULATIONS.items():
        table.append(Archetype(name, _mcts_factory(name, simulations), split, description))
    return tuple(table)


#: The archetypes the registry loads for ``tic_tac_toe``, in registration order.
ARCHETYPE_TABLE: tuple[Archetype, ...] = _table()
