"""An optimal Sokoban solver: A* over pushes, costed in moves, with deadlock pruning.

A search state is the box cells plus the player's exact cell just after a push. From a
state the player walks (breadth-first, around the boxes) to any square beside a box and
pushes it; the edge costs the walk plus one move. The heuristic is the sum, over boxes,
of the fewest pushes that bring each box to its nearest goal with no other box in the
way: every push is a move and moves one box one square, so it never overestimates and
never drops by more than the cost of an edge, and the first solved state taken off the
queue is optimal **in moves** (pushes are reported alongside, not minimised).

Two deadlocks are pruned, neither of which ever cuts off a solvable position:

* *dead squares*: cells from which no sequence of pushes brings a box to any goal, even
  on an otherwise empty board (non-goal corners, walls without a goal along them);
* *freeze deadlocks*: a pushed box that can move neither horizontally nor vertically
  (blocked by walls, by dead squares on both sides, or by boxes that are themselves
  frozen — a 2x2 block of boxes and walls is the simplest case) while it or a box frozen
  with it is off a goal.

Example:
    >>> from mage_envs.tasks.sokoban.level import parse_xsb
    >>> solution = solve(parse_xsb('''
    ... ######
    ... #@$ .#
    ... ######'''))
    >>> solution.actions, solution.moves, solution.pushes
    (('right', 'right'), 2, 2)
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache

from .level import DIRECTIONS, Board, Level

#: States expanded before :func:`solve` gives up (raises :class:`SearchLimitError`).
DEFAULT_MAX_EXPANSIONS = 200_000

State = tuple[int, tuple[int, ...]]  # (player cell, sorted box cells)


class SearchLimitError(RuntimeError):
    """The search expanded ``max_expansions`` states without settling the level."""


@dataclass(frozen=True)
class Solution:
    """An optimal solution: the action names, and how many of them push a box."""

    actions: tuple[str, ...]
    pushes: int

    @property
    def moves(self) -> int:
        """The solution length in moves (every action is one move)."""
        return len(self.actions)


@lru_cache(maxsize=256)
def goal_distances(board: Board) -> tuple[int, ...]:
    """Per cell, the fewest pushes that bring a box there to a goal on an empty board; -1
    for walls and dead squares. Computed by pulling boxes backwards from every goal.

    Example:
        >>> from mage_envs.tasks.sokoban.level import parse_xsb
        >>> goal_distances(parse_xsb("#####\\n#@$.#\\n#####").board)[5:9]
        (-1, -1, 1, 0)
    """
    neighbours = board.neighbours
    distance = [-1] * (board.width * board.height)
    queue = deque(sorted(board.goals))
    for goal in board.goals:
        distance[goal] = 0
    while queue:
        cell = queue.popleft()
        for d in range(4):
            # a box reaches `cell` by a push in direction d from `source`, the player behind it
            source = neighbours[d ^ 1][cell]
            if source < 0 or distance[source] >= 0 or neighbours[d ^ 1][source] < 0:
                continue
            distance[source] = distance[cell] + 1
            queue.append(source)
    return tuple(distance)


def dead_squares(board: Board) -> frozenset[int]:
    """Non-wall cells from which a box can never reach a goal.

    Example:
        >>> from mage_envs.tasks.sokoban.level import parse_xsb
        >>> sorted(dead_squares(parse_xsb("#####\\n#@$.#\\n#####").board))
        [6]
    """
    distance = goal_distances(board)
    cells = range(board.width * board.height)
    return frozenset(c for c in cells if distance[c] < 0 and c not in board.walls)


def frozen_off_goal(board: Board, boxes: Collection[int], cell: int) -> bool:
    """True when the box on ``cell`` is frozen and it, or a box frozen with it, is off a goal.

    Example (two boxes side by side against the top wall, one off its goal):
        >>> from mage_envs.tasks.sokoban.level import parse_xsb
        >>> level = parse_xsb("######\\n#*$ .#\\n#@   #\\n######")
        >>> frozen_off_goal(level.board, level.boxes, 8)
        True
    """
    group = _frozen_group(board, goal_distances(board), boxes, cell, frozenset())
    return group is not None and not group <= board.goals


def _frozen_group(
    board: Board, distance: tuple[int, ...], boxes: Collection[int], cell: int, assumed: frozenset[int]
) -> frozenset[int] | None:
    """The boxes frozen together with the box on ``cell``, or None if it can still move.

    Boxes in ``assumed`` (those being checked further up) count as walls, which is what
    makes the recursion end and is sound: the answer is only used if they are frozen too.
    """
    assumed = assumed | {cell}
    group = {cell}
    for axis in ((0, 1), (2, 3)):
        blocked = _axis_blocked(board, distance, boxes, cell, axis, assumed)
        if blocked is None:
            return None
        group |= blocked
    return frozenset(group)


def _axis_blocked(
    board: Board,
    distance: tuple[int, ...],
    boxes: Collection[int],
    cell: int,
    axis: tuple[int, int],
    assumed: frozenset[int],
) -> frozenset[int] | None:
    """The boxes that block ``cell`` along ``axis`` (possibly none), or None if it can move."""
    sides = [board.neighbours[d][cell] for d in axis]
    if any(side < 0 or side in assumed for side in sides):
        return frozenset()
    if all(distance[side] < 0 for side in sides):
        return frozenset()
    for side in sides:
        if side in boxes:
            group = _frozen_group(board, distance, boxes, side, assumed)
            if group is not None:
                return group
    return None


def is_deadlocked(level: Level) -> bool:
    """True if a box is on a dead square or frozen off a goal (the level is then unsolvable;
    False does not prove it solvable).

    Example:
        >>> from mage_envs.tasks.sokoban.level import parse_xsb
        >>> is_deadlocked(parse_xsb("#####\\n#$@.#\\n#####"))
        True
    """
    distance = goal_distances(level.board)
    if any(distance[box] < 0 for box in level.boxes):
        return True
    return any(frozen_off_goal(level.board, level.boxes, box) for box in level.boxes)


@lru_cache(maxsize=4096)
def solve(level: Level, max_expansions: int = DEFAULT_MAX_EXPANSIONS) -> Solution | None:
    """A solution with the fewest moves, or None if the level cannot be solved.

    Raises :class:`SearchLimitError` after ``max_expansions`` expanded states. Results are
    cached per level (positions are immutable and hashable).
    """
    if is_deadlocked(level):
        return None
    board = level.board
    neighbours = board.neighbours
    distance = goal_distances(board)
    start: State = (level.player, tuple(sorted(level.boxes)))
    best = {start: 0}
    parent: dict[State, tuple[State, int, int]] = {}
    tie = itertools.count()
    queue = [(sum(distance[b] for b in start[1]), 0, next(tie), start)]
    expansions = 0
    while queue:
        estimate, negative_cost, _, state = heapq.heappop(queue)
        cost = -negative_cost
        if cost > best[state]:
            continue
        heuristic = estimate - cost
        if heuristic == 0:
            return _rebuild(board, state, parent)
        expansions += 1
        if expansions > max_expansions:
            raise SearchLimitError(f"no solution settled after {max_expansions} expanded states")
        player, boxes = state
        occupied = set(boxes)
        walk = _walk_distances(neighbours, player, occupied)
        for i, box in enumerate(boxes):
            for d in range(4):
                stand = neighbours[d ^ 1][box]
                target = neighbours[d][box]
                if stand not in walk or target < 0 or target in occupied or distance[target] < 0:
                    continue
                moved = boxes[:i] + boxes[i + 1 :] + (target,)
                if frozen_off_goal(board, set(moved), target):
                    continue
                child: State = (box, tuple(sorted(moved)))
                child_cost = cost + walk[stand] + 1
                if child_cost < best.get(child, child_cost + 1):
                    best[child] = child_cost
                    parent[child] = (state, box, d)
                    child_estimate = child_cost + heuristic - distance[box] + distance[target]
                    heapq.heappush(queue, (child_estimate, -child_cost, next(tie), child))
    return None


def _walk_distances(neighbours: tuple[tuple[int, ...], ...], start: int, occupied: set[int]) -> dict[int, int]:
    """Moves from ``start`` to every cell the player can walk to without pushing."""
    distance = {start: 0}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        for d in range(4):
            nxt = neighbours[d][cell]
            if nxt >= 0 and nxt not in occupied and nxt not in distance:
                distance[nxt] = distance[cell] + 1
                queue.append(nxt)
    return distance


def _walk_path(neighbours: tuple[tuple[int, ...], ...], start: int, goal: int, occupied: set[int]) -> list[str]:
    """The action names of one shortest walk from ``start`` to ``goal`` around ``occupied``."""
    came_from: dict[int, tuple[int, int]] = {start: (-1, -1)}
    queue = deque([start])
    while queue and goal not in came_from:
        cell = queue.popleft()
        for d in range(4):
            nxt = neighbours[d][cell]
            if nxt >= 0 and nxt not in occupied and nxt not in came_from:
                came_from[nxt] = (cell, d)
                queue.append(nxt)
    path = []
    cell = goal
    while cell != start:
        cell, d = came_from[cell]
        path.append(DIRECTIONS[d])
    return path[::-1]


def _rebuild(board: Board, state: State, parent: dict[State, tuple[State, int, int]]) -> Solution:
    """Expand the chain of pushes that ends in ``state`` into single moves."""
    pushes = []
    while state in parent:
        previous, box, d = parent[state]
        pushes.append((previous, box, d))
        state = previous
    actions: list[str] = []
    for (player, boxes), box, d in reversed(pushes):
        stand = board.neighbours[d ^ 1][box]
        actions += _walk_path(board.neighbours, player, stand, set(boxes))
        actions.append(DIRECTIONS[d])
    return Solution(tuple(actions), len(pushes))
