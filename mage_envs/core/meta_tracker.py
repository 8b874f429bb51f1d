"""One learner's side of a meta-episode: its returns, memory, rewards and prompts.

:class:`MetaEpisodeTracker` is what every meta-episode env shares, whatever its API:
:class:`~mage_envs.MetaEpisodeWrapper` (one agent, Gymnasium) keeps one, the PettingZoo
``MetaEpisodeAEC`` keeps one per learner. It holds the finished inner episodes' returns,
successes and outcomes, the :class:`~mage_envs.core.memory.ReflectionMemory`, the
reward-mode arithmetic (:func:`meta_reward`) and the prompts: the ``[Episode n of N]``
header under the memory block, and the request for a reflection between episodes.

Example:
    >>> tracker = MetaEpisodeTracker(num_episodes=2, reward_mode="differential")
    >>> tracker.add_reward(-1.0)
    >>> tracker.end_episode({"outcome": "loss"})      # the meta reward of episode 1
    -1.0
    >>> print(tracker.reflect_prompt("Hand over.", {"outcome": "loss"}, inner_max=100))
    Memory of earlier episodes:
    [Episode 1] Result: loss, return -1.
    <BLANKLINE>
    Hand over.
    <BLANKLINE>
    Episode 1 of 2 is over. loss, return -1.
    Before the next episode against the same opponent, reflect: what did the opponent do, what worked, what will you do differently? Answer inside <reflection>...</reflection> in a few sentences.
    >>> tracker.add_reflection("<reflection>Bet the King.</reflection>")
    >>> tracker.next_episode()
    >>> tracker.add_reward(2.0)
    >>> tracker.end_episode({"outcome": "win"}), tracker.finished  # 2 - (-1)
    (3.0, True)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal, Sequence

from .contract import sanitize_text
from .memory import ReflectionMemory

RewardMode = Literal["differential", "final", "cumulative"]
#: Where a meta-episode is: an inner episode, the reflection between two, or the end.
Phase = Literal["act", "reflect", "done"]
#: The keys :meth:`MetaEpisodeTracker.info` adds to an inner env's ``info``.
META_INFO_KEYS = (
    "phase", "episode_index", "num_episodes", "episode_returns", "episode_successes", "episode_outcomes", "meta_done",
)
REWARD_MODES: tuple[str, ...] = ("differential", "final", "cumulative")

REFLECT_PROMPT = (
    "Episode {n} of {total} is over. {result}\n"
    "Before the next episode against the same opponent, reflect: what did the opponent do, "
    "what worked, what will you do differently? Answer inside <reflection>...</reflection> "
    "in a few sentences."
)


def meta_reward(returns: Sequence[float], num_episodes: int, mode: RewardMode) -> float:
    """The reward paid when inner episode ``len(returns)`` ends, given the returns so far.

    ``"differential"``: R(n) - R(n-1) with R(0) = 0 (the rewards sum to R(N));
    ``"final"``: R(N) at the last episode, 0 before; ``"cumulative"``: R(n).

    Example:
        >>> [meta_reward([1.0, -2.0][:n], 2, "differential") for n in (1, 2)]
        [1.0, -3.0]
        >>> meta_reward([1.0], 2, "final"), meta_reward([1.0, -2.0], 2, "cumulative")
        (0.0, -2.0)
    """
    current = returns[-1]
    if mode == "cumulative":
        return current
    if mode == "final":
        return current if len(returns) == num_episodes else 0.0
    previous = returns[-2] if len(returns) > 1 else 0.0
    return current - previous


def replay_reset(
    repeat_instance: bool, instance: int | None, seed: int | None
) -> tuple[int | None, dict[str, Any]]:
    """The ``(seed, options)`` of the next inner ``reset``: the same instance when
    ``repeat_instance`` (an env without instances is re-seeded with the first ``seed``).

    Example:
        >>> replay_reset(True, 42, 7), replay_reset(True, None, 7), replay_reset(False, 42, 7)
        ((None, {'instance': 42}), (7, {}), (None, {}))
    """
    if not repeat_instance:
        return None, {}
    if instance is not None:
        return None, {"instance": instance}
    return seed, {}


def chosen_instances(
    options: dict[str, Any] | None, repeat_instance: bool, num_episodes: int
) -> tuple[dict[str, Any], list[int] | None]:
    """Split a meta ``reset``'s ``options``: those of the first inner reset (with the first of
    ``options["instances"]`` as its ``instance``), and the instance of every episode, checked
    (fresh deals only, one per episode), or ``None`` when none were given.

    Example:
        >>> chosen_instances({"instances": [3, 5], "opponent": "x"}, False, 2)
        ({'opponent': 'x', 'instance': 3}, [3, 5])
        >>> chosen_instances(None, True, 2)
        ({}, None)
    """
    first = dict(options or {})
    instances = first.pop("instances", None)
    if instances is None:
        return first, None
    if repeat_instance:
        raise ValueError("options['instances'] gives every episode its own instance: it needs "
                         "repeat_instance=False (options['instance'] repeats one)")
    if "instance" in first:
        raise ValueError("give options['instance'] or options['instances'], not both")
    chosen = [int(k) for k in instances]
    if len(chosen) != num_episodes:
        raise ValueError(f"options['instances'] needs one instance per episode ({num_episodes}), got {len(chosen)}")
    first["instance"] = chosen[0]
    return first, chosen


@dataclass(frozen=True)
class MetaOptions:
    """The options of a meta-episode, one object for every meta env:
    :class:`~mage_envs.MetaEpisodeWrapper`, :class:`~mage_envs.numeric.TensorMetaWrapper`
    (the fields it uses), ``MetaEpisodeAEC`` and the ``gym.make`` arguments of the
    ``-meta-`` ids.

    Args:
        num_episodes: inner episodes per meta-episode (>= 1).
        reward_mode: ``"differential"`` (MAGE), ``"final"`` or ``"cumulative"``.
        reflection: ask for a reflection after every episode but the last.
        memory_budget: characters the memory block may take in a prompt.
        repeat_instance: replay the same deal / start position in every episode
            (``options["instance"]``); ``False`` deals afresh against the same opponent.
        include_summaries: put a one-line result of each earlier episode in the memory.

    Example:
        >>> kwargs = {"num_episodes": 2, "opponent": "nash"}
        >>> MetaOptions.take(kwargs).num_episodes, kwargs     # the game's options stay
        (2, {'opponent': 'nash'})
    """

    num_episodes: int = 3
    reward_mode: RewardMode = "differential"
    reflection: bool = True
    memory_budget: int = 1500
    repeat_instance: bool = True
    include_summaries: bool = True

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The option names, in order."""
        return tuple(field.name for field in fields(cls))

    @classmethod
    def of(cls, owner: str, options: dict[str, Any], allowed: Sequence[str] | None = None) -> MetaOptions:
        """The options from keyword arguments, refusing names outside ``allowed`` (default:
        all) with a ``TypeError`` that names ``owner``."""
        allowed = cls.names() if allowed is None else allowed
        unknown = [name for name in options if name not in allowed]
        if unknown:
            raise TypeError(f"{owner} got unexpected option(s) {unknown}; its options are {list(allowed)}")
        return cls(**options)

    @classmethod
    def take(cls, kwargs: dict[str, Any]) -> MetaOptions:
        """Pop the option names out of ``kwargs`` (``gym.make`` arguments); the rest are
        the inner env's."""
        return cls(**{name: kwargs.pop(name) for name in list(kwargs) if name in cls.names()})

    def as_kwargs(self, names: Sequence[str] | None = None) -> dict[str, Any]:
        """The options (those in ``names``, default all) as keyword arguments."""
        values = asdict(self)
        return values if names is None else {name: values[name] for name in names}

    def tracker(self) -> MetaEpisodeTracker:
        """A :class:`MetaEpisodeTracker` for one learner with these options."""
        return MetaEpisodeTracker(self.num_episodes, self.reward_mode, self.memory_budget, self.include_summaries)


class MetaEpisodeTracker:
    """One learner through a meta-episode of ``num_episodes`` inner episodes.

    Args:
        num_episodes: inner episodes per meta-episode (>= 1).
        reward_mode: ``"differential"`` (MAGE), ``"final"`` or ``"cumulative"``.
        memory_budget: characters the memory block may take in a prompt.
        include_summaries: put a one-line result of each earlier episode in the memory.
    """

    def __init__(
        self,
        num_episodes: int = 3,
        reward_mode: RewardMode = "differential",
        memory_budget: int = 1500,
        include_summaries: bool = True,
    ) -> None:
        if not isinstance(num_episodes, int) or num_episodes < 1:
            raise ValueError(f"num_episodes must be a positive integer, got {num_episodes!r}")
        if reward_mode not in REWARD_MODES:
            raise ValueError(
                f"reward_mode must be 'differential', 'final' or 'cumulative', got {reward_mode!r}"
            )
        self.num_episodes = num_episodes
        self.reward_mode: RewardMode = reward_mode
        self.memory = ReflectionMemory(budget=memory_budget, include_summaries=include_summaries)
        self.start()

    @staticmethod
    def prompt_length(inner_max: int, memory_budget: int) -> int:
        """The longest prompt a tracker makes from inner observations of ``inner_max`` chars."""
        act_room = inner_max + 42
        reflect_room = inner_max // 2 + 2 + len(REFLECT_PROMPT) + 120
        return memory_budget + 2 + max(act_room, reflect_room)

    def start(self) -> None:
        """Forget everything: a new meta-episode begins with episode 0."""
        self.memory.clear()
        self.returns: list[float] = []
        self.successes: list[bool] = []
        self.outcomes: list[str | None] = []
        self.episode_index = 0
        self.current_return = 0.0

    def add_reward(self, reward: float) -> None:
        """Add an inner step's reward to the current episode's return."""
        self.current_return += float(reward)

    def end_episode(self, info: dict[str, Any]) -> float:
        """Record the finished inner episode (``info``: its last info); return its meta reward."""
        self.returns.append(self.current_return)
        self.successes.append(bool(info.get("success", False)))
        self.outcomes.append(info.get("outcome"))
        summary = info.get("summary")
        line = f"Result: {self.result_line(info)}"
        self.memory.add_episode(f"{summary} {line}" if summary else line)
        return meta_reward(self.returns, self.num_episodes, self.reward_mode)

    @property
    def finished(self) -> bool:
        """Whether the last inner episode has ended."""
        return len(self.returns) == self.num_episodes

    def next_episode(self) -> None:
        """Move on to the next inner episode."""
        self.episode_index += 1
        self.current_return = 0.0

    def add_reflection(self, answer: Any) -> None:
        """Store the reflection in ``answer`` (a non-string answer stores an empty one)."""
        self.memory.add_reflection(answer if isinstance(answer, str) else "")

    def result_line(self, info: dict[str, Any]) -> str:
        """``"loss, return -2."``: the last finished episode's outcome and return."""
        outcome = info.get("outcome")
        prefix = f"{outcome}, " if outcome else ""
        return f"{prefix}return {self.returns[-1]:+g}."

    def with_memory(self, text: str) -> str:
        """``text`` under the memory block (if there is anything to remember)."""
        memory = self.memory.render()
        return f"{memory}\n\n{text}" if memory else text

    def act_prompt(self, obs: str, preamble: str = "") -> str:
        """An inner observation under ``[Episode n of N]`` and the memory block. An
        observation that begins with ``preamble`` (the inner env's ``prompt_preamble``: its
        rules, the same in every state) keeps it at the top, above the memory: every
        prompt of a run then begins with the same text (one shared prefix for a model).

        Example:
            >>> tracker = MetaEpisodeTracker(num_episodes=2)
            >>> tracker.add_reward(1.0)
            >>> _ = tracker.end_episode({"outcome": "win"})
            >>> tracker.next_episode()
            >>> print(tracker.act_prompt("Rules: bet or check.\\nYour card: King.", "Rules: bet or check."))
            Rules: bet or check.
            <BLANKLINE>
            Memory of earlier episodes:
            [Episode 1] Result: win, return +1.
            <BLANKLINE>
            [Episode 2 of 2]
            Your card: King.
        """
        header = f"[Episode {min(self.episode_index, self.num_episodes - 1) + 1} of {self.num_episodes}]"
        text = sanitize_text(obs)
        if preamble and text.startswith(preamble):
            episode = header + "\n" + text[len(preamble):].lstrip("\n")
            return f"{preamble}\n\n{self.with_memory(episode)}"
        return self.with_memory(f"{header}\n{text}")

    def reflect_prompt(self, obs: str, info: dict[str, Any], inner_max: int) -> str:
        """The request for a reflection: the end of the finished episode's last observation
        (at most half of ``inner_max``), its result, and the memory block."""
        prompt = REFLECT_PROMPT.format(
            n=len(self.returns), total=self.num_episodes, result=self.result_line(info)
        )
        body = sanitize_text(obs)[-(inner_max // 2):]
        return self.with_memory(f"{body}\n\n{prompt}")

    def info(
        self, inner: dict[str, Any], phase: Phase, **extra: Any
    ) -> dict[str, Any]:
        """``inner`` (an inner env's info) with the meta-episode's keys and ``extra`` added."""
        info = dict(inner)
        info.update(
            phase="reflect" if phase == "reflect" else "act",
            episode_index=self.episode_index,
            num_episodes=self.num_episodes,
            episode_returns=list(self.returns),
            episode_successes=list(self.successes),
            episode_outcomes=list(self.outcomes),
            **extra,
        )
        if phase == "reflect":
            info["legal_actions"] = []
        info["meta_done"] = phase == "done"
        return info
