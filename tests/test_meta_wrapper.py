"""MetaEpisodeWrapper: phases, memory, reward-mode arithmetic, replay, any contract env."""

import pickle
import random

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from mage_envs import MetaEpisodeWrapper, check_text_env, text_space
from mage_envs.core.contract import ACTION_SPACE
from mage_envs.games.kuhn_poker import KuhnPokerEnv


def play_meta(env, seed, choose=lambda info, rng: rng.choice(info["legal_actions"]), reflection="<reflection>ok</reflection>"):
    rng = random.Random(seed)
    obs, info = env.reset(seed=seed)
    rewards, infos = [], [info]
    while True:
        action = reflection if info["phase"] == "reflect" else f"<action>{choose(info, rng)}</action>"
        obs, reward, terminated, truncated, info = env.step(action)
        rewards.append(reward)
        infos.append(info)
        assert env.observation_space.contains(obs)
        if terminated or truncated:
            return rewards, infos


@pytest.mark.parametrize("seed", range(20))
def test_reward_modes_are_consistent_on_the_same_play(seed):
    results = {}
    for mode in ("differential", "final", "cumulative"):
        env = gym.make("mage/KuhnPoker-meta-v0", num_episodes=4, reward_mode=mode, opponent="random", repeat_instance=False)
        results[mode] = play_meta(env, seed)
    returns = results["final"][1][-1]["episode_returns"]
    assert len(returns) == 4
    for mode, (rewards, infos) in results.items():
        assert infos[-1]["episode_returns"] == returns  # same seed, same play
    diff = [r for r in results["differential"][0] if r != 0.0]
    assert sum(results["differential"][0]) == pytest.approx(returns[-1])  # telescopes to R(tau_N)
    assert sum(results["final"][0]) == pytest.approx(returns[-1])
    assert results["final"][0][:-1] == [0.0] * (len(results["final"][0]) - 1)
    assert sum(results["cumulative"][0]) == pytest.approx(sum(returns))
    # differential rewards are exactly R(n) - R(n-1) at each episode end
    ends = [i for i, info in enumerate(results["differential"][1][1:]) if len(info["episode_returns"]) > len(results["differential"][1][i]["episode_returns"])]
    paid = [results["differential"][0][i] for i in ends]
    assert paid == pytest.approx([returns[0]] + [b - a for a, b in zip(returns, returns[1:])])
    assert len(diff) <= 4


def test_phases_memory_and_fixed_opponent():
    env = gym.make("mage/KuhnPoker-meta-v0", num_episodes=3, opponent="trainable", seat=0)
    obs, info = env.reset(seed=5)
    opponent = info["opponent"]
    phases = [info["phase"]]
    prompts = [obs]
    while True:
        action = "<reflection>NOTE-%d: the opponent bluffs</reflection>" % len(phases) if info["phase"] == "reflect" else "check"
        obs, reward, terminated, truncated, info = env.step(action)
        phases.append(info["phase"])
        prompts.append(obs)
        assert info["opponent"] == opponent
        if terminated:
            break
    assert phases.count("reflect") == 2  # after episodes 1 and 2, not after the last
    reflect_index = phases.index("reflect")
    assert "<reflection>" in prompts[reflect_index] and "Episode 1 of 3 is over" in prompts[reflect_index]
    assert "NOTE-%d" % (reflect_index + 1) in prompts[reflect_index + 1]  # memory reaches the next prompt
    assert "Memory of earlier episodes" not in prompts[0]
    assert info["episode_index"] == 2 and len(info["episode_successes"]) == 3


def test_no_reflection_goes_straight_to_next_episode():
    env = gym.make("mage/KuhnPoker-meta-v0", num_episodes=3, reflection=False, opponent="maniac", seat=0)
    rewards, infos = play_meta(env, 0)
    assert all(info["phase"] == "act" for info in infos)
    assert len(infos[-1]["episode_returns"]) == 3


def test_repeat_instance_replays_the_deal():
    def deals(repeat):
        env = gym.make("mage/KuhnPoker-meta-v0", num_episodes=3, repeat_instance=repeat, opponent="random", reflection=False)
        seen = []
        obs, info = env.reset(seed=2)
        while True:
            if len(env.unwrapped.state.history()) <= 3:
                seen.append((tuple(env.unwrapped.state.history()[:2]), info["seat"]))
            obs, r, terminated, truncated, info = env.step("bet" if "bet" in info["legal_actions"] else "call")
            if terminated:
                return seen

    assert len(set(deals(True))) == 1
    assert any(len(set(deals(False))) > 1 for _ in range(1))


def test_memory_clipping_keeps_observation_in_space():
    env = gym.make("mage/KuhnPoker-meta-v0", num_episodes=6, memory_budget=300, opponent="random")
    huge = "<reflection>" + "\u00e9\U0001F600 very long thought " * 20000 + "</reflection>"
    rewards, infos = play_meta(env, 1, reflection=huge)
    assert len(infos[-1]["episode_returns"]) == 6
    memory = env.unwrapped  # the inner game env is untouched by the memory
    assert isinstance(memory, KuhnPokerEnv)


def test_observation_space_bound_is_tight_enough():
    env = gym.make("mage/KuhnPoker-meta-v0", memory_budget=500)
    assert env.observation_space.max_length <= 500 + 2 * KuhnPokerEnv.max_observation_chars


@pytest.mark.parametrize("bad", [{"num_episodes": 0}, {"reward_mode": "sum"}, {"memory_budget": 10}])
def test_wrapper_argument_errors(bad):
    with pytest.raises(ValueError):
        MetaEpisodeWrapper(KuhnPokerEnv(), **bad)


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped version")
def test_check_env_on_meta_ids():
    for env_id in ("mage/KuhnPoker-meta-v0",):
        env = gym.make(env_id)
        check_env(env, skip_render_check=True)


def test_pickle_mid_meta_episode_continues_identically():
    env = gym.make("mage/KuhnPoker-meta-v0", opponent="random", num_episodes=3)
    env.reset(seed=9)
    env.step("check" if "check" in env.unwrapped.legal_action_names() else "call")
    clone = pickle.loads(pickle.dumps(env))
    for _ in range(6):
        a = env.step("<reflection>x</reflection>" if env.unwrapped._done else "bet" if "bet" in env.unwrapped.legal_action_names() else "call")
        b = clone.step("<reflection>x</reflection>" if clone.unwrapped._done else "bet" if "bet" in clone.unwrapped.legal_action_names() else "call")
        assert a == b
        if a[2]:
            break


class GuessEnv(gym.Env):
    """A third-party contract env with no opponent and no instances: guess a hidden digit."""

    observation_space = text_space(200)
    action_space = ACTION_SPACE

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.secret = int(self.np_random.integers(0, 4))
        self.tries = 0
        return "Guess a digit 0-3.", {"legal_actions": ["0", "1", "2", "3"], "invalid_action": None}

    def step(self, action):
        self.tries += 1
        hit = action.strip() == str(self.secret)
        done = hit or self.tries >= 4
        reward = 1.0 if hit else 0.0
        info = {"legal_actions": ["0", "1", "2", "3"], "invalid_action": None}
        if done:
            info.update(outcome="win" if hit else "loss", success=hit)
        return ("Correct!" if hit else "Wrong."), reward, done, False, info


def test_wraps_a_third_party_env_and_replays_by_seed():
    env = MetaEpisodeWrapper(GuessEnv(), num_episodes=3, reflection=True)
    obs, info = env.reset(seed=4)
    secret = env.unwrapped.secret
    secrets = [secret]
    while True:
        obs, reward, terminated, truncated, info = env.step("<reflection>try another</reflection>" if info["phase"] == "reflect" else "0")
        if info["phase"] == "act" and env.unwrapped.tries == 0:
            secrets.append(env.unwrapped.secret)
        if terminated:
            break
    assert secrets == [secret] * 3  # repeat_instance via re-seeding
    assert info["opponent"] is None and len(info["episode_returns"]) == 3


def test_check_text_env_minimal_contract_for_third_party_envs():
    """GuessEnv follows the minimal contract the wrapper needs, not all a MAGE env promises."""
    check_text_env(GuessEnv(), strict=False)
    check_text_env(MetaEpisodeWrapper(GuessEnv(), num_episodes=2), strict=False)
    with pytest.raises(AssertionError, match="lacks"):
        check_text_env(GuessEnv())


def test_check_text_env_names_the_broken_rule():
    class DefaultCharset(GuessEnv):
        observation_space = gym.spaces.Text(200)  # letters and digits only, min_length 1

    class Crashes(GuessEnv):
        def step(self, action):
            if "no such action" in action:
                raise ValueError("illegal")
            return super().step(action)

    class Unclipped(GuessEnv):
        def reset(self, *, seed=None, options=None):
            obs, info = super().reset(seed=seed, options=options)
            return obs * 50, info

    with pytest.raises(AssertionError, match="min_length=0"):
        check_text_env(DefaultCharset(), strict=False)
    with pytest.raises(ValueError, match="illegal"):
        check_text_env(Crashes(), strict=False, episodes=30)
    with pytest.raises(AssertionError, match="outside the observation space"):
        check_text_env(Unclipped(), strict=False)


def test_one_options_object_for_every_meta_env():
    from mage_envs.core.meta_tracker import MetaOptions
    from mage_envs.numeric import KuhnPokerTensorEnv, TensorMetaWrapper

    env = MetaEpisodeWrapper(KuhnPokerEnv(), num_episodes=2, reflection=False)
    assert env.options == MetaOptions(num_episodes=2, reflection=False)
    assert env._saved_kwargs == MetaOptions(num_episodes=2, reflection=False).as_kwargs()
    made = gym.make("mage/KuhnPoker-meta-v0", num_episodes=2, reflection=False, opponent="nash")
    assert made.get_wrapper_attr("options") == env.options
    with pytest.raises(TypeError, match="unexpected option"):
        MetaEpisodeWrapper(KuhnPokerEnv(), num_episode=2)
    with pytest.raises(TypeError, match="TensorMetaWrapper got unexpected option"):
        TensorMetaWrapper(KuhnPokerTensorEnv(), reflection=False)


def _deal_sequence(env_id, seed, choose):
    """The (opponent, instance, seat) of every episode of one fresh-deal meta-episode."""
    env = gym.make(env_id, num_episodes=5, opponent="trainable", repeat_instance=False)
    _, infos = play_meta(env, seed, choose=choose)
    starts = {}
    for info in infos:
        if info["phase"] == "act":
            starts.setdefault(info["episode_index"], (info["opponent"], info["instance"], info["seat"]))
    assert sorted(starts) == list(range(5))
    return [starts[k] for k in range(5)]


@pytest.mark.parametrize("env_id", ["mage/KuhnPoker-meta-v0", "mage/LeducPoker-meta-v0"])
@pytest.mark.parametrize("seed", range(6))
def test_fresh_deals_follow_the_seed_not_the_play(env_id, seed):
    """Common random numbers: the deals after a seed are the same whatever the agent (and so
    the opponent, whose replies draw from their own stream) did, as in duplicate poker."""
    passive = _deal_sequence(env_id, seed, lambda info, rng: info["legal_actions"][0])
    aggressive = _deal_sequence(env_id, seed, lambda info, rng: info["legal_actions"][-1])
    at_random = _deal_sequence(env_id, seed, lambda info, rng: rng.choice(info["legal_actions"]))
    assert passive == aggressive == at_random
    assert len({instance for _, instance, _ in passive}) == 5  # fresh deals: five different instances


def test_each_episode_can_be_given_its_instance_with_fresh_deals():
    env = gym.make("mage/KuhnPoker-meta-v0", num_episodes=3, opponent="aggressive", repeat_instance=False)
    chosen = [11, 4, 11]
    starts = {}
    obs, info = env.reset(seed=0, options={"instances": chosen})
    while True:
        if info["phase"] == "act":
            starts.setdefault(info["episode_index"], info["instance"])
        action = "<reflection>ok</reflection>" if info["phase"] == "reflect" else info["legal_actions"][0]
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert [starts[k] for k in range(3)] == chosen
    with pytest.raises(ValueError, match="one instance per episode"):
        env.reset(seed=0, options={"instances": [1, 2]})
    with pytest.raises(ValueError, match="not both"):
        env.reset(seed=0, options={"instances": [1, 2, 3], "instance": 1})
    repeated = gym.make("mage/KuhnPoker-meta-v0", num_episodes=3, repeat_instance=True)
    with pytest.raises(ValueError, match="repeat_instance=False"):
        repeated.reset(seed=0, options={"instances": [1, 2, 3]})


def test_the_tensor_meta_env_takes_each_episodes_instance_too():
    env = gym.make("mage/KuhnPoker-tensor-meta-v0", opponent="aggressive", num_episodes=3, repeat_instance=False)
    obs, info = env.reset(seed=0, options={"instances": [11, 4, 11]})
    starts = {0: info["instance"]}
    while True:
        legal = np.flatnonzero(env.unwrapped.action_masks())
        obs, _, terminated, truncated, info = env.step(int(legal[0]))
        if terminated or truncated:
            break
        starts.setdefault(info["episode_index"], info["instance"])
    assert [starts[k] for k in range(3)] == [11, 4, 11]


def test_an_env_pickled_before_fresh_deals_had_their_own_stream_still_deals():
    env = KuhnPokerEnv(opponent="conservative")
    env.reset(seed=3)
    state = env.__getstate__()
    del state["_deals"]   # as pickled by an earlier release
    restored = KuhnPokerEnv.__new__(KuhnPokerEnv)
    restored.__setstate__(state)
    _, info = restored.reset()
    assert isinstance(info["instance"], int)


@pytest.mark.parametrize("env_id", ["mage/KuhnPoker-meta-v0", "mage/LeducPoker-meta-v0", "mage/TicTacToe-meta-v0"])
def test_the_rules_stay_on_top_so_every_prompt_shares_one_prefix(env_id):
    env = gym.make(env_id, num_episodes=3, reflection=False)
    preamble = env.unwrapped.prompt_preamble
    assert preamble.startswith("You are playing") and "You are Player" not in preamble  # the seat's line differs
    prompts = []
    for seed in range(6):  # both seats, several deals
        obs, info = env.reset(seed=seed)
        while True:
            prompts.append(obs)
            obs, _, terminated, truncated, info = env.step(f"<action>{info['legal_actions'][0]}</action>")
            if terminated or truncated:
                break
    assert all(p.startswith(preamble + "\n\n") and p.count(preamble) == 1 for p in prompts)
    later = [p for p in prompts if "Memory of earlier episodes" in p]
    assert later and all(p.index("Memory of earlier episodes") < p.index("[Episode ") for p in later)
    compact = gym.make(env_id, prompt_style="compact")
    assert compact.unwrapped.prompt_preamble == "" and compact.reset(seed=0)[0].startswith("[Episode 1 of 3]")
