"""Games per second of the text and numeric envs next to raw ``pyspiel`` on the same random games.

For Kuhn Poker, Leduc Poker and Tic-Tac-Toe, every loop plays uniformly random legal
moves for both seats: the raw loop calls ``pyspiel`` directly; the text loop goes through
the game's text env (prompt rendering, answer parsing, opponent sampling, info dicts),
the numeric loop through its ``-tensor-`` view, the PettingZoo loop through its AEC env
with both seats as agents (fewer games: it is much slower). Printed as ratios of games per
second measured in one run,
plus the opponent move latency of OpenSpiel's C++ MCTS next to its Python MCTS. With
TextArena importable (it is no dependency: ``pip install --target /tmp/ta textarena==0.7.4
nltk chess``, then ``--textarena-path /tmp/ta``), Tic-Tac-Toe also runs through TextArena's
own ``TicTacToe-v0`` (unwrapped, both seats random), in the same repeats. ``--json PATH``
writes the figures (games/s and ratios per game and loop) as JSON; ``--clock cpu`` times the
loops by this process's CPU time (on a shared machine).

Run: ``python benchmarks/env_throughput.py [--games 20000] [--aec-games 2000] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import pyspiel
from pettingzoo import AECEnv

from mage_envs.games.base import OpenSpielTextEnv
from mage_envs.games.kuhn_poker import KuhnPokerEnv
from mage_envs.games.leduc_poker import LeducPokerEnv
from mage_envs.games.tic_tac_toe import TicTacToeEnv
from mage_envs.numeric import KuhnPokerTensorEnv, LeducPokerTensorEnv, TicTacToeTensorEnv
from mage_envs.numeric.env import OpenSpielTensorEnv
from mage_envs.pettingzoo import kuhn_poker_v0, leduc_poker_v0, tic_tac_toe_v0

#: What the loops are timed by: ``--clock wall`` (``time.perf_counter``, the default) or
#: ``--clock cpu`` (``time.process_time``: this process's CPU time, which leaves out the
#: time other jobs of a shared machine hold the cores).
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}
clock = CLOCKS["wall"]

#: label -> (OpenSpiel game string, text env class, numeric env class, PettingZoo module)
GAMES: dict[str, tuple[str, type[OpenSpielTextEnv], type[OpenSpielTensorEnv], Any]] = {
    "Kuhn Poker": ("kuhn_poker", KuhnPokerEnv, KuhnPokerTensorEnv, kuhn_poker_v0),
    "Leduc Poker": ("leduc_poker", LeducPokerEnv, LeducPokerTensorEnv, leduc_poker_v0),
    "Tic-Tac-Toe": ("tic_tac_toe", TicTacToeEnv, TicTacToeTensorEnv, tic_tac_toe_v0),
}


def raw_pyspiel(game_string: str, games: int, seed: int) -> tuple[float, int]:
    """Seconds and agent decisions for ``games`` random games played on pyspiel directly."""
    game = pyspiel.load_game(game_string)
    rng = random.Random(seed)
    decisions = 0
    start = clock()
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
    return clock() - start, decisions


def env_games(env: gym.Env, games: int, seed: int, answer: Callable[[Any], Any]) -> tuple[float, int]:
    """Seconds and agent steps for ``games`` random games through ``env`` against its
    random opponent; ``answer`` turns a legal action from ``info`` into the env's action."""
    rng = random.Random(seed)
    steps = 0
    env.reset(seed=seed)
    start = clock()
    for _ in range(games):
        obs, info = env.reset()
        terminated = False
        while not terminated:
            legal = info["legal_actions"]
            obs, reward, terminated, truncated, info = env.step(answer(legal[rng.randrange(len(legal))]))
            steps += 1
    return clock() - start, steps


def textarena_games(games: int, seed: int) -> tuple[float, int]:
    """Seconds and steps for ``games`` random Tic-Tac-Toe games through TextArena's env
    (the unwrapped ``TicTacToe-v0``: both seats answer ``[cell]`` with a random free cell)."""
    import textarena

    env = textarena.make("TicTacToe-v0")
    while hasattr(env, "env"):  # the game itself, without TextArena's agent-facing wrappers
        env = env.env
    rng = random.Random(seed)
    steps = 0
    start = clock()
    for game in range(games):
        env.reset(num_players=2, seed=seed + game)
        done = False
        while not done:
            env.get_observation()
            board = env.state.game_state["board"]
            free = [cell for cell in range(9) if board[cell // 3][cell % 3] == ""]
            done, _ = env.step(action=f"[{free[rng.randrange(len(free))]}]")
            steps += 1
    return clock() - start, steps


def has_textarena() -> bool:
    """Whether TextArena is installed."""
    try:
        import textarena  # noqa: F401
    except ImportError:
        return False
    return True


def aec_games(env: AECEnv, games: int, seed: int) -> tuple[float, int]:
    """Seconds and agent steps for ``games`` games of the PettingZoo AEC env, both seats
    answering with random legal tagged actions (the waiting seat's pass turn counts too)."""
    rng = random.Random(seed)
    steps = 0
    start = clock()
    for game in range(games):
        env.reset(seed=seed + game)
        for _ in env.agent_iter():
            _, _, terminated, truncated, info = env.last()
            legal = info["legal_actions"]
            env.step(None if terminated or truncated else text_answer(rng.choice(legal)) if legal else "")
            steps += 1
    return clock() - start, steps


def text_answer(name: str) -> str:
    """The tagged answer a model is asked for."""
    return f"<action>{name}</action>"


def numeric_answer(action: int) -> int:
    """An action id as it is."""
    return action


def mcts_latency(simulations: int, moves: int, seed: int) -> tuple[float, float]:
    """Mean seconds per opening move of C++ and Python MCTS (random rollouts, uct_c 1.4)."""
    from open_spiel.python.algorithms import mcts

    game = pyspiel.load_game("tic_tac_toe")
    cpp = pyspiel.MCTSBot(game, pyspiel.RandomRolloutEvaluator(1, seed), 1.4, simulations, 1000, True, seed, False)
    py = mcts.MCTSBot(game, 1.4, simulations, mcts.RandomRolloutEvaluator(1, np.random.RandomState(seed)),
                      random_state=np.random.RandomState(seed), solve=True)
    timings = []
    for bot in (cpp, py):
        start = clock()
        for _ in range(moves):
            bot.step(game.new_initial_state())
        timings.append((clock() - start) / moves)
    return timings[0], timings[1]


def compare(label: str, games: int, aec: int, repeats: int, seed: int) -> dict[str, Any]:
    """Print raw, text, numeric and PettingZoo games per second for one game, best of
    ``repeats`` (the loops alternate within each repeat); the figures as a dict."""
    game_string, text_cls, numeric_cls, aec_module = GAMES[label]
    loops = {
        "raw pyspiel": (games, lambda: raw_pyspiel(game_string, games, seed)),
        "text env": (games, lambda: env_games(text_cls(opponent="random"), games, seed, text_answer)),
        "numeric env": (games, lambda: env_games(numeric_cls(opponent="random"), games, seed, numeric_answer)),
        "pettingzoo": (aec, lambda: aec_games(aec_module.env(), aec, seed)),
    }
    if game_string == "tic_tac_toe" and has_textarena():
        loops["textarena"] = (games, lambda: textarena_games(games, seed))
    best = dict.fromkeys(loops, float("inf"))
    steps = dict.fromkeys(loops, 0)
    for _ in range(repeats):
        for name, (_, loop) in loops.items():
            seconds, steps[name] = loop()
            best[name] = min(best[name], seconds)
    raw_rate = games / best["raw pyspiel"]
    figures: dict[str, Any] = {"games": games, "repeats": repeats, "loops": {}}
    print(f"{label}, random games, best of {repeats}")
    for name, seconds in best.items():
        rate = loops[name][0] / seconds
        unit = "agent decisions/s" if name == "raw pyspiel" else "env steps/s"
        ratio = "" if name in ("raw pyspiel", "textarena") else f"  ratio to raw: {rate / raw_rate:.3g}x"
        print(f"  {name:12s}: {rate:10.0f} games/s {steps[name] / seconds:10.0f} {unit}{ratio}")
        figures["loops"][name] = {"games_per_s": rate, "steps_per_s": steps[name] / seconds,
                                  "ratio_to_raw": rate / raw_rate}
    if "textarena" in best:
        print(f"  text env / TextArena: {best['textarena'] / best['text env']:.2f}x games/s")
        figures["text_over_textarena"] = best["textarena"] / best["text env"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", type=int, default=20000)
    parser.add_argument("--aec-games", type=int, default=2000, help="games for the PettingZoo loop")
    parser.add_argument("--repeats", type=int, default=3, help="best of N, alternating the loops")
    parser.add_argument("--game", choices=[*GAMES, "all"], default="all")
    parser.add_argument("--mcts-moves", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--textarena-path", help="a folder to import TextArena from (e.g. a pip --target folder)")
    parser.add_argument("--json", help="write the figures to this JSON file")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help="time the loops by wall or CPU time")
    args = parser.parse_args()
    global clock
    clock = CLOCKS[args.clock]
    if args.textarena_path:
        sys.path.append(args.textarena_path)  # after the environment's own packages
    results: dict[str, Any] = {"textarena": has_textarena(), "clock": args.clock}
    for label in GAMES if args.game == "all" else [args.game]:
        results[label] = compare(label, args.games, args.aec_games, args.repeats, args.seed)
    if args.mcts_moves:
        cpp, py = mcts_latency(100, args.mcts_moves, args.seed)
        print(f"Tic-Tac-Toe opening move, MCTS-100: C++ {cpp * 1e3:.2f} ms, Python {py * 1e3:.2f} ms ({py / cpp:.0f}x)")
        results["mcts_100_ms"] = {"cpp": cpp * 1e3, "python": py * 1e3}
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1)


if __name__ == "__main__":
    main()
