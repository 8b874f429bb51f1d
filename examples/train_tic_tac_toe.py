"""Train the embedded tiny model with the MAGE recipe on Tic-Tac-Toe.

A population of fixed-order heuristics (each exploitable by a different line of play)
and a random player; three games per meta-episode on the same seat. Against this pool the
opponent's replies within one game already tell the orders apart: the best non-adaptive
value equals the mean best response (+0.992 a game, ``best_nonadaptive_value``), so the
example measures learning to play, not learning across games (of the registered
archetypes, ``random``, ``greedy`` and ``minimax`` on the second seat leave the most room
for that: 0.076 a game). Evaluation covers held-out orders the agent never met in training.

    python examples/train_tic_tac_toe.py --iterations 150 --output-dir runs/example-ttt [--threads 2]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mage_agent.cli import evaluate_policy
from mage_agent.config import TrainConfig, apply_overrides
from mage_agent.trainer import Trainer

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=150)
    parser.add_argument("--eval-meta-episodes", type=int, default=100)
    parser.add_argument("--output-dir", default="runs/example-ttt")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads: 2 on an idle 2-core machine is 1.55x faster (default: %(default)s)")
    parser.add_argument("--overwrite", action="store_true", help="replace an earlier run in --output-dir")
    args = parser.parse_args()

    config = example_config(args.iterations, args.eval_meta_episodes, args.output_dir, args.seed, args.threads)
    trainer = Trainer(config, overwrite=args.overwrite)
    trainer.train()
    evaluate_policy(trainer.policy, config, Path(args.output_dir) / "eval.json", "example")


if __name__ == "__main__":
    main()
