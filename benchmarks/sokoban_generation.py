"""Time to generate one Sokoban level (topology, reverse play and the optimal solve).

Every level is built from scratch (the in-process caches are bypassed and cleared), for
instances ``0..levels-1`` of each room size; the table gives milliseconds per level
(mean and percentiles), the attempts it took and the optimal solution length.

Run: ``python benchmarks/sokoban_generation.py [--levels 200]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from mage_envs.tasks.sokoban.generator import generate_level
from mage_envs.tasks.sokoban.solver import solve

#: (width, height, boxes): RAGEN/verl-agent's 6x6 with one box up to gym-sokoban's 10x10 with four.
SIZES = ((6, 6, 1), (7, 7, 2), (8, 8, 2), (8, 8, 3), (10, 10, 3), (10, 10, 4))


def measure(width: int, height: int, boxes: int, levels: int) -> dict[str, float]:
    """Per-level seconds, attempts and optimal lengths for ``levels`` fresh instances."""
    build = generate_level.__wrapped__  # bypass the per-instance cache
    seconds, attempts, moves, pushes = [], [], [], []
    for instance in range(levels):
        solve.cache_clear()
        start = time.perf_counter()
        generated = build(instance, width, height, boxes)
        seconds.append(time.perf_counter() - start)
        attempts.append(generated.attempt + 1)
        moves.append(generated.solution.moves)
        pushes.append(generated.solution.pushes)
    ms = np.array(seconds) * 1e3
    return {
        "mean": float(ms.mean()),
        "p50": float(np.percentile(ms, 50)),
        "p90": float(np.percentile(ms, 90)),
        "p99": float(np.percentile(ms, 99)),
        "max": float(ms.max()),
        "attempts": statistics.mean(attempts),
        "moves": statistics.mean(moves),
        "pushes": statistics.mean(pushes),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, default=200, help="levels per room size (default: %(default)s)")
    args = parser.parse_args()
    print(f"Sokoban level generation + optimal solve, {args.levels} levels per size, milliseconds per level")
    header = f"{'room':>7} {'boxes':>5} | {'mean':>7} {'p50':>7} {'p90':>7} {'p99':>7} {'max':>7} | {'attempts':>8} {'moves':>6} {'pushes':>6}"
    print(header)
    print("-" * len(header))
    for width, height, boxes in SIZES:
        row = measure(width, height, boxes, args.levels)
        print(
            f"{width:>3}x{height:<3} {boxes:>5} | {row['mean']:7.2f} {row['p50']:7.2f} {row['p90']:7.2f} "
            f"{row['p99']:7.2f} {row['max']:7.2f} | {row['attempts']:8.2f} {row['moves']:6.1f} {row['pushes']:6.1f}"
        )


if __name__ == "__main__":
    main()
