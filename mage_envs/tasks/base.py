"""What the single-agent task envs share: :class:`TextTaskEnv`.

The base class owns the episode loop that does not depend on the task: seeding and
drawing the instance at ``reset``, the single-agent checks, the per-episode counters,
the guards of ``step``, the invalid-action policy (retry, fallback, forfeit), truncation
after ``max_steps``, ``render`` and the contract's ``info`` keys. A task supplies its
state and its prompt through a few hooks: :meth:`~TextTaskEnv._start`,
:meth:`~TextTaskEnv._legal_actions`, :meth:`~TextTaskEnv._apply`,
:meth:`~TextTaskEnv._compose` and the :attr:`~TextTaskEnv._started` property, plus
optional ones with defaults (how an answer is read, what an instance is drawn from, the
retry note, the fallback action, the forfeit's worth, extra ``info`` keys, a summary).

Example:
    >>> from mage_envs.tasks.sokoban import SokobanEnv
    >>> env = SokobanEnv(levels=["#####\\n#@$.#\\n#####"], invalid_action="forfeit")
    >>> obs, info = env.reset(options={"instance": 0})
    >>> obs, reward, terminated, truncated, info = env.step("I push the box.")
    >>> terminated, info["outcome"], info["forfeit"], info["invalid_action"]["reason"]
    (True, 'loss', True, 'no_action_tag')
    >>> env.step("<action>right</action>")
    Traceback (most recent call last):
        ...
    RuntimeError: the episode is over; call reset() to start a new one
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from ..core.contract import ACTION_SPACE, InvalidActionPolicy
from ..core.invalid import InvalidDecision, judge_invalid
from ..core.parsing import ParsedAction, parse_action

#: What ``step`` returns: (observation, reward, terminated, truncated, info).
StepResult = tuple[str, float, bool, bool, dict[str, Any]]


def check_settings(render_mode: str | None, *counts: tuple[str, Any, int]) -> None:
    """Raise ``ValueError`` for the first ``(name, value, minimum)`` whose value is not an
    integer >= minimum, then for a ``render_mode`` other than None and ``"ansi"``.

    Example:
        >>> check_settings(None, ("max_steps", 10, 1), ("history_length", 0, 1))
        Traceback (most recent call last):
            ...
        ValueError: history_length must be an integer >= 1, got 0
    """
    for name, value, low in counts:
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if render_mode not in (None, "ansi"):
        raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")


class TextTaskEnv(gym.Env[str, str], ABC):
    """A single-agent task with a text prompt and text answers (the shared episode loop).

    Args:
        max_steps: steps before the episode is truncated.
        history_length: steps of the current episode shown in the prompt (the last ones).
        invalid_action: ``"retry"``, ``"forfeit"``, ``"fallback"``, a dict or an
            :class:`~mage_envs.core.contract.InvalidActionPolicy`.
        accept_bare: accept an answer that is exactly one action without tags.
        render_mode: ``None`` or ``"ansi"``.

    A subclass checks its arguments with :func:`check_settings` before calling this
    ``__init__``, sets ``observation_space`` and ``_rules`` (the prompt's fixed head) and
    names itself in :attr:`task_name`. Every episode keeps ``_instance``, ``_steps``,
    ``_history`` (filled by :meth:`_apply`), ``_retries_left``, ``_outcome`` and
    ``_forfeited``.
    """

    #: The task's name in error messages, e.g. ``"Sokoban"``.
    task_name: ClassVar[str]
    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        max_steps: int,
        history_length: int,
        invalid_action: str | InvalidActionPolicy | dict[str, Any],
        accept_bare: bool,
        render_mode: str | None,
    ) -> None:
        self.max_steps = int(max_steps)
        self.history_length = int(history_length)
        self.invalid_policy = InvalidActionPolicy.from_spec(invalid_action)
        self.accept_bare = accept_bare
        self.render_mode = render_mode
        self.action_space = ACTION_SPACE
        self._rng = random.Random(0)

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode. ``options``: ``instance`` (replay instance ``k``: the same
        level, instruction or game); ``opponent`` must be absent or None (a single-agent
        task)."""
        super().reset(seed=seed)
        if seed is not None or not self._started:
            self._rng = random.Random(int(self.np_random.integers(0, 2**63 - 1)))
        options = options or {}
        if options.get("opponent") is not None:
            raise ValueError(
                f"{self.task_name} is a single-agent task: no opponent can be chosen, got {options['opponent']!r}"
            )
        instance = options.get("instance")
        if instance is None:
            instance = self._draw_instance()
        if not isinstance(instance, (int, np.integer)) or isinstance(instance, bool) or instance < 0:
            raise ValueError(f"options['instance'] must be a non-negative integer, got {instance!r}")
        self._instance = int(instance)
        self._start(self._instance)
        self._steps = 0
        self._history: list[Any] = []
        self._retries_left = self.invalid_policy.max_retries
        self._outcome: str | None = None
        self._forfeited = False
        return self._compose(None), self._info(None)

    def step(self, action: str) -> StepResult:
        if not self._started:
            raise RuntimeError("call reset() before step()")
        if self._outcome is not None:
            raise RuntimeError("the episode is over; call reset() to start a new one")
        parsed = self._read(action)
        if parsed.action is None:
            return self._invalid(parsed)
        return self._play(parsed.action, 0.0, None)

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._compose(None) if self._started else ""
        return None

    @property
    def steps(self) -> int:
        """Steps (actions) taken in the current episode; retried answers are not steps."""
        return self._steps

    # ------------------------------------------------------------------ hooks
    @property
    @abstractmethod
    def _started(self) -> bool:
        """Whether ``reset()`` has set up an episode (False on a fresh env)."""

    @abstractmethod
    def _start(self, instance: int) -> None:
        """Set up the task state of ``instance`` (called by ``reset`` before the counters)."""

    @abstractmethod
    def _legal_actions(self) -> list[str]:
        """The legal actions of the running episode (a new list)."""

    @abstractmethod
    def _apply(self, action: str, reward: float) -> tuple[float, str | None]:
        """Play the legal ``action``: update the task state and ``_history``; return
        ``reward`` plus what the step earned, and the outcome (``"win"``/``"loss"``) when
        the step ended the task, else None."""

    @abstractmethod
    def _compose(self, notice: str | None) -> str:
        """The prompt of the current state, with a retry ``notice`` when there is one."""

    def _read(self, answer: str) -> ParsedAction:
        """The legal action ``answer`` names, or why it names none."""
        return parse_action(answer, self._legal_actions(), accept_bare=self.accept_bare)

    def _draw_instance(self) -> int:
        """The instance of an episode that ``reset`` was not given one for."""
        return self._rng.getrandbits(63)

    def _retry_notice(self, decision: InvalidDecision) -> str:
        """The retry note: what was wrong (the legal actions follow in the prompt)."""
        reason = decision.report["message"].split(" Legal actions:")[0]
        return f"{reason} Retries left: {decision.retries_left}."

    def _fallback_action(self, legal_action: str) -> str:
        """The action a fallback plays for the legal action the policy picked."""
        return legal_action

    def _forfeit_return(self) -> float:
        """What a forfeit is worth when the policy sets no ``forfeit_return``."""
        return 0.0

    def _info_extras(self) -> dict[str, Any]:
        """Task keys of ``info``, after the contract's and before the end keys."""
        return {}

    def _summary(self) -> str | None:
        """One line about the finished episode for ``info["summary"]`` (None: no key)."""
        return None

    # ------------------------------------------------------------------ the loop
    def _play(self, action: str, reward: float, report: dict[str, Any] | None) -> StepResult:
        self._steps += 1
        reward, outcome = self._apply(action, reward)
        terminated = outcome is not None
        truncated = not terminated and self._steps >= self.max_steps
        if terminated:
            self._outcome = outcome
        elif truncated:
            self._outcome = "loss"
        return self._compose(None), reward, terminated, truncated, self._info(report)

    def _invalid(self, parsed: ParsedAction) -> StepResult:
        policy = self.invalid_policy
        decision = judge_invalid(policy, parsed, self._legal_actions(), self._retries_left, self._rng)
        self._retries_left = decision.retries_left
        if decision.applied == "retry":
            return self._compose(self._retry_notice(decision)), policy.penalty, False, False, self._info(decision.report)
        if decision.applied == "fallback":
            return self._play(self._fallback_action(decision.substitute), policy.penalty, decision.report)
        forfeit_return = policy.forfeit_value(self._forfeit_return)
        self._outcome, self._forfeited = "loss", True
        return self._compose(None), policy.penalty + forfeit_return, True, False, self._info(decision.report)

    def _info(self, report: dict[str, Any] | None) -> dict[str, Any]:
        info: dict[str, Any] = {
            "legal_actions": [] if self._outcome is not None else self._legal_actions(),
            "opponent": None,
            "seat": 0,
            "invalid_action": report,
            "instance": self._instance,
            **self._info_extras(),
        }
        if self._outcome is not None:
            info.update(outcome=self._outcome, success=self._outcome == "win", forfeit=self._forfeited)
            summary = self._summary()
            if summary is not None:
                info["summary"] = summary
        return info
