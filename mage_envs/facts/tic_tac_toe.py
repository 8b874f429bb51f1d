"""Tic-Tac-Toe's facts in OpenSpiel: player 0 is ``x`` and moves first, player 1 is ``o``;
action ``c`` (0..8) marks cell ``c`` in row-major order. A *board key* is the engine's
board as nine characters, ``x``, ``o`` or ``.`` (``str(state)`` without its newlines).

Example:
    >>> winning_line(place("xx.......", 2, "x"))
    (0, 1, 2)
"""

from __future__ import annotations

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
