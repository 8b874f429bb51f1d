"""Household tasks as a text environment (``mage/Household-v0``; ``mage/Household-meta-v0``
replays one game in every episode of a meta-episode).

Each episode is one TextWorld game: generated and compiled from its instance number (see
:mod:`~mage_envs.tasks.household.tasks` and :mod:`~mage_envs.tasks.household.builder`;
cached on disk), or one of ALFWorld's games with ``alfworld_split=`` (see
:mod:`~mage_envs.tasks.household.alfworld`). The prompt holds the rules, the task, the
game's answer to the last command, the last commands, the legal commands and the answer
format ``<action>open fridge 1</action>``.

* **Actions**: the game's admissible commands (``info["legal_actions"]``, TextWorld's
  ``admissible_commands``), matched case-insensitively; any other answer is an *invalid
  action*, handled by ``invalid_action`` (retry, forfeit or fallback); a retried answer
  is not a step.
* **Reward**: 1 at the step that completes the task, 0 otherwise (ALFWorld's ``won``). A
  forfeit pays ``penalty`` plus ``forfeit_return`` (default 0).
* **End**: ``terminated`` when the task is done (outcome ``"win"``) or forfeited
  (``"loss"``); ``truncated`` after ``max_steps`` actions (default 50, as ALFWorld in
  verl-agent; ``"loss"``). ``success`` is ``outcome == "win"``.
* **info**: ``legal_actions``, ``invalid_action``, ``instance``, ``opponent=None``,
  ``seat=0``, ``task_type`` (ALFWorld's name), ``goal``; at the end ``outcome``,
  ``success``, ``forfeit`` and ``summary`` (for the meta-episode memory: the task, done or
  not, and the commands that changed something, in order: ``"Task 'put a mug in desk 1.'
  not done after 50 actions. Commands that changed something: open drawer 1, take mug 1
  from drawer 1."``).
* **Options** of every task (:mod:`~mage_envs.tasks.base`): ``action_labels="numbers"``
  numbers the admissible commands, so a model that samples one token picks a command by
  its number; ``instance_split`` (the game's content decides its half: its scene, objects
  and goal, or ALFWorld's game file).
* **Options that make the task easier to learn from scratch** (differences from ALFWorld,
  off by default): ``looking_commands=False`` leaves the commands that only look
  (``look``, ``inventory``, ``examine X``: most of a game's admissible list) out of the
  legal ones; ``task_types`` draws only games of these ALFWorld task types;
  ``max_expert_steps`` only generated games whose expert needs at most that many commands
  (an explicit ``options["instance"]`` outside them is refused); ``progress_reward=c``
  adds ``c`` times the shortening of the expert's remaining plan to every step's reward
  (potential-based shaping: an episode's shaping sums to ``c`` times the plan's length at
  the start minus at the end, so a win is still worth more than any loss; ``success`` is
  unchanged).
* **Seeding**: ``reset(seed=s)`` seeds ``np_random``; the instance numbers (drawn from
  ``range(num_games)``, or from ALFWorld's games) and the random fallback action come from
  a generator derived from it. ``reset(options={"instance": k})`` replays game ``k``.
* **Expert**: :meth:`HouseholdEnv.expert_actions` is TextWorld's winning policy from the
  current state (ALFWorld's ``PLANNER`` expert for ALFWorld games).

The running game (a Jericho interpreter) is not pickled: an unpickled env reopens the game
(building it first if its cache lacks it) and replays the episode's commands, so it
continues identically.

Example (needs ``textworld``; compiles one game the first time):
    >>> env = HouseholdEnv()
    >>> obs, info = env.reset(options={"instance": 3})
    >>> info["goal"], env.expert_actions()
    ('put a remotecontrol on sofa 1.', ['take remotecontrol 1 from shelf 1', 'put remotecontrol 1 on sofa 1'])
    >>> for action in env.expert_actions():
    ...     obs, reward, terminated, truncated, info = env.step(f"<action>{action}</action>")
    >>> reward, terminated, info["success"]
    (1.0, True, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from gymnasium import spaces

from ...core.contract import InvalidActionPolicy, clip_text, text_space
from ..base import TextTaskEnv, check_settings, label_room
from .alfworld import AlfworldGame, alfworld_games, goal_from_intro, names_wrapper
from .builder import game_file
from .session import GameSession, Turn
from .tasks import TASK_TYPES, make_task
from .text import (
    done_commands,
    feedback_block,
    history_block,
    is_looking,
    legal_block,
    observation_budget,
    rules,
    task_block,
)

SUCCESS_REWARD = 1.0
#: Instances that ``reset()`` draws from when none is given (generated games).
DEFAULT_NUM_GAMES = 1000
_END_LINES = {
    "win": "Task complete. The episode is over.",
    "loss": "Out of actions: the task was not completed. The episode is over.",
    "forfeit": "You forfeited this episode by not answering with a legal action.",
}


def _check_task_types(task_types: Sequence[str] | None) -> tuple[str, ...] | None:
    """``task_types`` as a tuple, each one of :data:`TASK_TYPES` (``ValueError`` otherwise)."""
    if task_types is None:
        return None
    if isinstance(task_types, str) or not task_types:
        raise ValueError(f"task_types must be a non-empty list of task types, got {task_types!r}")
    unknown = [t for t in task_types if t not in TASK_TYPES]
    if unknown:
        raise ValueError(f"unknown task type {unknown[0]!r}; known: {', '.join(TASK_TYPES)}")
    return tuple(task_types)


def _require_textworld() -> None:
    """Fail at construction, with the install command, when TextWorld is missing."""
    try:
        import textworld  # noqa: F401
    except ImportError as error:
        raise ImportError('mage/Household-v0 needs TextWorld: pip install "mage-rl[household]"') from error


class HouseholdEnv(TextTaskEnv):
    """Single-agent household tasks (ALFWorld-style TextWorld games) with text answers.

    Args:
        max_steps: actions before the episode is truncated.
        invalid_action: ``"retry"``, ``"forfeit"``, ``"fallback"``, a dict or an
            :class:`~mage_envs.core.contract.InvalidActionPolicy`.
        accept_bare: accept an answer that is exactly one command without tags.
        history_length: commands of the current episode shown in the prompt (the last ones).
        num_games: generated games that ``reset()`` draws from (instances ``0..num_games-1``;
            any instance >= 0 can be asked for with ``options["instance"]``).
        cache_dir: where compiled games are kept (default
            :func:`~mage_envs.tasks.household.builder.default_cache_dir`).
        alfworld_split: play ALFWorld's games of this split (``"train"``, ``"valid_seen"``,
            ``"valid_unseen"``) instead of generated ones; instance ``k`` is game
            ``k % len(games)``.
        alfworld_data: ALFWorld's data folder (default ``$ALFWORLD_DATA``).
        render_mode: ``None`` or ``"ansi"``.
        action_labels, instance_split, prompt_style: see :class:`~mage_envs.tasks.base.TextTaskEnv`.
        looking_commands: list ``look``, ``inventory`` and ``examine X`` among the legal
            commands (ALFWorld does); False leaves them out (they change nothing), unless
            nothing else is admissible.
        task_types: draw only games of these task types (:data:`TASK_TYPES`' names;
            ``None``: all).
        max_expert_steps: draw only generated games whose expert plan has at most this
            many commands (``None``: all).
        progress_reward: reward per command by which a step shortens the expert's plan
            (negative when it lengthens it; 0: ALFWorld's reward, the default). A state
            with no plan known (not won) keeps the last one's length.
    """

    task_name: ClassVar[str] = "Household"

    def __init__(
        self,
        max_steps: int = 50,
        invalid_action: str | InvalidActionPolicy | dict[str, Any] = "retry",
        accept_bare: bool = True,
        history_length: int = 8,
        num_games: int = DEFAULT_NUM_GAMES,
        cache_dir: str | Path | None = None,
        alfworld_split: str | None = None,
        alfworld_data: str | Path | None = None,
        render_mode: str | None = None,
        action_labels: str = "none",
        instance_split: str = "all",
        prompt_style: str = "full",
        looking_commands: bool = True,
        task_types: Sequence[str] | None = None,
        max_expert_steps: int | None = None,
        progress_reward: float = 0.0,
    ) -> None:
        check_settings(render_mode, ("max_steps", max_steps, 1), ("history_length", history_length, 1),
                       ("num_games", num_games, 1), *(() if max_expert_steps is None else
                                                      (("max_expert_steps", max_expert_steps, 1),)))
        _require_textworld()
        super().__init__(max_steps, history_length, invalid_action, accept_bare, render_mode, action_labels,
                         instance_split, prompt_style)
        self.cache_dir = cache_dir
        self.alfworld_split = alfworld_split
        self._alfworld: tuple[AlfworldGame, ...] = ()
        if alfworld_split is not None:
            self._alfworld = alfworld_games(alfworld_split, alfworld_data)
        self.num_games = len(self._alfworld) or int(num_games)
        self.looking_commands = bool(looking_commands)
        self.task_types = _check_task_types(task_types)
        if max_expert_steps is not None and self._alfworld:
            raise ValueError("max_expert_steps applies to generated games only (ALFWorld's plans are not known "
                             "before a game is played): leave it out with alfworld_split")
        self.max_expert_steps = max_expert_steps
        self.progress_reward = float(progress_reward)
        self._pool = self._selected_games()
        self.observation_space: spaces.Text = text_space(observation_budget(self.max_steps, self.history_length)
                                                        + label_room(action_labels))
        self._rules = rules(self.max_steps, alfworld=bool(self._alfworld), looking=self.looking_commands)
        self._session: GameSession | None = None
        self._turn: Turn | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_session"] = None  # a running interpreter: reopened and replayed on unpickling
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._turn is not None:
            self._path = self._locate(self._instance)  # built again if this machine lacks it
            session = self._open(self._path)
            session.reset()
            for command, _feedback in self._history:
                session.step(command)

    # ------------------------------------------------------------------ gym API
    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    # ------------------------------------------------------------------ introspection
    @property
    def goal(self) -> str:
        """The current task, e.g. ``"put a hot apple in cabinet 2."``."""
        if self._turn is None:
            raise RuntimeError("call reset() first")
        return self._goal

    @property
    def game_path(self) -> Path:
        """The game file being played."""
        if self._turn is None:
            raise RuntimeError("call reset() first")
        return self._path

    def expert_actions(self) -> list[str]:
        """Commands that complete the task from the current state (``[]`` once the episode
        is over): TextWorld's winning policy, kept up to date as the game goes."""
        if self._turn is None:
            raise RuntimeError("call reset() first")
        if self._outcome is not None:
            return []
        return self._playing()[0].policy()

    # ------------------------------------------------------------------ hooks
    @property
    def _started(self) -> bool:
        return self._turn is not None

    def _start(self, instance: int) -> None:
        if self._pool is not None and not self._selects(instance):
            raise ValueError(f"instance {instance} is a {self._game_type(instance)} game"
                             + ("" if self._alfworld else f" whose expert needs {len(make_task(instance).walkthrough)} "
                                "commands") + f", outside task_types={self.task_types} / "
                             f"max_expert_steps={self.max_expert_steps}")
        self._path = self._locate(instance)
        self._task_type = self._game_type(instance)
        self._turn = self._open(self._path).reset()
        self._goal = goal_from_intro(self._turn.feedback)

    def _draw_instance(self) -> int:
        if self._pool is None:
            return self._rng.randrange(self.num_games)
        return self._pool[self._rng.randrange(len(self._pool))]

    def _split_key(self, instance: int) -> str:
        """The game: ALFWorld's file, or the generated task's scene, objects and goal."""
        if self._alfworld:
            return str(self._alfworld[instance % len(self._alfworld)].path.parent.name)
        task = make_task(instance)
        return f"{task.scene}|{task.receptacles}|{task.items}|{task.goal}"

    def _legal_actions(self) -> list[str]:
        admissible = list(self._playing()[1].admissible)
        if self.looking_commands:
            return admissible
        return [c for c in admissible if not is_looking(c)] or admissible

    def _apply(self, action: str, reward: float) -> tuple[float, str | None]:
        session = self._playing()[0]
        before = len(session.policy()) if self.progress_reward else 0
        turn = self._turn = session.step(action)
        self._history.append((action, turn.feedback))
        if self.progress_reward:
            after = 0 if turn.won else (len(session.policy()) or before)
            reward += self.progress_reward * (before - after)
        return (reward + SUCCESS_REWARD, "win") if turn.won else (reward, None)

    def _info_extras(self) -> dict[str, Any]:
        return {"task_type": self._task_type, "goal": self._goal}

    # ------------------------------------------------------------------ internals
    def _game_type(self, instance: int) -> str:
        """The task type of ``instance``'s game."""
        if self._alfworld:
            return self._alfworld[instance % len(self._alfworld)].task_type
        return make_task(instance).task_type

    def _selects(self, instance: int) -> bool:
        """Whether ``instance``'s game is of ``task_types`` and within ``max_expert_steps``."""
        if self.task_types is not None and self._game_type(instance) not in self.task_types:
            return False
        return self.max_expert_steps is None or len(make_task(instance).walkthrough) <= self.max_expert_steps

    def _selected_games(self) -> list[int] | None:
        """The instances ``reset()`` draws from under ``task_types`` / ``max_expert_steps``
        (``None`` without them: all of ``range(num_games)``, drawn as before)."""
        if self.task_types is None and self.max_expert_steps is None:
            return None
        pool = [k for k in range(self.num_games) if self._selects(k)]
        if not pool:
            raise ValueError(f"no game among the {self.num_games} has task_types={self.task_types} and "
                             f"max_expert_steps={self.max_expert_steps}")
        return pool

    def _locate(self, instance: int) -> Path:
        """The game file of ``instance`` (an ALFWorld game, or a generated one, built if needed)."""
        if self._alfworld:
            return self._alfworld[instance % len(self._alfworld)].path
        return game_file(instance, self.cache_dir)

    def _open(self, path: Path) -> GameSession:
        """The session playing ``path``: the open one, or a new one."""
        if self._session is not None and self._session.path == Path(path):
            return self._session
        self.close()
        session = self._session = GameSession(path, [names_wrapper()] if self._alfworld else [])
        return session

    def _playing(self) -> tuple[GameSession, Turn]:
        """The open session and its last turn (both set once an episode has started)."""
        assert self._session is not None and self._turn is not None, "call reset() first"
        return self._session, self._turn

    def _compose(self, notice: str | None) -> str:
        turn = self._playing()[1]
        last = self._history[-1][0] if self._history else None
        parts = [
            *self._head(),
            task_block(self._goal, self._steps, self.max_steps),
            "",
            feedback_block(turn.feedback, last),
            "",
            history_block(self._history, self.history_length),
            "",
        ]
        if self._outcome is None:
            parts.append(legal_block(self._listed_actions(), notice, self._label_note()))
        else:
            parts.append(_END_LINES["forfeit" if self._forfeited else self._outcome])
        return clip_text("\n".join(parts), self.observation_space.max_length)

    def _summary(self) -> str:
        """The task, done or not, and the commands that changed something (for the memory)."""
        done = done_commands([command for command, _ in self._history])
        commands = f" Commands that changed something: {', '.join(done)}." if done else ""
        if self._outcome == "win":
            return f"Task '{clip_text(self._goal, 100)}' done in {self._steps} actions.{commands}"
        how = "forfeited" if self._forfeited else f"not done after {self._steps} actions"
        return f"Task '{clip_text(self._goal, 100)}' {how}.{commands}"
