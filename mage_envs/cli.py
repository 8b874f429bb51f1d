"""The ``mage`` command line: list environments and opponents, evaluate built-in agents.

Examples::

    mage envs
    mage opponents kuhn_poker
    mage eval --env-id mage/KuhnPoker-meta-v0 --agent best-response --opponents trainable
    mage eval --agent bayes --opponents conservative,aggressive,intermediate --env-options '{"repeat_instance": false}'
    mage train --output-dir runs/kuhn          # the trainer (needs the [agent] extra)
    mage eval --agent policy --model runs/kuhn                # its newest checkpoint
    mage eval --agent openai --base-url http://127.0.0.1:8000/v1 --model MODEL   # needs the [api] extra
    mage serve --port 8000 --token "$TOKEN"    # the envs over OpenEnv (needs the [serve] extra)
    mage view runs/kuhn --serve                # runs/kuhn/report.html, served on 127.0.0.1:8765
    mage exploitability --model runs/kuhn       # exact NashConv of a checkpoint's first hand
    mage tournament --agents nash,aggressive,best-response,bayes,runs/kuhn   # a round robin
    mage tournament --agents nash,aggressive,openai:MODEL --base-url http://127.0.0.1:8000/v1   # an API model too
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import gymnasium as gym

from .agents.openai_chat import APIError, OpenAIChatAgent
from .agents.prompting import INSTRUCTIONS
from .eval_protocol import (
    DEFAULT_HELDOUT,
    DEFAULT_POPULATION,
    EVAL_META_EPISODES,
    EVAL_SEED,
    EvalSettings,
    eval_settings,
    protocol_opponents,
    training_population,
)
from .evaluation import evaluate
from .opponents.registry import RESERVED_POPULATION_NAMES, TABLE_PREFIX, archetype, list_opponents
from .oracle.adaptive import BayesAdaptiveAgent
from .oracle.agents import BestResponseAgent, RandomLegalAgent
from .registration import check_env_id, check_env_options
from .transcripts import TRANSCRIPT_STEPS, start_transcript

if TYPE_CHECKING:
    from .tournament import Entrant

GAMES = ("kuhn_poker", "leduc_poker", "tic_tac_toe")
#: ``mage eval --agent`` choices: reference agents, local models (mage_agent, torch), API models.
AGENTS = ("random", "best-response", "bayes", "policy", "react", "reflexion", "openai")
MODEL_AGENTS = ("policy", "react", "reflexion")
DEFAULT_ENV = "mage/KuhnPoker-meta-v0"
DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
PROTOCOL_OPPONENTS = (*DEFAULT_POPULATION, *DEFAULT_HELDOUT)


def parse_pairs(pairs: Sequence[str], flag: str = "--env-kwarg") -> dict[str, Any]:
    """``KEY=VALUE`` pairs as a dict, each value read as JSON where it parses; a pair without
    ``=`` or without a key exits with an error that names ``flag``.

    Example:
        >>> parse_pairs(["seat=0", "packed_forward=false", "name=x"])
        {'seat': 0, 'packed_forward': False, 'name': 'x'}
        >>> parse_pairs(["seat"], flag="--candidate")
        Traceback (most recent call last):
        SystemExit: error: --candidate expects KEY=VALUE, got 'seat'
    """
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"error: {flag} expects KEY=VALUE, got {pair!r}")
        try:
            kwargs[key] = json.loads(raw)
        except json.JSONDecodeError:
            kwargs[key] = raw
    return kwargs


def _cmd_envs(args: argparse.Namespace) -> int:
    for env_id in sorted(i for i in gym.registry if i.startswith("mage/")):
        print(env_id)
    return 0


def _cmd_opponents(args: argparse.Namespace) -> int:
    names = list_opponents(args.game)
    for name in names:
        spec = archetype(args.game, name)
        print(f"{name:<28} {spec.split:<9} {spec.description}")
    print("\ntrainable: a training population may hold it; heldout: for evaluation only (mage train refuses it).")
    heldout = protocol_opponents(args.game)[1]
    print(f"mage train's default population (what it trains against): {', '.join(training_population(args.game))}; "
          f"its evaluations add {', '.join(heldout)}.")
    return 0


def _agent_arguments(name: str, args: argparse.Namespace, settings: EvalSettings) -> dict[str, Any]:
    """``evaluate`` keyword arguments for a reference agent or the API agent."""
    if name == "random":
        return {"agent": RandomLegalAgent(seed=settings.seed)}
    if name == "best-response":
        return {"agent": None, "make_agent": BestResponseAgent}
    if name == "bayes":  # its prior: the opponents evaluated, equally likely
        prior = settings.opponents
        return {"agent": None, "make_agent": lambda env: BayesAdaptiveAgent(env, population=prior)}
    return {"agent": OpenAIChatAgent(
        args.model, args.base_url or DEFAULT_BASE_URL, api_key_env=args.api_key_env, temperature=args.temperature or 0.0,
        max_tokens=_given(args.max_tokens, 256), stop=args.stop, timeout=args.timeout, retries=args.retries,
        concurrency=args.concurrency, prompting=args.prompting or "plain")}


def _transcript_steps(value: int) -> int | None:
    """``--transcript-steps``: a count, or every meta-episode's steps for a negative one."""
    return None if value < 0 else value


def _json_object(text: str) -> dict[str, Any]:
    """``--env-options``: a JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r} ({error})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


#: ``mage eval``'s flags of the release before: (the name ``mage train`` and ``mage eval``
#: share now, where it stores, its type); the old ones still work and say so
#: (``--env-kwarg KEY=VALUE``, repeated, adds one option each).
DEPRECATED_EVAL_FLAGS: dict[str, tuple[str, str, Any]] = {
    "--env": ("--env-id", "env", str), "--meta-episodes": ("--eval-meta-episodes", "meta_episodes", int),
    "--seed": ("--eval-seed", "seed", int), "--max-tokens": ("--max-new-tokens", "max_tokens", int),
    "--env-kwarg": ("--env-options", "env_kwarg", str),
}


class Deprecated(argparse.Action):
    """A flag kept under its old name: it stores as ``new`` does (``append``: adds to a
    list) and prints a note to use ``new``."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str, append: bool = False,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, **kwargs)
        self.new, self.append = new, append

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"mage: {option_string} is deprecated: use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, [*getattr(namespace, self.dest, []), values] if self.append else values)


def _given(value: int | None, default: int) -> int:
    return default if value is None else value


def _agents_of(args: argparse.Namespace) -> list[str]:
    """The agents to evaluate (default: policy for a model, openai for a URL, else the reference agents)."""
    if args.agent:
        agents = list(args.agent)
    elif args.base_url:
        agents = ["openai"]
    else:
        agents = ["policy"] if args.model else ["random", "best-response"]
    if args.model is None and any(a in MODEL_AGENTS or a == "openai" for a in agents):
        raise ValueError(f"--agent {'/'.join(a for a in agents if a in (*MODEL_AGENTS, 'openai'))} needs --model: "
                         "a checkpoint folder, a local path, a hub id or smollm2-135m (openai: the name the server "
                         "serves, listed by GET <base-url>/models)")
    local = [a for a in agents if a in MODEL_AGENTS]
    if local and (args.temperature is not None or args.stop):   # refused rather than silently ignored
        raise ValueError("--temperature and --stop apply to --agent openai only; a local model samples with its "
                         f"checkpoint's settings (--agent {'/'.join(local)})")
    if args.prompting and agents != ["openai"]:
        raise ValueError("--prompting applies to --agent openai only (the local models have --agent react/reflexion)")
    if args.env is not None:  # a misspelt id fails before a model loads
        check_env_id(args.env)
    return agents


def _cmd_eval(args: argparse.Namespace) -> int:
    agents = _agents_of(args)
    env_kwargs = {**parse_pairs(getattr(args, "env_kwarg", None) or []), **args.env_options}
    if args.env is not None or args.model is None:  # else a checkpoint's env, checked when its config is built
        check_env_options(args.env or DEFAULT_ENV, env_kwargs)
    if args.opponents == "train":
        print("mage: --opponents train is deprecated: use trainable (every archetype a training population may "
              "hold, not a run's population)", file=sys.stderr)
        args.opponents = "trainable"
    opponents = None if args.opponents is None else (
        args.opponents if args.opponents in RESERVED_POPULATION_NAMES else args.opponents.split(","))
    for agent_name in agents:
        if agent_name in MODEL_AGENTS:
            _evaluate_model(agent_name, args, opponents, env_kwargs)
            continue
        settings = reference_settings(agent_name, args.env or DEFAULT_ENV, opponents, args.meta_episodes, args.seed,
                                      env_kwargs, args.prompting)
        print(f"mage: {settings.describe()}", file=sys.stderr)
        arguments = _agent_arguments(agent_name, args, settings)
        name = getattr(arguments["agent"], "name", agent_name)
        output = Path(args.output_dir or "runs/eval")
        transcript = start_transcript(output / f"transcript_{name}.jsonl", args.resume, args.overwrite)
        report = evaluate(
            env_id=settings.env_id,
            opponents=settings.opponents,
            meta_episodes=settings.meta_episodes,
            seed=settings.seed,
            env_kwargs=settings.env_kwargs,
            oracle=not args.no_oracle,
            progress=not args.quiet,
            agent_name=name,
            transcript=transcript,
            transcript_steps=_transcript_steps(args.transcript_steps),
            **arguments,
        )
        path = report.save(output / f"eval_{name}.json")
        print(report.table())
        print(f"saved {path} and {transcript}\n")
    return 0


def reference_settings(agent: str, env_id: str, opponents: str | list[str] | None = None,
                       meta_episodes: int | None = None, seed: int | None = None,
                       env_options: dict[str, Any] | None = None, prompting: str | None = None) -> EvalSettings:
    """What ``mage eval --agent random|best-response|bayes|openai`` plays: the protocol of
    ``mage train``'s final evaluation (:mod:`mage_envs.eval_protocol`), each flag given over
    it. An API model reads the full prompts (the rules) and writes reflections only with
    ``--prompting reflexion``.

    Example:
        >>> reference_settings("openai", DEFAULT_ENV, prompting="reflexion").env_kwargs["reflection"]
        True
    """
    api = agent == "openai"
    return eval_settings(env_id, opponents, meta_episodes, seed, env_options, reflection=api and prompting == "reflexion",
                         prompt_style="full" if api else "compact")


def _evaluate_model(agent: str, args: argparse.Namespace, opponents: str | list[str] | None,
                    env_kwargs: dict[str, object]) -> None:
    """``--agent policy|react|reflexion``: handled by ``mage_agent`` (needs torch)."""
    agent_cli = _agent_cli()
    # the notes `mage train` shows (which forward runs, the oracles' work); --quiet hides transformers' bars too
    with agent_cli.notes_to_stderr(), agent_cli.library_progress_bars(not args.quiet):
        agent_cli.evaluate_model(
            args.model, agent, env_id=args.env, opponents=opponents,
            meta_episodes=args.meta_episodes, seed=args.seed, env_options=env_kwargs, max_new_tokens=args.max_tokens,
            output_dir=args.output_dir, resume=args.resume, overwrite=args.overwrite, progress=not args.quiet,
            transcript_steps=_transcript_steps(args.transcript_steps))


def _agent_cli() -> Any:
    try:
        from mage_agent import cli as agent_cli
    except ImportError as error:
        raise _MissingExtra(f"this command needs the trainer's dependencies ({error.name} is missing): "
                            'pip install torch==2.13.0 && pip install -e ".[agent]"') from None
    return agent_cli


class _MissingExtra(Exception):
    """An optional dependency the command needs is not installed."""


def _cmd_view(args: argparse.Namespace) -> int:
    from .view import serve, write_report

    path = write_report(args.run_dir, args.output, replays_per_opponent=args.replays)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB; it opens offline in any browser)")
    if args.serve:
        serve(path, args.host, args.port, allow_remote=args.allow_remote)
    return 0


def _cmd_exploitability(args: argparse.Namespace) -> int:
    _agent_cli()  # the [agent] extra, or a clear error
    from mage_agent.exploitability import exploitability_main

    if args.env is not None:
        check_env_id(args.env)
    exploitability_main(args.model, env_id=args.env, output_dir=args.output_dir, later_hands=args.later_hands,
                        eval_meta_episodes=args.eval_meta_episodes, progress=not args.quiet)
    return 0


#: ``mage tournament``'s flags for ``openai:MODEL`` entrants (destination -> default); each
#: defaults to ``None`` in the parser, so that one given without such an entrant is refused.
TOURNAMENT_API_DEFAULTS: dict[str, Any] = {
    "base_url": DEFAULT_BASE_URL, "api_key_env": "OPENAI_API_KEY", "api_samples": 8, "temperature": 1.0,
    "concurrency": 8, "max_tokens": 256, "timeout": 60.0, "retries": 4, "prompting": "plain", "stop": None,
}
#: The prefix of an API model entrant: ``openai:MODEL``.
OPENAI_PREFIX = "openai:"


def _api_options(args: argparse.Namespace, api_entrants: Sequence[str]) -> dict[str, Any]:
    """The ``openai:MODEL`` flags with their defaults; refused when given without such an entrant."""
    given = [f"--{dest.replace('_', '-')}" for dest in TOURNAMENT_API_DEFAULTS if getattr(args, dest) is not None]
    if given and not api_entrants:
        raise ValueError(f"{', '.join(given)} apply to openai:MODEL entrants only (none in --agents)")
    options = {dest: default if getattr(args, dest) is None else getattr(args, dest)
               for dest, default in TOURNAMENT_API_DEFAULTS.items()}
    if options["api_samples"] < 1:
        raise ValueError(f"--api-samples must be >= 1, got {options['api_samples']}")
    return options


def _api_entrant(name: str, env_id: str, options: dict[str, Any], output: Path) -> Entrant:
    """``openai:MODEL`` as an entrant: its first hand sampled through the API; the table is
    saved to ``output`` (replayable as ``table:PATH``)."""
    import dataclasses
    import re

    from .opponents.table import save_table
    from .tournament import sampled_entrant

    model = name[len(OPENAI_PREFIX):]
    if not model:
        raise ValueError("openai:MODEL needs the model's name (the one GET <base-url>/models lists)")
    agent = OpenAIChatAgent(
        model, options["base_url"], api_key_env=options["api_key_env"], temperature=options["temperature"],
        max_tokens=options["max_tokens"], stop=options["stop"], timeout=options["timeout"],
        retries=options["retries"], concurrency=options["concurrency"], prompting=options["prompting"], name=name)
    print(f"mage: {name}: asking {agent.url} {options['api_samples']} times at every information state's first-hand "
          f"prompt (temperature {options['temperature']:g}, {options['concurrency']} requests at a time)",
          file=sys.stderr)
    try:
        entrant = sampled_entrant(env_id, agent, options["api_samples"], name=name)
    except APIError as error:
        raise APIError(f"{name} could not be tabulated: {error}", error.status) from None
    path = save_table(entrant.table, output / f"policy_{re.sub(r'[^A-Za-z0-9._-]+', '_', name)}.json")
    print(f"mage: {name}: {entrant.details['note']}; its table: {path}", file=sys.stderr)
    return dataclasses.replace(entrant, details={**entrant.details, "base_url": options["base_url"],
                                                 "table_file": str(path)})


def _cmd_tournament(args: argparse.Namespace) -> int:
    from .registration import game_of
    from .tournament import ORACLES, Entrant, archetype_entrant, plot_tournament, round_robin

    check_env_id(args.env)
    game = game_of(args.env)
    if game not in ("kuhn_poker", "leduc_poker"):
        raise ValueError(f"mage tournament plays Kuhn or Leduc Poker, not {args.env}")
    known = list_opponents(game)
    names = [n.strip() for n in args.agents.split(",") if n.strip()]
    options = _api_options(args, [n for n in names if n.startswith(OPENAI_PREFIX)])
    output = Path(args.output_dir)
    entrants = []
    for name in names:
        if name in ORACLES:
            entrants.append(Entrant(name, kind=name))
        elif name.startswith(OPENAI_PREFIX):
            entrants.append(_api_entrant(name, args.env, options, output))
        elif name in known or name.startswith(TABLE_PREFIX):
            entrants.append(archetype_entrant(game, name))
        elif Path(name).exists():
            _agent_cli()
            from mage_agent.exploitability import load_run, measure

            policy, config, _ = load_run(name, args.env)
            _, table = measure(policy, config)
            entrants.append(Entrant("/".join(Path(name).resolve().parts[-2:]), table, in_prior=False))
        else:
            raise ValueError(f"{name!r} is neither an archetype of {game} ({', '.join(known)}), "
                             f"{' nor '.join(ORACLES)}, a table:PATH, openai:MODEL, nor a checkpoint folder")
    result = round_robin(game, entrants, games=args.games, seed=args.seed)
    path = result.save(output / "tournament.json")
    plot = plot_tournament(result, output / "tournament.png")
    print(result.table())
    print(f"saved {path} and {plot}")
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    try:
        from .server import ServerSettings, serve
    except ImportError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    settings = ServerSettings(
        token=args.token,
        max_sessions=args.max_sessions,
        max_sessions_per_client=args.max_sessions_per_client,
        idle_timeout=args.idle_timeout,
        http_idle_timeout=args.http_idle_timeout,
        ws_ping_interval=args.ws_ping_interval,
        ws_ping_timeout=args.ws_ping_timeout,
        max_body_bytes=args.max_body_bytes,
        default_env=args.env,
    )
    serve(settings, args.host, args.port, allow_unauthenticated=args.allow_unauthenticated)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mage", description="MAGE: meta-RL environments for language agents.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("train", help="train a policy (see `mage train --help`; needs the [agent] extra)")

    envs = sub.add_parser("envs", help="list the registered environment ids")
    envs.set_defaults(func=_cmd_envs)

    opponents = sub.add_parser("opponents", help="list a game's opponent archetypes")
    opponents.add_argument("game", choices=GAMES)
    opponents.set_defaults(func=_cmd_opponents)

    ev = sub.add_parser("eval", help="evaluate an agent per opponent and episode index, beside the oracle values",
                        description="Evaluate reference agents, local models (policy, react, reflexion: the [agent] "
                        "extra) or an OpenAI-compatible API model (openai: the [api] extra). Every finished "
                        "meta-episode is appended to <output-dir>/transcript_<agent>.jsonl (the steps of the first "
                        "--transcript-steps per opponent, the results of all); --resume continues an interrupted "
                        "evaluation without replaying them. By default every agent is evaluated as `mage train`'s final "
                        "evaluation evaluates (the same opponents, meta-episodes, seeds, 3 episodes, no reflections, "
                        "an invalid answer retried twice at -1 each; a checkpoint: its run's settings, so its "
                        "eval.json is reproduced), and the settings are printed; deliberately different: a model "
                        "mage did not train (openai, a pretrained local model) reads the full prompts with the rules, "
                        "and reflections are written only with --prompting reflexion or --agent reflexion. "
                        "The flags are named as in `mage train`; the names of the release "
                        "before (--env, --meta-episodes, --seed, --max-tokens, --env-kwarg KEY=VALUE) still work, with a "
                        "note.")
    ev.add_argument("--agent", action="append", choices=AGENTS,
                    help="agent(s) to evaluate; repeat the flag for several (default: policy with --model, openai "
                    "with --base-url, else random and best-response). bayes: the Bayes-optimal agent of "
                    "fresh-deal Kuhn Poker (--env-options '{\"repeat_instance\": false}'), whose prior is the --opponents")
    ev.add_argument("--model", "--checkpoint", dest="model", default=None,
                    help="policy/react/reflexion: a run folder (its newest checkpoint), a checkpoint folder "
                    "(.../checkpoints/iter-N), a local model path, a hub id or smollm2-135m; openai: the model name the "
                    "server serves")
    ev.add_argument("--env-id", dest="env", default=None, metavar="ID",
                    help=f"environment id (default: a checkpoint's, else {DEFAULT_ENV})")
    ev.add_argument("--opponents", default=None, help="trainable, heldout, all, or comma-separated archetype ids "
                    f"(default: the protocol's population and held-out archetypes, {', '.join(PROTOCOL_OPPONENTS)}, "
                    "where the game has them, else its trainable then its held-out ones; a checkpoint: its run's "
                    "training population and held-out ones)")
    ev.add_argument("--eval-meta-episodes", dest="meta_episodes", type=int, default=None, metavar="N",
                    help=f"meta-episodes per opponent (default: {EVAL_META_EPISODES}; a checkpoint: its run's)")
    ev.add_argument("--eval-seed", dest="seed", type=int, default=None, metavar="SEED",
                    help=f"meta-episode j uses seed + j (default: {EVAL_SEED}; a checkpoint: its run's)")
    ev.add_argument("--env-options", type=_json_object, default={}, metavar="JSON",
                    help='further gym.make arguments (JSON object, e.g. \'{"seat": 0, "num_episodes": 5}\'; '
                    "a checkpoint's are kept, these override them)")
    ev.add_argument("--output-dir", default=None, help="where eval_<agent>.json and transcript_<agent>.jsonl go "
                    "(default: a checkpoint's run folder, else runs/eval)")
    ev.add_argument("--transcript-steps", type=int, default=TRANSCRIPT_STEPS, metavar="N",
                    help="per opponent, the meta-episodes (the first N by index) whose every prompt and answer the "
                    "transcript keeps, for `mage view`; the others keep their results, which is all --resume needs "
                    "(-1: every meta-episode's; default: %(default)s)")
    ev.add_argument("--resume", action="store_true", help="continue the evaluation in --output-dir's transcript")
    ev.add_argument("--overwrite", action="store_true", help="remove an earlier transcript in --output-dir first")
    ev.add_argument("--max-new-tokens", dest="max_tokens", type=int, default=None, metavar="N",
                    help="answer budget in tokens (default: openai 256; local models: the checkpoint's or 128)")
    for old, (new, dest, kind) in DEPRECATED_EVAL_FLAGS.items():   # the names of the release before
        ev.add_argument(old, dest=dest, type=kind, action=Deprecated, new=new, append=dest == "env_kwarg",
                        help=argparse.SUPPRESS)
    ev.add_argument("--no-oracle", action="store_true", help="skip the best-response / equilibrium columns "
                    "(random, best-response, openai)")
    ev.add_argument("--quiet", action="store_true", help="no progress bar")
    api = ev.add_argument_group("openai: any OpenAI-compatible endpoint (OpenAI, vLLM, transformers serve)")
    api.add_argument("--base-url", default=None, help=f"API root (default: {DEFAULT_BASE_URL})")
    api.add_argument("--api-key-env", default="OPENAI_API_KEY",
                     help="environment variable holding the API key; unset: no Authorization header "
                     "(default: %(default)s)")
    api.add_argument("--prompting", choices=list(INSTRUCTIONS), default=None,
                     help="instructions added to acting prompts: plain (zero-shot), react (think, then act) or "
                     "reflexion (reflections between episodes, sets reflection=true) (default: plain)")
    api.add_argument("--concurrency", type=int, default=8, help="requests in flight at most (default: %(default)s)")
    api.add_argument("--temperature", type=float, default=None, help="(default: 0)")
    api.add_argument("--stop", action="append", default=None, metavar="TEXT", help="stop string; repeat for several")
    api.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default: %(default)s)")
    api.add_argument("--retries", type=int, default=4,
                     help="retries of a request after a timeout, a connection error, HTTP 429/5xx or a malformed "
                     "body, with exponential backoff (default: %(default)s)")
    ev.set_defaults(func=_cmd_eval)

    vw = sub.add_parser("view", help="write a run's HTML report (curves, evaluation, replays), optionally serve it",
                        description="Write RUN_DIR/report.html: training curves, the evaluation by episode index "
                        "beside the oracle values, replays of the transcripts' meta-episodes and a side-by-side of two "
                        "agents on the same one. One self-contained file: nothing is fetched when it is opened.")
    vw.add_argument("run_dir", metavar="RUN_DIR", help="a training run's --output-dir or an evaluation's")
    vw.add_argument("--output", default=None, help="where the page goes (default: RUN_DIR/report.html)")
    vw.add_argument("--replays", type=int, default=20,
                    help="per agent and opponent, the meta-episodes with steps the page replays at most "
                    "(default: %(default)s)")
    vw.add_argument("--serve", action="store_true", help="then serve the page over HTTP until Ctrl-C")
    vw.add_argument("--host", default="127.0.0.1", help="address to bind with --serve (default: %(default)s, loopback)")
    vw.add_argument("--port", type=int, default=8765, help="port with --serve (default: %(default)s; 0: any free one)")
    vw.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    vw.set_defaults(func=_cmd_view)
    ex = sub.add_parser("exploitability", help="the exact exploitability of a trained policy (Kuhn, Leduc)",
                        description="Tabulate a checkpoint's policy at every information state (the env's own "
                        "prompt, seat by seat, empty memory) from its action-token probabilities, and compute "
                        "OpenSpiel's NashConv and exploitability. Writes exploitability.json, policy.json "
                        "(information state -> action probabilities) and best_response.json (the best-response-to "
                        "archetype's table). Needs the [agent] extra.")
    ex.add_argument("--model", required=True, help="a checkpoint folder (.../checkpoints/iter-N), a run folder (its "
                    "newest checkpoint) or tiny (the untrained embedded model)")
    ex.add_argument("--env-id", "--env", dest="env", default=None, help="environment id (default: the checkpoint's)")
    ex.add_argument("--output-dir", default=None, help="(default: <run folder>/exploitability)")
    ex.add_argument("--later-hands", action="store_true",
                    help="also hand 2 given the memory of every hand 1, and with repeated deals hand 3 given every "
                    "reachable pair (Kuhn Poker): their exploitability and exact returns by hand per archetype")
    ex.add_argument("--eval-meta-episodes", type=int, default=0,
                    help="also play that many meta-episodes against best-response-to in the env (default: none)")
    ex.add_argument("--quiet", action="store_true", help="no progress bar")
    ex.set_defaults(func=_cmd_exploitability)

    tr = sub.add_parser("tournament", help="a round robin among agents on Kuhn or Leduc Poker: payoffs, ratings",
                        description="Every agent plays every other from both seats over stratified deals (each "
                        "opening deal the same number of times): the payoff matrix with 95%% CIs and its exact "
                        "values, OpenSkill ratings, tournament.json and tournament.png. Checkpoints play their "
                        "first-hand policy, tabulated (the [agent] extra). An API model (openai:MODEL, the [api] "
                        "extra) plays the first-hand policy estimated from --api-samples answers at every "
                        "information state's prompt (the full prompt `mage eval --agent openai` shows, empty "
                        "memory); its answers that name no legal action are counted and left out, and a state "
                        "with none valid is played uniformly and listed. Its table is saved as "
                        "policy_openai_MODEL.json (replay it with table:PATH).")
    tr.add_argument("--agents", required=True,
                    help="comma-separated: archetype ids, best-response (the best response to each opponent), bayes "
                    "(the best response to the listed archetypes, equally likely), table:PATH, checkpoint or run "
                    "folders, openai:MODEL (the model the server at --base-url serves; repeat for several models)")
    tr.add_argument("--env-id", "--env", dest="env", default=DEFAULT_ENV, help="environment id (default: %(default)s)")
    tr.add_argument("--games", type=int, default=100, help="games per opening deal and seat (default: %(default)s)")
    tr.add_argument("--seed", type=int, default=0, help="(default: %(default)s)")
    tr.add_argument("--output-dir", default="runs/tournament", help="(default: %(default)s)")
    tapi = tr.add_argument_group("openai:MODEL entrants: any OpenAI-compatible endpoint (as mage eval --agent openai)")
    tapi.add_argument("--base-url", default=None, help=f"API root (default: {DEFAULT_BASE_URL})")
    tapi.add_argument("--api-key-env", default=None, help="environment variable holding the API key; unset: no "
                      "Authorization header (default: OPENAI_API_KEY)")
    tapi.add_argument("--api-samples", type=int, default=None, metavar="N",
                      help="answers sampled per information state, one request each (default: 8)")
    tapi.add_argument("--temperature", type=float, default=None,
                      help="(default: 1, the model's own distribution; 0 with --api-samples 1: its greedy answer, "
                      "as mage eval plays it by default)")
    tapi.add_argument("--concurrency", type=int, default=None, help="requests in flight at most (default: 8)")
    tapi.add_argument("--max-new-tokens", dest="max_tokens", type=int, default=None, metavar="N",
                      help="answer budget in tokens (default: 256)")
    tapi.add_argument("--prompting", choices=["plain", "react"], default=None,
                      help="instructions added to the prompts, as mage eval --prompting (default: plain)")
    tapi.add_argument("--stop", action="append", default=None, metavar="TEXT", help="stop string; repeat for several")
    tapi.add_argument("--timeout", type=float, default=None, help="seconds per request (default: 60)")
    tapi.add_argument("--retries", type=int, default=None,
                      help="retries of a request after a timeout, a connection error, HTTP 429/5xx or a malformed "
                      "body, with exponential backoff; then the tournament stops with the error (default: 4)")
    tr.set_defaults(func=_cmd_tournament)

    sv = sub.add_parser("serve", help="serve the envs over the OpenEnv protocol (needs the [serve] extra)")
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s, loopback only)")
    sv.add_argument("--port", type=int, default=8000, help="(default: %(default)s)")
    sv.add_argument("--token", default=os.environ.get("MAGE_SERVE_TOKEN") or None,
                    help="bearer token required on every route but /health (default: $MAGE_SERVE_TOKEN)")
    sv.add_argument("--max-sessions", type=int, default=64,
                    help="open sessions at most; when full, the least recently used idle HTTP session makes room "
                    "(default: %(default)s)")
    sv.add_argument("--max-sessions-per-client", type=int, default=None,
                    help="open sessions per client address at most (default: no cap)")
    sv.add_argument("--idle-timeout", type=float, default=600.0,
                    help="seconds without a message before a WebSocket session is closed (default: %(default)s)")
    sv.add_argument("--http-idle-timeout", type=float, default=60.0,
                    help="seconds without a request before an HTTP session is reaped (default: %(default)s)")
    sv.add_argument("--ws-ping-interval", type=float, default=20.0,
                    help="seconds between pings on each WebSocket (default: %(default)s)")
    sv.add_argument("--ws-ping-timeout", type=float, default=20.0,
                    help="seconds a ping waits for its pong before the socket and its session are dropped "
                    "(default: %(default)s)")
    sv.add_argument("--max-body-bytes", type=int, default=1 << 20,
                    help="largest HTTP body or WebSocket message (default: %(default)s)")
    sv.add_argument("--env", default="mage/KuhnPoker-v0", help="env of a reset without env_id (default: %(default)s)")
    sv.add_argument("--allow-unauthenticated", action="store_true",
                    help="allow a non-loopback --host without --token (only on a network that is yours alone)")
    sv.set_defaults(func=_cmd_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["train"]:  # the trainer's flags are its config fields: mage_agent parses them
        try:
            return _agent_cli().train_main(argv[1:])
        except _MissingExtra as error:
            print(f"error: `mage train`: {error}", file=sys.stderr)
            return 2
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (KeyError, ValueError, TypeError, FileExistsError, FileNotFoundError, ImportError, _MissingExtra) as error:
        message = error.args[0] if error.args else str(error)
        print(f"error: {message}", file=sys.stderr)
        return 2
    except APIError as error:
        hint = ("\nThe finished meta-episodes are in the transcript: rerun with --resume to continue."
                if args.command == "eval" else "")
        print(f"error: {error}{hint}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
