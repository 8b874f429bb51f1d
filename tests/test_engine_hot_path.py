"""The engine's hot path: known histories are played without ``pyspiel``, a stationary
opponent's move tables draw as its own ``act`` would, others are asked every move."""

import pickle
import random

import pyspiel
import pytest

from mage_envs.games.engine import ChanceStream
from mage_envs.games.kuhn_poker import KuhnPokerEnv
from mage_envs.games.tic_tac_toe import TicTacToeEnv
from mage_envs.opponents import PolicyOpponent, make_opponent
from mage_envs.opponents.base import draw_move, move_table, sample_action, tabulate_policy
from mage_envs.opponents.table import TableOpponent


def reference_sample(probs, rng):
    """The sampler as it was written before move tables: a walk over ``probs``."""
    if len(probs) == 1:
        return next(iter(probs))
    threshold, cumulative, last = rng.random(), 0.0, None
    for action, prob in probs.items():
        if prob <= 0.0:
            continue
        cumulative += prob
        last = action
        if threshold < cumulative:
            return action
    return last


def test_move_tables_draw_what_the_reference_sampler_draws():
    maker = random.Random(1)
    for _ in range(2000):
        size = maker.randint(1, 6)
        weights = [maker.choice([0.0, maker.random(), 1 / 3]) for _ in range(size)]
        if not any(weights):
            weights[maker.randrange(size)] = 1.0
        total = sum(weights)
        probs = {maker.randrange(100) * 10 + i: w / total for i, w in enumerate(weights)}
        seed = maker.getrandbits(32)
        ours, theirs = random.Random(seed), random.Random(seed)
        table = move_table(probs)
        draws = [draw_move(table, ours) for _ in range(5)]
        assert draws == [reference_sample(probs, theirs) for _ in range(5)]
        assert ours.getstate() == theirs.getstate()  # the same randomness consumed
        assert sample_action(probs, random.Random(seed)) == draws[0]


def test_a_distribution_without_mass_is_refused():
    with pytest.raises(ValueError, match="no positive mass"):
        move_table({0: 0.0, 1: 0.0})


def test_known_histories_are_played_without_a_live_state():
    env = KuhnPokerEnv(opponent="random")
    rng = random.Random(0)

    def play(games):
        built = 0
        for _ in range(games):
            _, info = env.reset()
            terminated = False
            while not terminated:
                _, _, terminated, _, info = env.step(rng.choice(info["legal_actions"]))
            built += env._live is not None
        return built

    env.reset(seed=0)
    assert play(2000) > 0       # new histories build the live state
    assert play(300) == 0       # Kuhn has few: later games never need it
    assert env.state.history() == env._actions  # built on demand, and right
    assert env.state.is_terminal() and env.state.returns()[env._seat] == env._node.payoff


class CountingOpponent(PolicyOpponent):
    """A uniform opponent whose ``act`` counts its calls: not stationary."""

    stationary = False

    def __init__(self):
        super().__init__("counting", lambda state: {a: 1 / len(state.legal_actions()) for a in state.legal_actions()})
        self.calls = 0

    def act(self, state):
        self.calls += 1
        return super().act(state)


def test_an_opponent_that_is_not_stationary_is_asked_at_every_move():
    opponent = CountingOpponent()
    env = TicTacToeEnv(opponent=opponent, seat=0)
    rng = random.Random(3)
    moves = 0
    env.reset(seed=3)
    for _ in range(100):  # the same histories again and again: a stationary opponent would be cached
        _, info = env.reset(options={"instance": 0})
        terminated = False
        while not terminated:
            _, _, terminated, _, info = env.step(rng.choice(info["legal_actions"][:2]))
        moves += len(env.state.history()) // 2  # O's moves: the opponent's
    assert opponent.calls == moves


@pytest.mark.parametrize("opponent", ["random", "minimax"])
def test_the_cached_opponent_plays_as_its_own_act(opponent):
    """The env's per-history move tables against the opponent's own ``act`` on the live
    state (a subclass that is not stationary), over the same seeded games."""
    cached = TicTacToeEnv(opponent=opponent, seat=1)
    uncached = make_opponent("tic_tac_toe", opponent)
    uncached.stationary = False  # type: ignore[misc]  # this instance only: asked by act()
    direct = TicTacToeEnv(opponent=uncached, seat=1)
    for env_seed in range(3):
        runs = []
        for env in (cached, direct):
            rng = random.Random(env_seed)
            _, info = env.reset(seed=env_seed)
            trace = [env.state.history()]
            for _ in range(300):
                _, reward, terminated, _, info = env.step(rng.choice(info["legal_actions"]))
                trace.append((env.state.history(), reward))
                if terminated:
                    _, info = env.reset()
            runs.append(trace)
        assert runs[0] == runs[1]


def test_an_env_pickled_with_a_stream_object_plays_on_alike():
    env = KuhnPokerEnv(opponent="random", seat=1)
    env.reset(seed=5)
    state = env.__getstate__()
    stream = ChanceStream(0)
    stream._state = state["_chance"]
    state["_chance"] = stream  # as envs pickled before the stream became an int
    old = KuhnPokerEnv.__new__(KuhnPokerEnv)
    old.__setstate__(pickle.loads(pickle.dumps(state)))
    for _ in range(20):
        step = env.step(env.legal_action_names()[0])
        assert old.step(old.legal_action_names()[0]) == step
        if step[2]:
            assert old.reset() == env.reset()


def test_a_table_opponent_plays_as_the_archetype_with_its_table():
    """A TableOpponent (whose ``table`` attribute is its policy table) goes through the
    engine's move tables like any stationary opponent (the table's actions in the
    archetype's order, so that both draw alike)."""
    game = pyspiel.load_game("kuhn_poker")
    table = tabulate_policy(game, pyspiel.UniformRandomPolicy(game))
    uniform = TableOpponent("uniform", {key: dict(sorted(probs.items())) for key, probs in table.items()})
    runs = []
    for opponent in (uniform, "random"):
        env, rng = KuhnPokerEnv(opponent=opponent), random.Random(2)
        _, info = env.reset(seed=2)
        trace = []
        for _ in range(400):
            obs, reward, terminated, _, info = env.step(rng.choice(info["legal_actions"]))
            trace.append((obs, reward))
            if terminated:
                _, info = env.reset()
        runs.append(trace)
    assert runs[0] == runs[1]


@pytest.mark.parametrize("cls, kept_from", [(KuhnPokerEnv, 1), (TicTacToeEnv, 2)])
def test_a_view_is_kept_from_its_first_or_second_showing(cls, kept_from):
    """Kuhn keeps a history's view at its first showing; Tic-Tac-Toe (``keep_first_view =
    False``) computes it without keeping it the first time and keeps it the second. Later
    showings return that very object."""
    env = cls(opponent="random", seat=0)
    shown = []
    for seed in (0, None, None):
        obs, _ = env.reset(seed=seed, options={"instance": 8})  # the same seat and deal: the same first node
        shown.append((obs, env._node.view))
    assert shown[0][1] is (env._shown if kept_from == 1 else False)
    assert shown[1][1] is env._shown and shown[2][1] is env._shown
    assert shown[0][0] == shown[1][0] == shown[2][0]


def test_random_tic_tac_toe_keeps_few_views():
    """Most histories of random Tic-Tac-Toe games are shown once: their prompts are not kept."""
    env, rng = TicTacToeEnv(opponent="random"), random.Random(0)
    _, info = env.reset(seed=0)
    for _ in range(3000):
        _, _, terminated, _, info = env.step(rng.choice(info["legal_actions"]))
        if terminated:
            _, info = env.reset()
    nodes = list(env._history._nodes.values())
    kept = sum(1 for node in nodes if node.view)
    assert 0 < kept < 0.2 * len(nodes)
