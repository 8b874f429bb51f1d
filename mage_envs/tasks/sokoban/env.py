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
  ``outcome``, ``success`` and ``forfeit``.
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

import random
from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from ...core.contract import ACTION_SPACE, InvalidActionPolicy, clip_text, text_space
from ...core.invalid import judge_invalid
from ...core.parsing import ParsedAction, parse_action
from .generator import generate_level
from .level import DIRECTIONS, Level, parse_xsb
from .solver import solve
from .text import action_block, board_block, history_block, observation_budget, rules

STEP_REWARD = -0.1
BOX_ON_GOAL_REWARD = 1.0
BOX_OFF_GOAL_REWARD = -1.0
SOLVED_REWARD = 10.0

_ACCEPTED = {f"<action>{name}</action>": name for name in DIRECTIONS}
_END_LINES = {
    "win": "Solved: every box is on a goal. The episode is over.",
    "loss": "Out of steps: the puzzle was not solved. The episode is over.",
    "forfeit": "You forfeited this episode by not answering with a legal action.",
}


class SokobanEnv(gym.Env[str, str]):
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
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 4}

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
    ) -> None:
        for name, value, low in (("width", width, 5), ("height", height, 5), ("num_boxes", num_boxes, 1),
                                 ("max_steps", max_steps, 1), ("history_length", history_length, 1)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if isinstance(levels, str):
            raise TypeError("levels must be a sequence of XSB strings, not one string")
        self.levels: tuple[Level, ...] | None = None if levels is None else tuple(parse_xsb(text) for text in levels)
        if self.levels == ():
            raise ValueError("levels must hold at least one XSB level")
        if self.levels is not None and any(level.solved for level in self.levels):
            raise ValueError("every level in levels must start with a box off its goal")
        self.width, self.height, self.num_boxes = int(width), int(height), int(num_boxes)
        self.max_steps = int(max_steps)
        self.history_length = int(history_length)
        self.invalid_policy = InvalidActionPolicy.from_spec(invalid_action)
        self.accept_bare = accept_bare
        self.render_mode = render_mode
        if self.levels is not None:
            width = max(level.board.width for level in self.levels)
            height = max(level.board.height for level in self.levels)
        self.observation_space = text_space(observation_budget(width, height, self.max_steps, self.history_length))
        self.action_space = ACTION_SPACE
        self._rules = rules(self.max_steps)
        self._rng = random.Random(0)
        self._level: Level | None = None

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode. ``options``: ``instance`` (replay level ``k``); ``opponent``
        must be absent or None (a single-agent task)."""
        super().reset(seed=seed)
        if seed is not None or self._level is None:
            self._rng = random.Random(int(self.np_random.integers(0, 2**63 - 1)))
        options = options or {}
        if options.get("opponent") is not None:
            raise ValueError(f"Sokoban is a single-agent task: no opponent can be chosen, got {options['opponent']!r}")
        instance = options.get("instance")
        if instance is None:
            instance = self._rng.getrandbits(63)
        if not isinstance(instance, (int, np.integer)) or isinstance(instance, bool) or instance < 0:
            raise ValueError(f"options['instance'] must be a non-negative integer, got {instance!r}")
        self._instance = int(instance)
        self._level = self._start_level(self._instance)
        self._steps = 0
        self._history: list[str] = []
        self._retries_left = self.invalid_policy.max_retries
        self._outcome: str | None = None
        self._forfeited = False
        return self._compose(None), self._info(None)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._level is None:
            raise RuntimeError("call reset() before step()")
        if self._outcome is not None:
            raise RuntimeError("the episode is over; call reset() to start a new one")
        direction = _ACCEPTED.get(action) if isinstance(action, str) else None
        if direction is None:
            parsed = parse_action(action, DIRECTIONS, accept_bare=self.accept_bare)
            if parsed.action is None:
                return self._invalid(parsed)
            direction = parsed.action
        return self._play(direction, 0.0, None)

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._compose(None) if self._level is not None else ""
        return None

    # ------------------------------------------------------------------ introspection
    @property
    def level(self) -> Level:
        """The current position (immutable)."""
        if self._level is None:
            raise RuntimeError("call reset() first")
        return self._level

    @property
    def steps(self) -> int:
        """Steps taken in the current episode (retried answers are not steps)."""
        return self._steps

    def expert_actions(self) -> list[str] | None:
        """The fewest moves that solve the level from the current position (``[]`` when it
        is solved), or None when it can no longer be solved (a box is stuck). Solutions are
        cached per position; the solver may raise
        :class:`~mage_envs.tasks.sokoban.solver.SearchLimitError` on very large levels."""
        solution = solve(self.level)
        return None if solution is None else list(solution.actions)

    # ------------------------------------------------------------------ internals
    def _start_level(self, instance: int) -> Level:
        if self.levels is not None:
            return self.levels[instance % len(self.levels)]
        return generate_level(instance, self.width, self.height, self.num_boxes).level

    def _play(self, direction: str, reward: float, report: dict[str, Any] | None) -> tuple:
        self._level, move = self._level.move(direction)
        self._steps += 1
        self._history.append(move.describe())
        reward += STEP_REWARD
        if move.goal_change > 0:
            reward += BOX_ON_GOAL_REWARD
        elif move.goal_change < 0:
            reward += BOX_OFF_GOAL_REWARD
        terminated = self._level.solved
        truncated = not terminated and self._steps >= self.max_steps
        if terminated:
            reward += SOLVED_REWARD
            self._outcome = "win"
        elif truncated:
            self._outcome = "loss"
        return self._compose(None), reward, terminated, truncated, self._info(report)

    def _invalid(self, parsed: ParsedAction) -> tuple:
        policy = self.invalid_policy
        decision = judge_invalid(policy, parsed, DIRECTIONS, self._retries_left, self._rng)
        self._retries_left = decision.retries_left
        if decision.applied == "retry":
            return self._compose(decision.notice), policy.penalty, False, False, self._info(decision.report)
        if decision.applied == "fallback":
            return self._play(decision.substitute, policy.penalty, decision.report)
        forfeit_return = policy.forfeit_return
        if forfeit_return is None:
            forfeit_return = STEP_REWARD * (self.max_steps - self._steps)
        self._outcome, self._forfeited = "loss", True
        return self._compose(None), policy.penalty + forfeit_return, True, False, self._info(decision.report)

    def _compose(self, notice: str | None) -> str:
        parts = [
            self._rules,
            "",
            board_block(self._level, self._steps, self.max_steps),
            "",
            history_block(self._history, self.history_length),
            "",
        ]
        if self._outcome is None:
            parts.append(action_block(notice))
        else:
            parts.append(_END_LINES["forfeit" if self._forfeited else self._outcome])
        return clip_text("\n".join(parts), self.observation_space.max_length)

    def _info(self, report: dict[str, Any] | None) -> dict[str, Any]:
        info: dict[str, Any] = {
            "legal_actions": [] if self._outcome is not None else list(DIRECTIONS),
            "opponent": None,
            "seat": 0,
            "invalid_action": report,
            "instance": self._instance,
        }
        if self._outcome is not None:
            info.update(outcome=self._outcome, success=self._outcome == "win", forfeit=self._forfeited)
        return info
