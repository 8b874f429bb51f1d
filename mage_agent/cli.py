"""``mage train`` and ``mage eval --checkpoint``: the trainer's command line.

Every config field is a flag (``--gamma-traj 0.6``, ``--scope global``); ``--config``
reads a YAML file first; flags override it.

Examples::

    mage train                                   # the embedded default, on CPU
    mage train --output-dir runs/kuhn --scope global --group-opponents mixed
    mage train --output-dir runs/kuhn --resume   # continue a killed run
    torchrun --nproc-per-node 4 --no-python mage train --device cuda   # 4 GPUs, data parallel
    mage eval --checkpoint runs/kuhn/checkpoints/iter-000300
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any, Callable, Sequence

from mage_envs.evaluation import evaluate
from mage_envs.registration import game_of

from .agents import PolicyAgent, react_agent, reflexion_agent
from .build import build_policy, env_kwargs, population_of, sampling_of
from .config import TrainConfig, apply_overrides, choices_of, did_you_mean, field_index, help_of, load_config
from .plots import plot_evaluation, plot_training
from .policy import Policy


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    """An argparse ``type`` that refuses a value outside ``choices`` with the closest one."""

    def parse(text: str) -> str:
        if text not in choices:
            raise argparse.ArgumentTypeError(
                f"invalid choice {text!r}{did_you_mean(text, choices)} (choose from {', '.join(choices)})")
        return text

    return parse


def parse_train_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, where an unknown flag is answered with the closest known one."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        flags = [option for action in parser._actions for option in action.option_strings]
        parts = [word + did_you_mean(word.split("=")[0], flags) if word.startswith("--") else word for word in unknown]
        parser.error(f"unrecognized arguments: {' '.join(parts)}")
    return args


def train_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mage train", description="Train a MAGE policy (defaults: the embedded "
                                     "tiny model on mage/KuhnPoker-meta-v0, on CPU).")
    parser.add_argument("--config", help="YAML file with model/env/rollout/algo/run sections")
    parser.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --output-dir")
    parser.add_argument("--overwrite", action="store_true",
                        help="remove an earlier run's logs, checkpoints and evaluations from --output-dir first")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    defaults = TrainConfig()
    for name, (section, f) in field_index(defaults).items():
        section_config = getattr(defaults, section)
        default = getattr(section_config, name)
        choices = choices_of(type(section_config), name)
        kind: Any = type(default)
        if choices is not None:
            kind = _choice(choices)
        elif kind is bool:
            kind = _parse_bool
        elif kind in (list, dict):
            kind = json.loads
        details = f"default: {json.dumps(default)}" + (f"; choices: {', '.join(choices)}" if choices else "")
        help_text = f"[{section}] {help_of(f)} ({details})".replace("%", "%%")
        parser.add_argument(_flag(name), dest=name, type=kind, choices=choices, default=argparse.SUPPRESS,
                            help=help_text)
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The config file (if any), then the flags given on the command line."""
    config = load_config(args.config) if args.config else TrainConfig()
    overrides = {name: getattr(args, name) for name in field_index(config) if hasattr(args, name)}
    return apply_overrides(config, overrides)


def evaluate_policy(
    policy: Policy, config: TrainConfig, path: Path, name: str, progress: bool = True, agent: PolicyAgent | None = None,
    verbose: bool = True,
) -> dict:
    """Evaluate on the training and held-out archetypes; write ``path`` (JSON) and a PNG,
    and print the table unless ``verbose`` is false.

    ``agent`` defaults to the policy itself (sampling as in training); the prompting
    baselines pass theirs."""
    from mage_envs.oracle import best_nonadaptive_value

    if agent is None:
        agent = PolicyAgent(policy, sampling_of(config), action_tokens=config.rollout.action_tokens,
                            seed=config.run.eval_seed, name=name, answer_prefix=config.rollout.answer_prefix,
                            answer_question=config.rollout.answer_question)
    kwargs = env_kwargs(config)
    opponents = kwargs.get("opponent")
    report = evaluate(agent, config.env.env_id, opponents=opponents, meta_episodes=config.run.eval_meta_episodes,
                      seed=config.run.eval_seed, env_kwargs={k: v for k, v in kwargs.items() if k != "opponent"},
                      progress=progress, agent_name=name)
    game = config.env.env_id
    data = report.to_dict()
    data["env_kwargs"] = {k: (dataclasses.asdict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else v)
                          for k, v in data["env_kwargs"].items()}
    population = population_of(config)
    data["training_population"] = population
    nonadaptive = None
    game_string = game_of(game)  # not None when there is a population
    if population and game_string and all(o.get("best_response_exact") for o in data["opponents"].values()):
        nonadaptive = best_nonadaptive_value(game_string, population, kwargs["seat"]).value * config.env.reward_scale
    data["best_nonadaptive_value"] = nonadaptive
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str))
    plot_evaluation(data, path.with_suffix(".png"))
    if not verbose:
        return data
    print(report.table())
    if nonadaptive is None:
        print(f"saved {path} and {path.with_suffix('.png')}")
        return data
    print(f"best non-adaptive value against the training population: {nonadaptive:+.3f}")
    for opponent, result in data["opponents"].items():
        first, final = result["mean_return_by_episode"][0], result["mean_return_by_episode"][-1]
        line = (f"  {opponent:<16} return ep1 {first:+.3f} -> ep{len(result['mean_return_by_episode'])} {final:+.3f}"
                f"  gap to best response {result['best_response_value'] - final:+.3f}")
        if result.get("instance_optimal_value") is not None:
            line += f"  gap to the instance ceiling {result['instance_optimal_value'] - final:+.3f}"
        print(line + f"  adaptation gain over non-adaptive {final - nonadaptive:+.3f}")
    print(f"saved {path} and {path.with_suffix('.png')}")
    return data


def train_main(argv: Sequence[str]) -> int:
    from .trainer import Trainer

    parser = train_parser()
    args = parse_train_args(parser, argv)
    try:
        config = config_from_args(args)
        population_of(config)  # unknown or held-out archetypes fail here, before the model loads
    except (ValueError, OSError) as error:
        parser.error(str(error))
    output = Path(config.run.output_dir)
    if args.resume and args.overwrite:
        parser.error("--resume continues the run in --output-dir and --overwrite removes it: pass one")
    try:
        trainer = Trainer(config, resume=args.resume, progress=not args.quiet, overwrite=args.overwrite)
    except FileExistsError as error:
        parser.error(str(error))
    main = trainer.world.is_main  # under torchrun, rank 0 writes and evaluates
    if main:
        (output / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
    if main and config.run.eval_meta_episodes and trainer.start_iteration == 0:
        evaluate_policy(trainer.policy, config, output / "eval_untrained.json", "untrained", progress=not args.quiet)
    trainer.train()
    if main and (output / "metrics.jsonl").exists():
        plot_training(output / "metrics.jsonl", output / "training.png")
    if main and config.run.eval_meta_episodes:
        evaluate_policy(trainer.policy, config, output / "eval.json", "trained", progress=not args.quiet)
    trainer.world.barrier()
    trainer.world.close()
    return 0


def eval_main(argv: Sequence[str]) -> int:
    """``mage eval --checkpoint DIR [--agent policy|react|reflexion]``."""
    parser = argparse.ArgumentParser(prog="mage eval", description="Evaluate a checkpoint or a model.")
    parser.add_argument("--checkpoint", "--model", dest="checkpoint", required=True,
                        help="a checkpoint folder (.../checkpoints/iter-N), a local model path or a hub id")
    parser.add_argument("--env", default=None, help="environment id (default: the checkpoint's, else KuhnPoker-meta)")
    parser.add_argument("--agent", choices=["policy", "react", "reflexion"], default="policy")
    parser.add_argument("--meta-episodes", type=int, default=None)
    parser.add_argument("--max-new-tokens", type=int, default=None, help="generation budget per answer")
    parser.add_argument("--output", default=None, help="where eval.json goes (default: next to the checkpoint)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    if args.env is not None:  # a misspelt id fails here, before the model loads
        try:
            apply_overrides(TrainConfig(), {"env_id": args.env})
        except ValueError as error:
            parser.error(str(error))
    folder = Path(args.checkpoint)
    state_file = folder / "state.json"
    if state_file.exists():
        config = TrainConfig.from_dict(json.loads(state_file.read_text())["config"])
        run_dir = folder.parent.parent
        policy = build_policy(config, run_dir, folder)
    else:
        config = apply_overrides(TrainConfig(), {"name_or_path": args.checkpoint, "action_tokens": False,
                                                 "max_new_tokens": 128, "prompt_style": "full"})
        run_dir = folder if folder.is_dir() else Path("runs") / "eval"
        policy = build_policy(config, run_dir)
    if args.meta_episodes is not None:
        config = apply_overrides(config, {"eval_meta_episodes": args.meta_episodes})
    if args.env is not None:
        config = apply_overrides(config, {"env_id": args.env})
    if args.max_new_tokens is not None:
        config = apply_overrides(config, {"max_new_tokens": args.max_new_tokens})
    if args.agent != "policy":
        config = apply_overrides(config, {"action_tokens": False, "reflection": args.agent == "reflexion"})
    output = Path(args.output) if args.output else run_dir / f"eval_{args.agent}.json"
    agent = None
    if args.agent != "policy":
        builder = react_agent if args.agent == "react" else reflexion_agent
        agent = builder(policy, sampling_of(config), seed=config.run.eval_seed)
    evaluate_policy(policy, config, output, args.agent, progress=not args.quiet, agent=agent)
    return 0
