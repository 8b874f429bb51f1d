"""The numeric views (mage/<Game>-tensor-v0, -tensor-meta-v0) and the two RL examples."""

import importlib.util
import pickle
import random
import statistics
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import mage_envs  # noqa: F401
from mage_envs.games.kuhn_poker import KuhnPokerEnv
from mage_envs.games.leduc_poker import LeducPokerEnv
from mage_envs.games.tic_tac_toe import TicTacToeEnv
from mage_envs.numeric import (
    KuhnPokerTensorEnv,
    LeducPokerTensorEnv,
    TensorMetaWrapper,
    TicTacToeTensorEnv,
)

ROOT = Path(__file__).resolve().parent.parent
TENSOR_IDS = sorted(i for i in gym.registry if i.startswith("mage/") and "-tensor-" in i)
#: Opponents without search bots, so that rollouts are cheap and pickling is exact.
FAST = {"KuhnPoker": "trainable", "LeducPoker": "trainable", "TicTacToe": ["random", "greedy", "minimax"]}
PAIRS = [(KuhnPokerEnv, KuhnPokerTensorEnv), (LeducPokerEnv, LeducPokerTensorEnv), (TicTacToeEnv, TicTacToeTensorEnv)]


def make(env_id, **kwargs):
    stem = env_id.split("/")[1].split("-")[0]
    return gym.make(env_id, opponent=FAST[stem], **kwargs)


def rollout(env_id, seed, steps=80, **kwargs):
    """Masked random actions, one in five an arbitrary id (illegal ones included)."""
    env = make(env_id, **kwargs)
    rng = random.Random(seed)
    obs, info = env.reset(seed=seed)
    trace = [(obs, info)]
    for _ in range(steps):
        if rng.random() < 0.2:
            action = rng.randrange(env.action_space.n)
        else:
            action = rng.choice(info["legal_actions"])
        obs, reward, terminated, truncated, info = env.step(action)
        trace.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            obs, info = env.reset()
            trace.append((obs, info))
    return env, trace


def same(a, b):
    """Equality of nested tuples / dicts / lists holding numpy arrays."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b) and np.asarray(a).dtype == np.asarray(b).dtype
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


# ---------------------------------------------------------------------- registration and API
def test_every_game_has_tensor_ids():
    for stem in FAST:
        assert f"mage/{stem}-tensor-v0" in TENSOR_IDS and f"mage/{stem}-tensor-meta-v0" in TENSOR_IDS


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
@pytest.mark.parametrize("invalid_action", ["forfeit", "fallback", "retry"])
@pytest.mark.parametrize("env_id", TENSOR_IDS)
def test_gymnasium_env_checker(env_id, invalid_action):
    env = make(env_id, invalid_action=invalid_action)
    check_env(env if "-meta-" in env_id else env.unwrapped, skip_render_check=True)


@pytest.mark.parametrize("env_id", TENSOR_IDS)
def test_observations_in_space_and_mask_is_the_engine_legal_actions(env_id):
    env = make(env_id)
    rng = random.Random(0)
    obs, info = env.reset(seed=0)
    for _ in range(300):
        assert env.observation_space.contains(obs)
        legal = [] if info.get("forfeit") or env.unwrapped.state.is_terminal() else env.unwrapped.state.legal_actions()
        assert info["legal_actions"] == legal
        assert info["action_mask"].dtype == np.int8 and np.flatnonzero(info["action_mask"]).tolist() == legal
        assert np.flatnonzero(env.get_wrapper_attr("action_masks")()).tolist() == legal
        if env.unwrapped.state.current_player() >= 0 and not info.get("forfeit"):
            assert env.unwrapped.state.current_player() == info["seat"]
        if not legal:
            obs, info = env.reset()
            continue
        action = env.action_space.sample(mask=info["action_mask"]) if rng.random() < 0.9 else rng.randrange(env.action_space.n)
        obs, reward, terminated, truncated, info = env.step(action)


@pytest.mark.parametrize("env_id", TENSOR_IDS)
def test_same_seed_same_rollout(env_id):
    assert same(rollout(env_id, 5)[1], rollout(env_id, 5)[1])
    assert not same(rollout(env_id, 5)[1], rollout(env_id, 6)[1])


@pytest.mark.parametrize("env_id", TENSOR_IDS)
def test_pickled_env_continues_identically(env_id):
    env, _ = rollout(env_id, 2, steps=7)
    clone = pickle.loads(pickle.dumps(env))
    for step in range(30):
        mask = env.get_wrapper_attr("action_masks")()
        if not mask.any():
            break
        action = int(np.flatnonzero(mask)[step % mask.sum()])
        a, b = env.step(action), clone.step(action)
        assert same(a, b)
        if a[2] or a[3]:
            break


@pytest.mark.parametrize("text_cls, tensor_cls", PAIRS)
def test_text_and_tensor_views_play_the_same_game(text_cls, tensor_cls):
    """Same seed, same action ids: the same opponent, seat, deal, history and rewards."""
    opponent = "trainable" if text_cls is not TicTacToeEnv else ["random", "greedy"]
    text, tensor = text_cls(opponent=opponent), tensor_cls(opponent=opponent)
    rng = random.Random(0)
    for seed in range(20):
        (_, t_info), (obs, n_info) = text.reset(seed=seed), tensor.reset(seed=seed)
        for key in ("opponent", "seat", "instance"):
            assert t_info[key] == n_info[key]
        assert obs[0] == (n_info["seat"] == 0)  # both tensors start with the seat one-hot
        done = False
        while not done:
            assert text.state.history() == tensor.state.history()
            action = rng.choice(n_info["legal_actions"])
            name = {i: n for n, i in text.action_names(text.state).items()}[action]
            t_step, n_step = text.step(name), tensor.step(action)
            assert t_step[1:4] == n_step[1:4]
            n_info, done = n_step[4], n_step[2]
        assert text.state.history() == tensor.state.history()


def test_observation_is_the_information_state_tensor():
    env = LeducPokerTensorEnv(opponent="calling-station", seat=1)
    obs, info = env.reset(seed=3)
    assert obs.dtype == np.float32
    assert obs.tolist() == env.state.information_state_tensor(1)
    ttt = TicTacToeTensorEnv(opponent="random", seat=1)
    obs, _ = ttt.reset(seed=0)
    assert obs.tolist() == [0.0, 1.0, *ttt.state.observation_tensor(1)]
    assert obs[2:11].sum() == 8  # the opponent (X) has played one of the nine cells


# ---------------------------------------------------------------------- invalid actions
def test_illegal_action_forfeits_by_default():
    env = LeducPokerTensorEnv(opponent="calling-station", seat=0)
    obs, info = env.reset(seed=0)
    assert info["legal_actions"] == [1, 2]  # nothing to fold to
    obs, reward, terminated, truncated, info = env.step(0)
    assert terminated and reward == -1.0  # the ante, as a fold
    assert info["forfeit"] and info["outcome"] == "loss"
    assert info["invalid_action"]["applied"] == "forfeit" and info["invalid_action"]["text"] == "0"
    assert info["legal_actions"] == [] and not env.action_masks().any()
    with pytest.raises(RuntimeError):
        env.step(1)


def test_out_of_range_action_is_invalid_and_non_integers_raise():
    env = KuhnPokerTensorEnv(opponent="aggressive", seat=0, invalid_action="fallback")
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(np.int64(7))
    assert info["invalid_action"]["applied"] == "fallback" and info["invalid_action"]["played"] in ("0", "1")
    assert env.state.history()[2] == int(info["invalid_action"]["played"])
    env.reset()
    for action in (0.5, "bet", np.array([1])):
        with pytest.raises(TypeError, match="integer id"):
            env.step(action)
    assert env.step(np.array(1))[4]["invalid_action"] is None  # a 0-d integer array is an id


def test_fallback_plays_a_legal_action_with_the_penalty():
    env = TicTacToeTensorEnv(opponent="preferred-cell-row-major", seat=1,
                             invalid_action={"mode": "fallback", "fallback": "first", "penalty": -0.5})
    obs, info = env.reset(seed=0)
    occupied = next(a for a in range(9) if a not in info["legal_actions"])
    obs, reward, terminated, truncated, info = env.step(occupied)
    assert reward == -0.5 and not terminated
    assert info["invalid_action"]["played"] == "1"  # the first free cell
    assert env.state.history()[1] == 1


def test_retry_keeps_the_state_then_forfeits():
    env = TicTacToeTensorEnv(opponent="preferred-cell-row-major", seat=1,
                             invalid_action={"mode": "retry", "max_retries": 2, "penalty": -0.1})
    obs, info = env.reset(seed=0)
    occupied = next(a for a in range(9) if a not in info["legal_actions"])
    for retries_left in (1, 0):
        again, reward, terminated, truncated, info = env.step(occupied)
        assert np.array_equal(again, obs) and again is not obs and not terminated and reward == -0.1
        assert info["invalid_action"]["retries_left"] == retries_left and env.action_masks().any()
    again, reward, terminated, truncated, info = env.step(occupied)
    assert terminated and info["forfeit"] and reward == pytest.approx(-1.1)


# ---------------------------------------------------------------------- meta-episodes
KING, QUEEN = 2, 1
BET, PASS = 1, 0


def scripted_meta(opponent, actions, **kwargs):
    """Kuhn, seat 0, instance 3 (the agent holds the King, the opponent the Queen)."""
    env = gym.make("mage/KuhnPoker-tensor-meta-v0", opponent=opponent, seat=0, **kwargs)
    obs, info = env.reset(seed=0, options={"instance": 3})
    assert env.unwrapped.state.history()[:2] == [KING, QUEEN]
    steps = [(obs, 0.0, False, False, info)]
    for action in actions:
        steps.append(env.step(action))
    return env, steps


def slot(tensor_bits, revealed, ret):
    return [*tensor_bits, *revealed, ret]


def test_meta_memory_encodes_the_showdowns_by_hand():
    # calling-station never bets and always calls: bet-call, check-check, bet-call, all showdowns.
    env, steps = scripted_meta("calling-station", [BET, PASS, BET], num_episodes=3)
    me = [1, 0, 0, 0, 1]  # seat 0 one-hot, the King one-hot
    queen = [0, 1, 0]  # the opponent's card, shown down
    bet_call = me + [0, 1, 0, 1, 0, 0] + queen + [2 / 2]  # won 2 chips; payoffs are at most 2
    check_check = me + [1, 0, 1, 0, 0, 0] + queen + [1 / 2]
    empty, no_actions = [0.0] * 15, [0] * 6
    assert env.observation_space.shape == (2 * 15 + 3 + 11,)
    assert steps[0][0].tolist() == empty + empty + [1, 0, 0] + me + no_actions
    assert steps[1][0].tolist() == bet_call + empty + [0, 1, 0] + me + no_actions
    assert steps[2][0].tolist() == bet_call + check_check + [0, 0, 1] + me + no_actions
    assert steps[3][0].tolist() == bet_call + check_check + [0, 0, 1] + me + [0, 1, 0, 1, 0, 0]
    assert [s[1] for s in steps[1:]] == [2.0, -1.0, 1.0]  # differential
    assert [s[2] for s in steps[1:]] == [False, False, True]
    assert steps[3][4]["episode_returns"] == [2.0, 1.0, 2.0] and steps[3][4]["meta_done"]
    assert steps[3][4]["episode_outcomes"] == ["win"] * 3 and steps[3][4]["phase"] == "act"
    with pytest.raises(RuntimeError):
        env.step(BET)


def test_meta_memory_hides_a_folded_card():
    # conservative folds the Queen to a bet: no showdown, no card.
    env, steps = scripted_meta("conservative", [BET], num_episodes=2)
    me = [1, 0, 0, 0, 1]
    assert steps[1][0].tolist() == me + [0, 1, 1, 0, 0, 0] + [0, 0, 0] + [1 / 2] + [0, 1] + me + [0] * 6
    assert steps[1][4]["finished_episode_info"]["outcome"] == "win"


@pytest.mark.parametrize("mode, rewards", [("differential", [2.0, -1.0, 1.0]),
                                           ("cumulative", [2.0, 1.0, 2.0]),
                                           ("final", [0.0, 0.0, 2.0])])
def test_meta_reward_modes(mode, rewards):
    _, steps = scripted_meta("calling-station", [BET, PASS, BET], num_episodes=3, reward_mode=mode)
    assert [s[1] for s in steps[1:]] == rewards


def test_meta_keeps_the_opponent_and_deals_afresh_without_repeat():
    env = gym.make("mage/KuhnPoker-tensor-meta-v0", opponent="trainable", num_episodes=6, repeat_instance=False)
    obs, info = env.reset(seed=1)
    opponents, instances, done = set(), set(), False
    while not done:
        opponents.add(env.unwrapped.opponent.name)
        instances.add(env.unwrapped._instance)
        action = int(np.flatnonzero(env.get_wrapper_attr("action_masks")())[0])
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["opponent"] == env.unwrapped.opponent.name
        done = terminated or truncated
    assert len(opponents) == 1 and len(instances) > 1 and len(info["episode_returns"]) == 6


def test_meta_wrapper_arguments():
    base = KuhnPokerTensorEnv()
    with pytest.raises(ValueError, match="num_episodes"):
        TensorMetaWrapper(base, num_episodes=0)
    with pytest.raises(ValueError, match="reward_mode"):
        TensorMetaWrapper(base, reward_mode="sum")
    with pytest.raises(TypeError, match="tensor env"):
        TensorMetaWrapper(KuhnPokerEnv())
    single = TensorMetaWrapper(base, num_episodes=1)
    obs, _ = single.reset(seed=0)
    assert obs.shape == (1 + 11,) and obs[0] == 1.0


# ---------------------------------------------------------------------- the examples
def load_example(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_maskable_ppo_example_improves_on_the_untrained_policy(capsys):
    pytest.importorskip("sb3_contrib")
    result = load_example("sb3_kuhn_poker").main(["--timesteps", "4096", "--eval-games", "1000"])
    assert result["best_response"] == pytest.approx(1 / 3)
    assert result["after"] > result["before"] + 0.2
    assert result["exact_after"] > result["exact_before"] + 0.2
    assert result["exact_after"] <= result["best_response"] + 1e-9
    assert "gap to best response" in capsys.readouterr().out


def test_rl2_example_takes_the_cli_meaning_of_its_flags(capsys):
    pytest.importorskip("sb3_contrib")
    result = load_example("rl2_kuhn_poker").main(["--timesteps", "128", "--n-envs", "1", "--num-episodes", "2",
                                                 "--eval-meta-episodes", "0"])
    assert result["before"] == result["after"] == []   # 0 skips the evaluations, as in `mage train`
    assert "2 hands per meta-episode" in capsys.readouterr().out


def test_rl2_example_improves_on_the_untrained_policy(capsys):
    pytest.importorskip("sb3_contrib")
    result = load_example("rl2_kuhn_poker").main(["--timesteps", "16384", "--eval-meta-episodes", "500"])
    before = statistics.fmean(mean for mean, _ in result["before"])
    after = statistics.fmean(mean for mean, _ in result["after"])
    assert len(result["after"]) == 3 and after > before + 0.05
    assert result["nonadaptive"] == pytest.approx(1 / 18) and result["ceiling"] == pytest.approx(5 / 18)
    assert "non-adaptive" in capsys.readouterr().out
