"""Every registered mage/* id: the Gymnasium checker, determinism, spaces, pickling."""

import pickle
import random

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import mage_envs  # noqa: F401
from mage_envs import check_text_env

ENV_IDS = sorted(i for i in gym.registry if i.startswith("mage/"))
#: Ids that act with text; the numeric ``-tensor-`` ids are rolled out in tests/test_numeric.py.
TEXT_IDS = [i for i in ENV_IDS if "-tensor-" not in i]
#: Opponents without search bots, so that rollouts are cheap and pickling is exact.
FAST = {"KuhnPoker": "trainable", "LeducPoker": "trainable", "TicTacToe": ["random", "greedy", "minimax"]}


def fast_kwargs(env_id):
    for stem, opponent in FAST.items():
        if f"/{stem}-" in env_id:
            return {"opponent": opponent}
    return {}


def test_all_games_are_registered():
    for stem in FAST:
        assert f"mage/{stem}-v0" in ENV_IDS and f"mage/{stem}-meta-v0" in ENV_IDS


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_gymnasium_env_checker(env_id):
    env = gym.make(env_id, **fast_kwargs(env_id))
    check_env(env if "-meta-" in env_id else env.unwrapped, skip_render_check=True)


def rollout(env_id, seed, steps=60):
    env = gym.make(env_id, **fast_kwargs(env_id))
    rng = random.Random(seed)
    obs, info = env.reset(seed=seed)
    trace = [(obs, info)]
    for _ in range(steps):
        legal = info.get("legal_actions") or ["x"]
        answer = rng.choice([f"<action>{rng.choice(legal)}</action>", rng.choice(legal), "junk", ""])
        if info.get("phase") == "reflect":
            answer = f"<reflection>note {rng.random()}</reflection>"
        obs, reward, terminated, truncated, info = env.step(answer)
        assert env.observation_space.contains(obs), env_id
        trace.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            obs, info = env.reset()
            trace.append((obs, info))
    return trace


@pytest.mark.parametrize("env_id", TEXT_IDS)
def test_same_seed_same_rollout(env_id):
    assert rollout(env_id, 5) == rollout(env_id, 5)
    assert rollout(env_id, 5) != rollout(env_id, 6)


@pytest.mark.parametrize("env_id", TEXT_IDS)
def test_pickled_env_continues_identically(env_id):
    env = gym.make(env_id, **fast_kwargs(env_id))
    obs, info = env.reset(seed=2)
    clone = pickle.loads(pickle.dumps(env))
    for step in range(20):
        if info.get("phase") == "reflect":
            answer = "<reflection>ok</reflection>"
        else:
            legal = info.get("legal_actions") or ["x"]
            answer = legal[step % len(legal)]
        a = env.step(answer)
        b = clone.step(answer)
        assert a == b
        obs, reward, terminated, truncated, info = a
        if terminated or truncated:
            break


GAME_IDS = [f"mage/{stem}-v0" for stem in FAST]


def play_episode(env, seed, options):
    """One episode with seeded random legal answers: the whole transcript."""
    rng = random.Random(seed)
    obs, info = env.reset(seed=seed, options=options)
    trace = [obs, info]
    while True:
        answer = f"<action>{rng.choice(info['legal_actions'])}</action>"
        obs, reward, terminated, truncated, info = env.step(answer)
        trace += [obs, reward, info]
        if terminated or truncated:
            return trace


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_reused_env_matches_fresh_envs_across_opponents_seats_and_instances(env_id):
    # the env keeps per-history tables (views, chance odds, payoffs): reuse must not leak
    game = env_id.split("/")[1].split("-")[0]
    opponents = ["random", "greedy", "minimax"] if game == "TicTacToe" else ["random", "nash", "aggressive"]
    reused = gym.make(env_id, opponent=opponents)
    for episode in range(24):
        options = {"opponent": opponents[episode % 3], "instance": episode % 5}
        fresh = gym.make(env_id, opponent=opponents)
        assert play_episode(reused, episode, options) == play_episode(fresh, episode, options)


@pytest.mark.parametrize("env_id", TEXT_IDS)
def test_text_contract_checker(env_id):
    check_text_env(gym.make(env_id, **fast_kwargs(env_id)), seed=1, episodes=2)


def test_text_contract_checker_refuses_a_numeric_env():
    with pytest.raises(AssertionError, match="must be a gymnasium.spaces.Text"):
        check_text_env(gym.make("mage/KuhnPoker-tensor-v0"))
