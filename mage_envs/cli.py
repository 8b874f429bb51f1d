"""The ``mage`` command line: list environments and opponents, evaluate built-in agents.

Examples::

    mage envs
    mage opponents kuhn_poker
    mage eval --env mage/KuhnPoker-meta-v0 --agent best-response --opponents train
    mage train --output-dir runs/kuhn          # the trainer (needs the [agent] extra)
    mage eval --checkpoint runs/kuhn/checkpoints/iter-000300
    mage serve --port 8000 --token "$TOKEN"    # the envs over OpenEnv (needs the [serve] extra)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

import gymnasium as gym

from .evaluation import evaluate
from .opponents.registry import archetype, list_opponents
from .oracle.agents import BestResponseAgent, RandomLegalAgent

GAMES = ("kuhn_poker", "leduc_poker", "tic_tac_toe")


def _parse_kwargs(pairs: Sequence[str]) -> dict[str, object]:
    """``["seat=0", "reward_scale=5"]`` -> ``{"seat": 0, "reward_scale": 5}`` (JSON values)."""
    kwargs: dict[str, object] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"error: --env-kwarg expects KEY=VALUE, got {pair!r}")
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
    for name in list_opponents(args.game):
        spec = archetype(args.game, name)
        print(f"{name:<28} {spec.split:<8} {spec.description}")
    return 0


def _agent_arguments(name: str, seed: int) -> dict[str, Any]:
    """``evaluate`` keyword arguments for a built-in agent name."""
    if name == "random":
        return {"agent": RandomLegalAgent(seed=seed)}
    return {"agent": None, "make_agent": BestResponseAgent}


def _cmd_eval(args: argparse.Namespace) -> int:
    env_kwargs = _parse_kwargs(args.env_kwarg)
    opponents = args.opponents if args.opponents in ("train", "heldout", "all") else args.opponents.split(",")
    output = Path(args.output_dir)
    for agent_name in args.agent:
        report = evaluate(
            env_id=args.env,
            opponents=opponents,
            meta_episodes=args.meta_episodes,
            seed=args.seed,
            env_kwargs=env_kwargs,
            oracle=not args.no_oracle,
            progress=not args.quiet,
            agent_name=agent_name,
            **_agent_arguments(agent_name, args.seed),
        )
        path = report.save(output / f"eval_{agent_name}.json")
        print(report.table())
        print(f"saved {path}\n")
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
        idle_timeout=args.idle_timeout,
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

    ev = sub.add_parser("eval", help="evaluate built-in agents per opponent and episode index")
    ev.add_argument("--env", default="mage/KuhnPoker-meta-v0", help="environment id (default: %(default)s)")
    ev.add_argument("--agent", action="append", choices=["random", "best-response"],
                    help="agent(s) to evaluate; repeat the flag for several (default: random and best-response)")
    ev.add_argument("--opponents", default="all", help="train, heldout, all, or comma-separated archetype ids")
    ev.add_argument("--meta-episodes", type=int, default=200, help="meta-episodes per opponent (default: %(default)s)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--env-kwarg", action="append", default=[], metavar="KEY=VALUE",
                    help="extra gym.make argument, value parsed as JSON (e.g. seat=0, num_episodes=5)")
    ev.add_argument("--output-dir", default="runs/eval", help="where eval_<agent>.json goes (default: %(default)s)")
    ev.add_argument("--no-oracle", action="store_true", help="skip the best-response / equilibrium columns")
    ev.add_argument("--quiet", action="store_true", help="no progress bar")
    ev.set_defaults(func=_cmd_eval)

    sv = sub.add_parser("serve", help="serve the envs over the OpenEnv protocol (needs the [serve] extra)")
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s, loopback only)")
    sv.add_argument("--port", type=int, default=8000, help="(default: %(default)s)")
    sv.add_argument("--token", default=os.environ.get("MAGE_SERVE_TOKEN") or None,
                    help="bearer token required on every route but /health (default: $MAGE_SERVE_TOKEN)")
    sv.add_argument("--max-sessions", type=int, default=64, help="open sessions at most (default: %(default)s)")
    sv.add_argument("--idle-timeout", type=float, default=600.0,
                    help="seconds without a message before a session is closed (default: %(default)s)")
    sv.add_argument("--max-body-bytes", type=int, default=1 << 20,
                    help="largest HTTP body or WebSocket message (default: %(default)s)")
    sv.add_argument("--env", default="mage/KuhnPoker-v0", help="env of a reset without env_id (default: %(default)s)")
    sv.add_argument("--allow-unauthenticated", action="store_true",
                    help="allow a non-loopback --host without --token (only on a network that is yours alone)")
    sv.set_defaults(func=_cmd_serve)
    return parser


def _agent_command(command: str, argv: Sequence[str]) -> int:
    """``mage train`` / ``mage eval --checkpoint``: handled by ``mage_agent`` (needs torch)."""
    try:
        from mage_agent import cli as agent_cli
    except ImportError as error:
        print(f"error: `mage {command}` needs the trainer's dependencies ({error.name} is missing): "
              'pip install torch==2.13.0 && pip install -e ".[agent]"', file=sys.stderr)
        return 2
    return agent_cli.train_main(argv) if command == "train" else agent_cli.eval_main(argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    model_flags = ("--checkpoint", "--model")
    if argv[:1] == ["train"] or (argv[:1] == ["eval"] and any(a.startswith(model_flags) for a in argv)):
        return _agent_command(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    if getattr(args, "agent", "unset") is None:
        args.agent = ["random", "best-response"]
    try:
        return args.func(args)
    except (KeyError, ValueError, TypeError) as error:
        message = error.args[0] if error.args else str(error)
        print(f"error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
