"""Sokoban positions: the fixed board, the pieces on it, the rules of motion and XSB text.

Cells are numbered ``row * width + column`` from the top-left corner. A :class:`Level` is
a :class:`Board` (walls and goals, which never change) with the player's cell and the
box cells; :meth:`Level.move` returns the next level and what the move did. Levels are
immutable and hashable, so solvers and caches can key on them.

XSB notation: ``#`` wall, ``@`` player, ``+`` player on a goal, ``$`` box, ``*`` box on a
goal, ``.`` goal, space floor (``-`` and ``_`` are read as floor too).

Example:
    >>> level = parse_xsb('''
    ... #####
    ... #@$.#
    ... #####''')
    >>> after, move = level.move("right")
    >>> move.goal_change, after.solved
    (1, True)
    >>> print(after.to_xsb())
    #####
    # @*#
    #####
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

#: The action names, in the order used for direction indices (``d ^ 1`` is the opposite).
DIRECTIONS: tuple[str, ...] = ("up", "down", "left", "right")
_OFFSETS = ((-1, 0), (1, 0), (0, -1), (0, 1))
_FLOOR_CHARS = frozenset(" -_")


@dataclass(frozen=True)
class Board:
    """The fixed part of a level: a ``height`` x ``width`` grid with its walls and goals."""

    width: int
    height: int
    walls: frozenset[int]
    goals: frozenset[int]

    @cached_property
    def neighbours(self) -> tuple[tuple[int, ...], ...]:
        """``neighbours[d][cell]``: the cell one step in direction ``d``, or -1 (wall, off grid)."""
        table = []
        for dr, dc in _OFFSETS:
            row_table = []
            for cell in range(self.width * self.height):
                r, c = divmod(cell, self.width)
                r, c = r + dr, c + dc
                inside = 0 <= r < self.height and 0 <= c < self.width
                target = r * self.width + c if inside else -1
                row_table.append(-1 if target in self.walls else target)
            table.append(tuple(row_table))
        return tuple(table)

    def coordinates(self, cell: int) -> tuple[int, int]:
        """``(row, column)`` of ``cell``, counted from 1 at the top-left corner."""
        row, column = divmod(cell, self.width)
        return row + 1, column + 1


@dataclass(frozen=True)
class Move:
    """What one step did: the player ``moved``, a box was ``pushed``, and the change in
    the number of boxes on goals (+1 a box onto a goal, -1 off a goal, else 0)."""

    direction: str
    moved: bool
    pushed: bool
    goal_change: int

    def describe(self) -> str:
        """A short history line, e.g. ``"up: pushed a box onto a goal"``."""
        if self.pushed:
            where = {1: " onto a goal", -1: " off a goal", 0: ""}[self.goal_change]
            return f"{self.direction}: pushed a box{where}"
        if self.moved:
            return f"{self.direction}: moved"
        return f"{self.direction}: blocked, nothing moved"


@dataclass(frozen=True)
class Level:
    """A board with the player's cell and the set of box cells."""

    board: Board
    player: int
    boxes: frozenset[int]

    @property
    def solved(self) -> bool:
        """Every box is on a goal."""
        return self.boxes <= self.board.goals

    @property
    def boxes_on_goals(self) -> int:
        return len(self.boxes & self.board.goals)

    def move(self, direction: str) -> tuple[Level, Move]:
        """Step the player one square; a box in the way is pushed if the square behind it
        is free. Walking into a wall or pushing a blocked box changes nothing."""
        d = DIRECTIONS.index(direction)
        step = self.board.neighbours[d]
        target = step[self.player]
        if target < 0:
            return self, Move(direction, False, False, 0)
        if target not in self.boxes:
            return replace(self, player=target), Move(direction, True, False, 0)
        beyond = step[target]
        if beyond < 0 or beyond in self.boxes:
            return self, Move(direction, False, False, 0)
        goals = self.board.goals
        change = (beyond in goals) - (target in goals)
        boxes = (self.boxes - {target}) | {beyond}
        return Level(self.board, target, boxes), Move(direction, True, True, change)

    def to_xsb(self) -> str:
        """The level in XSB notation, one line per row (trailing floor stripped)."""
        board = self.board
        lines = []
        for row in range(board.height):
            chars = []
            for cell in range(row * board.width, (row + 1) * board.width):
                chars.append(_cell_char(cell in board.walls, cell in board.goals, cell in self.boxes, cell == self.player))
            lines.append("".join(chars).rstrip())
        return "\n".join(lines)


def _cell_char(wall: bool, goal: bool, box: bool, player: bool) -> str:
    if wall:
        return "#"
    if player:
        return "+" if goal else "@"
    if box:
        return "*" if goal else "$"
    return "." if goal else " "


def parse_xsb(text: str) -> Level:
    """Read a level in XSB notation; blank lines before and after it are ignored.

    Raises ``ValueError`` unless there is exactly one player, at least one box and as
    many goals as boxes.

    Example:
        >>> level = parse_xsb("####\\n#@*#\\n####")
        >>> level.board.width, level.player, sorted(level.boxes), level.solved
        (4, 5, [6], True)
    """
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        raise ValueError("an XSB level needs at least one line")
    width = max(len(line) for line in lines)
    walls, goals, boxes, players = set(), set(), set(), []
    for r, line in enumerate(lines):
        for c, char in enumerate(line.ljust(width)):
            cell = r * width + c
            if char == "#":
                walls.add(cell)
            elif char in "@+":
                players.append(cell)
            elif char in "$*":
                boxes.add(cell)
            elif char != "." and char not in _FLOOR_CHARS:
                raise ValueError(f"unknown XSB character {char!r} at row {r + 1}, column {c + 1}")
            if char in ".+*":
                goals.add(cell)
    if len(players) != 1:
        raise ValueError(f"an XSB level needs exactly one player (@ or +), found {len(players)}")
    if not boxes or len(boxes) != len(goals):
        raise ValueError(f"an XSB level needs at least one box and as many goals as boxes, found {len(boxes)} boxes and {len(goals)} goals")
    board = Board(width, len(lines), frozenset(walls), frozenset(goals))
    return Level(board, players[0], frozenset(boxes))
