"""Tic-Tac-Toe's facts in OpenSpiel: player 0 is ``x`` and moves first, player 1 is ``o``;
action ``c`` (0..8) marks cell ``c`` in row-major order. A *board key* is the engine's
board as nine characters, ``x``, ``o`` or ``.`` (``str(state)`` without its newlines).

Example:
    >>> winning_line(place("xx.......", 2, "x"))
    (0, 1, 2)
"""

from __future__ import annotations

import functools

import pyspiel

GAME = "tic_tac_toe"
EMPTY = "."
#: The eight lines of three cells (rows, columns, diagonals), cells in row-major order.
LINES: tuple[tuple[int, int, int], ...] = (
    (0, 1, 2), (3, 4, 5), (6, 7, 8),
    (0, 3, 6), (1, 4, 7), (2, 5, 8),
    (0, 4, 8), (2, 4, 6),
)  # fmt: skip


def board_key(state: pyspiel.State) -> str:
    """The board of ``state`` as nine characters ``x``/``o``/``.``, row-major.

    Example:
        >>> state = pyspiel.load_game("tic_tac_toe").new_initial_state()
        >>> state.apply_action(4); board_key(state)
        '....x....'
    """
    return str(state).replace("\n", "")


def free_cells(board: str) -> list[int]:
    """The empty cells of ``board``, ascending.

    Example:
        >>> free_cells("xox.o.xxo")
        [3, 5]
    """
    return [cell for cell, mark in enumerate(board) if mark == EMPTY]


def mark_to_move(board: str) -> str:
    """``"x"`` when both have played equally often (x moves first), else ``"o"``.

    Example:
        >>> mark_to_move("....x...."), mark_to_move(".........")
        ('o', 'x')
    """
    return "x" if board.count("x") == board.count("o") else "o"


def place(board: str, cell: int, mark: str) -> str:
    """``board`` with ``mark`` on ``cell``.

    Example:
        >>> place(".........", 4, "x")
        '....x....'
    """
    return board[:cell] + mark + board[cell + 1 :]


def winning_line(board: str) -> tuple[int, int, int] | None:
    """The first line of three equal marks on ``board``, or ``None``.

    Example:
        >>> winning_line("xo.xo.x..")
        (0, 3, 6)
    """
    for line in LINES:
        first, second, third = line
        mark = board[first]
        if mark != EMPTY and mark == board[second] == board[third]:
            return line
    return None


# ---------------------------------------------------------------------- exact solution
@functools.cache
def negamax_value(board: str) -> int:
    """The game value for the player to move on ``board``: 1 win, 0 draw, -1 loss.

    Solved once per process (about 5.5k positions, memoised).

    Example:
        >>> negamax_value("........."), negamax_value("xx.oo....")  # x to move wins
        (0, 1)
    """
    if winning_line(board) is not None:
        return -1  # the previous mover completed a line
    cells = free_cells(board)
    if not cells:
        return 0
    mark = mark_to_move(board)
    return max(-negamax_value(place(board, cell, mark)) for cell in cells)


@functools.cache
def optimal_cells(board: str) -> tuple[int, ...]:
    """The free cells that keep the game value of ``board`` for the player to move.

    Example:
        >>> optimal_cells("xo.......")  # x to move; these three cells force a win
        (3, 4, 6)
    """
    mark, value = mark_to_move(board), negamax_value(board)
    return tuple(c for c in free_cells(board) if -negamax_value(place(board, c, mark)) == value)
