"""Solve Leduc Poker with OpenSpiel's C++ CFR+ and ship the average policy as JSON.

The result, ``mage_envs/data/leduc_cfr_policy.json``, backs the ``nash`` and
``cfr-argmax`` Leduc opponents (re-solving at run time would cost ~9 s per process).
The file holds ``metadata`` (solver, iterations, decimals, nash_conv, game value for
player 0, solve seconds) and ``policy``: ``{information state: {action: probability}}``
over every decision node, probabilities rounded to ``--decimals`` places and summing to
one. One information state per line keeps diffs readable.

Example:
    .venv/bin/python scripts/solve_leduc.py --iterations 1000 --decimals 4
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pyspiel

from mage_envs.opponents.base import tabulate_policy

GAME = "leduc_poker"
DEFAULT_OUTPUT = Path(__file__).resolve().parents[1] / "mage_envs" / "data" / "leduc_cfr_policy.json"
Table = dict[str, dict[int, float]]


def solve(game: pyspiel.Game, iterations: int) -> Table:
    """CFR+'s average policy after ``iterations``, tabulated over all information states."""
    solver = pyspiel.CFRPlusSolver(game)
    for _ in range(iterations):
        solver.evaluate_and_update_policy()
    return tabulate_policy(game, solver.average_policy())


def round_probs(probs: dict[int, float], decimals: int) -> dict[int, float]:
    """Round to ``decimals`` places; the most likely action (lowest on ties) takes the rest.

    Example:
        >>> round_probs({0: 0.33333, 1: 0.33333, 2: 0.33334}, 2)
        {0: 0.33, 1: 0.33, 2: 0.34}
    """
    rounded = {a: round(probs[a], decimals) for a in sorted(probs)}
    best = max(rounded, key=lambda a: probs[a])
    rounded[best] = round(1.0 - sum(p for a, p in rounded.items() if a != best), decimals)
    return rounded


def evaluate(game: pyspiel.Game, table: Table) -> tuple[float, float]:
    """(NashConv, expected return of player 0) of ``table`` played by both seats."""
    policy = pyspiel.TabularPolicy({key: list(probs.items()) for key, probs in table.items()})
    nash_conv = pyspiel.nash_conv(game, policy)
    value = pyspiel.expected_returns(game.new_initial_state(), policy, -1, True)[0]
    return nash_conv, value


def to_json(metadata: dict, table: Table) -> str:
    """The file's text: compact, one information state per line, keys sorted."""
    lines = [
        f"{json.dumps(key)}:{json.dumps({str(a): p or 0 for a, p in probs.items()}, separators=(',', ':'))}"
        for key, probs in sorted(table.items())
    ]
    return '{"metadata":' + json.dumps(metadata) + ',\n"policy":{\n' + ",\n".join(lines) + "\n}}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=1000, help="CFR+ iterations")
    parser.add_argument("--decimals", type=int, default=4, help="decimal places kept per probability")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="where to write the JSON")
    args = parser.parse_args()

    game = pyspiel.load_game(GAME)
    start = time.perf_counter()
    raw = solve(game, args.iterations)
    seconds = time.perf_counter() - start
    table = {key: round_probs(probs, args.decimals) for key, probs in raw.items()}
    raw_nash_conv, _ = evaluate(game, raw)
    nash_conv, value = evaluate(game, table)
    metadata = {
        "game": GAME,
        "solver": "pyspiel.CFRPlusSolver",
        "iterations": args.iterations,
        "decimals": args.decimals,
        "nash_conv": round(nash_conv, 7),
        "nash_conv_unrounded": round(raw_nash_conv, 7),
        "value_player0": round(value, 7),
        "solve_seconds": round(seconds, 1),
        "information_states": len(table),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(to_json(metadata, table))
    print(json.dumps(metadata, indent=1))
    print(f"wrote {args.output} ({args.output.stat().st_size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
