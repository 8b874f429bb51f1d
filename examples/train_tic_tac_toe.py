"""Train the embedded tiny model with the MAGE recipe on Tic-Tac-Toe.

A population of fixed-order heuristics (each exploitable by a different line of play)
and a random player; three games per meta-episode on the same seat. Against this pool the
opponent's replies within one game already tell the orders apart: the best non-adaptive
value equals the mean best response (+0.992 a game, ``best_nonadaptive_value``), so the
example measures learning to play, not learning across games (of the registered
archetypes, ``random``, ``greedy`` and ``minimax`` on the second seat leave the most room
for that: 0.076 a game). Evaluation covers held-out orders the agent never met in training.

    python examples/train_tic_tac_toe.py --iterations 150 --output-dir runs/example-ttt [--threads 2]

It takes every ``mage train`` flag with its meaning (``--help`` lists them with this
example's defaults; ``--eval-meta-episodes 0`` skips the evaluations, ``--resume``
continues a killed run).
"""

from __future__ import annotations

from mage_agent.cli import train_main
from mage_agent.config import TrainConfig, apply_overrides

TRAIN_POPULATION = {
    "preferred-cell-center-first": 1.0,
    "preferred-cell-corners-first": 1.0,
    "preferred-cell-edges-first": 1.0,
    "preferred-cell-row-major": 1.0,
    "random": 1.0,
}
HELD_OUT = ["preferred-cell-anti-diagonal", "preferred-cell-spiral"]


def example_config(iterations: int = 150, eval_meta_episodes: int = 100, output_dir: str = "runs/example-ttt",
                   seed: int = 0, threads: int = 1) -> TrainConfig:
    """The example's training configuration (``benchmarks/ttt_speed.py`` times it). On a
    2-core machine of its own ``threads=2`` is about 1.55 times faster than one with the same
    returns; on a busy machine two threads wait for each other and run slower than one."""
    return apply_overrides(TrainConfig(), {
        "env_id": "mage/TicTacToe-meta-v0",
        "num_episodes": 3,
        "population": TRAIN_POPULATION,
        "heldout": HELD_OUT,
        "iterations": iterations,
        "eval_meta_episodes": eval_meta_episodes,
        "output_dir": output_dir,
        "seed": seed,
        "threads": threads,
    })


def main(argv: list[str] | None = None) -> int:
    """``mage train`` with this example's config: every ``mage train`` flag, the same meaning."""
    return train_main(argv, base=example_config(), prog="train_tic_tac_toe.py", description=__doc__.splitlines()[0])


if __name__ == "__main__":
    raise SystemExit(main())
