"""The text layer of the household tasks: rules, task, last feedback, history and the legal
commands as one prompt, every block with a budget.

Example:
    >>> print(history_block([("open fridge 1", "You open the fridge 1.")], limit=5))
    Your actions this episode:
    - open fridge 1 -> You open the fridge 1.
    >>> print(legal_block(["look", "inventory"], None))
    Legal actions: look, inventory
    Answer with exactly one action inside tags, e.g. <action>take apple 1 from countertop 1</action>.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...core.contract import clip_text, sanitize_text
from ...core.parsing import answer_instruction

RULES = """You are in a household, a text game built with TextWorld in the style of ALFWorld. Complete the task by typing commands.
- look describes the room; inventory lists what you carry; examine X describes X.
- open X and close X for closed receptacles (cabinets, drawers, fridges...); take X from Y picks X up; insert X into Y puts it in a container, put X on Y on a supporter; drop X leaves it on the floor.
- clean X with sinkbasin N, heat X with microwave N and cool X with fridge N work on an object X that you carry.
- Only the commands listed as legal are accepted.
- The reward is 1 when the task is done, which ends the episode, and 0 otherwise. You have at most {max_steps} actions."""

ALFWORLD_RULES = """You are in a household, one of ALFWorld's text games (played by TextWorld). Complete the task by typing commands.
- go to X walks to receptacle X; look describes where you are; inventory lists what you hold; examine X describes X.
- open X and close X for closed receptacles; take X from Y picks X up (you hold one object at a time); move X to Y puts it in or on receptacle Y.
- clean X with Y (a sink basin), heat X with Y (a microwave), cool X with Y (a fridge) and use X (a lamp) work where you stand, on what you hold.
- Only the commands listed as legal are accepted.
- The reward is 1 when the task is done, which ends the episode, and 0 otherwise. You have at most {max_steps} actions."""

#: The rules' lines on the commands that only look (generated games, ALFWorld's).
LOOK_LINE = "- look describes the room; inventory lists what you carry; examine X describes X."
ALFWORLD_LOOK_LINE = "- go to X walks to receptacle X; look describes where you are; inventory lists what you hold; examine X describes X."
#: The line that replaces them when the commands that only look are left out of the legal ones.
NO_LOOKING_LINE = "- The game's answers describe what you see; commands that only look (look, inventory, examine) are not offered."
ANSWER_FORMAT = answer_instruction("take apple 1 from countertop 1")
GOAL_CHARS = 300
FEEDBACK_CHARS = 2400
HISTORY_ITEM_CHARS = 120
NOTICE_CHARS = 400
LEGAL_CHARS = 3000
#: Headings, the step line, the end-of-episode sentence and line breaks.
FIXED_CHARS = 400


def rules(max_steps: int, alfworld: bool = False, looking: bool = True) -> str:
    """The rules block: the generated games' commands, or ALFWorld's; without ``looking``
    commands, the line on them says they are not offered.

    Example:
        >>> NO_LOOKING_LINE in rules(20, looking=False), "inventory lists" in rules(20, looking=False)
        (True, False)
    """
    text = (ALFWORLD_RULES if alfworld else RULES).format(max_steps=max_steps)
    if looking:
        return text
    return text.replace(LOOK_LINE, NO_LOOKING_LINE).replace(ALFWORLD_LOOK_LINE, f"- go to X walks to receptacle X.\n{NO_LOOKING_LINE}")


def clip(text: str, budget: int) -> str:
    """``text`` folded to ASCII and clipped to ``budget`` characters (`` ...`` marks a cut)."""
    return clip_text(sanitize_text(text), budget, marker=" ...")


def task_block(goal: str, steps: int, max_steps: int) -> str:
    return f"Task: {clip(goal, GOAL_CHARS)}\nActions taken: {steps} of {max_steps}."


def feedback_block(feedback: str, command: str | None) -> str:
    """The game's answer to the last command (the room and task at the start)."""
    heading = "The game begins:" if command is None else f"The game's answer to '{clip(command, 80)}':"
    return f"{heading}\n{clip(feedback, FEEDBACK_CHARS)}"


def history_block(history: Sequence[tuple[str, str]], limit: int) -> str:
    """The last ``limit`` commands with the first line of their feedback."""
    if not history:
        return "Your actions this episode: none yet."
    shown = history[-limit:]
    title = "Your actions this episode"
    if len(shown) < len(history):
        title += f" (the last {len(shown)} of {len(history)})"
    lines = [clip(f"- {command} -> {feedback.split(chr(10))[0]}", HISTORY_ITEM_CHARS) for command, feedback in shown]
    return "\n".join([f"{title}:", *lines])


def legal_block(legal: Sequence[str], notice: str | None, note: str = "") -> str:
    """An optional retry notice, the legal commands (labelled or not) and the answer format,
    with an optional ``note`` after it."""
    parts = [f"Note: {clip(notice, NOTICE_CHARS)}"] if notice else []
    parts += [clip(f"Legal actions: {', '.join(legal)}", LEGAL_CHARS), f"{ANSWER_FORMAT} {note}".rstrip()]
    return "\n".join(parts)


#: Commands that only look (ALFWorld's ``help`` too): the memory's list of what was done
#: leaves them out, and ``looking_commands=False`` the legal commands.
LOOKING = ("look", "inventory", "examine ", "help")


def is_looking(command: str) -> bool:
    """Whether ``command`` only looks (``look``, ``inventory``, ``examine X``, ``help``).

    Example:
        >>> is_looking("examine fridge 1"), is_looking("open fridge 1")
        (True, False)
    """
    return command.startswith(LOOKING)


def done_commands(commands: Sequence[str]) -> list[str]:
    """The commands that changed something (not ``look``, ``inventory``, ``examine X``), in
    order, each once: what a later attempt can repeat or avoid.

    Example:
        >>> done_commands(["look", "open fridge 1", "examine apple 1", "open fridge 1", "take apple 1 from fridge 1"])
        ['open fridge 1', 'take apple 1 from fridge 1']
    """
    return list(dict.fromkeys(c for c in commands if not is_looking(c)))


def observation_budget(max_steps: int, history_length: int) -> int:
    """An upper bound on the length of every prompt."""
    return (max(len(rules(max_steps)), len(rules(max_steps, alfworld=True))) + GOAL_CHARS + FEEDBACK_CHARS + 80 + history_length * (HISTORY_ITEM_CHARS + 1)
            + NOTICE_CHARS + LEGAL_CHARS + len(ANSWER_FORMAT) + FIXED_CHARS)
