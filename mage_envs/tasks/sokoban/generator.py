"""Procedural Sokoban levels, one per instance number, each solved before it is returned.

The method follows gym-sokoban (Schrader, 2018):

1. *Topology*: a random walk across the room stamps small floor patterns (a bar, a
   corner, a 2x2 block...) at every step and changes direction with probability 0.35;
   the outer ring is always wall.
2. *Placement*: goals and the player go on random floor cells, every box on a goal.
3. *Reverse play*: from the solved position, a breadth-first search over the moves of a
   player who may pull the box behind it as it steps away (up to
   :data:`REVERSE_STATE_LIMIT` positions). Every pull is the reverse of a push, so every
   position reached is solvable. The position kept is the one with every box and the
   player off the goals (gym-sokoban scores a position 0 unless every goal is uncovered,
   so its player never starts on a goal) that scores highest on gym-sokoban's score,
   box swaps (how often the pulled box changed) x total box displacement from the
   starting goals; the first found wins ties.
4. *Solving*: :func:`~mage_envs.tasks.sokoban.solver.solve` proves the level solvable
   and gives its optimal length in moves.

An attempt that fails (too little floor, no position with every box and the player off
the goals, or the solver's expansion limit) is retried with the next attempt number;
attempt ``a`` of instance ``k`` draws from ``random.Random("mage-sokoban/<w>x<h>/<boxes>/<k>/<a>")``,
a string seed that depends neither on the platform nor on the hash seed (a test pins
instance 0). A level is never returned broken, and instance ``k`` is always the same level.

Example:
    >>> generated = generate_level(0, width=6, height=6, num_boxes=1)
    >>> generated.level.solved, generated.solution.moves > 0
    (False, True)
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from functools import lru_cache

from .level import Board, Level
from .solver import SearchLimitError, Solution, solve

#: Attempts per level before :func:`generate_level` gives up on a room configuration.
MAX_ATTEMPTS = 64
#: Expansions the solver may spend on one generated candidate.
GENERATION_MAX_EXPANSIONS = 50_000
#: Positions the reverse play may visit per attempt.
REVERSE_STATE_LIMIT = 10_000
_TURN_PROBABILITY = 0.35
#: Floor patterns stamped around the walker (3x3, centred on it), as in gym-sokoban.
_MASKS = (
    ((0, 0, 0), (1, 1, 1), (0, 0, 0)),
    ((0, 1, 0), (0, 1, 0), (0, 1, 0)),
    ((0, 0, 0), (1, 1, 0), (0, 1, 0)),
    ((0, 0, 0), (1, 1, 0), (1, 1, 0)),
    ((0, 0, 0), (0, 1, 1), (0, 1, 0)),
)
_STEPS = ((-1, 0), (1, 0), (0, -1), (0, 1))


@dataclass(frozen=True)
class GeneratedLevel:
    """A generated level, its optimal solution, and the attempt that produced it."""

    level: Level
    solution: Solution
    attempt: int


@lru_cache(maxsize=4096)
def generate_level(instance: int, width: int = 6, height: int = 6, num_boxes: int = 1) -> GeneratedLevel:
    """The level of ``instance`` for a ``width`` x ``height`` room (outer walls included).

    Raises ``RuntimeError`` when no attempt succeeds (a room too small for its boxes).
    """
    if instance < 0:
        raise ValueError(f"instance must be a non-negative integer, got {instance}")
    for attempt in range(MAX_ATTEMPTS):
        rng = random.Random(f"mage-sokoban/{width}x{height}/{num_boxes}/{instance}/{attempt}")
        level = _candidate(rng, width, height, num_boxes)
        if level is None:
            continue
        try:
            solution = solve(level, GENERATION_MAX_EXPANSIONS)
        except SearchLimitError:
            continue
        if solution is None:
            raise RuntimeError(f"the solver found no solution to a reverse-played level (a solver bug):\n{level.to_xsb()}")
        return GeneratedLevel(level, solution, attempt)
    raise RuntimeError(
        f"could not generate a {width}x{height} level with {num_boxes} boxes in {MAX_ATTEMPTS} attempts; "
        "use a larger room or fewer boxes"
    )


def room_topology(rng: random.Random, width: int, height: int) -> frozenset[int]:
    """The floor cells of a random room: a random walk stamping floor patterns."""
    floor: set[int] = set()
    row, column = rng.randrange(1, height - 1), rng.randrange(1, width - 1)
    step = rng.choice(_STEPS)
    for _ in range(int(1.7 * (width + height))):
        if rng.random() < _TURN_PROBABILITY:
            step = rng.choice(_STEPS)
        row = min(max(row + step[0], 1), height - 2)
        column = min(max(column + step[1], 1), width - 2)
        mask = rng.choice(_MASKS)
        for dr in range(3):
            for dc in range(3):
                r, c = row + dr - 1, column + dc - 1
                if mask[dr][dc] and 0 < r < height - 1 and 0 < c < width - 1:
                    floor.add(r * width + c)
    return frozenset(floor)


def _candidate(rng: random.Random, width: int, height: int, num_boxes: int) -> Level | None:
    """One reverse-played level, or None if this attempt cannot make one."""
    floor = room_topology(rng, width, height)
    if len(floor) < num_boxes + 2:
        return None
    player, *goals = rng.sample(sorted(floor), num_boxes + 1)
    walls = frozenset(range(width * height)) - floor
    board = Board(width, height, walls, frozenset(goals))
    return _reverse_play(board, player, goals)


def _reverse_play(board: Board, player: int, goals: list[int]) -> Level | None:
    """Breadth-first reverse play from the solved position (at most
    :data:`REVERSE_STATE_LIMIT` positions); the best-scoring position, or None."""
    neighbours = board.neighbours
    start = (player, tuple(goals))  # boxes[i] started on goals[i]
    seen = {start}
    queue = deque([(start, -1, 0)])  # (position, last box pulled, box swaps)
    best_score, best = 0, None
    while queue:
        (here, boxes), last_pulled, swaps = queue.popleft()
        if here not in board.goals and board.goals.isdisjoint(boxes):
            score = swaps * sum(_manhattan(board, b, g) for b, g in zip(boxes, goals))
            if score > best_score:
                best_score, best = score, Level(board, here, frozenset(boxes))
        for d in range(4):
            ahead = neighbours[d][here]
            if ahead < 0 or ahead in boxes:
                continue
            successors = [((ahead, boxes), last_pulled, swaps)]
            behind = neighbours[d ^ 1][here]
            if behind in boxes:
                pulled = boxes.index(behind)
                moved = boxes[:pulled] + (here,) + boxes[pulled + 1 :]
                successors.append(((ahead, moved), pulled, swaps + (pulled != last_pulled)))
            for position, pulled, count in successors:
                if position not in seen and len(seen) < REVERSE_STATE_LIMIT:
                    seen.add(position)
                    queue.append((position, pulled, count))
    return best


def _manhattan(board: Board, a: int, b: int) -> int:
    (ra, ca), (rb, cb) = divmod(a, board.width), divmod(b, board.width)
    return abs(ra - rb) + abs(ca - cb)
