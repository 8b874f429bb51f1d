"""Every registered id plays exactly as it did when ``tests/fixtures/golden_rollouts.json``
was last written. It was written before the game facts moved to ``mage_envs.facts`` (which
kept every digest), and rewritten for changes meant to alter play: the rules above the
memory in the games' meta prompts; the tasks' episode summaries in ``info`` (Sokoban's
moves and box positions, Household's and WebShop's actions) and their rules above the
memory; Kuhn Poker's trainable split gaining ``random-style`` (its four ids, which play
``opponent="trainable"``; with the six archetypes before it they give the old digests); Sokoban's
``info["state_key"]`` (with that key left out, its two ids give the old digests). Each digest is of a seeded rollout of random
answers, hashed step by step (observations, rewards, flags and infos).

Regenerate (only after a change that is meant to alter play):
``python tests/test_golden_rollouts.py > tests/fixtures/golden_rollouts.json``.
"""

import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import mage_envs  # noqa: F401

GOLDEN = Path(__file__).parent / "fixtures" / "golden_rollouts.json"
ENV_IDS = sorted(i for i in gym.registry if i.startswith("mage/"))
#: Opponents without search bots (as in tests/test_all_envs.py), so that a rollout is cheap.
FAST = {"KuhnPoker": "trainable", "LeducPoker": "trainable", "TicTacToe": ["random", "greedy", "minimax"]}
#: Ids whose envs take seconds to build (a catalogue or scenes): in the slow run only.
SLOW = ("Household", "WebShop")


def _kwargs(env_id: str) -> dict[str, Any]:
    return next(({"opponent": o} for stem, o in FAST.items() if f"/{stem}-" in env_id), {})


def _plain(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else repr(value)


def rollout_digest(env_id: str, seed: int = 3, steps: int = 40) -> str:
    """SHA-256 of a seeded rollout of ``env_id`` with random (legal, bare, junk) answers."""
    env = gym.make(env_id, **_kwargs(env_id))
    rng = random.Random(seed)
    digest = hashlib.sha256()

    def feed(*values: Any) -> None:
        digest.update(json.dumps(values, default=_plain, sort_keys=True).encode())

    obs, info = env.reset(seed=seed)
    feed(obs, info)
    for _ in range(steps):
        if "-tensor-" in env_id:
            action: Any = int(rng.choice(np.flatnonzero(info["action_mask"])))
        elif info.get("phase") == "reflect":
            action = f"<reflection>note {rng.random()}</reflection>"
        else:
            legal = info.get("legal_actions") or ["x"]
            action = rng.choice([f"<action>{rng.choice(legal)}</action>", rng.choice(legal), "junk"])
        obs, reward, terminated, truncated, info = env.step(action)
        feed(obs, reward, terminated, truncated, info)
        if terminated or truncated:
            obs, info = env.reset()
            feed(obs, info)
    env.close()
    return digest.hexdigest()


@pytest.mark.parametrize("env_id", [pytest.param(i, marks=pytest.mark.slow) if any(f"/{s}" in i for s in SLOW) else i
                                    for i in ENV_IDS])
def test_every_registered_id_plays_as_before(env_id):
    assert rollout_digest(env_id) == json.loads(GOLDEN.read_text())[env_id]


def test_the_golden_file_covers_every_registered_id():
    assert sorted(json.loads(GOLDEN.read_text())) == ENV_IDS


if __name__ == "__main__":
    json.dump({env_id: rollout_digest(env_id) for env_id in ENV_IDS}, sys.stdout, indent=1)
    print()
