"""Steps per second of the text Kuhn env next to raw ``pyspiel`` on the same random games.

Both loops play uniformly random legal moves for both seats; the raw loop calls
``pyspiel`` directly, the text loop goes through ``KuhnPokerEnv`` (prompt rendering,
answer parsing, opponent sampling, info dicts). Printed as a ratio measured in one run,
plus the opponent move latency of OpenSpiel's C++ MCTS next to its Python MCTS.

Run: ``python benchmarks/env_throughput.py [--games 20000]``
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np
import pyspiel

from mage_envs.games.kuhn_poker import KuhnPokerEnv


def raw_pyspiel(games: int, seed: int) -> tuple[float, int]:
    """Seconds and agent decisions for ``games`` random games played on pyspiel directly."""
    game = pyspiel.load_game("kuhn_poker")
    rng = random.Random(seed)
    decisions = 0
    start = time.perf_counter()
    for g in range(games):
        seat = g & 1
        state = game.new_initial_state()
        while not state.is_terminal():
            if state.is_chance_node():
                outcomes = state.chance_outcomes()
                state.apply_action(outcomes[rng.randrange(len(outcomes))][0])
            else:
                legal = state.legal_actions()
                decisions += state.current_player() == seat
                state.apply_action(legal[rng.randrange(len(legal))])
    return time.perf_counter() - start, decisions


def text_env(games: int, seed: int) -> tuple[float, int]:
    """Seconds and agent steps for ``games`` random games through the text env."""
    env = KuhnPokerEnv(opponent="random", seat="random")
    rng = random.Random(seed)
    steps = 0
    env.reset(seed=seed)
    start = time.perf_counter()
    for _ in range(games):
        obs, info = env.reset()
        terminated = False
        while not terminated:
            legal = info["legal_actions"]
            obs, reward, terminated, truncated, info = env.step(f"<action>{legal[rng.randrange(len(legal))]}</action>")
            steps += 1
    return time.perf_counter() - start, steps


def mcts_latency(simulations: int, moves: int, seed: int) -> tuple[float, float]:
    """Mean seconds per opening move of C++ and Python MCTS (random rollouts, uct_c 1.4)."""
    from open_spiel.python.algorithms import mcts

    game = pyspiel.load_game("tic_tac_toe")
    cpp = pyspiel.MCTSBot(game, pyspiel.RandomRolloutEvaluator(1, seed), 1.4, simulations, 1000, True, seed, False)
    py = mcts.MCTSBot(game, 1.4, simulations, mcts.RandomRolloutEvaluator(1, np.random.RandomState(seed)),
                      random_state=np.random.RandomState(seed), solve=True)
    timings = []
    for bot in (cpp, py):
        start = time.perf_counter()
        for _ in range(moves):
            bot.step(game.new_initial_state())
        timings.append((time.perf_counter() - start) / moves)
    return timings[0], timings[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3, help="best of N, alternating the two loops")
    parser.add_argument("--mcts-moves", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    raw_best = text_best = float("inf")
    for _ in range(args.repeats):
        raw_time, raw_decisions = raw_pyspiel(args.games, args.seed)
        text_time, text_steps = text_env(args.games, args.seed)
        raw_best, text_best = min(raw_best, raw_time), min(text_best, text_time)
    print(f"Kuhn Poker, {args.games} random games, best of {args.repeats}")
    print(f"  raw pyspiel : {args.games / raw_best:10.0f} games/s  {raw_decisions / raw_best:10.0f} agent decisions/s")
    print(f"  text env    : {args.games / text_best:10.0f} games/s  {text_steps / text_best:10.0f} env steps/s")
    print(f"  ratio text/raw (games per second): {raw_best / text_best:.2f}x")
    cpp, py = mcts_latency(100, args.mcts_moves, args.seed)
    print(f"Tic-Tac-Toe opening move, MCTS-100: C++ {cpp * 1e3:.2f} ms, Python {py * 1e3:.2f} ms ({py / cpp:.0f}x)")


if __name__ == "__main__":
    main()
