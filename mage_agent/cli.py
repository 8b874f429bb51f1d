"""``mage train`` and ``mage eval --agent policy|react|reflexion``: the trainer's side of the command line.

Every config field is a flag (``--gamma-traj 0.6``, ``--scope global``); ``--config``
reads a YAML file first; flags override it.

Examples::

    mage train                                   # the embedded default, on CPU
    mage train --output-dir runs/kuhn --scope global --group-opponents mixed
    mage train --output-dir runs/kuhn --resume   # continue a killed run
    torchrun --nproc-per-node 4 --no-python mage train --device cuda   # 4 GPUs, data parallel
    mage eval --model runs/kuhn                  # its newest checkpoint; mage_envs.cli parses it, evaluate_model runs it
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from mage_envs.cli import Deprecated
from mage_envs.eval_protocol import EvalSettings, protocol_opponents
from mage_envs.evaluation import evaluate
from mage_envs.registration import game_of
from mage_envs.transcripts import TRANSCRIPT_STEPS, start_transcript

from .agents import PolicyAgent, react_agent, reflexion_agent
from .build import build_policy, env_kwargs, eval_env_kwargs, policy_agent, population_of, sampling_of
from .checkpoint import latest_checkpoint, run_folder_of
from .config import TrainConfig, apply_overrides, choices_of, did_you_mean, field_index, help_of, load_config
from .plots import plot_evaluation, plot_training
from .policy import Policy
from .sampling import Sampler

LOG = logging.getLogger(__name__)

def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _optional_float(text: str) -> float | None:
    """A number, or ``null`` / ``none`` for the game's default."""
    if text.lower() in ("null", "none"):
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or null, got {text!r}") from None


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


#: Config fields whose flag is not their name: the name ``mage eval`` uses for the same thing.
FLAG_NAMES = {"name_or_path": "--model"}

TRAIN_DESCRIPTION = "Train a MAGE policy (defaults: the embedded tiny model on mage/KuhnPoker-meta-v0, on CPU)."


def train_parser(defaults: TrainConfig | None = None, prog: str = "mage train",
                 description: str = TRAIN_DESCRIPTION) -> argparse.ArgumentParser:
    """``mage train``'s flags, one per config field, their help showing ``defaults``'
    values (an example's own config; default: :class:`TrainConfig`'s)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", help="YAML file with model/env/rollout/algo/run sections")
    parser.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --output-dir")
    parser.add_argument("--overwrite", action="store_true",
                        help="remove an earlier run's logs, checkpoints and evaluations from --output-dir first")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    defaults = defaults or TrainConfig()
    for name, (section, f) in field_index(defaults).items():
        section_config = getattr(defaults, section)
        default = getattr(section_config, name)
        choices = choices_of(type(section_config), name)
        kind: Any = type(default)
        if choices is not None:
            kind = _choice(choices)
        elif str(f.type) == "float | None":   # a number, or null: the game's
            kind = _optional_float
        elif kind is bool:
            kind = _parse_bool
        elif kind in (list, dict, type(None)):   # JSON; a list's null means "the game's"
            kind = json.loads
        details = f"default: {json.dumps(default)}" + (f"; choices: {', '.join(choices)}" if choices else "")
        help_text = f"[{section}] {help_of(f)} ({details})".replace("%", "%%")
        parser.add_argument(FLAG_NAMES.get(name, _flag(name)), dest=name, type=kind, choices=choices,
                            default=argparse.SUPPRESS, help=help_text)
        if name in FLAG_NAMES:   # the field's own flag, the name of the release before
            parser.add_argument(_flag(name), dest=name, type=kind, action=Deprecated, new=FLAG_NAMES[name],
                                help=argparse.SUPPRESS)
    return parser


def config_from_args(args: argparse.Namespace, base: TrainConfig | None = None) -> TrainConfig:
    """The config file (if any; else ``base``, default :class:`TrainConfig`), then the
    flags given on the command line."""
    config = load_config(args.config) if args.config else base or TrainConfig()
    overrides = {name: getattr(args, name) for name in field_index(config) if hasattr(args, name)}
    return apply_overrides(config, overrides)


def evaluate_policy(
    policy: Policy, config: TrainConfig, path: Path, name: str, progress: bool = True, agent: PolicyAgent | None = None,
    verbose: bool = True, opponents: str | list[str] | None = None, transcript: Path | None = None,
    oracle: bool = True, transcript_steps: int | None = TRANSCRIPT_STEPS, sampler: Sampler | None = None,
) -> dict:
    """Evaluate on the training and held-out archetypes (or ``opponents``); write ``path``
    (JSON, with the ``sampling`` the answers were drawn with) and a PNG, and print the table
    unless ``verbose`` is false. ``oracle=False``
    leaves out the oracle values (an estimate against a search bot costs a tree search).

    ``agent`` defaults to the policy itself (sampling as in training, through ``sampler``
    when given: a trainer's own); the prompting baselines pass theirs. ``transcript``: the JSONL file of finished meta-episodes that
    :func:`~mage_envs.evaluation.evaluate` appends to and resumes from, with the steps of
    the first ``transcript_steps`` per opponent (``None``: all)."""
    from mage_envs.oracle import bayes_adaptive_value, best_nonadaptive_value
    from mage_envs.oracle.adaptive import supports, unsolvable

    if agent is None:
        agent = policy_agent(policy, config, config.run.eval_seed, name, sampler=sampler)
    kwargs = eval_env_kwargs(config)
    settings = EvalSettings(config.env.env_id, opponents or kwargs.get("opponent") or "all",
                            config.run.eval_meta_episodes, config.run.eval_seed,
                            {k: v for k, v in kwargs.items() if k != "opponent"})
    LOG.info("%s", settings.describe())
    with agent.sampler.reusing_prefixes():
        report = evaluate(agent, settings.env_id, opponents=settings.opponents, meta_episodes=settings.meta_episodes,
                          seed=settings.seed, env_kwargs=settings.env_kwargs, progress=progress, agent_name=name,
                          transcript=transcript, oracle=oracle, transcript_steps=transcript_steps)
    game = config.env.env_id
    data = report.to_dict()
    data["env_kwargs"] = {k: (dataclasses.asdict(v) if dataclasses.is_dataclass(v) and not isinstance(v, type) else v)
                          for k, v in data["env_kwargs"].items()}
    population = population_of(config)
    data["training_population"] = population
    data["sampling"] = dataclasses.asdict(agent.sampling)   # what the answers were drawn with
    nonadaptive = None
    game_string = game_of(game)  # not None when there is a population
    if population and game_string and all(o.get("best_response_exact") for o in data["opponents"].values()):
        LOG.info("oracle: the best non-adaptive value against the training population (%s)", ", ".join(population))
        nonadaptive = best_nonadaptive_value(game_string, population, kwargs["seat"]).value * config.env.reward_scale
    data["best_nonadaptive_value"] = nonadaptive
    adaptive = None
    sees_earlier_hands = config.env.memory or config.env.reflection
    if (game_string is not None and supports(game_string) and nonadaptive is not None
            and not config.env.repeat_instance and sees_earlier_hands):
        if reason := unsolvable(game_string, population, config.env.num_episodes):
            LOG.info("oracle: no Bayes-optimal value: %s", reason)
        else:
            LOG.info("oracle: the Bayes-optimal adaptive value over %d hands, then that agent on the %d "
                     "meta-episodes per opponent just evaluated", config.env.num_episodes,
                     config.run.eval_meta_episodes)
            adaptive = bayes_adaptive_value(game_string, population, config.env.num_episodes, kwargs["seat"]).value
            adaptive *= config.env.reward_scale
            data["bayes_by_episode"] = bayes_on_sample(config, population, list(data["opponents"]))
    data["bayes_adaptive_value"] = adaptive
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
    if adaptive is not None:
        line = f"Bayes-optimal adaptive agent's final episode against the training population: {adaptive:+.3f}"
        played = {name: returns[-1] for name, returns in data["bayes_by_episode"].items()}
        if played:   # weighted as the population is, like the value itself
            weight = sum(population[name] for name in played)
            line += f" (on these meta-episodes: {sum(population[n] * v for n, v in played.items()) / weight:+.3f})"
        print(line)
    for opponent, result in data["opponents"].items():
        first, final = result["mean_return_by_episode"][0], result["mean_return_by_episode"][-1]
        line = (f"  {opponent:<16} return ep1 {first:+.3f} -> ep{len(result['mean_return_by_episode'])} {final:+.3f}"
                f"  gap to best response {result['best_response_value'] - final:+.3f}")
        if result.get("instance_optimal_value") is not None:
            line += f"  gap to the instance ceiling {result['instance_optimal_value'] - final:+.3f}"
        print(line + f"  adaptation gain over non-adaptive {final - nonadaptive:+.3f}")
    print(f"saved {path} and {path.with_suffix('.png')}")
    return data


def bayes_on_sample(config: TrainConfig, population: dict[str, float], opponents: list[str]) -> dict[str, list[float]]:
    """Per opponent of the population, the Bayes-optimal agent's mean return by episode index
    on the meta-episodes just evaluated: the same seeds and stratified instances of every
    hand, so the same deals and, against a deterministic archetype, the same sample exactly."""
    from mage_envs.oracle import BayesAdaptiveAgent

    kwargs = {k: v for k, v in env_kwargs(config).items() if k != "opponent"}
    styles = [name for name in opponents if name in population]
    report = evaluate(None, config.env.env_id, opponents=styles, meta_episodes=config.run.eval_meta_episodes,
                      seed=config.run.eval_seed, env_kwargs=kwargs, oracle=False, progress=False, agent_name="bayes",
                      make_agent=lambda env: BayesAdaptiveAgent(env, population=population))
    return {name: result.mean_return_by_episode for name, result in report.opponents.items()}


@contextlib.contextmanager
def notes_to_stderr() -> Iterator[None]:
    """While in the block, ``mage_agent``'s log notes (which forward runs, and why) go to stderr."""
    log = logging.getLogger("mage_agent")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("mage: %(message)s"))
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


@contextlib.contextmanager
def library_progress_bars(shown: bool) -> Iterator[None]:
    """While in the block, transformers' own progress bars (writing shards, loading weights)
    are shown only if ``shown`` (``--quiet`` hides them with MAGE's); restored after."""
    from transformers.utils import logging as hf_logging

    before = hf_logging.is_progress_bar_enabled()
    (hf_logging.enable_progress_bar if shown else hf_logging.disable_progress_bar)()
    try:
        yield
    finally:
        (hf_logging.enable_progress_bar if before else hf_logging.disable_progress_bar)()


def evaluations(config: TrainConfig) -> dict[str, TrainConfig]:
    """The evaluations a run makes, by file-name suffix: ``""`` (``eval.json``) with the
    config's ``eval_env_options``, then ``"_<name>"`` for each of ``extra_evals`` (its
    options over those).

    Example:
        >>> config = apply_overrides(TrainConfig(), {"env_id": "mage/WebShop-meta-v0",
        ...     "eval_env_options": {"instance_split": "eval"}, "extra_evals": {"ood": {"split": "ood"}}})
        >>> {suffix: c.env.eval_env_options for suffix, c in evaluations(config).items()}
        {'': {'instance_split': 'eval'}, '_ood': {'instance_split': 'eval', 'split': 'ood'}}
    """
    runs = {"": config}
    for name, options in config.env.extra_evals.items():
        runs[f"_{name}"] = apply_overrides(config, {"eval_env_options": {**config.env.eval_env_options, **options}})
    return runs


def train_main(argv: Sequence[str] | None = None, base: TrainConfig | None = None, prog: str = "mage train",
               description: str = TRAIN_DESCRIPTION) -> int:
    """``mage train``: train, plot and evaluate; the exit status. An example passes its own
    ``base`` config, so that it takes every ``mage train`` flag with the same meaning."""
    argv = list(sys.argv[1:] if argv is None else argv)
    with notes_to_stderr(), library_progress_bars("--quiet" not in argv):
        return _train(argv, train_parser(base, prog, description), base)


def _train(argv: Sequence[str], parser: argparse.ArgumentParser, base: TrainConfig | None) -> int:
    from .run_lock import RunFolderBusy
    from .trainer import Trainer

    args = parse_train_args(parser, argv)
    try:
        config = config_from_args(args, base)
        population_of(config)  # unknown or held-out archetypes fail here, before the model loads
    except (ValueError, OSError) as error:
        parser.error(str(error))
    output = Path(config.run.output_dir)
    if args.resume and args.overwrite:
        parser.error("--resume continues the run in --output-dir and --overwrite removes it: pass one")
    try:
        trainer = Trainer(config, resume=args.resume, progress=not args.quiet, overwrite=args.overwrite)
    except (FileExistsError, RunFolderBusy) as error:
        parser.error(str(error))
    main = trainer.world.is_main  # under torchrun, rank 0 writes and evaluates
    config = trainer.config   # with the population written out
    if main:
        (output / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
    if main and config.run.eval_meta_episodes and trainer.start_iteration == 0:
        for suffix, evaluated in evaluations(config).items():
            evaluate_policy(trainer.policy, evaluated, output / f"eval_untrained{suffix}.json", "untrained",
                            progress=not args.quiet, sampler=trainer.sampler,
                            transcript=start_transcript(output / f"transcript_untrained{suffix}.jsonl", overwrite=True))
    trainer.train()
    if main and (output / "metrics.jsonl").exists():
        plot_training(output / "metrics.jsonl", output / "training.png")
    if main and config.run.eval_meta_episodes:  # a sample of transcripts, so that every run can be replayed
        for suffix, evaluated in evaluations(config).items():
            evaluate_policy(trainer.policy, evaluated, output / f"eval{suffix}.json", "trained", progress=not args.quiet,
                            sampler=trainer.sampler,
                            transcript=start_transcript(output / f"transcript_trained{suffix}.jsonl", overwrite=True))
    trainer.world.barrier()
    trainer.world.close()
    return 0


def model_eval_config(
    model: str | Path,
    agent: str = "policy",
    env_id: str | None = None,
    meta_episodes: int | None = None,
    seed: int | None = None,
    env_options: dict[str, Any] | None = None,
    max_new_tokens: int | None = None,
) -> TrainConfig:
    """The config :func:`evaluate_model` evaluates with: a checkpoint folder's run config, or
    for any other model :class:`TrainConfig`'s (the protocol of ``mage train``'s final
    evaluation, :mod:`mage_envs.eval_protocol`) with the free-text settings that
    benchmarks/free_text.py chose for a pretrained model, which reads the full prompts;
    then every argument given over it.

    Example:
        >>> config = model_eval_config("smollm2-135m", "reflexion")
        >>> config.env.prompt_style, config.env.reflection, config.run.eval_meta_episodes
        ('full', True, 300)
    """
    state_file = Path(model) / "state.json"
    overrides: dict[str, Any] = {"env_id": env_id, "eval_meta_episodes": meta_episodes, "eval_seed": seed,
                                 "max_new_tokens": max_new_tokens}
    if state_file.exists():
        config = TrainConfig.from_dict(json.loads(state_file.read_text())["config"])
    else:
        config = apply_overrides(TrainConfig(), {"name_or_path": str(model), "action_tokens": False,
                                                 "temperature": 0.3, "max_new_tokens": 128, "prompt_style": "full"})
        game = game_of(env_id or config.env.env_id)
        if game is not None:   # the protocol's opponents of this game, as for any other agent
            population, heldout = protocol_opponents(game)
            overrides.update(population=dict.fromkeys(population, 1.0), heldout=heldout)
    if env_options:
        overrides["env_options"] = {**config.env.env_options, **env_options}
    if agent != "policy":
        overrides.update(action_tokens=False, reflection=agent == "reflexion")
    return apply_overrides(config, {k: v for k, v in overrides.items() if v is not None})


def evaluate_model(
    model: str,
    agent: str = "policy",
    env_id: str | None = None,
    opponents: str | list[str] | None = None,
    meta_episodes: int | None = None,
    seed: int | None = None,
    env_options: dict[str, Any] | None = None,
    max_new_tokens: int | None = None,
    output_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    transcript_steps: int | None = TRANSCRIPT_STEPS,
) -> dict:
    """``mage eval --agent policy|react|reflexion --model MODEL``: evaluate a checkpoint or a model.

    ``model`` is a checkpoint folder (``.../checkpoints/iter-N``, evaluated with its run's
    settings), a run folder (its newest checkpoint), a local model path, a hub id or
    ``smollm2-135m``, evaluated as :func:`model_eval_config` says; every other argument
    overrides its setting when given. ``eval_<agent>.json`` and
    ``transcript_<agent>.jsonl`` go to ``output_dir`` (default: the checkpoint's run folder,
    or the checkpoint folder itself when it is kept outside a run, else ``runs/eval``); an
    earlier transcript there is continued with ``resume``, removed
    with ``overwrite``, else refused (:func:`~mage_envs.transcripts.start_transcript`); it
    keeps the steps of the first ``transcript_steps`` meta-episodes per opponent.
    """
    folder = Path(model)
    latest = latest_checkpoint(folder / "checkpoints")
    if latest is not None:   # a run folder: its newest checkpoint
        LOG.info("evaluating %s, the newest checkpoint of %s", latest.name, folder)
        folder = latest
    checkpoint = (folder / "state.json").exists()
    run_dir = run_folder_of(folder) if checkpoint else folder if folder.is_dir() else Path("runs") / "eval"
    output = Path(output_dir) if output_dir is not None else run_dir if checkpoint else Path("runs") / "eval"
    transcript = start_transcript(output / f"transcript_{agent}.jsonl", resume, overwrite)  # before the model loads
    config = model_eval_config(folder if checkpoint else model, agent, env_id, meta_episodes, seed, env_options,
                               max_new_tokens)
    policy = build_policy(config, run_dir, folder if checkpoint else None)
    player = None
    if agent != "policy":
        builder = react_agent if agent == "react" else reflexion_agent
        player = builder(policy, sampling_of(config), seed=config.run.eval_seed)
    return evaluate_policy(policy, config, output / f"eval_{agent}.json", agent, progress=progress, agent=player,
                           opponents=opponents, transcript=transcript, transcript_steps=transcript_steps)
