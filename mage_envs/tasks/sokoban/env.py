"""Sokoban as a text environment (``mage/Sokoban-v0``; ``mage/Sokoban-meta-v0`` replays one
level in every episode of a meta-episode).

Each episode is one level, generated from its instance number (see
:mod:`~mage_envs.tasks.sokoban.generator`) or taken from ``levels``. The prompt holds the
rules, the legend, the board in XSB notation, the step count, the last moves of the
episode, the legal actions and the answer format ``<action>up</action>``.

* **Actions**: ``up``, ``down``, ``left``, ``right`` are always legal while the episode
  runs. Walking into a wall or pushing a box against a wall or another box is a legal
  step that changes nothing (a *no-op*: it costs the step penalty and a step). An answer
  that names no direction is an *invalid action*, handled by ``invalid_action`` (retry,
  forfeit or fallback) like every contract env; a retried answer is not a step.
* **Rewards** (as gym-sokoban): -0.1 per step, +1 for a box pushed onto a goal, -1 for a
  box pushed off a goal, +10 when every box is on a goal. A forfeit pays ``penalty``
  plus ``forfeit_return``, by default -0.1 for each step left (what idling until the
  step limit would have cost).
* **End**: ``terminated`` when solved (outcome ``"win"``) or forfeited (``"loss"``);
  ``truncated`` after ``max_steps`` steps (default 100, as RAGEN and verl-agent; outcome
  ``"loss"``). ``success`` is ``outcome == "win"``.
* **info**: ``legal_actions`` (the four directions; empty once the episode is over),
  ``invalid_action``, ``instance``, ``opponent=None``, ``seat=0``; at the end
  ``outcome``, ``success``, ``forfeit`` and ``summary``: for the meta-episode memory,
  solved or not, where each box ended and the moves tried (``"Not solved after 100
  moves. Boxes ended at row 3 column 4 (off a goal). Moves: right x3, up, ..."``).
* **Options** of every task (:mod:`~mage_envs.tasks.base`): ``action_labels`` and
  ``instance_split`` (the room's XSB text decides its half: an evaluated room never
  appears in training, whatever its instance number).
* **Seeding**: ``reset(seed=s)`` seeds ``np_random``; the instance numbers and the random
  fallback action come from a generator derived from it. ``reset(options={"instance": k})``
  replays level ``k`` exactly.

Example:
    >>> env = SokobanEnv(levels=["#####\\n#@$.#\\n#####"])
    >>> obs, info = env.reset(seed=0)
    >>> info["legal_actions"], env.expert_actions()
    (['up', 'down', 'left', 'right'], ['right'])
    >>> obs, reward, terminated, truncated, info = env.step("<action>right</action>")
    >>> round(reward, 2), terminated, info["outcome"]
    (10.9, True, 'win')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from gymnasium import spaces

from ...core.contract import InvalidActionPolicy, clip_text, text_space
from ...core.invalid import InvalidDecision
from ...core.parsing import ParsedAction, canonical_answers
from ..base import TextTaskEnv, check_settings, label_room
from .generator import generate_level
from .level import DIRECTIONS, Level, parse_xsb
from .solver import solve
from .text import action_block, board_block, episode_summary, history_block, observation_budget, rules, spatial_hints

STEP_REWARD = -0.1
BOX_ON_GOAL_REWARD = 1.0
BOX_OFF_GOAL_REWARD = -1.0
SOLVED_REWARD = 10.0

_ACCEPTED = canonical_answers(DIRECTIONS, accept_bare=False)
_END_LINES = {
    "win": "Solved: every box is on a goal. The episode is over.",
    "loss": "Out of steps: the puzzle was not solved. The episode is over.",
    "forfeit": "You forfeited this episode by not answering with a legal action.",
}


class SokobanEnv(TextTaskEnv):
    """Single-agent Sokoban with a text prompt and text answers.

    Args:
        width, height: room size in cells, outer walls included (as gym-sokoban's
            ``dim_room``; at least 5).
        num_boxes: boxes (and goals) per generated level.
        max_steps: steps before the episode is truncated.
        invalid_action: ``"retry"``, ``"forfeit"``, ``"fallback"``, a dict or an
            :class:`~mage_envs.core.contract.InvalidActionPolicy`.
        accept_bare: accept an answer that is exactly a direction without tags.
        history_length: moves of the current episode shown in the prompt (the last ones).
        levels: XSB levels to play instead of generated ones; instance ``k`` plays
            ``levels[k % len(levels)]`` (``width``, ``height`` and ``num_boxes`` are then
            not used).
        render_mode: ``None`` or ``"ansi"``.
        action_labels, instance_split, prompt_style: see :class:`~mage_envs.tasks.base.TextTaskEnv`.
        spatial_hints: add a line above the legal actions saying what lies next to the player in
            each direction and, per box off a goal, its offset from the player and the
            nearest free goal's offset from it (``Around you: up wall, ... A box is down 1
            right 0 from you; ...``): the board in words, for a model that cannot read
            positions off the XSB grid (the embedded tiny model cannot: see
            docs/training.md). Off by default, as gym-sokoban shows only the grid.
    """

    task_name: ClassVar[str] = "Sokoban"

    def __init__(
        self,
        width: int = 6,
        height: int = 6,
        num_boxes: int = 1,
        max_steps: int = 100,
        invalid_action: str | InvalidActionPolicy | dict[str, Any] = "retry",
        accept_bare: bool = True,
        history_length: int = 10,
        levels: Sequence[str] | None = None,
        render_mode: str | None = None,
        action_labels: str = "none",
        instance_split: str = "all",
        prompt_style: str = "full",
        spatial_hints: bool = False,
    ) -> None:
        check_settings(render_mode, ("width", width, 5), ("height", height, 5), ("num_boxes", num_boxes, 1),
                       ("max_steps", max_steps, 1), ("history_length", history_length, 1))
        if isinstance(levels, str):
            raise TypeError("levels must be a sequence of XSB strings, not one string")
        self.levels: tuple[Level, ...] | None = None if levels is None else tuple(parse_xsb(text) for text in levels)
        if self.levels == ():
            raise ValueError("levels must hold at least one XSB level")
        if self.levels is not None and any(level.solved for level in self.levels):
            raise ValueError("every level in levels must start with a box off its goal")
        self.width, self.height, self.num_boxes = int(width), int(height), int(num_boxes)
        self.spatial_hints = bool(spatial_hints)
        super().__init__(max_steps, history_length, invalid_action, accept_bare, render_mode, action_labels,
                         instance_split, prompt_style)
        if self.levels is not None:
            width = max(level.board.width for level in self.levels)
            height = max(level.board.height for level in self.levels)
        boxes = max(len(level.boxes) for level in self.levels) if self.levels is not None else self.num_boxes
        budget = (observation_budget(width, height, self.max_steps, self.history_length,
                                     boxes if self.spatial_hints else 0) + label_room(action_labels))
        self.observation_space: spaces.Text = text_space(budget)
        self._rules = rules(self.max_steps)
        self._level: Level | None = None

    # ------------------------------------------------------------------ introspection
    @property
    def level(self) -> Level:
        """The current position (immutable)."""
        if self._level is None:
            raise RuntimeError("call reset() first")
        return self._level

    def expert_actions(self) -> list[str] | None:
        """The fewest moves that solve the level from the current position (``[]`` when it
        is solved), or None when it can no longer be solved (a box is stuck). Solutions are
        cached per position; the solver may raise
        :class:`~mage_envs.tasks.sokoban.solver.SearchLimitError` on very large levels."""
        solution = solve(self.level)
        return None if solution is None else list(solution.actions)

    # ------------------------------------------------------------------ hooks
    @property
    def _started(self) -> bool:
        return self._level is not None

    def _start(self, instance: int) -> None:
        if self.levels is not None:
            self._level = self.levels[instance % len(self.levels)]
        else:
            self._level = generate_level(instance, self.width, self.height, self.num_boxes).level

    def _legal_actions(self) -> list[str]:
        return list(DIRECTIONS)

    def _split_key(self, instance: int) -> str:
        """The room itself (its XSB text, player included): small rooms repeat across instances."""
        if self.levels is not None:
            return self.levels[instance % len(self.levels)].to_xsb()
        return generate_level(instance, self.width, self.height, self.num_boxes).level.to_xsb()

    def _read(self, answer: str) -> ParsedAction:
        """An exact ``<action>direction</action>`` skips the parser."""
        direction = _ACCEPTED.get(answer) if isinstance(answer, str) else None
        return ParsedAction(direction) if direction is not None else super()._read(answer)

    def _apply(self, action: str, reward: float) -> tuple[float, str | None]:
        self._level, move = self._board().move(action)
        self._history.append(move.describe())
        reward += STEP_REWARD
        if move.goal_change > 0:
            reward += BOX_ON_GOAL_REWARD
        elif move.goal_change < 0:
            reward += BOX_OFF_GOAL_REWARD
        if not self._level.solved:
            return reward, None
        return reward + SOLVED_REWARD, "win"

    def _info_extras(self) -> dict[str, Any]:
        """``state_key``: the position (XSB), what the future depends on besides the step count."""
        return {"state_key": self._board().to_xsb()}

    def _board(self) -> Level:
        """The current level (set once an episode has started)."""
        assert self._level is not None, "call reset() first"
        return self._level

    def _retry_notice(self, decision: InvalidDecision) -> str:
        """The whole notice, legal actions included."""
        return decision.notice

    def _forfeit_return(self) -> float:
        """What idling until the step limit would have cost."""
        return STEP_REWARD * (self.max_steps - self._steps)

    def _summary(self) -> str:
        """Solved or not, where the boxes ended and the moves tried (for the memory)."""
        return episode_summary([line.split(":")[0] for line in self._history], self._board())

    def _compose(self, notice: str | None) -> str:
        parts = [
            *self._head(),
            board_block(self._board(), self._steps, self.max_steps),
            "",
            history_block(self._history, self.history_length),
            "",
            *([spatial_hints(self._board())] if self.spatial_hints and self._outcome is None else []),
        ]
        if self._outcome is None:
            parts.append(action_block(notice, self._listed_actions(), self._label_note()))
        else:
            parts.append(_END_LINES["forfeit" if self._forfeited else self._outcome])
        return clip_text("\n".join(parts), self.observation_space.max_length)
