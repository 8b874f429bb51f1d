"""Rollouts: B groups x G copies of a meta-environment, stepped in lockstep.

Every copy in a group shares its seed and opponent archetype (the GRPO/GiGPO group). At
each turn, every pending prompt — acting and reflecting alike — goes into one batched
``generate`` call of the :class:`~mage_agent.sampling.Sampler` (by default the policy's own
:class:`~mage_agent.sampling.TorchSampler`). Each turn records its prompt and completion
tokens, log-probs, the reward that followed, whether the answer was invalid, the phase, the
episode index and the opponent archetype.

With ``action_tokens=True`` (for small models whose vocabulary holds every action name as
one token) an acting turn samples a single token among the legal action names, or among
their labels when the env numbers them (:func:`~mage_agent.agents.action_token_ids`); the
env reads the bare name or label.

Example:
    >>> from mage_agent.tiny import build_model, build_tokenizer
    >>> from mage_agent.policy import Policy
    >>> from mage_agent.sampling import Sampling
    >>> tok = build_tokenizer(["check bet fold call"])
    >>> runner = RolloutRunner("mage/KuhnPoker-meta-v0", {"reflection": False}, num_envs=4)
    >>> batch = runner.collect(Policy(build_model(tok), tok), [GroupSpec(0, "nash"), GroupSpec(1, "random")],
    ...                        group_size=2, sampling=Sampling(max_new_tokens=1), action_tokens=True, seed=0)
    >>> len(batch.episode_returns), all(t.opponent in ("nash", "random") for t in batch.turns)
    (4, True)
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import gymnasium as gym

import mage_envs  # noqa: F401  (registers the environments)
from mage_envs.games.base import OpenSpielTextEnv
from mage_envs.games.engine import OpenSpielGameEnv
from mage_envs.opponents import Opponent, as_population

from .agents import action_token_ids, answer_prefixes, choice_token_ids, with_question
from .policy import Policy
from .sampling import Sampler, Sampling, TorchSampler

#: The archetype label of every turn in a single-agent task (one normalisation scope).
TASK = "task"


@dataclass(frozen=True)
class GroupSpec:
    """One group: its reset seed and its opponent archetype (``None`` for a task), or one
    archetype per copy in ``copy_opponents`` (copies that meet different opponents)."""

    seed: int
    opponent: str | None
    copy_opponents: tuple[str, ...] | None = None

    def opponent_of(self, copy: int) -> str | None:
        """The archetype copy ``copy`` of the group meets."""
        return self.opponent if self.copy_opponents is None else self.copy_opponents[copy]


@dataclass
class Turn:
    """One model call and what the environment answered."""

    traj: int
    group: int
    opponent: str
    episode: int
    phase: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    reward: float
    truncated: bool
    anchor: str
    allowed_ids: list[int] | None
    #: a free-text answer's legal first tokens (:func:`~mage_agent.agents.choice_token_ids`)
    choice_ids: list[int] | None = None
    #: an invalid acting answer's reason (:data:`~mage_envs.core.checker.INVALID_REASONS`) and text
    rejected: tuple[str, str] | None = None
    #: an action-token turn's tokens of the moves that keep the game value, where the env
    #: knows them and some legal move does not (:func:`optimal_token_ids`)
    optimal_ids: list[int] | None = None

    @property
    def invalid(self) -> bool:
        """Whether the env refused this acting answer."""
        return self.rejected is not None


@dataclass
class RolloutBatch:
    """All turns of one collection, in time order per trajectory, plus per-trajectory results."""

    turns: list[Turn] = field(default_factory=list)
    episode_returns: list[list[float]] = field(default_factory=list)
    episode_successes: list[list[bool]] = field(default_factory=list)
    opponents: list[str] = field(default_factory=list)
    generated_tokens: int = 0

    def ordered_turns(self) -> list[Turn]:
        """Turns grouped by trajectory, time order kept (what credit assignment expects)."""
        return sorted(self.turns, key=lambda t: t.traj)

    def extend(self, other: RolloutBatch) -> None:
        """Append another collection; its groups and trajectories are numbered after ours."""
        groups = 1 + max((t.group for t in self.turns), default=-1)
        trajectories = len(self.episode_returns)
        self.turns += [dataclasses.replace(t, traj=t.traj + trajectories, group=t.group + groups) for t in other.turns]
        self.episode_returns += other.episode_returns
        self.episode_successes += other.episode_successes
        self.opponents += other.opponents
        self.generated_tokens += other.generated_tokens


def rejection(report: Any, text: str) -> tuple[str, str] | None:
    """An acting answer's :attr:`Turn.rejected` from the env's ``info["invalid_action"]``
    (``None``: the answer was valid): MAGE envs name one of
    :data:`~mage_envs.core.checker.INVALID_REASONS`; another env's report may not.

    Example:
        >>> rejection({"reason": "illegal_action", "text": "raise"}, "raise"), rejection(True, "?")
        (('illegal_action', 'raise'), ('invalid', '?'))
        >>> rejection(None, "<action>bet</action>") is None
        True
    """
    if report is None:
        return None
    return str(report.get("reason", "invalid")) if isinstance(report, Mapping) else "invalid", text


def solves_exactly(env: gym.Env) -> bool:
    """Whether ``env``'s game is solved exactly: its ``optimal_actions()`` names the moves
    that keep the game value (Tic-Tac-Toe's does; a game with hidden cards has none).

    Example:
        >>> solves_exactly(gym.make("mage/TicTacToe-meta-v0")), solves_exactly(gym.make("mage/KuhnPoker-meta-v0"))
        (True, False)
    """
    method = getattr(type(env.unwrapped), "optimal_actions", None)
    return method is not None and method is not OpenSpielTextEnv.optimal_actions


def optimal_token_ids(env: gym.Env, info: Mapping[str, Any], allowed: list[int] | None) -> list[int] | None:
    """The tokens among ``allowed`` (one per legal action, in ``info["legal_actions"]``'s
    order) of the moves that keep the game value, from the env's ``optimal_actions()`` (a
    game solved exactly, e.g. Tic-Tac-Toe); ``None`` where the env has none, on a turn that
    is not a one-token action, or where every legal move keeps the value (nothing to learn).

    Example:
        >>> env = gym.make("mage/TicTacToe-meta-v0", opponent="preferred-cell-row-major", seat=1)
        >>> _, info = env.reset(seed=0)          # X took cell 1: only the centre keeps the draw
        >>> info["legal_actions"][3], optimal_token_ids(env, info, list(range(100, 108)))
        ('5', [103])
    """
    solver = getattr(env.unwrapped, "optimal_actions", None)
    legal = info.get("legal_actions")
    if solver is None or allowed is None or not legal or info.get("phase", "act") != "act":
        return None
    optimal = solver()
    if optimal is None or len(optimal) == len(legal):
        return None
    return [token for name, token in zip(legal, allowed) if name in optimal]


def anchor_of(observation: str, info: Mapping[str, Any] | None = None) -> str:
    """A short stable hash of GiGPO's anchor state: the env's ``info["state_key"]`` when it
    gives one (Sokoban's position), with the meta-episode's phase, episode index and earlier
    episodes' returns (which differential rewards depend on), so that one position reached
    by different moves shares a step baseline; else the whole prompt.

    Example:
        >>> a = anchor_of("moves: up", {"state_key": "#@$.#", "episode_index": 0, "episode_returns": []})
        >>> a == anchor_of("moves: left, right, up", {"state_key": "#@$.#", "episode_index": 0, "episode_returns": []})
        True
        >>> a == anchor_of("moves: up", {"state_key": "#@$.#", "episode_index": 1, "episode_returns": [-1.5]})
        False
    """
    if info is None or info.get("state_key") is None:
        text = observation
    else:
        text = (f"{info.get('phase', 'act')}|{info.get('episode_index', 0)}|{info.get('episode_returns', [])}|"
                f"{info['state_key']}")
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


class RolloutRunner:
    """Owns ``num_envs`` copies of ``env_id`` and collects lockstep rollouts with them."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any], num_envs: int) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.env_id = env_id
        self.envs = [gym.make(env_id, **env_kwargs) for _ in range(num_envs)]

    def collect(
        self,
        policy: Policy,
        groups: list[GroupSpec],
        group_size: int,
        sampling: Sampling,
        action_tokens: bool = False,
        seed: int = 0,
        answer_prefix: str = "",
        answer_question: bool = False,
        on_turn: Callable[[int, int], None] | None = None,
        sampler: Sampler | None = None,
    ) -> RolloutBatch:
        """Play one meta-episode per env: ``len(groups) * group_size`` must equal ``num_envs``.
        In free text, ``answer_question`` closes acting prompts with
        :data:`~mage_agent.agents.ANSWER_QUESTION` and ``answer_prefix`` starts the answers.
        ``on_turn(turn, playing)`` is called before each turn's ``generate`` (a progress line).
        ``sampler`` draws the answers (default: ``TorchSampler(policy)``); ``policy``'s
        tokenizer names the action tokens."""
        sampler = TorchSampler(policy) if sampler is None else sampler
        count = len(groups) * group_size
        if count != len(self.envs):
            raise ValueError(f"{len(groups)} groups x {group_size} copies != {len(self.envs)} envs")
        batch = RolloutBatch(
            episode_returns=[[] for _ in range(count)],
            episode_successes=[[] for _ in range(count)],
            opponents=[groups[i // group_size].opponent_of(i % group_size) or TASK for i in range(count)],
        )
        observations, infos = [], []
        for i, env in enumerate(self.envs):
            spec = groups[i // group_size]
            opponent = spec.opponent_of(i % group_size)
            options = {} if opponent is None else {"opponent": opponent}
            obs, info = env.reset(seed=spec.seed, options=options)
            observations.append(obs)
            infos.append(info)
        with sampler.reusing_prefixes():   # the weights stay fixed while it plays
            active = list(range(count))
            turn_index = 0
            while active:
                allowed = [action_token_ids(policy, infos[i]) if action_tokens else None for i in active]
                optimal = [optimal_token_ids(self.envs[i], infos[i], ids) for i, ids in zip(active, allowed)]
                prompts = [observations[i] for i in active]
                if answer_question and not action_tokens:
                    prompts = [with_question(prompt, infos[i]) for prompt, i in zip(prompts, active)]
                if on_turn is not None:
                    on_turn(turn_index + 1, len(active))
                generations = sampler.generate(
                    prompts, sampling,
                    allowed_ids=allowed if action_tokens else None, seed=seed * 1_000_003 + turn_index,
                    prefixes=None if action_tokens else answer_prefixes([infos[i] for i in active], answer_prefix),
                )
                turn_index += 1
                still_active = []
                for i, generation, optimal_ids in zip(active, generations, optimal):
                    info = infos[i]
                    obs, reward, terminated, truncated, next_info = self.envs[i].step(generation.text)
                    batch.generated_tokens += len(generation.completion_ids)
                    batch.turns.append(Turn(
                        traj=i, group=i // group_size, opponent=batch.opponents[i],
                        episode=int(info.get("episode_index", 0)), phase=info.get("phase", "act"),
                        prompt_ids=generation.prompt_ids, completion_ids=generation.completion_ids,
                        logprobs=generation.logprobs, reward=float(reward),
                        truncated=generation.truncated, anchor=anchor_of(observations[i], info),
                        allowed_ids=generation.allowed_ids,
                        choice_ids=None if generation.allowed_ids is not None else choice_token_ids(policy, info),
                        rejected=rejection(next_info.get("invalid_action"), generation.text)
                        if info.get("phase", "act") == "act" else None,
                        optimal_ids=optimal_ids,
                    ))
                    observations[i], infos[i] = obs, next_info
                    if terminated or truncated:
                        batch.episode_returns[i] = list(next_info.get("episode_returns", [reward]))
                        batch.episode_successes[i] = list(next_info.get("episode_successes", [next_info.get("success", False)]))
                    else:
                        still_active.append(i)
                active = still_active
        return batch

    def set_opponents(self, members: list[str | Opponent]) -> None:
        """Make every env's opponent population ``members`` (archetype ids or instances), so
        that a group may name any of them."""
        for env in self.envs:
            base = env.unwrapped
            if not isinstance(base, OpenSpielGameEnv):
                raise TypeError(f"{self.env_id!r} has no opponents")
            base.population = as_population(base.game_string, members)

    def close(self) -> None:
        for env in self.envs:
            env.close()

