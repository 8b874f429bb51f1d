"""Kuhn Poker: exact payoffs of every terminal history, archetypes as specified, env contract."""

import itertools
import random

import gymnasium as gym
import pyspiel
import pytest
from gymnasium.utils.env_checker import check_env

from mage_envs.facts.kuhn_poker import BET, JACK, KING, PASS, QUEEN
from mage_envs.games.kuhn_poker import KuhnPokerEnv
from mage_envs.opponents import Opponent, make_opponent
from mage_envs.opponents.kuhn_poker import cfr_average_policy

CARDS = {"J": JACK, "Q": QUEEN, "K": KING}


class ScriptedOpponent(Opponent):
    """Plays a fixed list of actions (for driving the env into a chosen history)."""

    name = "scripted"

    def __init__(self, actions):
        self.actions = list(actions)

    def act(self, state):
        return self.actions.pop(0)


def expected_payoff_p0(c0: int, c1: int, betting: str) -> int:
    """Hand-written Kuhn rules: ante 1, bet 1."""
    if betting == "pbp":
        return -1
    if betting == "bp":
        return 1
    stake = 1 if betting == "pp" else 2
    return stake if c0 > c1 else -stake


def find_instance(deal):
    """An instance number whose deal is ``deal`` (found by dealing, with a throwaway env)."""
    probe = KuhnPokerEnv(opponent="random", seat=0)
    for instance in range(500):
        probe.reset(seed=0, options={"instance": instance})
        if tuple(probe.state.history()[:2]) == deal:
            return instance
    raise AssertionError(f"no instance deals {deal}")


@pytest.mark.parametrize("seat", [0, 1])
@pytest.mark.parametrize("deal", list(itertools.permutations(range(3), 2)))
@pytest.mark.parametrize("betting", ["pp", "pbp", "pbb", "bp", "bb"])
def test_every_terminal_history_pays_exactly(seat, deal, betting):
    moves = [PASS if m == "p" else BET for m in betting]
    agent_moves = moves[seat::2]
    opponent_moves = moves[1 - seat :: 2]
    env = KuhnPokerEnv(opponent=ScriptedOpponent(opponent_moves), seat=seat)
    instance = find_instance(deal)
    obs, info = env.reset(seed=0, options={"instance": instance})
    assert env.state.history()[:2] == list(deal)
    total = 0.0
    for move in agent_moves:
        name = next(n for n, a in env.action_names(env.state).items() if a == move)
        obs, reward, terminated, truncated, info = env.step(f"<action>{name}</action>")
        total += reward
    assert terminated and not truncated
    p0 = expected_payoff_p0(deal[0], deal[1], betting)
    assert total == (p0 if seat == 0 else -p0)
    assert env.state.returns() == [p0, -p0]  # zero-sum, engine agrees
    assert info["outcome"] == ("win" if total > 0 else "loss")
    assert info["success"] == (total > 0)


def test_observation_hides_opponent_card_until_showdown():
    env = KuhnPokerEnv(opponent="calling-station", seat=0)
    for seed in range(30):
        obs, info = env.reset(seed=seed)
        history = env.state.history()
        opponent_card = ["Jack", "Queen", "King"][history[1]]
        mine = ["Jack", "Queen", "King"][history[0]]
        assert f"Your card: {mine}." in obs
        assert f"opponent holds the {opponent_card}" not in obs
        obs, *_ = env.step("<action>bet</action>")
        assert f"the opponent holds the {opponent_card}" in obs


@pytest.mark.parametrize(
    "name, table",
    [
        # (card, history) -> probability of betting/calling
        ("conservative", {("J", ""): 0, ("Q", ""): 0, ("K", ""): 1, ("J", "b"): 0, ("Q", "b"): 0, ("K", "b"): 1, ("Q", "p"): 0, ("K", "p"): 1, ("Q", "pb"): 0}),
        ("aggressive", {("J", ""): 1, ("Q", ""): 1, ("K", ""): 1, ("J", "p"): 1, ("J", "b"): 0, ("Q", "b"): 1, ("K", "b"): 1, ("J", "pb"): 0, ("Q", "pb"): 1}),
        ("intermediate", {("J", ""): 0, ("Q", ""): 1, ("K", ""): 1, ("Q", "p"): 1, ("J", "p"): 0, ("Q", "b"): 0, ("K", "b"): 1, ("J", "b"): 0, ("Q", "pb"): 0}),
        ("random", {("J", ""): 0.5, ("K", "b"): 0.5, ("Q", "p"): 0.5}),
        ("calling-station", {("K", ""): 0, ("J", "b"): 1, ("J", "pb"): 1, ("K", "p"): 0}),
        ("bluffer", {("J", ""): 1, ("Q", ""): 0, ("K", ""): 1, ("J", "b"): 0, ("K", "b"): 1}),
    ],
)
def test_archetypes_follow_their_descriptions(name, table):
    game = pyspiel.load_game("kuhn_poker")
    opponent = make_opponent("kuhn_poker", name)
    for (card, history), p_bet in table.items():
        state = game.new_initial_state()
        acting = len(history) % 2
        state.apply_action(CARDS[card])
        other = next(c for c in range(3) if c != CARDS[card])
        state.apply_action(other)
        if acting == 1:  # the acting player is player 1: deal their card second
            state = game.new_initial_state()
            state.apply_action(other)
            state.apply_action(CARDS[card])
        for move in history:
            state.apply_action(PASS if move == "p" else BET)
        assert state.current_player() == acting
        probs = opponent.action_probabilities(state)
        assert probs.get(BET, 0.0) == pytest.approx(p_bet), (name, card, history)


def test_nash_archetype_is_an_exact_equilibrium():
    game = pyspiel.load_game("kuhn_poker")
    nash = make_opponent("kuhn_poker", "nash")
    table = {}

    def walk(state):
        if state.is_terminal():
            return
        if state.is_chance_node():
            for a, _ in state.chance_outcomes():
                walk(state.child(a))
            return
        probs = nash.action_probabilities(state)
        table[state.information_state_string()] = [(a, probs.get(a, 0.0)) for a in state.legal_actions()]
        for a in state.legal_actions():
            walk(state.child(a))

    walk(game.new_initial_state())
    policy = pyspiel.TabularPolicy(table)
    assert pyspiel.nash_conv(game, policy) == pytest.approx(0.0, abs=1e-12)
    value = pyspiel.expected_returns(game.new_initial_state(), policy, -1, True)
    assert value[0] == pytest.approx(-1 / 18, abs=1e-12)


def test_cfr_argmax_is_deterministic_and_solved_once():
    policy = cfr_average_policy()
    assert cfr_average_policy() is policy  # cached, not re-solved
    opponent = make_opponent("kuhn_poker", "cfr-argmax")
    game = pyspiel.load_game("kuhn_poker")
    state = game.new_initial_state()
    state.apply_action(KING)
    state.apply_action(JACK)
    assert opponent.action_probabilities(state) == {BET: 1.0}  # King opens with a bet
    state.apply_action(PASS)  # seat 0 passes; the player 1 holds the Jack
    probs = opponent.action_probabilities(state)
    assert len(probs) == 1 and sum(probs.values()) == 1.0


def test_check_env_and_space():
    env = gym.make("mage/KuhnPoker-v0")
    check_env(env.unwrapped)
    rng = random.Random(0)
    for seed in range(200):
        obs, info = env.reset(seed=seed)
        assert env.observation_space.contains(obs)
        done = False
        while not done:
            obs, reward, terminated, truncated, info = env.step(f"<action>{rng.choice(info['legal_actions'])}</action>")
            assert env.observation_space.contains(obs)
            done = terminated or truncated
        assert info["outcome"] in ("win", "draw", "loss") and info["opponent"] in env.unwrapped.population.ids


def rollout(env, seed, n=40):
    rng = random.Random(seed)
    trace = []
    obs, info = env.reset(seed=seed)
    trace.append((obs, info))
    for _ in range(n):
        action = rng.choice(info["legal_actions"] + ["nonsense", "<action>raise</action>"]) if info["legal_actions"] else "x"
        obs, reward, terminated, truncated, info = env.step(action)
        trace.append((obs, reward, terminated, truncated, info))
        if terminated or truncated:
            obs, info = env.reset()
            trace.append((obs, info))
    return trace


@pytest.mark.parametrize("env_id", ["mage/KuhnPoker-v0", "mage/KuhnPoker-meta-v0"])
def test_determinism_under_seed(env_id):
    assert rollout(gym.make(env_id), 7) == rollout(gym.make(env_id), 7)
    assert rollout(gym.make(env_id), 7) != rollout(gym.make(env_id), 8)


def test_instance_replays_deal_and_seat():
    env = KuhnPokerEnv(opponent="random", seat="random")
    env.reset(seed=1)
    seen = set()
    for instance in range(40):
        env.reset(options={"instance": instance})
        first = (env.state.history()[:2], env._seat)
        env.reset(options={"instance": instance})
        assert (env.state.history()[:2], env._seat) == first
        seen.add(first[1])
    assert seen == {0, 1}


def test_reward_scale_multiplies_payoffs():
    base = KuhnPokerEnv(opponent="maniac", seat=0)
    scaled = KuhnPokerEnv(opponent="maniac", seat=0, reward_scale=5.0)
    for seed in range(10):
        base.reset(seed=seed)
        scaled.reset(seed=seed)
        assert scaled.step("bet")[1] == 5.0 * base.step("bet")[1]


@pytest.mark.parametrize(
    "kwargs, error",
    [({"seat": 2}, ValueError), ({"opponent": "nobody"}, KeyError), ({"reward_scale": -1}, ValueError),
     ({"invalid_action": "explode"}, ValueError), ({"opponent": 3.5}, TypeError), ({"render_mode": "human"}, ValueError)],
)
def test_bad_constructor_arguments_have_clear_errors(kwargs, error):
    with pytest.raises(error):
        KuhnPokerEnv(**kwargs)


def test_step_before_reset_and_after_end():
    env = KuhnPokerEnv(opponent="maniac", seat=0)
    with pytest.raises(RuntimeError, match="reset"):
        env.step("bet")
    env.reset(seed=0)
    env.step("bet")
    with pytest.raises(RuntimeError, match="over"):
        env.step("bet")
