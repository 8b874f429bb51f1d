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

Two options every task shares:

* ``action_labels="numbers"`` numbers the legal actions in the prompt (``1: look, 2:
  inventory``), adds ``info["action_labels"]`` (``["1", "2", ...]``, in the order of
  ``info["legal_actions"]``) and reads an answer that is exactly a label (in tags or bare)
  as the action it labels; the names stay legal answers. A model that samples one token
  per turn picks among the labels when the names are not single tokens (Household's
  commands, WebShop's clicks).
* ``instance_split="train"`` / ``"eval"`` draws only the instances whose *content* (a
  Sokoban room, a Household game: :meth:`TextTaskEnv._split_key`) has an even / odd
  SHA-256, so that a run evaluates on instances it never trained on: two instance numbers
  that make the same room fall in the same half (WebShop splits its instructions instead,
  see :class:`~mage_envs.tasks.webshop.WebShopEnv`). An explicit ``options["instance"]``
  outside the split is refused. ``"all"`` (the default) draws from every instance.

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

import hashlib
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
#: The values of ``action_labels``: no labels, or the numbers 1, 2, ...
ACTION_LABELS = ("none", "numbers")
#: The values of ``instance_split``: every instance, the training ones, the evaluation ones.
INSTANCE_SPLITS = ("all", "train", "eval")
#: ``"full"``: the rules head every prompt (for language models); ``"compact"``: no rules (a
#: model trained from scratch, such as the embedded tiny one, gains nothing from a fixed text
#: and pays for every token of it).
PROMPT_STYLES = ("full", "compact")
#: The sentence a labelled prompt adds under its legal actions.
LABEL_NOTE = "You may answer with an action's number instead of its name, e.g. <action>1</action>."
#: Characters a prompt's budget adds for labels: the note, and Sokoban's four "n: " prefixes
#: (the other tasks clip their list of legal actions to its own budget).
LABEL_ROOM = 100


def label_room(action_labels: str) -> int:
    """The characters labels add to a prompt's budget.

    Example:
        >>> label_room("none"), label_room("numbers")
        (0, 100)
    """
    return 0 if action_labels == "none" else LABEL_ROOM


def labelled(legal: list[str], labels: list[str]) -> list[str]:
    """The legal actions as a labelled prompt lists them (unchanged without labels).

    Example:
        >>> labelled(["look", "open fridge 1"], ["1", "2"]), labelled(["up"], [])
        (['1: look', '2: open fridge 1'], ['up'])
    """
    if not labels:
        return list(legal)
    return [f"{label}: {action}" for label, action in zip(labels, legal)]


#: Draws an instance split may take to find one of its instances.
MAX_SPLIT_DRAWS = 1000


def split_half(key: str) -> str:
    """``"train"`` or ``"eval"``: the half an instance whose content is ``key`` falls in
    (the parity of its SHA-256).

    Example:
        >>> split_half("3"), split_half("0")
        ('train', 'eval')
    """
    return "eval" if int(hashlib.sha256(key.encode()).hexdigest(), 16) % 2 else "train"


def check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    """``ValueError`` unless ``value`` is one of ``choices``.

    Example:
        >>> check_choice("action_labels", "letters", ACTION_LABELS)
        Traceback (most recent call last):
            ...
        ValueError: action_labels must be one of 'none', 'numbers', got 'letters'
    """
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


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
        action_labels: ``"none"`` or ``"numbers"`` (number the legal actions; see above).
        instance_split: ``"all"``, ``"train"`` or ``"eval"`` (see above).
        prompt_style: ``"full"`` (the rules head every prompt) or ``"compact"`` (no rules).

    A subclass checks its arguments with :func:`check_settings` before calling this
    ``__init__``, sets ``observation_space`` and ``_rules`` (the prompt's fixed head) and
    names itself in :attr:`task_name`. Every episode keeps ``_instance``, ``_steps``,
    ``_history`` (filled by :meth:`_apply`), ``_retries_left``, ``_outcome`` and
    ``_forfeited``.
    """

    #: The task's name in error messages, e.g. ``"Sokoban"``.
    task_name: ClassVar[str]
    #: The rules at the head of every prompt (set by the subclass's ``__init__``).
    _rules: str
    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        max_steps: int,
        history_length: int,
        invalid_action: str | InvalidActionPolicy | dict[str, Any],
        accept_bare: bool,
        render_mode: str | None,
        action_labels: str = "none",
        instance_split: str = "all",
        prompt_style: str = "full",
    ) -> None:
        check_choice("action_labels", action_labels, ACTION_LABELS)
        check_choice("instance_split", instance_split, INSTANCE_SPLITS)
        check_choice("prompt_style", prompt_style, PROMPT_STYLES)
        self.prompt_style = prompt_style
        self.action_labels = action_labels
        self.instance_split = instance_split
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
            instance = self._split_draw(self._draw_instance())
        if not isinstance(instance, (int, np.integer)) or isinstance(instance, bool) or instance < 0:
            raise ValueError(f"options['instance'] must be a non-negative integer, got {instance!r}")
        if not self._in_split(int(instance)):
            raise ValueError(f"instance {instance} is not in instance_split {self.instance_split!r} of {self.task_name} "
                             "(its content's SHA-256 decides its half)")
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
        parsed = self._read_label(action)
        if parsed.action is None:
            parsed = self._read(action)
        if parsed.action is None:
            return self._invalid(parsed)
        return self._play(parsed.action, 0.0, None)

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._compose(None) if self._started else ""
        return None

    @property
    def prompt_preamble(self) -> str:
        """The rules every prompt begins with (the text contract's optional preamble: a
        meta-episode keeps it above the memory, so all prompts of a run share it); empty in
        the compact style."""
        return self._rules if self.prompt_style == "full" else ""

    def _head(self) -> list[str]:
        """The lines a prompt starts with: the rules and a blank line, or none (compact)."""
        return [self.prompt_preamble, ""] if self.prompt_preamble else []

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
        """The instance of an episode that ``reset`` was not given one for (before the split)."""
        return self._rng.getrandbits(63)

    def _split_draw(self, instance: int) -> int:
        """``instance`` if it is in ``instance_split``, else the first later draw that is
        (``ValueError`` after :data:`MAX_SPLIT_DRAWS` draws)."""
        for _ in range(MAX_SPLIT_DRAWS):
            if self._in_split(instance):
                return instance
            instance = self._draw_instance()
        raise ValueError(f"no instance of instance_split {self.instance_split!r} in {MAX_SPLIT_DRAWS} draws of "
                         f"{self.task_name}: the pool is too small to split")

    def _split_key(self, instance: int) -> str:
        """What decides an instance's half: by default its number; a task whose numbers can
        make the same content twice names the content (Sokoban's room, Household's game)."""
        return str(instance)

    def _in_split(self, instance: int) -> bool:
        """Whether ``instance`` belongs to ``instance_split``."""
        return self.instance_split == "all" or split_half(self._split_key(instance)) == self.instance_split

    def _labels(self) -> list[str]:
        """The labels of the legal actions now (``[]`` without ``action_labels``)."""
        if self.action_labels == "none" or self._outcome is not None:
            return []
        return [str(i) for i in range(1, len(self._legal_actions()) + 1)]

    def _listed_actions(self) -> list[str]:
        """The legal actions as the prompt lists them (labelled when labels are on)."""
        return labelled(self._legal_actions(), self._labels())

    def _label_note(self) -> str:
        """:data:`LABEL_NOTE` when labels are on, else ``""``."""
        return LABEL_NOTE if self.action_labels != "none" else ""

    def _read_label(self, answer: str) -> ParsedAction:
        """The action whose label ``answer`` is (in tags or bare; played as a fallback plays
        that legal action, e.g. WebShop's search form searches for the instruction), or an
        empty result."""
        labels = self._labels()
        if not labels:
            return ParsedAction(None)
        parsed = parse_action(answer, labels, accept_bare=True)
        if parsed.action is None:
            return ParsedAction(None)
        return ParsedAction(self._fallback_action(self._legal_actions()[int(parsed.action) - 1]))

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
        labels = self._labels()
        if self.action_labels != "none":
            info["action_labels"] = labels
        if self._outcome is not None:
            info.update(outcome=self._outcome, success=self._outcome == "win", forfeit=self._forfeited)
            summary = self._summary()
            if summary is not None:
                info["summary"] = summary
        return info
