"""Leduc Poker: text layer faithful to the engine, hidden information, shipped CFR+ policy,
archetypes as described, env contract."""

import functools
import random

import gymnasium as gym
import pyspiel
import pytest
from gymnasium.utils.env_checker import check_env

from mage_envs.core.contract import InvalidActionPolicy
from mage_envs.games.leduc_poker import LeducPokerEnv, committed
from mage_envs.opponents import PolicyOpponent, list_opponents, make_opponent
from mage_envs.opponents.base import decision_states as walk_decision_states
from mage_envs.opponents.leduc_poker import (
    ARCHETYPES,
    CALL,
    FOLD,
    RAISE,
    cfr_policy_table,
    load_cfr_file,
)

GAME = pyspiel.load_game("leduc_poker")
#: One engine card per rank (the suit never matters): J, Q, K and their twins.
J, Q, K, J2, Q2, K2 = 0, 2, 4, 1, 3, 5
RANK_WORDS = ("Jack", "Queen", "King")


def deal(p0: int, p1: int, *actions: int) -> pyspiel.State:
    """The state after dealing ``p0``, ``p1`` and playing ``actions`` (public card included)."""
    state = GAME.new_initial_state()
    for action in (p0, p1, *actions):
        state.apply_action(action)
    return state


@functools.cache
def decision_states() -> tuple[pyspiel.State, ...]:
    return tuple(walk_decision_states(GAME))


def play_random(env, rng: random.Random, seed: int):
    """One episode with uniformly random legal answers; yields every (obs, reward, info)."""
    obs, info = env.reset(seed=seed)
    yield obs, 0.0, info
    terminated = False
    while not terminated:
        obs, reward, terminated, truncated, info = env.step(f"<action>{rng.choice(info['legal_actions'])}</action>")
        assert not truncated
        yield obs, reward, info


# ---------------------------------------------------------------------- engine facts
def test_card_ranks_and_pairs_match_the_engine():
    # check-check in both rounds: the pair with the board wins, else the higher rank, ties split
    assert deal(J2, K, CALL, CALL, J, CALL, CALL).returns() == [1, -1]
    assert deal(K, Q, CALL, CALL, J, CALL, CALL).returns() == [1, -1]
    assert deal(Q, Q2, CALL, CALL, K, CALL, CALL).returns() == [0, 0]
    assert deal(Q, K, CALL, CALL, Q2, CALL, CALL).returns() == [1, -1]


def test_committed_chips_match_the_engine_money_everywhere():
    for state in decision_states():
        money = state.money()
        assert committed(state) == [100 - money[0], 100 - money[1]]
        assert sum(committed(state)) == state.pot()


# ---------------------------------------------------------------------- text layer
def test_action_names_map_to_the_engine_legal_actions():
    env = LeducPokerEnv(opponent="random", seat=0)
    for state in decision_states():
        names = env.action_names(state)
        assert sorted(names.values()) == state.legal_actions()
        if FOLD in state.legal_actions():
            assert list(names) == ["fold", "call", "raise"][: len(names)]
        else:
            assert names == {"check": CALL, "bet": RAISE}


def test_move_lines_name_amounts_and_the_public_card():
    env = LeducPokerEnv(opponent="random", seat=0)
    moves = [(J, None), (Q, None), (RAISE, "You bet 2 chips."), (RAISE, "Opponent raises by 2 chips."),
             (CALL, "You call 2 chips."), (K2, "The public card is the King."), (CALL, "You check."),
             (RAISE, "Opponent bets 4 chips."), (FOLD, "You fold.")]  # fmt: skip
    state = GAME.new_initial_state()
    for action, expected in moves:
        assert env.describe_move(state, state.current_player(), action, 0) == expected
        state.apply_action(action)
    assert env.describe_end(state, 0) == "Hand over: you folded. You lose 5 chips."
    assert env.describe_end(state, 1) == "Hand over: the opponent folded. You win 5 chips."


@pytest.mark.parametrize(
    "cards, verdict, payoff",
    [
        ((J, K, J2), "Your pair of Jacks wins.", 3),
        ((K, Q, J), "Your King is the higher card.", 3),
        ((J, Q, K), "The opponent's Queen is the higher card.", -3),
        ((K, Q, Q2), "The opponent's pair of Queens wins.", -3),
        ((Q, Q2, K), "Equal ranks: the pot is split.", 0),
    ],
)
def test_showdown_text_agrees_with_the_engine(cards, verdict, payoff):
    env = LeducPokerEnv(opponent="random", seat=0)
    state = deal(cards[0], cards[1], RAISE, CALL, cards[2], CALL, CALL)
    text = env.describe_end(state, 0)
    mine, theirs, board = (RANK_WORDS[c // 2] for c in cards)
    assert text.startswith(f"Hand over: showdown. You hold the {mine}, the opponent holds the {theirs} "
                           f"and the public card is the {board}.")  # fmt: skip
    result = {3: "You win 3 chips.", -3: "You lose 3 chips.", 0: "Nobody wins any chips."}[payoff]
    assert text.endswith(f"{verdict} {result}")
    assert state.returns() == [payoff, -payoff]


def test_text_depends_only_on_the_agents_information_state():
    """Private view, legal names and move lines agree across states the agent cannot tell
    apart, so the opponent's card cannot leak before the showdown."""
    env = LeducPokerEnv(opponent="random", seat=0)
    for seat in (0, 1):
        seen: dict[str, str] = {}
        stack = [(GAME.new_initial_state(), ())]
        while stack:
            state, lines = stack.pop()
            if state.is_terminal():
                continue
            player = state.current_player()
            if player == seat:
                text = "\n".join((env.private_view(state, seat), *lines, *env.action_names(state)))
                key = state.information_state_string(seat)
                assert seen.setdefault(key, text) == text, key
            actions = [a for a, _ in state.chance_outcomes()] if state.is_chance_node() else state.legal_actions()
            for action in actions:
                line = env.describe_move(state, player, action, seat)
                stack.append((state.child(action), lines + ((line,) if line else ())))
        assert len(seen) == sum(f"[Observer: {seat}]" in key for key in cfr_policy_table())


def test_opponent_card_is_revealed_only_at_showdown():
    env = LeducPokerEnv(opponent="all")
    rng = random.Random(0)
    for seed in range(100):
        for obs, _, info in play_random(env, rng, seed):
            if "outcome" not in info:
                assert "opponent holds" not in obs
        if env.state.history()[-1] != FOLD:
            theirs = RANK_WORDS[env.state.private_card(1 - info["seat"]) // 2]
            assert f"the opponent holds the {theirs} " in obs
        else:
            assert "opponent holds" not in obs


# ---------------------------------------------------------------------- env contract
def test_registered_and_passes_check_env():
    env = gym.make("mage/LeducPoker-v0")
    assert isinstance(env.unwrapped, LeducPokerEnv)
    check_env(env.unwrapped)
    meta = gym.make("mage/LeducPoker-meta-v0", num_episodes=2, opponent="maniac")
    obs, info = meta.reset(seed=0)
    assert "Leduc Poker" in obs and info["opponent"] == "maniac"


def test_observations_stay_in_the_space_and_rewards_equal_engine_returns():
    env = LeducPokerEnv(opponent="all", reward_scale=2.5)
    rng = random.Random(1)
    for seed in range(300):
        total = 0.0
        for obs, reward, info in play_random(env, rng, seed):
            assert env.observation_space.contains(obs)
            total += reward
        returns = env.state.returns()
        assert sum(returns) == 0
        assert total == 2.5 * returns[info["seat"]]
        assert info["outcome"] == ("win" if total > 0 else "loss" if total < 0 else "draw")


def check_then_raise(state: pyspiel.State) -> dict[int, float]:
    """Checks when opening a round, then raises whenever allowed, else calls."""
    if not (state.round1() if state.round() == 1 else state.round2()):
        return {CALL: 1.0}
    return {RAISE if RAISE in state.legal_actions() else CALL: 1.0}


@pytest.mark.parametrize("seat", [0, 1])
def test_longest_raise_sequence_fits_and_pays_thirteen(seat):
    """Check, bet, raise, call in both rounds: the longest hand and the biggest pot."""
    names = {CALL: "call", RAISE: "raise"}
    env = LeducPokerEnv(opponent=PolicyOpponent("check-raiser", check_then_raise), seat=seat)
    obs, info = env.reset(seed=3)
    total, terminated = 0.0, False
    while not terminated:
        assert env.observation_space.contains(obs)
        name = names[next(iter(check_then_raise(env.state)))]
        if name not in info["legal_actions"]:
            name = {"call": "check", "raise": "bet"}[name]
        obs, reward, terminated, _, info = env.step(f"<action>{name}</action>")
        total += reward
    assert env.observation_space.contains(obs) and len(obs) <= env.max_observation_chars
    assert len(env.state.history()) == 3 + GAME.max_game_length()  # 3 cards, 4 moves per round
    assert abs(total) in (0, 13) and "Pot: 26 chips (you put in 13, the opponent 13)." in obs


def rollout(env_id: str, seed: int, steps: int = 30) -> list:
    env = gym.make(env_id)
    rng = random.Random(seed)
    obs, info = env.reset(seed=seed)
    trace = [(obs, info)]
    for _ in range(steps):
        answer = rng.choice([*info["legal_actions"], "nonsense", "<action>bet</action>"])
        obs, reward, terminated, truncated, info = env.step(answer)
        trace.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            obs, info = env.reset()
            trace.append((obs, info))
    return trace


@pytest.mark.parametrize("env_id", ["mage/LeducPoker-v0", "mage/LeducPoker-meta-v0"])
def test_determinism_under_seed(env_id):
    assert rollout(env_id, 5) == rollout(env_id, 5)
    assert rollout(env_id, 5) != rollout(env_id, 6)


def test_invalid_answer_with_retry_leaves_the_state_untouched():
    env = LeducPokerEnv(opponent="calling-station", seat=0, invalid_action=InvalidActionPolicy("retry", max_retries=3))
    obs, info = env.reset(seed=0)
    history, legal = env.state.history(), info["legal_actions"]
    for answer in ("<action>raise</action>", "I would like to fold", "<action>call"):
        obs, penalty, terminated, _, info = env.step(answer)
        assert not terminated and penalty == 0.0 and info["invalid_action"]["applied"] == "retry"
        assert env.state.history() == history and info["legal_actions"] == legal
        assert "Note:" in obs and env.observation_space.contains(obs)
    obs, _, terminated, _, info = env.step("<action>check</action>")
    assert info["invalid_action"] is None and env.state.history()[: len(history)] == history


def test_invalid_answer_with_forfeit_or_fallback():
    env = LeducPokerEnv(opponent="calling-station", seat=0, invalid_action="forfeit", reward_scale=2.0)
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("<action>fold</action>")  # fold is not legal yet
    assert terminated and reward == -2.0 and info["forfeit"] and "forfeited" in obs  # a fold: the ante, doubled
    env = LeducPokerEnv(opponent="calling-station", seat=0, invalid_action=InvalidActionPolicy("fallback", fallback="first"))
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("nonsense")
    assert info["invalid_action"]["played"] == "check" and env.state.history()[2] == CALL


def test_retries_run_out_into_a_forfeit():
    env = LeducPokerEnv(opponent="calling-station", seat=1, invalid_action="retry")
    env.reset(seed=0)
    outcomes = [env.step("nonsense")[2] for _ in range(3)]
    assert outcomes == [False, False, True] and env.state.history()[:3] == env.state.history()


# ---------------------------------------------------------------------- shipped CFR+ policy
def test_shipped_policy_covers_every_information_state_exactly():
    table = cfr_policy_table()
    legal = {s.information_state_string(): s.legal_actions() for s in decision_states()}
    assert table.keys() == legal.keys() and len(table) == 936
    for key, probs in table.items():
        assert sorted(probs) == legal[key]
        assert min(probs.values()) >= 0 and sum(probs.values()) == pytest.approx(1.0, abs=1e-12)


def test_shipped_policy_is_near_nash_with_the_known_value():
    policy = pyspiel.TabularPolicy({key: list(probs.items()) for key, probs in cfr_policy_table().items()})
    nash_conv = pyspiel.nash_conv(GAME, policy)
    value = pyspiel.expected_returns(GAME.new_initial_state(), policy, -1, True)
    metadata = load_cfr_file()["metadata"]
    assert nash_conv < 1e-3
    assert value[0] == pytest.approx(-0.0856, abs=5e-4) and sum(value) == pytest.approx(0.0, abs=1e-12)
    assert metadata["nash_conv"] == pytest.approx(nash_conv, abs=1e-6)
    assert metadata["value_player0"] == pytest.approx(value[0], abs=1e-6)
    assert uniform_nash_conv() > 4  # the measure is not vacuous: uniform random is far off


def uniform_nash_conv() -> float:
    return pyspiel.nash_conv(GAME, pyspiel.UniformRandomPolicy(GAME))


def test_nash_and_cfr_argmax_follow_the_shipped_table():
    assert cfr_policy_table() is cfr_policy_table()  # loaded once
    nash, argmax = make_opponent("leduc_poker", "nash"), make_opponent("leduc_poker", "cfr-argmax")
    for state in decision_states()[::7]:
        probs = cfr_policy_table()[state.information_state_string()]
        assert nash.action_probabilities(state) == {a: p for a, p in probs.items() if p > 0}
        best = max(probs.values())
        assert argmax.action_probabilities(state) == {min(a for a, p in probs.items() if p == best): 1.0}
    nash.reset(random.Random(0))
    state = deal(K, J)  # the King opens with a mixed strategy: both moves get sampled
    assert {nash.act(state) for _ in range(200)} == {CALL, RAISE}


# ---------------------------------------------------------------------- archetypes
def test_splits():
    assert list_opponents("leduc_poker", "trainable") == [
        "nash", "cfr-argmax", "random", "conservative", "aggressive", "intermediate"]  # fmt: skip
    assert list_opponents("leduc_poker", "heldout") == ["calling-station", "maniac", "bluffer"]


@pytest.mark.parametrize("name", list(ARCHETYPES))
def test_archetypes_are_distributions_of_the_information_state(name):
    """Valid over the legal actions, and equal across states with one information state
    (the opponent caches on the key; the raw policy is called on every state)."""
    opponent = make_opponent("leduc_poker", name)
    policy = ARCHETYPES[name][0]
    for state in decision_states():
        probs = opponent.action_probabilities(state)  # validated: legal, sums to one
        assert {a: p for a, p in policy(state).items() if p > 0} == probs


# (p0 card, p1 card, actions) -> the acting player's move, per archetype
START_J, START_Q, START_K = deal(J, K), deal(Q, K), deal(K, Q)
J_FACING_BET = deal(K, J, RAISE)
Q_FACING_BET = deal(K, Q, RAISE)
K_FACING_BET = deal(Q, K, RAISE)
J_AT_CAP = deal(J, K, RAISE, RAISE)  # player 0 bet, was raised: no more raises
Q_AT_CAP = deal(Q, K, RAISE, RAISE)
K_AT_CAP = deal(K, Q, RAISE, RAISE)
J_PAIRED_FACING_BET = deal(K, J, CALL, CALL, J2, RAISE)
Q_PAIRED_START = deal(Q, K, CALL, CALL, Q2)
Q_UNPAIRED_ROUND2 = deal(Q, K, CALL, CALL, J2)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("conservative", [(START_J, CALL), (START_Q, CALL), (START_K, RAISE), (J_FACING_BET, FOLD),
                          (Q_FACING_BET, FOLD), (K_FACING_BET, RAISE), (K_AT_CAP, CALL),
                          (Q_PAIRED_START, RAISE), (J_PAIRED_FACING_BET, RAISE), (Q_UNPAIRED_ROUND2, CALL)]),
        ("aggressive", [(START_J, RAISE), (START_Q, RAISE), (J_FACING_BET, FOLD), (J_AT_CAP, FOLD),
                        (Q_FACING_BET, RAISE), (Q_AT_CAP, CALL), (J_PAIRED_FACING_BET, RAISE)]),
        ("intermediate", [(START_J, CALL), (START_Q, RAISE), (START_K, RAISE), (J_FACING_BET, FOLD),
                          (Q_FACING_BET, CALL), (Q_AT_CAP, CALL), (K_FACING_BET, RAISE), (K_AT_CAP, CALL),
                          (Q_PAIRED_START, RAISE)]),
        ("calling-station", [(START_K, CALL), (J_FACING_BET, CALL), (K_AT_CAP, CALL), (Q_PAIRED_START, CALL)]),
        ("maniac", [(START_J, RAISE), (J_FACING_BET, RAISE), (J_AT_CAP, CALL), (Q_UNPAIRED_ROUND2, RAISE)]),
        ("bluffer", [(START_J, RAISE), (START_Q, CALL), (START_K, RAISE), (J_FACING_BET, RAISE),
                     (J_AT_CAP, FOLD), (Q_FACING_BET, FOLD), (K_AT_CAP, CALL), (Q_PAIRED_START, RAISE)]),
    ],
)  # fmt: skip
def test_heuristic_archetypes_follow_their_descriptions(name, expected):
    opponent = make_opponent("leduc_poker", name)
    for state, action in expected:
        assert opponent.action_probabilities(state) == {action: 1.0}, (name, str(state))


def test_random_archetype_is_uniform_over_legal_actions():
    opponent = make_opponent("leduc_poker", "random")
    assert opponent.action_probabilities(START_J) == {CALL: 0.5, RAISE: 0.5}
    assert opponent.action_probabilities(J_FACING_BET) == pytest.approx({FOLD: 1 / 3, CALL: 1 / 3, RAISE: 1 / 3})
    assert opponent.action_probabilities(J_AT_CAP) == {FOLD: 0.5, CALL: 0.5}
