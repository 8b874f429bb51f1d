"""The evaluation protocol: the settings of ``mage train``'s final evaluation, which
``mage eval`` uses by default for every agent (reference agents, local models, API models).

``mage_agent``'s config takes its defaults from the constants here, so an evaluation of a
trained run, of an untrained model and of an API model meet the same opponents on the same
seeds under the same rules, but for one opponent: ``mage train``'s default population in Kuhn
Poker adds ``random-style`` (:data:`TRAINING_EXTRAS`), which a run's own evaluation meets
too. The one deliberate difference in reading: a model that ``mage train`` did
not train (an API model, a pretrained local model) reads the ``"full"`` prompts, with the
rules, where a trained run reads what it trained on (``"compact"`` by default); reflections
are written only when asked (``--prompting reflexion``, ``--agent reflexion``).

Example:
    >>> settings = eval_settings("mage/KuhnPoker-meta-v0")
    >>> settings.opponents, settings.meta_episodes, settings.seed
    (['conservative', 'aggressive', 'intermediate', 'bluffer', 'calling-station', 'maniac'], 300, 1000000000)
    >>> settings.env_kwargs["reflection"], settings.env_kwargs["invalid_action"].penalty
    (False, -1.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .core.contract import InvalidActionPolicy
from .opponents.registry import list_opponents
from .registration import env_options, game_of

__all__ = [
    "DEFAULT_HELDOUT", "DEFAULT_POPULATION", "EVAL_META_EPISODES", "EVAL_SEED", "INVALID_PENALTY", "INVALID_RETRIES",
    "NUM_EPISODES", "TRAINING_EXTRAS", "EvalSettings", "eval_settings", "protocol_env_kwargs", "protocol_opponents",
    "training_population",
]

#: The protocol's training styles: the population its evaluations report first (each trainable).
#: ``mage train``'s default population holds them, and more in some games (:data:`TRAINING_EXTRAS`).
DEFAULT_POPULATION = ("conservative", "aggressive", "intermediate")
#: What ``mage train``'s default population adds to a game's protocol population: in Kuhn Poker a
#: pure style drawn at random per meta-episode, so that the agent learns to read a style it has
#: never met from the earlier hands (docs/league.md, "Reading styles never met").
TRAINING_EXTRAS: dict[str, tuple[str, ...]] = {"kuhn_poker": ("random-style",)}
#: The held-out archetypes its evaluations add to the population's (never trained against).
DEFAULT_HELDOUT = ("bluffer", "calling-station", "maniac")
#: Meta-episodes per opponent, and the first seed (disjoint from training's).
EVAL_META_EPISODES = 300
EVAL_SEED = 1_000_000_000
#: Inner episodes per meta-episode.
NUM_EPISODES = 3
#: An invalid answer may be retried this many times per episode, each costing this reward.
INVALID_RETRIES = 2
INVALID_PENALTY = -1.0


def protocol_env_kwargs(env_id: str, *, reflection: bool = False, prompt_style: str = "compact") -> dict[str, Any]:
    """The protocol's ``gym.make`` arguments that ``env_id`` takes (a game's seat, prompt
    style and reward scale; a meta id's meta options), opponents aside.

    Example:
        >>> sorted(protocol_env_kwargs("mage/KuhnPoker-v0"))
        ['invalid_action', 'prompt_style', 'reward_scale', 'seat']
    """
    kwargs: dict[str, Any] = {
        "num_episodes": NUM_EPISODES, "reward_mode": "differential", "reflection": reflection,
        "include_summaries": True, "repeat_instance": True,
        "invalid_action": InvalidActionPolicy("retry", max_retries=INVALID_RETRIES, penalty=INVALID_PENALTY),
    }
    if game_of(env_id) is not None:
        kwargs.update(prompt_style=prompt_style, seat="random", reward_scale=1.0)
    accepted = env_options(env_id)
    return kwargs if accepted is None else {k: v for k, v in kwargs.items() if k in accepted}


@dataclass(frozen=True)
class EvalSettings:
    """What an evaluation plays: ``evaluate``'s arguments but the agent."""

    env_id: str
    opponents: list[str] | str
    meta_episodes: int
    seed: int
    env_kwargs: dict[str, Any]

    def describe(self) -> str:
        """One line for the log.

        Example:
            >>> eval_settings("mage/KuhnPoker-meta-v0", meta_episodes=12).describe()  # doctest: +ELLIPSIS
            'evaluation: mage/KuhnPoker-meta-v0, 6 opponents (conservative, ..., maniac), 12 meta-episodes each, seeds from 1000000000, 3 episodes, reflection off, compact prompts, invalid answers: 2 retries at -1 each'
        """
        names = self.opponents
        opponents = f"opponents: {names}" if isinstance(names, str) else (
            f"{len(names)} opponents ({names[0]}, ..., {names[-1]})" if len(names) > 3
            else f"opponents {', '.join(names)}")
        kwargs = self.env_kwargs
        parts = [f"evaluation: {self.env_id}", opponents,
                 f"{self.meta_episodes} meta-episodes each", f"seeds from {self.seed}"]
        if "num_episodes" in kwargs:
            parts += [f"{kwargs['num_episodes']} episodes", f"reflection {'on' if kwargs.get('reflection') else 'off'}"]
        if "prompt_style" in kwargs:
            parts.append(f"{kwargs['prompt_style']} prompts")
        invalid = InvalidActionPolicy.from_spec(kwargs.get("invalid_action", "retry"))
        if invalid.mode == "retry":
            parts.append(f"invalid answers: {invalid.max_retries} retries at {invalid.penalty:g} each")
        else:
            parts.append(f"invalid answers: {invalid.mode}, {invalid.penalty:g}")
        return ", ".join(parts)


def protocol_opponents(game: str) -> tuple[list[str], list[str]]:
    """The protocol's population and held-out archetypes of ``game``: the defaults where the
    game has them all (Kuhn and Leduc Poker), else its trainable and its held-out ones.

    Example:
        >>> protocol_opponents("tic_tac_toe")[1]
        ['preferred-cell-anti-diagonal', 'preferred-cell-spiral', 'mcts-1000']
    """
    if set(DEFAULT_POPULATION + DEFAULT_HELDOUT) <= set(list_opponents(game)):
        return list(DEFAULT_POPULATION), list(DEFAULT_HELDOUT)
    return list_opponents(game, "trainable"), list_opponents(game, "heldout")


def training_population(game: str) -> list[str]:
    """``mage train``'s default population of ``game``: its :func:`protocol_opponents`'
    population and its :data:`TRAINING_EXTRAS`.

    Example:
        >>> training_population("kuhn_poker")
        ['conservative', 'aggressive', 'intermediate', 'random-style']
        >>> training_population("leduc_poker")
        ['conservative', 'aggressive', 'intermediate']
    """
    return [*protocol_opponents(game)[0], *TRAINING_EXTRAS.get(game, ())]


def eval_settings(
    env_id: str,
    opponents: str | Sequence[str] | None = None,
    meta_episodes: int | None = None,
    seed: int | None = None,
    env_options: dict[str, Any] | None = None,
    *,
    reflection: bool = False,
    prompt_style: str = "compact",
) -> EvalSettings:
    """The protocol's settings for ``env_id``, each argument given overriding its default
    (``env_options``: over :func:`protocol_env_kwargs`). The default opponents are the
    :func:`protocol_opponents`, the population first (a task has none: ``"all"``).

    Example:
        >>> eval_settings("mage/TicTacToe-meta-v0").opponents[:3]
        ['random', 'greedy', 'minimax']
    """
    game = game_of(env_id)
    default: list[str] | str = "all"
    if game is not None:
        population, heldout = protocol_opponents(game)
        default = [*population, *heldout]
    kwargs = {**protocol_env_kwargs(env_id, reflection=reflection, prompt_style=prompt_style), **(env_options or {})}
    return EvalSettings(
        env_id, default if opponents is None else opponents if isinstance(opponents, str) else list(opponents),
        EVAL_META_EPISODES if meta_episodes is None else meta_episodes, EVAL_SEED if seed is None else seed, kwargs)
