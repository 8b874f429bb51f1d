"""The PettingZoo envs: PettingZoo's own test suites, zero-sum payoffs, private cards,
seeding, invalid answers, the single-agent prompts, and MetaEpisodeAEC."""

import itertools
import pickle
import random
import subprocess
import sys

import pytest
from pettingzoo.test import api_test, max_cycles_test, parallel_api_test, render_test, seed_test
from pettingzoo.utils import OrderEnforcingWrapper
from pettingzoo.utils.conversions import aec_to_parallel

from mage_envs.games.base import FORFEIT_LINE
from mage_envs.opponents.base import Opponent
from mage_envs.pettingzoo import MetaEpisodeAEC, kuhn_poker_v0, leduc_poker_v0, tic_tac_toe_v0
from mage_envs.pettingzoo.text_game import OPPONENT_FORFEIT_LINE, TRUNCATED_LINE, WAIT_LINE

MODULES = [kuhn_poker_v0, leduc_poker_v0, tic_tac_toe_v0]
POKER = [kuhn_poker_v0, leduc_poker_v0]
# the suites warn that text observations and actions are not numpy arrays / Box spaces
suite = pytest.mark.filterwarnings("ignore::UserWarning")


def play(env, choose, seed=None, options=None):
    """Play one game (or meta-episode) through the AEC loop; return the per-step records.

    ``choose(agent, obs, info)`` answers for a live agent; None is sent for dead steps.
    """
    env.reset(seed=seed, options=options)
    records = []
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, info = env.last()
        records.append((agent, obs, reward, terminated, truncated, info))
        env.step(None if terminated or truncated else choose(agent, obs, info))
    return records


def random_legal(seed):
    """Random legal answers for the seat to move, an empty answer for the other one."""
    rng = random.Random(seed)

    def choose(agent, obs, info):
        if info.get("phase") == "reflect":
            return f"<reflection>{agent} note {rng.random():.3f}</reflection>"
        legal = info["legal_actions"]
        return f"<action>{rng.choice(legal)}</action>" if legal else ""

    return choose


def totals(records):
    out = {}
    for agent, _, reward, *_ in records:
        out[agent] = out.get(agent, 0.0) + reward
    return out


# ---------------------------------------------------------------- PettingZoo's suites
@suite
@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_pettingzoo_suites(module):
    api_test(module.env(), num_cycles=50)
    parallel_api_test(module.parallel_env(), num_cycles=50)
    seed_test(module.env, num_cycles=50)
    max_cycles_test(module)
    render_test(module.env)


@suite
@pytest.mark.parametrize("module", [kuhn_poker_v0, tic_tac_toe_v0], ids=["kuhn", "ttt"])
def test_meta_env_passes_the_suites(module):
    def make():
        return OrderEnforcingWrapper(MetaEpisodeAEC(module.raw_env(), num_episodes=3, swap_seats=True))

    api_test(make(), num_cycles=100)
    parallel_api_test(aec_to_parallel(make()), num_cycles=100)
    seed_test(make, num_cycles=100)


def test_import_mage_envs_does_not_import_pettingzoo():
    code = "import sys, mage_envs; assert 'pettingzoo' not in sys.modules, 'pettingzoo imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------- games
@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_full_games_are_zero_sum_and_pay_the_engine_returns(module):
    env = module.env(reward_scale=5.0)
    for seed in range(40):
        records = play(env, random_legal(seed), seed=seed)
        paid = totals(records)
        returns = env.unwrapped.game_state.returns()
        assert paid == pytest.approx({"player_0": 5.0 * returns[0], "player_1": 5.0 * returns[1]})
        assert sum(paid.values()) == pytest.approx(0.0)
        final = {agent: info for agent, *_, info in records if "outcome" in info}
        assert {final["player_0"]["outcome"], final["player_1"]["outcome"]} in ({"win", "loss"}, {"draw"})


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_one_seat_moves_per_cycle(module):
    env = module.env()
    records = play(env, random_legal(3), seed=3)
    live = [r for r in records if not (r[3] or r[4])]
    assert [r[0] for r in live] == ["player_0", "player_1"] * (len(live) // 2)  # strict cycles
    for first, second in zip(live[::2], live[1::2]):
        movers = [r for r in (first, second) if r[5]["legal_actions"]]
        assert len(movers) == 1  # exactly one seat may act in a cycle
        waiting = first if movers[0] is second else second
        assert waiting[1]["legal_moves"].sum() == 0
        assert waiting[1]["prompt"].endswith(WAIT_LINE) or "outcome" in waiting[5]  # or the game just ended
        mover = movers[0]
        assert mover[1]["legal_moves"].sum() == len(mover[5]["legal_actions"])


class Replay(Opponent):
    """Plays a fixed list of moves: the other seat's moves in a recorded AEC game."""

    name = "replay"

    def __init__(self, moves):
        self.moves = list(moves)

    def act(self, state):
        return self.moves.pop(0)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_each_seat_reads_the_single_agent_prompt(module):
    for seed in range(6):
        env = module.raw_env()
        records = play(env, random_legal(seed), seed=seed)
        instance = records[0][5]["instance"]
        history = env.game_state.history()
        seat_moves = [[], []]
        replay = env.game.new_initial_state()
        for action in history:
            if replay.current_player() >= 0:
                seat_moves[replay.current_player()].append(action)
            replay.apply_action(action)
        for seat, agent in enumerate(("player_0", "player_1")):
            prompts = [r[1]["prompt"] for r in records if r[0] == agent and (r[5]["legal_actions"] or r[3])]
            single = env.text_env(opponent=Replay(seat_moves[1 - seat]), seat=seat)
            obs, _ = single.reset(seed=0, options={"instance": instance})
            expected = [obs]
            for action in seat_moves[seat]:
                name = {a: n for n, a in single.action_names(single.state).items()}[action]
                obs, *_ = single.step(f"<action>{name}</action>")
                expected.append(obs)
            assert prompts == expected


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_prompts_kept_per_history_are_the_text_layer_prompts(module):
    """The prompts the env keeps per seat and history (replayed seeds reuse them) are those
    the text layer writes from scratch, with retry notices, waits, forfeits and truncations."""
    env = module.env(max_cycles=4)
    rng = random.Random(0)
    closings = (WAIT_LINE, FORFEIT_LINE, OPPONENT_FORFEIT_LINE, TRUNCATED_LINE.format(cycles=4))
    for game in range(60):
        env.reset(seed=game % 12)
        retrying = dict.fromkeys(env.agents, False)  # the seat's last answer earned a retry
        for agent in env.agent_iter():
            for name in env.agents:
                prompt = env.observe(name)["prompt"]
                lines = prompt.splitlines()
                closing = lines[-1] if lines[-1] in closings else None
                notice = next((line[len("Note: ") :] for line in lines if line.startswith("Note: ")), None)
                legal = env.infos[name]["legal_actions"]
                assert (notice is not None) == (retrying[name] and bool(legal))
                state, seat = env.unwrapped.game_state, env.possible_agents.index(name)
                assert prompt == env.unwrapped.text.prompt(state, seat, state.history(), legal, notice, closing)
            _, _, terminated, truncated, info = env.last()
            legal = info["legal_actions"]
            answer = rng.choice([*(f"<action>{name}</action>" for name in legal), "nonsense", ""])
            env.step(None if terminated or truncated else answer)
            if legal and agent in env.infos:
                report = env.infos[agent]["invalid_action"]
                retrying[agent] = report is not None and report["applied"] == "retry"


@pytest.mark.parametrize("module", POKER, ids=["kuhn", "leduc"])
def test_prompts_never_reveal_the_other_private_card_before_showdown(module):
    """Before the end, a seat's prompt is a function of its information state alone."""
    env = module.raw_env()
    seen: dict[tuple, tuple[str, int]] = {}
    shared = 0
    for seed in range(150):
        env.reset(seed=seed)
        choose = random_legal(seed)
        while not any(env.terminations.values()):
            state = env.game_state
            for seat, agent in enumerate(env.agents):
                if state.is_terminal():
                    continue
                key = (seat, state.information_state_string(seat), bool(env.infos[agent]["legal_actions"]))
                other_card = state.history()[1 - seat]
                prompt = env.observe(agent)["prompt"]
                previous = seen.setdefault(key, (prompt, other_card))
                assert previous[0] == prompt, "a prompt depends on the other seat's card"
                shared += previous[1] != other_card
            agent = env.agent_selection
            env.step(choose(agent, None, env.infos[agent]))
    assert shared > 50  # the same information state was met with different hidden cards


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_same_seed_same_games_and_instances_replay(module):
    def trace(seed, options=None):
        rng = random.Random(seed)

        def choose(agent, obs, info):
            legal = info["legal_actions"] or ["x"]
            return rng.choice([f"<action>{rng.choice(legal)}</action>", "junk", "", rng.choice(legal)])

        env = module.env(invalid_action="fallback")
        return [(agent, obs["prompt"], obs["legal_moves"].tolist(), reward, term, trunc, info)
                for agent, obs, reward, term, trunc, info in play(env, choose, seed=seed, options=options)]

    assert trace(7) == trace(7)
    assert trace(7) != trace(8)
    instance = trace(7)[0][6]["instance"]
    replayed = trace(8, options={"instance": instance})
    assert replayed[0][1] == trace(7)[0][1] and replayed[0][6]["instance"] == instance  # same deal


# ---------------------------------------------------------------- invalid answers
def test_default_policy_retries_three_times_then_forfeits():
    env = kuhn_poker_v0.env()
    env.reset(seed=0)
    for retry in range(3):
        env.step("I raise!")  # player_0, the seat to move
        report = env.infos["player_0"]["invalid_action"]
        assert report["applied"] == "retry" and report["retries_left"] == 2 - retry
        env.step("")  # player_1 passes
        assert env.observe("player_0")["prompt"].count("Note: No <action>") == 1
        assert env.infos["player_0"]["legal_actions"] == ["check", "bet"]
    env.step("still no tag")  # the fourth invalid answer forfeits: a fold of the ante
    assert env.rewards == {"player_0": -1.0, "player_1": 1.0}
    env.step("")
    assert all(env.terminations.values())
    assert env.infos["player_0"]["outcome"] == "loss" and env.infos["player_1"]["outcome"] == "win"
    assert env.infos["player_0"]["forfeit"] and env.infos["player_1"]["success"]
    assert env.observe("player_1")["prompt"].endswith(OPPONENT_FORFEIT_LINE)


def test_random_text_always_ends_the_game():
    for module in MODULES:
        env = module.env()
        for seed in range(5):
            env.reset(seed=seed)
            for agent in env.action_spaces:
                env.action_space(agent).seed(seed)
            steps = 0
            for agent in env.agent_iter(100):
                _, _, terminated, truncated, _ = env.last()
                env.step(None if terminated or truncated else env.action_space(agent).sample())
                steps += 1
            assert not env.agents and steps == 2 * 4 + 2  # four invalid answers, two dead steps


def test_fallback_plays_a_legal_move_and_penalty_goes_to_the_offender():
    env = tic_tac_toe_v0.env(invalid_action={"mode": "fallback", "fallback": "first", "penalty": -0.5})
    env.reset(seed=0)
    env.step("<action>10</action>")
    assert env.rewards == {"player_0": -0.5, "player_1": 0.0}
    assert env.infos["player_0"]["invalid_action"]["played"] == "1"
    env.step("")
    assert env.unwrapped.game_state.history() == [0]


def test_forfeit_mode_ends_at_the_end_of_the_cycle():
    env = leduc_poker_v0.env(invalid_action="forfeit", reward_scale=2.0)
    env.reset(seed=1)
    env.step("<action>bet</action>")  # player_0 bets 2
    env.step("")
    env.step("")
    env.step("<action>raise</action>")  # player_1 raises
    env.step("<action>raise</action>")  # illegal: capped at one raise -> player_0 forfeits (a fold)
    assert env.rewards == {"player_0": -6.0, "player_1": 6.0} and not any(env.terminations.values())
    env.step("")
    assert all(env.terminations.values())


def test_max_cycles_truncates():
    env = tic_tac_toe_v0.env(max_cycles=3)
    records = play(env, random_legal(0), seed=0)
    assert len(env.unwrapped.game_state.history()) == 3
    last = {agent: (obs, trunc, info) for agent, obs, _, _, trunc, info in records}
    for obs, truncated, info in last.values():
        assert truncated and "outcome" not in info
        assert obs["prompt"].endswith(TRUNCATED_LINE.format(cycles=3))


def test_argument_errors():
    with pytest.raises(ValueError):
        kuhn_poker_v0.raw_env(max_cycles=0)
    with pytest.raises(ValueError):
        kuhn_poker_v0.raw_env(render_mode="rgb_array")
    with pytest.raises(ValueError):
        kuhn_poker_v0.raw_env(reward_scale=-1.0)
    with pytest.raises(ValueError):
        MetaEpisodeAEC(kuhn_poker_v0.raw_env(), reward_mode="sum")


# ---------------------------------------------------------------- meta-episodes
@pytest.mark.parametrize("seed", range(8))
def test_meta_reward_modes_per_learner(seed):
    results = {}
    for mode in ("differential", "final", "cumulative"):
        env = MetaEpisodeAEC(leduc_poker_v0.raw_env(), num_episodes=4, reward_mode=mode, repeat_instance=False)
        records = play(OrderEnforcingWrapper(env), random_legal(seed), seed=seed)
        final = {agent: info for agent, *_, info in records if info.get("meta_done")}
        results[mode] = (totals(records), {a: final[a]["episode_returns"] for a in final})
    returns = results["final"][1]
    for learner, own in returns.items():
        assert len(own) == 4
        assert results["differential"][1][learner] == own  # same seed, same play
        assert results["differential"][0][learner] == pytest.approx(own[-1])  # telescopes to R(N)
        assert results["final"][0][learner] == pytest.approx(own[-1])
        assert results["cumulative"][0][learner] == pytest.approx(sum(own))
    assert [a + b for a, b in zip(returns["player_0"], returns["player_1"])] == pytest.approx([0.0] * 4)


def test_differential_rewards_are_paid_at_each_game_end():
    env = MetaEpisodeAEC(kuhn_poker_v0.raw_env(), num_episodes=3, repeat_instance=False)
    env.reset(seed=4)
    paid = {"player_0": [], "player_1": []}
    choose = random_legal(4)
    while env.agents:
        agent = env.agent_selection
        if env.terminations[agent]:
            env.step(None)
            continue
        before = len(env.infos[agent]["episode_returns"])
        env.step(choose(agent, None, env.infos[agent]))
        if len(env.infos.get(agent, {}).get("episode_returns", [])) > before:
            for learner in env.agents:
                paid[learner].append(env.rewards[learner])
    for learner, rewards in paid.items():
        returns = env.trackers[learner].returns
        assert rewards == pytest.approx([returns[0]] + [b - a for a, b in itertools.pairwise(returns)])


def test_reflection_phases_for_both_learners_with_separate_memories():
    env = MetaEpisodeAEC(kuhn_poker_v0.raw_env(), num_episodes=3, swap_seats=True)
    records = play(OrderEnforcingWrapper(env), random_legal(1), seed=1)
    reflect = [(agent, obs["prompt"]) for agent, obs, _, term, _, info in records
               if info["phase"] == "reflect" and not term]
    assert [agent for agent, _ in reflect] == ["player_0", "player_1", "player_1", "player_0"]  # seats swap
    assert all("<reflection>" in prompt and "Episode" in prompt for _, prompt in reflect)
    last = {agent: obs["prompt"] for agent, obs, *_ in records}
    notes = {agent: [r for r in env.trackers[agent].memory.reflections] for agent in env.possible_agents}
    assert all(len(n) == 2 and n[0].startswith(agent) for agent, n in notes.items())
    assert notes["player_0"][0] in last["player_0"] and notes["player_0"][0] not in last["player_1"]
    # the rules on top (every prompt's shared prefix), then the memory, then the episode
    rules, memory = last["player_0"].split("\n\nMemory of earlier episodes:\n")
    assert rules == env.env.unwrapped.prompt_preamble and "[Episode 3 of 3]\nYou are Player" in memory
    seats = [info["seat"] for agent, _, _, term, _, info in records if agent == "player_0" and not term]
    assert seats[0] == 0 and 1 in seats  # player_0 played both seats


def test_meta_repeats_the_deal():
    env = MetaEpisodeAEC(kuhn_poker_v0.raw_env(), num_episodes=3, reflection=False)
    deals = []
    env.reset(seed=2)
    choose = random_legal(2)
    while env.agents:
        agent = env.agent_selection
        if len(env.env.game_state.history()) == 2:
            deals.append(tuple(env.env.game_state.history()))
        env.step(None if env.terminations[agent] else choose(agent, None, env.infos[agent]))
    assert len(deals) >= 3 and len(set(deals)) == 1


def test_pickling_rebuilds_from_the_arguments():
    env = MetaEpisodeAEC(tic_tac_toe_v0.raw_env(max_cycles=7), num_episodes=2, swap_seats=True)
    clone = pickle.loads(pickle.dumps(env))
    assert clone.num_episodes == 2 and clone.swap_seats and clone.env.max_cycles == 7
    records = play(clone, random_legal(0), seed=0)
    assert records[-1][5]["meta_done"] and len(records[-1][5]["episode_returns"]) == 2


def test_aec_composes_the_text_layer_without_building_a_single_agent_env(monkeypatch):
    from mage_envs.games.text import GameText

    def refuse(*args, **kwargs):
        raise AssertionError("TextGameAEC built a single-agent env")

    for module in (kuhn_poker_v0, leduc_poker_v0, tic_tac_toe_v0):
        monkeypatch.setattr(module.raw_env.text_env, "__init__", refuse)
        env = module.raw_env()
        env.reset(seed=0)
        assert isinstance(env.text, GameText) and type(env.text) is module.raw_env.text_env.text_class
    with pytest.raises(ValueError, match="reward_scale"):
        kuhn_poker_v0.raw_env(reward_scale=0)
