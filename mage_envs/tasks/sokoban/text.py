"""The text layer of Sokoban: the rules, the board and the move history as one prompt.

Example:
    >>> from mage_envs.tasks.sokoban.level import parse_xsb
    >>> level = parse_xsb("#####\\n#@$.#\\n#####")
    >>> print(board_block(level, steps=0, max_steps=10))
    Board after 0 of 10 steps (0 of 1 boxes on goals):
    #####
    #@$.#
    #####
    You (@) are at row 2, column 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.parsing import answer_instruction
from .level import DIRECTIONS, Level

RULES = """You are playing Sokoban, a puzzle on a grid seen from above. You are the warehouse keeper.
- Each action moves you one square up, down, left or right. Row 1 is the top row and column 1 the leftmost: "up" goes toward row 1, "left" toward column 1.
- Walking into a box pushes it one square further in the same direction if that square is floor or a goal. You cannot pull a box, and you cannot push two boxes at once.
- Walking into a wall, or pushing a box against a wall or another box, leaves everything where it is; the step still counts.
- You solve the puzzle when every box is on a goal. A box pushed into a corner that is not a goal can never be moved out, so think before pushing.
- Rewards: -0.1 per step, +1 for pushing a box onto a goal, -1 for pushing a box off a goal, +10 when the puzzle is solved.
- You have at most {max_steps} steps.
Legend: # wall, @ you, + you on a goal, $ box, * box on a goal, . goal, (space) floor."""

#: The answer format, shown under the legal actions.
ANSWER_FORMAT = answer_instruction("up", think=True)
#: The longest history line, less the digits of the step number.
_LONGEST_HISTORY_LINE = "- step : right: pushed a box off a goal"
#: The longest spatial hints, less the digits of the offsets.
_LONGEST_AROUND = len("Around you: up floor, down floor, left floor, right floor. ")
_LONGEST_BOX_HINT = len("A box is down  right  from you; the nearest free goal is down  right  from it. ")
#: Room for the status lines, a retry notice (clipped answers are at most 64 characters)
#: and the end-of-episode sentence, besides the rules, board and history.
FIXED_BUDGET = 720


def rules(max_steps: int) -> str:
    """The rules block shown at the top of every prompt."""
    return RULES.format(max_steps=max_steps)


def board_block(level: Level, steps: int, max_steps: int) -> str:
    """The XSB board with the step count, boxes on goals and the player's coordinates."""
    row, column = level.board.coordinates(level.player)
    return (
        f"Board after {steps} of {max_steps} steps ({level.boxes_on_goals} of {len(level.boxes)} boxes on goals):\n"
        f"{level.to_xsb()}\n"
        f"You (@) are at row {row}, column {column}."
    )


_CELL_NAMES = ("floor", "goal", "box", "box")   # indexed by 2 * box + goal


def _offset(source: tuple[int, int], target: tuple[int, int]) -> str:
    """``"down 1 right 0"``: where ``target`` lies from ``source``, rows first."""
    rows, columns = target[0] - source[0], target[1] - source[1]
    return f"{'down' if rows >= 0 else 'up'} {abs(rows)} {'right' if columns >= 0 else 'left'} {abs(columns)}"


def spatial_hints(level: Level) -> str:
    """What the board shows, in words a model without a picture of the grid can use: what
    lies next to the player in each direction, and for every box off a goal its offset from
    the player and the offset of the nearest free goal (no box on it; the first in reading
    order on a tie) from the box.

    Example:
        >>> from mage_envs.tasks.sokoban.level import parse_xsb
        >>> print(spatial_hints(parse_xsb("######\\n#@$ .#\\n######")))
        Around you: up wall, down wall, left wall, right box. A box is down 0 right 1 from you; the nearest free goal is down 0 right 2 from it.
    """
    board = level.board
    around = []
    for direction, steps in zip(DIRECTIONS, board.neighbours):
        cell = steps[level.player]
        name = "wall" if cell < 0 else _CELL_NAMES[2 * (cell in level.boxes) + (cell in board.goals)]
        around.append(f"{direction} {name}")
    me = board.coordinates(level.player)
    free = sorted(board.goals - level.boxes)
    lines = [f"Around you: {', '.join(around)}."]
    for box in sorted(level.boxes - board.goals):
        at = board.coordinates(box)
        goal = min(free, key=lambda g: abs(board.coordinates(g)[0] - at[0]) + abs(board.coordinates(g)[1] - at[1]))
        lines.append(f"A box is {_offset(me, at)} from you; the nearest free goal is "
                     f"{_offset(at, board.coordinates(goal))} from it.")
    return " ".join(lines)


def history_block(history: list[str], limit: int) -> str:
    """The last ``limit`` moves of this episode, one numbered line each.

    Example:
        >>> print(history_block(["up: moved", "left: blocked, nothing moved"], limit=1))
        Your moves this episode (the last 1 of 2):
        - step 2: left: blocked, nothing moved
    """
    if not history:
        return "Your moves this episode: none yet."
    shown = history[-limit:]
    first = len(history) - len(shown) + 1
    title = "Your moves this episode:" if len(shown) == len(history) else f"Your moves this episode (the last {len(shown)} of {len(history)}):"
    lines = [f"- step {first + i}: {line}" for i, line in enumerate(shown)]
    return "\n".join([title, *lines])


def action_block(notice: str | None, listed: Sequence[str] = DIRECTIONS, note: str = "") -> str:
    """The legal actions (as ``listed``, labelled or not) and the answer format (with an
    optional ``note`` after it), after an optional retry notice."""
    parts = [f"Note: {notice}"] if notice else []
    parts += [f"Legal actions: {', '.join(listed)}", f"{ANSWER_FORMAT} {note}".rstrip()]
    return "\n".join(parts)


def run_lengths(moves: Sequence[str]) -> str:
    """Moves in order, a run of one move written once with its count.

    Example:
        >>> run_lengths(["right", "right", "right", "up", "left", "left"])
        'right x3, up, left x2'
    """
    runs: list[list[Any]] = []
    for move in moves:
        if runs and runs[-1][0] == move:
            runs[-1][1] += 1
        else:
            runs.append([move, 1])
    return ", ".join(move if count == 1 else f"{move} x{count}" for move, count in runs)


def episode_summary(moves: Sequence[str], level: Level) -> str:
    """What the memory keeps of a finished episode: solved or not, where every box ended
    (row, column, on a goal or not) and the moves tried, in order.

    Example:
        >>> from mage_envs.tasks.sokoban.level import parse_xsb
        >>> print(episode_summary(["left", "left"], parse_xsb("######\\n#. $@#\\n######").move("left")[0]))
        Not solved after 2 moves. Boxes ended at row 2 column 3 (off a goal). Moves: left x2.
    """
    board = level.board
    boxes = ", ".join(
        f"row {r} column {c} ({'on' if cell in board.goals else 'off'} a goal)"
        for cell in sorted(level.boxes) for r, c in [board.coordinates(cell)]
    )
    head = f"Solved in {len(moves)} moves." if level.solved else f"Not solved after {len(moves)} moves."
    return f"{head} Boxes ended at {boxes}. Moves: {run_lengths(moves) or 'none'}."


def observation_budget(width: int, height: int, max_steps: int, history_length: int, boxes: int = 0) -> int:
    """An upper bound on the prompt length for a room of ``width`` x ``height`` cells, with
    room for the spatial hints of ``boxes`` boxes (0: no hints)."""
    history_line = len(_LONGEST_HISTORY_LINE) + len(str(max_steps)) + 1
    hints = (_LONGEST_AROUND + boxes * (_LONGEST_BOX_HINT + 2 * len(str(max(width, height))))) if boxes else 0
    return len(rules(max_steps)) + height * (width + 1) + history_length * history_line + hints + FIXED_BUDGET
