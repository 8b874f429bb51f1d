"""Long seeded rollouts of the game envs play exactly as when
``tests/fixtures/rollout_digests.json`` was written: thousands of steps per env (the golden
rollouts take 40), so that a change to the hot path that alters one observation, reward or
info byte anywhere (a cached view, prompt or move table reused where it should not be, a
cache cleared, a replayed instance) changes a digest. The digests must also not depend on
the size of the engine's cache of histories.

Rewritten when Kuhn Poker's trainable split gained ``random-style`` (the three Kuhn rollouts that
play ``opponent="trainable"``; without it they give the digests before).

Regenerate (only after a change that is meant to alter play):
``python tests/test_rollout_digests.py > tests/fixtures/rollout_digests.json``.
"""

import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from mage_envs.games import engine
from mage_envs.games.kuhn_poker import KuhnPokerEnv
from mage_envs.games.leduc_poker import LeducPokerEnv
from mage_envs.games.tic_tac_toe import TicTacToeEnv
from mage_envs.numeric import KuhnPokerTensorEnv, TicTacToeTensorEnv
from mage_envs.pettingzoo import kuhn_poker_v0, tic_tac_toe_v0

DIGESTS = Path(__file__).parent / "fixtures" / "rollout_digests.json"
STEPS = 3000

#: name -> a fresh single-agent env (text or numeric)
GYM_ENVS: dict[str, Callable[[], Any]] = {
    "kuhn-random": lambda: KuhnPokerEnv(opponent="random"),
    "kuhn-trainable": lambda: KuhnPokerEnv(opponent="trainable", reward_scale=5),
    "kuhn-compact-forfeit": lambda: KuhnPokerEnv(opponent="all", prompt_style="compact", invalid_action="forfeit"),
    "leduc-trainable": lambda: LeducPokerEnv(opponent="trainable"),
    "ttt-random": lambda: TicTacToeEnv(opponent="random"),
    "ttt-mixed-fallback": lambda: TicTacToeEnv(opponent=["random", "greedy", "minimax"], invalid_action="fallback"),
    "ttt-compact-seat1": lambda: TicTacToeEnv(opponent="random", seat=1, prompt_style="compact"),
    "kuhn-tensor": lambda: KuhnPokerTensorEnv(opponent="trainable"),
    "ttt-tensor": lambda: TicTacToeTensorEnv(opponent="random", invalid_action="retry"),
}
#: name -> a fresh PettingZoo AEC env
AEC_ENVS: dict[str, Callable[[], Any]] = {
    "kuhn-aec": kuhn_poker_v0.env,
    "ttt-aec": tic_tac_toe_v0.env,
}


def _plain(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else repr(value)


def _answer(rng: random.Random, info: dict[str, Any], numeric: bool) -> Any:
    """A random answer: mostly a tagged legal name, else bare, reasoned, junk (or an illegal id)."""
    legal = info["legal_actions"] or ["x"]
    if numeric:
        return int(rng.choice(legal)) if rng.random() < 0.95 else 99
    name = rng.choice(legal)
    return rng.choices([f"<action>{name}</action>", name, f"I think so. <action>{name}</action>", "junk"],
                       weights=[80, 8, 8, 4])[0]


def gym_digest(name: str, seed: int = 11, steps: int = STEPS) -> str:
    """SHA-256 of ``steps`` seeded steps of ``GYM_ENVS[name]`` (every reset's and step's
    observation, reward, flags and info); one reset in ten replays an earlier instance."""
    env, rng, digest = GYM_ENVS[name](), random.Random(seed), hashlib.sha256()
    numeric = "tensor" in name

    def feed(*values: Any) -> None:
        digest.update(json.dumps(values, default=_plain, sort_keys=True).encode())

    obs, info = env.reset(seed=seed)
    feed(obs, info)
    instances = [info["instance"]]
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(_answer(rng, info, numeric))
        feed(obs, reward, terminated, truncated, info)
        if terminated or truncated:
            options = {"instance": rng.choice(instances)} if rng.random() < 0.1 else None
            obs, info = env.reset(options=options)
            instances.append(info["instance"])
            feed(obs, info)
    return digest.hexdigest()


def aec_digest(name: str, seed: int = 11, steps: int = STEPS) -> str:
    """SHA-256 of ``steps`` seeded AEC steps of ``AEC_ENVS[name]`` (each ``last()`` and
    both seats' observations after every step); games reset with seeds that follow ``seed``."""
    env, rng, digest = AEC_ENVS[name](), random.Random(seed), hashlib.sha256()

    def feed(*values: Any) -> None:
        digest.update(json.dumps(values, default=_plain, sort_keys=True).encode())

    game, done = 0, 0
    while done < steps:
        env.reset(seed=seed + game)
        game += 1
        for agent in env.agent_iter():
            obs, reward, terminated, truncated, info = env.last()
            feed(agent, obs, reward, terminated, truncated, info)
            env.step(None if terminated or truncated else _answer(rng, info, False))
            done += 1
        feed([env.observe(agent) for agent in env.possible_agents])
    return digest.hexdigest()


def all_digests() -> dict[str, str]:
    return {**{name: gym_digest(name) for name in GYM_ENVS}, **{name: aec_digest(name) for name in AEC_ENVS}}


@pytest.mark.parametrize("name", list(GYM_ENVS))
def test_long_rollouts_play_as_before(name):
    assert gym_digest(name) == json.loads(DIGESTS.read_text())[name]


@pytest.mark.parametrize("name", list(AEC_ENVS))
def test_long_aec_rollouts_play_as_before(name):
    assert aec_digest(name) == json.loads(DIGESTS.read_text())[name]


@pytest.mark.parametrize("name", ["ttt-mixed-fallback", "kuhn-trainable", "ttt-aec"])
def test_a_small_history_cache_plays_alike(name, monkeypatch):
    """The cache of histories cleared every few dozen nodes: every view rebuilt, same bytes."""
    monkeypatch.setattr(engine, "NODE_LIMIT", 40)
    digest = aec_digest(name, steps=600) if name in AEC_ENVS else gym_digest(name, steps=600)
    monkeypatch.undo()
    assert digest == (aec_digest(name, steps=600) if name in AEC_ENVS else gym_digest(name, steps=600))


if __name__ == "__main__":
    json.dump(all_digests(), sys.stdout, indent=1)
    print()
