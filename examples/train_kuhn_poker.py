"""Train the embedded tiny model with the MAGE recipe on Kuhn Poker, top to bottom.

The same steps `mage train` runs, spelled out: build the config, collect lockstep
rollouts against a population of opponent archetypes, assign credit across the episodes
of each meta-episode, compute per-archetype group advantages, update with PPO-clip, and
finally evaluate by episode index against the exact oracle values.

    python examples/train_kuhn_poker.py --iterations 100 --output-dir runs/example-kuhn

It takes every ``mage train`` flag with its meaning (``--help`` lists them with this
example's defaults; ``--eval-meta-episodes 0`` skips the evaluation).
"""

from __future__ import annotations

from pathlib import Path

from mage_agent.cli import config_from_args, evaluate_policy, parse_train_args, train_parser
from mage_agent.config import TrainConfig, apply_overrides
from mage_agent.trainer import Trainer

#: The recipe: differential reward, a population of three styles, per-archetype advantage
#: normalisation, the paper's discounts (0.95 within, 0.6 across episodes).
RECIPE = {
    "env_id": "mage/KuhnPoker-meta-v0",
    "num_episodes": 3,
    "reward_mode": "differential",
    "population": {"conservative": 1.0, "aggressive": 1.0, "intermediate": 1.0},
    "scope": "per-archetype",
    "gamma_step": 0.95,
    "gamma_traj": 0.6,
    "iterations": 100,
    "eval_meta_episodes": 200,
    "output_dir": "runs/example-kuhn",
}


def main(argv: list[str] | None = None) -> int:
    # 1. The config: the recipe, then any `mage train` flag given, with the CLI's meaning.
    base = apply_overrides(TrainConfig(), RECIPE)
    parser = train_parser(base, prog="train_kuhn_poker.py", description=__doc__.splitlines()[0])
    args = parse_train_args(parser, argv)
    if args.resume and args.overwrite:
        parser.error("--resume continues the run in --output-dir and --overwrite removes it: pass one")
    try:
        config = config_from_args(args, base)
        # 2. The trainer builds the tiny model (or loads config.model.name_or_path), the
        #    optimizer and the lockstep rollout runner.
        trainer = Trainer(config, resume=args.resume, progress=False, overwrite=args.overwrite)
    except (ValueError, FileExistsError) as error:
        parser.error(str(error))

    # 3. Each iteration: collect -> credit (returns + advantages) -> PPO update -> log.
    for iteration in range(trainer.start_iteration, config.run.iterations):
        batch = trainer.collect(iteration)
        turns, advantages, diagnostics = trainer.credit(batch)   # diagnostics: per-archetype credit health
        stats = trainer.update(turns, advantages, iteration)
        metrics = trainer.summarise(iteration, batch, {**diagnostics, **stats}, rollout_seconds=1.0, seconds=1.0)
        if (iteration + 1) % 10 == 0 and not args.quiet:
            print(f"iter {iteration + 1:4d}  return by episode "
                  + " ".join(f"{metrics[f'return_ep{i + 1}']:+.3f}" for i in range(config.env.num_episodes))
                  + f"  entropy {stats.get('entropy', float('nan')):.3f}")

    # 4. Evaluate per archetype and episode index, beside the exact best-response values
    #    (`--eval-meta-episodes 0` skips it, as it does for `mage train`).
    if config.run.eval_meta_episodes:
        evaluate_policy(trainer.policy, config, Path(config.run.output_dir) / "eval.json", "example",
                        progress=not args.quiet)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
