"""Tic-Tac-Toe: the text env (``mage/TicTacToe-v0``) and its opponent archetypes."""

from __future__ import annotations

import functools
import random
from typing import Any, Callable

import gymnasium as gym
import pyspiel
import pytest
from gymnasium.utils.env_checker import check_env

import mage_envs  # noqa: F401  (registers mage/TicTacToe-v0)
from mage_envs.facts.tic_tac_toe import GAME, board_key, free_cells, negamax_value, optimal_cells, place
from mage_envs.games.tic_tac_toe import TicTacToeEnv, draw_board
from mage_envs.opponents import list_opponents, make_opponent, sample_action
from mage_envs.opponents.base import ActionProbs, BotOpponent, PolicyOpponent
from mage_envs.opponents.tic_tac_toe import (
    PREFERRED_ORDERS,
    greedy_policy,
    minimax_policy,
    random_policy,
)

Answer = Callable[[TicTacToeEnv, random.Random], str]
PREFERRED = [f"preferred-cell-{name}" for name in PREFERRED_ORDERS]
END_LINES = {"win": "Game over: you win", "draw": "Game over: draw", "loss": "Game over: you lose"}


# ---------------------------------------------------------------------- helpers
def tag(cell: int) -> str:
    """The agent's answer for OpenSpiel cell ``cell`` (shown to the agent as cell + 1)."""
    return f"<action>{cell + 1}</action>"


def policy_agent(policy: Callable[[pyspiel.State], ActionProbs]) -> Answer:
    """An agent answering with a move drawn from ``policy`` in the env's live state."""
    return lambda env, rng: tag(sample_action(policy(env.state), rng))


random_agent = policy_agent(random_policy)


def play(env: TicTacToeEnv, answer: Answer, rng: random.Random, **reset: Any) -> list[tuple]:
    """One episode: every (observation, reward, terminated, truncated, info, engine board)."""
    obs, info = env.reset(**reset)
    steps: list[tuple] = [(obs, 0.0, False, False, info, board_key(env.state))]
    terminated = False
    while not terminated:
        obs, reward, terminated, truncated, info = env.step(answer(env, rng))
        assert not truncated
        steps.append((obs, reward, terminated, truncated, info, board_key(env.state)))
    return steps


def outcomes(opponent: str, answer: Answer, games: int, seed: int, seat: Any = "random") -> list[str]:
    """The agent's outcome in ``games`` consecutive seeded episodes."""
    env = TicTacToeEnv(opponent=opponent, seat=seat)
    rng = random.Random(seed)
    env.reset(seed=seed)
    return [play(env, answer, rng)[-1][4]["outcome"] for _ in range(games)]


def state_after(*cells: int) -> pyspiel.State:
    state = pyspiel.load_game(GAME).new_initial_state()
    for cell in cells:
        state.apply_action(cell)
    return state


@functools.cache
def reachable_states() -> dict[str, pyspiel.State]:
    """Every reachable position (board key -> one state reaching it), by the engine."""
    found: dict[str, pyspiel.State] = {}
    stack = [pyspiel.load_game(GAME).new_initial_state()]
    while stack:
        state = stack.pop()
        key = board_key(state)
        if key in found:
            continue
        found[key] = state
        if not state.is_terminal():
            stack.extend(state.child(a) for a in state.legal_actions())
    return found


# ---------------------------------------------------------------------- the env API
def test_check_env_after_gym_make() -> None:
    env = gym.make("mage/TicTacToe-v0", opponent="random", render_mode="ansi")
    assert isinstance(env.unwrapped, TicTacToeEnv)
    check_env(env.unwrapped, skip_render_check=False)
    env.close()


def test_gym_make_default_population_is_train() -> None:
    env = gym.make("mage/TicTacToe-v0")
    assert env.unwrapped.population.ids == tuple(list_opponents(GAME, "trainable"))


def test_observations_stay_in_space_and_legal_actions_are_the_free_cells() -> None:
    env = TicTacToeEnv(opponent="all", invalid_action={"mode": "retry", "max_retries": 3})
    rng = random.Random(5)
    env.reset(seed=5)
    seen_opponents, seen_seats = set(), set()
    for _ in range(150):
        for obs, _, terminated, _, info, board in play(env, flaky_agent, rng):
            assert env.observation_space.contains(obs)
            assert not obs.endswith("[...]"), "the observation budget must never clip a prompt"
            assert draw_board(board) in obs
            legal = [str(cell + 1) for cell in free_cells(board)]
            if not terminated:
                assert info["legal_actions"] == legal
                assert f"Legal actions: {', '.join(legal)}" in obs
            seen_opponents.add(info["opponent"])
            seen_seats.add(info["seat"])
    assert seen_seats == {0, 1}
    assert seen_opponents == set(list_opponents(GAME))


def flaky_agent(env: TicTacToeEnv, rng: random.Random) -> str:
    """A random agent that sometimes answers an occupied cell or no tag at all."""
    taken = [cell for cell in range(9) if cell not in env.state.legal_actions()]
    roll = rng.random()
    if roll < 0.1 and taken:
        return tag(rng.choice(taken))
    if roll < 0.15:
        return "I am not sure."
    return random_agent(env, rng)


def test_board_shows_marks_and_free_cell_numbers() -> None:
    env = TicTacToeEnv(opponent="preferred-cell-row-major", seat=1)
    obs, info = env.reset(seed=0)
    assert "You play O" in obs and " X | 2 | 3" in obs
    assert "- Opponent (X) takes cell 1." in obs
    obs, *_ = env.step(tag(4))
    assert " X | X | 3\n---+---+---\n 4 | O | 6\n---+---+---\n 7 | 8 | 9" in obs
    assert "- You (O) take cell 5.\n- Opponent (X) takes cell 2." in obs
    assert env.step(tag(2))[4]["legal_actions"] == ["6", "7", "8", "9"]
    assert env.state.history() == [0, 4, 1, 2, 3]  # the opponent's next free cell is 4


def test_rollouts_are_deterministic_under_a_seed() -> None:
    def rollouts(seed: int) -> list[list[tuple]]:
        env = TicTacToeEnv(opponent="all")
        rng = random.Random(seed)
        first = play(env, flaky_agent, rng, seed=seed)
        return [first] + [play(env, flaky_agent, rng) for _ in range(20)]

    assert rollouts(11) == rollouts(11)
    assert rollouts(11) != rollouts(12)


def test_replaying_an_instance_keeps_the_seat() -> None:
    env = TicTacToeEnv(opponent="minimax")
    _, info = env.reset(seed=3)
    for _ in range(5):
        assert env.reset(options={"instance": info["instance"]})[1]["seat"] == info["seat"]


@pytest.mark.parametrize("scale", [1.0, 10.0])
def test_terminal_rewards_are_the_engine_payoffs(scale: float) -> None:
    env = TicTacToeEnv(opponent="trainable", reward_scale=scale)
    rng = random.Random(2)
    env.reset(seed=2)
    seen = set()
    for _ in range(120):
        steps = play(env, random_agent, rng)
        returns = env.state.returns()
        *_, (obs, reward, _, _, info, _) = steps
        assert all(step[1] == 0.0 for step in steps[:-1])
        assert returns[0] + returns[1] == 0.0
        assert reward == returns[info["seat"]] * scale
        expected = {1.0: "win", 0.0: "draw", -1.0: "loss"}[returns[info["seat"]]]
        assert info["outcome"] == expected and info["success"] == (expected == "win")
        assert END_LINES[expected] in obs
        seen.add(expected)
    assert seen == {"win", "draw", "loss"}


def test_an_occupied_cell_is_rejected_without_changing_the_game() -> None:
    env = TicTacToeEnv(opponent="preferred-cell-center-first", seat=1)
    obs, info = env.reset(seed=0)  # the opponent took cell 5
    history = env.state.history()
    obs, reward, terminated, _, info = env.step("<action>5</action>")
    assert info["invalid_action"]["reason"] == "illegal_action"
    assert info["invalid_action"]["applied"] == "retry"
    assert "'5' is not a legal action now" in obs
    assert (reward, terminated) == (0.0, False)
    assert env.state.history() == history
    assert info["legal_actions"] == ["1", "2", "3", "4", "6", "7", "8", "9"]
    obs, _, _, _, info = env.step("<action>1</action>")
    assert info["invalid_action"] is None
    assert env.state.history() == [4, 0, 2]  # the opponent's next free cell: corner 3


def test_an_occupied_cell_under_forfeit_and_fallback() -> None:
    opponent = "preferred-cell-center-first"
    forfeit = TicTacToeEnv(opponent=opponent, seat=1, invalid_action="forfeit", reward_scale=10)
    forfeit.reset(seed=0)
    obs, reward, terminated, _, info = forfeit.step(tag(4))
    assert (reward, terminated, info["outcome"], info["forfeit"]) == (-10.0, True, "loss", True)
    assert "You forfeited" in obs

    fallback = TicTacToeEnv(opponent=opponent, seat=1, invalid_action="fallback")
    fallback.reset(seed=0)
    _, _, terminated, _, info = fallback.step(tag(4))
    assert not terminated and info["invalid_action"]["applied"] == "fallback"
    played = int(info["invalid_action"]["played"]) - 1
    assert fallback.state.history()[:2] == [4, played]


# ---------------------------------------------------------------------- the registry
def test_archetype_splits() -> None:
    train, heldout = list_opponents(GAME, "trainable"), list_opponents(GAME, "heldout")
    assert {"random", "minimax", "greedy", "mcts-100"} <= set(train)
    assert "mcts-1000" in heldout
    assert len([name for name in train if name.startswith("preferred-cell-")]) >= 6
    everyone = {"random", "greedy", "minimax", "mcts-100", "mcts-1000", *PREFERRED}
    assert set(train) | set(heldout) == everyone and not set(train) & set(heldout)
    assert isinstance(make_opponent(GAME, "mcts-100"), BotOpponent)


@pytest.mark.parametrize("name", ["random", "greedy", "minimax", *PREFERRED])
def test_policy_archetypes_give_distributions_in_every_position(name: str) -> None:
    opponent = make_opponent(GAME, name)
    assert isinstance(opponent, PolicyOpponent)
    for state in reachable_states().values():
        if not state.is_terminal():
            probs = opponent.action_probabilities(state)  # validated by PolicyOpponent
            assert len(probs) == 1 or name in ("random", "greedy", "minimax")


# ---------------------------------------------------------------------- minimax
def test_the_solver_agrees_with_the_engine_everywhere() -> None:
    positions = reachable_states()
    assert len(positions) == 5478

    @functools.cache
    def engine_value(key: str) -> float:
        state = positions[key]
        if state.is_terminal():
            return state.returns()[state.move_number() % 2]  # the player who would move
        return max(-engine_value(board_key(state.child(a))) for a in state.legal_actions())

    for key in positions:
        assert negamax_value(key) == engine_value(key)
    assert negamax_value(".........") == 0


def test_minimax_is_uniform_over_the_optimal_moves() -> None:
    assert minimax_policy(state_after(0, 1)) == {3: 1 / 3, 4: 1 / 3, 6: 1 / 3}
    assert optimal_cells("xx.oo....") == (2,)  # win at once; anything else loses
    assert set(minimax_policy(state_after(4))) == {0, 2, 6, 8}  # edge replies lose


@pytest.mark.parametrize("seat", [0, 1])
def test_minimax_never_loses_to_random(seat: int) -> None:
    results = outcomes("minimax", random_agent, games=150, seed=seat, seat=seat)
    assert "win" not in results
    assert results.count("loss") > len(results) // 2


def test_minimax_against_minimax_always_draws() -> None:
    assert set(outcomes("minimax", policy_agent(minimax_policy), games=60, seed=4)) == {"draw"}


def optimal_agent(env: TicTacToeEnv, rng: random.Random) -> str:
    """An agent answering with one of the env's own ``optimal_actions()``, at random."""
    optimal = env.optimal_actions()
    assert optimal
    return f"<action>{rng.choice(optimal)}</action>"


def test_optimal_actions_are_the_value_keeping_cells_at_every_position_the_learner_meets() -> None:
    rng = random.Random(0)
    for seat in (0, 1):
        env = TicTacToeEnv(opponent="random", seat=seat)
        env.reset(seed=seat)
        seen = 0
        for _ in range(40):
            env.reset()
            while not env.state.is_terminal():
                board = board_key(env.state)
                value = negamax_value(board)
                names = env.optimal_actions()
                assert names is not None and set(names) <= set(env.action_names(env.state))
                kept = [str(cell + 1) for cell in free_cells(board)
                        if -negamax_value(place(board, cell, "xo"[seat])) == value]
                assert names == kept
                seen += len(names) < len(free_cells(board))
                env.step(tag(sample_action(random_policy(env.state), rng)))
            assert env.optimal_actions() is None   # the game is over
        assert seen > 20   # positions where some move gives the value away


@pytest.mark.parametrize("opponent", ["mcts-100", "minimax", "greedy", "random"])
def test_playing_only_optimal_actions_never_loses(opponent: str) -> None:
    results = outcomes(opponent, optimal_agent, games=30, seed=7)
    assert "loss" not in results
    if opponent == "random":
        assert results.count("win") > len(results) // 2   # a won position is kept until it is won


def test_optimal_actions_where_a_move_must_block_or_win() -> None:
    env = TicTacToeEnv(opponent="preferred-cell-row-major", seat=1)
    env.reset(seed=0)                         # X took cell 1: only the centre keeps the draw
    assert env.optimal_actions() == ["5"]
    env.step("<action>5</action>")            # X took 2: O must block the top row at 3
    assert board_key(env.state) == "xx..o...."
    assert env.optimal_actions() == ["3"]


# ---------------------------------------------------------------------- greedy and fixed orders
def test_greedy_wins_first_then_blocks_then_plays_at_random() -> None:
    assert greedy_policy(state_after(0, 3, 1, 4)) == {2: 1.0}  # x completes the top row, no block at 5
    assert greedy_policy(state_after(0, 3, 1)) == {2: 1.0}  # o blocks the top row
    assert greedy_policy(state_after(0, 4, 8, 2, 6)) == {3: 0.5, 7: 0.5}  # x threatens twice
    assert greedy_policy(state_after(4)) == {c: 1 / 8 for c in (0, 1, 2, 3, 5, 6, 7, 8)}


def test_greedy_opponent_blocks_in_the_env() -> None:
    env = TicTacToeEnv(opponent="greedy", seat=0)
    env.reset(seed=0)
    env.step(tag(0))
    free = env.state.legal_actions()
    threat, block = next((t, b) for t, b in ((1, 2), (3, 6), (4, 8)) if t in free and b in free)
    env.step(tag(threat))
    assert env.state.history()[3] == block


def test_preferred_orders_match_their_names() -> None:
    orders = {name: order for name, (order, _, _) in PREFERRED_ORDERS.items()}
    assert orders["row-major"] == tuple(range(9))
    assert orders["column-major"] == (0, 3, 6, 1, 4, 7, 2, 5, 8)
    assert orders["center-first"][0] == 4
    assert set(orders["corners-first"][:4]) == {0, 2, 6, 8}
    assert set(orders["edges-first"][:4]) == {1, 3, 5, 7}
    assert orders["diagonal"][:3] == (0, 4, 8) and orders["anti-diagonal"][:3] == (2, 4, 6)
    assert orders["spiral"] == (0, 1, 2, 5, 8, 7, 6, 3, 4)


@pytest.mark.parametrize("name", sorted(PREFERRED_ORDERS))
def test_preferred_cell_plays_the_first_free_cell_of_its_order(name: str) -> None:
    order = PREFERRED_ORDERS[name][0]
    assert sorted(order) == list(range(9))
    env = TicTacToeEnv(opponent=f"preferred-cell-{name}", seat="random")
    rng = random.Random(7)
    env.reset(seed=7)
    for _ in range(20):
        seat = play(env, random_agent, rng)[-1][4]["seat"]
        history = env.state.history()
        for index in range(1 - seat, len(history), 2):
            taken = set(history[:index])
            assert history[index] == next(cell for cell in order if cell not in taken)


# ---------------------------------------------------------------------- MCTS
def test_mcts_100_beats_random_most_of_the_time() -> None:
    results = outcomes("mcts-100", random_agent, games=30, seed=0)
    assert results.count("loss") >= 18, results


def test_mcts_opponent_is_reproducible_under_the_env_seed() -> None:
    def histories(seed: int, opponent: str) -> list[list[int]]:
        env = TicTacToeEnv(opponent=opponent, seat=0)
        env.reset(seed=seed)
        rng = random.Random(0)  # the agent's own randomness does not depend on the env seed
        games = []
        for _ in range(8):
            play(env, random_agent, rng)
            games.append(env.state.history())
        return games

    assert histories(1, "mcts-100") == histories(1, "mcts-100")
    assert histories(1, "mcts-100") != histories(2, "mcts-100")
    assert histories(1, "mcts-1000") == histories(1, "mcts-1000")


def test_minimax_agent_never_loses_to_mcts_1000() -> None:
    results = outcomes("mcts-1000", policy_agent(minimax_policy), games=10, seed=9)
    assert "loss" not in results
