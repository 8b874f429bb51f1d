"""Reference agents for the text envs: callables ``(observation, info) -> "<action>NAME</action>"``.

:class:`RandomLegalAgent` is the floor; :class:`BestResponseAgent` is the ceiling against a
known opponent: it reads the live OpenSpiel state from the env and plays the exact best
response, so its mean return matches :func:`~mage_envs.oracle.best_response_value`.
In a meta env both answer a reflection prompt (``info["phase"] == "reflect"``) with
:data:`REFLECTION`: they do not learn.

Example:
    >>> import gymnasium as gym, mage_envs
    >>> env = gym.make("mage/KuhnPoker-v0", opponent="conservative", seat=0)
    >>> agent = BestResponseAgent(env)
    >>> obs, info = env.reset(seed=0)
    >>> agent(obs, info) in ("<action>check</action>", "<action>bet</action>")
    True
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pyspiel

from ..games.base import OpenSpielTextEnv
from ..opponents.base import Opponent
from .values import best_response_policy

#: What the reference agents answer to a reflection prompt.
REFLECTION = "<reflection>No notes: this reference agent does not learn.</reflection>"


def answer(name: str) -> str:
    """The answer format every env parses."""
    return f"<action>{name}</action>"


def reflecting(info: dict[str, Any]) -> bool:
    """Whether a meta env is asking for a reflection rather than an action."""
    return info.get("phase") == "reflect"


class RandomLegalAgent:
    """Picks uniformly among ``info["legal_actions"]`` with its own seeded generator.

    Example:
        >>> RandomLegalAgent(seed=0)("", {"legal_actions": ["check", "bet"]})
        '<action>bet</action>'
    """

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if reflecting(info):
            return REFLECTION
        return answer(self._rng.choice(info["legal_actions"]))


class BestResponseAgent:
    """The exact best response to the env's opponent, played through the text interface.

    Args:
        env: the env it plays in (any wrapper around an ``OpenSpielTextEnv``, e.g. from
            ``gym.make``); the agent reads ``env.unwrapped.state`` and the action names.
        opponent: the opponent to best-respond to; ``None`` (default) means whichever
            archetype the env drew for the current episode (an oracle that knows it).
        model_samples, seed: used only against search bots (see
            :func:`~mage_envs.oracle.best_response_policy`).

    Policies are computed once per (opponent, seat) and cached.
    """

    def __init__(
        self,
        env: gym.Env,
        opponent: str | Opponent | None = None,
        *,
        model_samples: int = 8,
        seed: int = 0,
    ) -> None:
        base = env.unwrapped
        if not isinstance(base, OpenSpielTextEnv):
            raise TypeError(f"BestResponseAgent needs an OpenSpiel text env, got {type(base).__name__}")
        self._env = base
        self._opponent = opponent
        self._model_samples = model_samples
        self._seed = seed
        self._policies: dict[tuple[str, int], Callable[[pyspiel.State], int]] = {}

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if reflecting(info):
            return REFLECTION
        state = self._env.state
        seat = int(info["seat"])
        opponent = self._opponent if self._opponent is not None else self._env.opponent
        key = (opponent if isinstance(opponent, str) else opponent.name, seat)
        policy = self._policies.get(key)
        if policy is None:
            policy = self._policies[key] = best_response_policy(
                self._env.game_string, opponent, seat,
                model_samples=self._model_samples, seed=self._seed,
            )
        action = policy(state)
        names = {action_id: name for name, action_id in self._env.action_names(state).items()}
        return answer(names[action])
