"""Tic-Tac-Toe as a text environment (``mage/TicTacToe-v0``).

The agent plays X (moves first) from seat 0 and O from seat 1. Cells are numbered 1 to 9
left to right, top to bottom; the legal action names are the numbers of the free cells
(OpenSpiel's action is the cell number minus one). The reward is +1 for a win, 0 for a
draw and -1 for a loss (times ``reward_scale``; MAGE used 10).

Example:
    >>> env = TicTacToeEnv(opponent="preferred-cell-row-major", seat=0)
    >>> obs, info = env.reset(seed=0)
    >>> info["legal_actions"]
    ['1', '2', '3', '4', '5', '6', '7', '8', '9']
    >>> obs, reward, terminated, truncated, info = env.step("<action>5</action>")
    >>> print(env.private_view(env.state, 0))
    Board (X and O are marks, numbers are free cells):
     O | 2 | 3
    ---+---+---
     4 | X | 6
    ---+---+---
     7 | 8 | 9
"""

from __future__ import annotations

import functools

import pyspiel

from ..facts.tic_tac_toe import EMPTY, board_key, optimal_cells, winning_line
from .base import OpenSpielTextEnv
from .text import GameText

_RULES = """You are playing Tic-Tac-Toe against an opponent on a 3x3 board.
- The cells are numbered 1 to 9, left to right and top to bottom (1 2 3 is the top row, 7 8 9 the bottom row).
- X moves first, then the players alternate; each move puts your mark on one free cell.
- The first player with three marks in a row (a row, a column or a diagonal) wins.
- If the board fills up without three in a row, the game is a draw.
- Your action is the number of a free cell.
You play {mark} ({order})."""

_SEPARATOR = "\n---+---+---\n"
#: The name of each cell, by OpenSpiel action: its 1-based number.
_CELL_NAMES = tuple(str(cell + 1) for cell in range(9))


def mark_of(player: int) -> str:
    """The mark of OpenSpiel player ``player``: ``"X"`` for 0 (moves first), ``"O"`` for 1.

    Example:
        >>> mark_of(0), mark_of(1)
        ('X', 'O')
    """
    return "XO"[player]


@functools.lru_cache(maxsize=1 << 14)
def draw_board(board: str) -> str:
    """A board key (see :func:`~mage_envs.opponents.tic_tac_toe.board_key`) as a grid
    with marks in upper case and free cells shown by their number (memoised: a game has
    5,478 boards).

    Example:
        >>> print(draw_board("x...o...."))
         X | 2 | 3
        ---+---+---
         4 | O | 6
        ---+---+---
         7 | 8 | 9
    """
    cells = [str(i + 1) if mark == EMPTY else mark.upper() for i, mark in enumerate(board)]
    rows = (" " + " | ".join(cells[r : r + 3]) for r in (0, 3, 6))
    return _SEPARATOR.join(rows)


def cell_list(cells: tuple[int, ...]) -> str:
    """Cell indices as the 1-based numbers the agent sees.

    Example:
        >>> cell_list((0, 4, 8))
        '1, 5, 9'
    """
    return ", ".join(str(cell + 1) for cell in cells)


class TicTacToeText(GameText):
    """The text layer of Tic-Tac-Toe: rules, action names, views, move lines."""

    game_string = "tic_tac_toe"
    title = "Tic-Tac-Toe"
    max_observation_chars = 2048

    def rules(self, seat: int) -> str:
        order = "you move first" if seat == 0 else "the opponent plays X and moves first"
        return _RULES.format(mark=mark_of(seat), order=order)

    def action_names(self, state: pyspiel.State) -> dict[str, int]:
        return {_CELL_NAMES[cell]: cell for cell in state.legal_actions()}

    def private_view(self, state: pyspiel.State, seat: int) -> str:
        label = "Final board" if state.is_terminal() else "Board (X and O are marks, numbers are free cells)"
        return f"{label}:\n{draw_board(board_key(state))}"

    def describe_move(self, state: pyspiel.State, player: int, action: int, seat: int) -> str:
        if player == seat:
            return f"You ({'XO'[player]}) take cell {_CELL_NAMES[action]}."
        return f"Opponent ({'XO'[player]}) takes cell {_CELL_NAMES[action]}."

    def describe_end(self, state: pyspiel.State, seat: int) -> str:
        payoff = state.returns()[seat]
        if payoff == 0:
            return "Game over: draw. The board is full with no three in a row."
        line = winning_line(board_key(state))
        assert line is not None  # a decisive game ends on a line of three
        if payoff > 0:
            return f"Game over: you win with three {mark_of(seat)} in a row (cells {cell_list(line)})."
        return (
            f"Game over: you lose. The opponent has three {mark_of(1 - seat)} in a row "
            f"(cells {cell_list(line)})."
        )


class TicTacToeEnv(OpenSpielTextEnv):
    """One game of Tic-Tac-Toe against an opponent archetype; see :class:`OpenSpielTextEnv`."""

    text_class = TicTacToeText
    keep_first_view = False  # random play shows most histories once

    def optimal_actions(self) -> list[str] | None:
        """The free cells (their names) that keep the game value for the player to move
        (:func:`~mage_envs.facts.tic_tac_toe.optimal_cells`, the exact solution): every
        cell where the game is a draw with best play and no move loses it, only the winning
        ones where a win can be forced; ``None`` once the game is over.

        Example:
            >>> env = TicTacToeEnv(opponent="preferred-cell-row-major", seat=1)
            >>> _ = env.reset(seed=0)                 # X took cell 1; O must take the centre
            >>> env.optimal_actions()
            ['5']
        """
        state = self.state
        if state.is_terminal():
            return None
        return [_CELL_NAMES[cell] for cell in optimal_cells(board_key(state))]
