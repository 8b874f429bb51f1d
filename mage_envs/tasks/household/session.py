"""A running TextWorld game: commands in; clean feedback, admissible commands and the
winning policy out.

:class:`GameSession` opens a game file with ``textworld.start`` (a compiled ``.z8`` with
its ``.json``, played by Jericho and tracked by TextWorld's ``TWInform7`` wrapper; or an
ALFWorld ``.tw-pddl`` played by TextWorld's PDDL engine) and asks for the admissible
commands and ``won`` every turn. The winning policy (the expert) is TextWorld's
``policy_commands``, tracked every turn for compiled games; a PDDL game asks its planner
(Fast Downward) only when :meth:`GameSession.policy` is called, as planning costs more.
:func:`clean_feedback` strips what an Inform 7 interpreter prints around the story text:
TextWorld's ASCII-art banner and the ``>`` prompt with its status line.

Example:
    >>> raw = "You open the cabinet 1.\\n\\n\\n>            -= Kitchen =-0/2"
    >>> clean_feedback(raw)
    'You open the cabinet 1.'
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.contract import sanitize_text

#: Jericho's random seed: games are replayed exactly.
INTERPRETER_SEED = 1234
_BLANK_LINES = re.compile(r"\n\s*\n\s*(\n\s*)+")


def clean_feedback(text: str) -> str:
    """The story text of one turn: no banner, no trailing prompt (nor the interpreter's
    closing lines after ``*** The End ***``), at most one blank line in a row, ASCII only.

    Example:
        >>> clean_feedback("  $$ | $$\\n  \\\\$$  $$\\n\\nWelcome!\\n\\n\\n\\nYou see a mug 1.\\n>")
        'Welcome!\\n\\nYou see a mug 1.'
    """
    lines = text.split("\n")
    banner_end = max((i for i, line in enumerate(lines) if "$$" in line), default=-1)
    text = "\n".join(lines[banner_end + 1:])
    for marker in ("*** The End ***", "\n>"):
        cut = text.rfind(marker)
        if cut >= 0:
            text = text[:cut]
    return sanitize_text(_BLANK_LINES.sub("\n\n", text).strip())


@dataclass(frozen=True)
class Turn:
    """What the game says after a reset or a command."""

    feedback: str
    admissible: tuple[str, ...]
    won: bool


class GameSession:
    """One TextWorld game, reset and stepped by command.

    Args:
        path: a ``.z8`` game (its ``.json`` beside it) or an ALFWorld ``.tw-pddl`` file.
        wrappers: TextWorld wrappers to add (the ALFWorld adapter names objects with them).
    """

    def __init__(self, path: str | Path, wrappers: Sequence[Any] = ()) -> None:
        import textworld

        self.path = Path(path)
        self._planned = self.path.suffix == ".tw-pddl"
        infos = textworld.EnvInfos(admissible_commands=True, policy_commands=not self._planned, won=True)
        with warnings.catch_warnings():  # Jericho does not know TextWorld's games by name; they play fine
            warnings.filterwarnings("ignore", message=".*is not fully supported")
            self._env = textworld.start(str(self.path), request_infos=infos, wrappers=list(wrappers))
        self._env.seed(INTERPRETER_SEED)

    def reset(self) -> Turn:
        """Start the game again from its first turn."""
        self._state = self._env.reset()
        return self._turn(self._state)

    def step(self, command: str) -> Turn:
        """Play ``command`` (an admissible command)."""
        self._state, _score, _done = self._env.step(command)
        return self._turn(self._state)

    def policy(self) -> list[str]:
        """Commands that win from the current state (``[]`` when TextWorld has none)."""
        if self._planned:  # TextWorld's PddlEnv computes policy_commands the same way
            return list(self._env._pddl_state.replan(self._env._entity_infos) or [])
        return list(self._state.get("policy_commands") or [])

    def close(self) -> None:
        self._env.close()

    @staticmethod
    def _turn(state: Any) -> Turn:
        return Turn(
            feedback=clean_feedback(state.feedback or ""),
            admissible=tuple(state["admissible_commands"]),
            won=bool(state["won"]),
        )
