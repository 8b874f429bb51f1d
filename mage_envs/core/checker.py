"""``check_text_env``: the text contract (docs/text_contract.md) as code.

Gymnasium's ``check_env`` checks the Gym API; :func:`check_text_env` checks what MAGE adds
on top: text spaces over :data:`~mage_envs.core.contract.TEXT_CHARSET`, the ``info`` keys
at reset, at every step and at the end of an episode, invalid answers reported (never
raised), overlong answers clipped, and the meta-episode keys when the env is a meta env.
Run it on an env before wrapping it with :class:`~mage_envs.MetaEpisodeWrapper`.

It plays ``episodes`` episodes with a seeded agent that mostly answers a legal action in
tags and sometimes an invalid or overlong answer, and raises ``AssertionError`` naming the
first broken rule. ``strict=False`` checks only what the wrapper needs from a third-party
env (``legal_actions`` and ``invalid_action`` in ``info``; ``outcome`` and ``success`` at
the end); ``strict=True`` (the default) checks everything a MAGE env promises.

Example:
    >>> import gymnasium as gym, mage_envs
    >>> check_text_env(gym.make("mage/KuhnPoker-v0", opponent="nash"))
    >>> check_text_env(gym.make("mage/KuhnPoker-meta-v0", opponent="nash", num_episodes=2))
"""

from __future__ import annotations

import random
from typing import Any, SupportsFloat, cast, get_args

import gymnasium as gym
from gymnasium import spaces

from .contract import INFO_KEYS, MAX_ACTION_CHARS, TERMINAL_INFO_KEYS, Outcome
from .meta_tracker import META_INFO_KEYS

#: The outcomes an episode may end with.
OUTCOMES: tuple[str, ...] = get_args(Outcome)
#: The keys every ``info["invalid_action"]`` report carries.
INVALID_REPORT_KEYS = ("reason", "text", "message", "policy", "applied")
#: The reasons an answer can be invalid (:class:`~mage_envs.core.parsing.ParsedAction`).
INVALID_REASONS = ("empty", "no_action_tag", "unclosed_action_tag", "illegal_action", "not_a_string")
#: The smallest keys a third-party env needs for :class:`~mage_envs.MetaEpisodeWrapper`.
MINIMAL_INFO_KEYS = ("legal_actions", "invalid_action")
#: An answer that names no legal action of any MAGE env.
_INVALID_ANSWER = "<action>no such action</action>"


def check_text_env(env: gym.Env, *, seed: int = 0, episodes: int = 3, max_steps: int = 200, strict: bool = True) -> None:
    """Raise ``AssertionError`` unless ``env`` follows the text contract.

    Args:
        env: the env to check (wrapped or not); it is reset and stepped.
        seed: seeds the env's first reset and the checking agent.
        episodes: episodes (meta-episodes for a meta env) to play.
        max_steps: a bound on the steps of one episode.
        strict: check all of :data:`~mage_envs.core.contract.INFO_KEYS`, the terminal keys
            with ``forfeit``, empty ``legal_actions`` at the end and the invalid-answer
            reports; ``False``: only :data:`MINIMAL_INFO_KEYS`, ``outcome`` and ``success``.
    """
    _check_spaces(env)
    rng = random.Random(seed)
    obs, info = env.reset(seed=seed)
    again = env.reset(seed=seed)
    assert again == (obs, info), "reset(seed=s) twice gave different observations or info"
    for episode in range(episodes):
        if episode:
            obs, info = env.reset()
        _check_observation(env, obs, info, strict, "reset")
        assert info["invalid_action"] is None, "info['invalid_action'] must be None after reset"
        for _ in range(max_steps):
            answer = _answer(rng, info)
            obs, reward, terminated, truncated, info = env.step(answer)
            _check_step(env, answer, obs, reward, terminated, truncated, info, strict)
            if terminated or truncated:
                break
        else:
            raise AssertionError(f"an episode did not end within {max_steps} steps")


def _check_spaces(env: gym.Env) -> None:
    for name in ("observation_space", "action_space"):
        space = getattr(env, name)
        assert isinstance(space, spaces.Text), f"{name} must be a gymnasium.spaces.Text, got {space}"
        assert space.min_length == 0, f"{name} must allow the empty string (min_length=0)"
        missing = set(" \n") - set(space.character_set)
        assert not missing, f"{name}'s charset lacks {sorted(missing)!r}: use TEXT_CHARSET"
    assert cast(spaces.Text, env.action_space).max_length >= MAX_ACTION_CHARS, (
        f"the action space must take answers of {MAX_ACTION_CHARS} characters (ACTION_SPACE)"
    )


def _check_observation(env: gym.Env, obs: Any, info: Any, strict: bool, where: str) -> None:
    assert isinstance(obs, str), f"the observation after {where} must be a str, got {type(obs).__name__}"
    assert env.observation_space.contains(obs), (
        f"the observation after {where} is outside the observation space (length {len(obs)}, "
        f"max {cast(spaces.Text, env.observation_space).max_length}, or a character outside the charset)"
    )
    assert isinstance(info, dict), f"info after {where} must be a dict"
    keys = INFO_KEYS if strict else MINIMAL_INFO_KEYS
    missing = [key for key in keys if key not in info]
    assert not missing, f"info after {where} lacks {missing}"
    legal = info["legal_actions"]
    assert isinstance(legal, list) and all(isinstance(name, str) for name in legal), (
        f"info['legal_actions'] after {where} must be a list of str"
    )
    if "phase" in info:
        missing = [key for key in META_INFO_KEYS if key not in info]
        assert not missing, f"a meta env's info after {where} lacks {missing}"


def _check_step(
    env: gym.Env, answer: str, obs: Any, reward: SupportsFloat, terminated: bool, truncated: bool, info: Any, strict: bool
) -> None:
    where = f"step({answer[:40]!r})"
    _check_observation(env, obs, info, strict, where)
    assert isinstance(reward, SupportsFloat), f"the reward of {where} must be a number"
    report = info["invalid_action"]
    if strict and _is_invalid(answer) and info.get("phase", "act") == "act":
        assert isinstance(report, dict), f"an invalid answer must be reported in info['invalid_action'] ({where})"
    if report is not None:
        assert isinstance(report, dict), "info['invalid_action'] must be None or a dict"
        if strict:
            missing = [key for key in INVALID_REPORT_KEYS if key not in report]
            assert not missing, f"info['invalid_action'] lacks {missing}"
            assert report["reason"] in INVALID_REASONS, f"unknown invalid reason {report['reason']!r}"
            assert len(report["text"]) <= 80, "info['invalid_action']['text'] must be clipped to 80 characters"
    if strict:
        assert info["seat"] in (0, 1), f"info['seat'] must be 0 or 1, got {info['seat']!r}"
    if terminated or truncated or "outcome" in info:
        _check_end(info, strict, where, terminated or truncated)


def _check_end(info: dict[str, Any], strict: bool, where: str, over: bool) -> None:
    keys = (*TERMINAL_INFO_KEYS, "forfeit") if strict else TERMINAL_INFO_KEYS
    missing = [key for key in keys if key not in info]
    assert not missing, f"info at the end of an episode ({where}) lacks {missing}"
    assert info["outcome"] in OUTCOMES, f"info['outcome'] must be one of {OUTCOMES}, got {info['outcome']!r}"
    assert info["success"] == (info["outcome"] == "win"), "info['success'] must be outcome == 'win'"
    if strict and over:
        assert info["legal_actions"] == [], "info['legal_actions'] must be empty once the episode is over"


def _is_invalid(answer: str) -> bool:
    return answer == _INVALID_ANSWER or len(answer) > MAX_ACTION_CHARS


def _answer(rng: random.Random, info: dict[str, Any]) -> str:
    """Mostly a legal action in tags; sometimes an invalid one, or one whose only tag lies
    beyond the clipping point (so it must be read as invalid); a reflection when asked."""
    if info.get("phase") == "reflect":
        return "<reflection>" + "note " * rng.randrange(1, 400) + "</reflection>"
    legal = info["legal_actions"]
    draw = rng.random()
    if draw < 0.1 or not legal:
        return _INVALID_ANSWER
    name = rng.choice(legal)
    if draw < 0.15:
        return "x" * MAX_ACTION_CHARS + f"<action>{name}</action>"
    return f"I choose {name}. <action>{name}</action>"
