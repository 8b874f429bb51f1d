"""Helpers shared by the tests of the single-agent task envs (Sokoban, WebShop, Household).

Example:
    >>> act("up")
    '<action>up</action>'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env


def act(action: str) -> str:
    """``action`` in the answer format."""
    return f"<action>{action}</action>"


def play(env: gym.Env, answers: list[str]) -> list[tuple]:
    """Step ``answers`` until the episode ends; every (obs, reward, terminated, truncated, info)."""
    steps = []
    for answer in answers:
        steps.append(env.step(answer))
        if steps[-1][2] or steps[-1][3]:
            break
    return steps


def check_registered_ids(stem: str, env_class: type[gym.Env]) -> None:
    """``mage/{stem}-v0`` makes an ``env_class`` and passes Gymnasium's checker, render
    included; ``mage/{stem}-meta-v0`` passes it and replays one instance."""
    env = gym.make(f"mage/{stem}-v0", render_mode="ansi")
    assert isinstance(env.unwrapped, env_class)
    check_env(env.unwrapped, skip_render_check=False)
    check_env(gym.make(f"mage/{stem}-meta-v0"), skip_render_check=True)
    assert gym.spec(f"mage/{stem}-meta-v0").kwargs["repeat_instance"] is True


def check_reset_option_errors(env: gym.Env, bad_instance: int) -> None:
    """A single-agent task refuses an opponent and a negative instance."""
    with pytest.raises(ValueError, match="single-agent"):
        env.reset(options={"opponent": "random"})
    with pytest.raises(ValueError, match="instance"):
        env.reset(options={"instance": bad_instance})


def step_and_check_report(
    env: gym.Env,
    answer: str,
    mode: str,
    acting: bool,
    state: Callable[[], object],
    legal: Sequence[str] | None = None,
) -> tuple:
    """Step ``answer`` and check what any answer must give: an observation in the space and,
    when ``acting``, an invalid answer reported under ``mode`` (a retry leaves ``state()`` as
    it was; a fallback plays one of ``legal`` when given). Returns the step."""
    before = state()
    step = env.step(answer)
    obs, _reward, _terminated, _truncated, info = step
    assert env.observation_space.contains(obs)
    report = info.get("invalid_action")
    if acting and report:
        assert report["policy"] == mode
        assert report["applied"] == mode or (mode, report["applied"]) == ("retry", "forfeit")
        if report["applied"] == "retry":
            assert state() == before
        if mode == "fallback" and legal is not None:
            assert report["played"] in legal
    return step
