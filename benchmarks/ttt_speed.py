"""Training time per iteration of two settings, side by side (by default the plain forward
and the packed one).

Trains the Tic-Tac-Toe example's configuration (``examples/train_tic_tac_toe.py``; ``--env
kuhn``: ``mage train``'s defaults) twice in one process, with the ``--baseline`` settings
then the ``--candidate`` ones (default ``packed_forward`` off, then on), for ``--warmup`` +
``--iterations`` iterations each. It prints the seconds per timed iteration, split into
sampling, the rest of the rollout (environment steps, prompts) and the update, the ratio of
the two, and whether the per-iteration metrics agree: the returns exactly, the other metrics
(loss diagnostics, log-probs) to ``--tolerance``. It exits non-zero when they do not. The
machine may be shared: compare the ratio, not the seconds.

Run: ``python benchmarks/ttt_speed.py [--env ttt] [--iterations 3] [--warmup 1] [--groups 16]
[--baseline threads=1 --candidate threads=2]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from mage_agent.config import TrainConfig, apply_overrides
from mage_agent.trainer import Trainer
from mage_envs.cli import parse_pairs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from train_tic_tac_toe import example_config  # noqa: E402

#: Metrics that the rollouts alone decide: equal to the last bit, or the runs differ.
EXACT = ("meta_episodes", "return_", "success_", "final_return/", "invalid_rate", "return_spread/",
         "advantage_scale/", "zero_advantage_groups/")
#: Metrics that measure time, not results.
TIMES = ("seconds", "tokens_per_second")


@dataclass
class Run:
    """One training run: its per-iteration metrics and its stages' seconds per iteration."""

    history: list[dict[str, Any]]
    stages: dict[str, list[float]] = field(default_factory=dict)


def config_of(env: str, iterations: int, groups: int, settings: dict[str, Any], output_dir: str) -> TrainConfig:
    """The benchmarked configuration: the example's (``ttt``) or the defaults (``kuhn``), with ``settings``."""
    base = example_config() if env == "ttt" else TrainConfig()
    fixed = {"iterations": iterations, "eval_meta_episodes": 0, "tensorboard": False, "checkpoint_every": 0,
             "output_dir": output_dir}
    if clash := sorted(set(settings) & set(fixed)):
        raise SystemExit(f"the benchmark sets {', '.join(clash)} itself: compare other settings")
    overrides: dict[str, Any] = {**fixed, **({"groups_per_iteration": groups} if groups else {}), **settings}
    return apply_overrides(base, overrides)


def timed(owner: Any, name: str, record: Callable[[float], None]) -> None:
    """Replace the method ``owner.name`` by one that passes each call's seconds to ``record``."""
    original: Callable = getattr(owner, name)

    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            record(time.perf_counter() - started)

    setattr(owner, name, wrapper)


def train(config: TrainConfig) -> Run:
    """Train ``config``, timing each iteration's sampling calls, the rest of its rollout and its update."""
    trainer = Trainer(config, progress=False)
    run = Run([], {"sampling": [], "rollout rest": [], "update": []})
    sampling = [0.0]   # seconds in the sampler's generate calls so far
    timed(trainer.sampler, "generate", lambda seconds: sampling.__setitem__(0, sampling[0] + seconds))

    def rollout(seconds: float) -> None:
        run.stages["sampling"].append(sampling[0])
        run.stages["rollout rest"].append(seconds - sampling[0])
        sampling[0] = 0.0

    timed(trainer, "collect", rollout)
    timed(trainer, "update", run.stages["update"].append)
    run.history = trainer.train()
    run.stages["iteration"] = [m["seconds"] for m in run.history]
    return run


def disagreements(old: list[dict[str, Any]], new: list[dict[str, Any]], tolerance: float) -> tuple[list[str], float]:
    """The metrics that differ (exact ones at all, others beyond ``tolerance``, relative to
    max(1, |value|)), and the largest difference of the others."""
    bad, largest = [], 0.0
    for a, b in zip(old, new, strict=True):
        for key in sorted(set(a) | set(b)):
            if key in TIMES:
                continue
            x, y = a.get(key), b.get(key)
            if key.startswith(EXACT) or not isinstance(x, float) or not isinstance(y, float):
                if x != y:
                    bad.append(f"iteration {a['iteration']} {key}: {x!r} != {y!r}")
                continue
            gap = abs(x - y) / max(1.0, abs(x))
            largest = max(largest, gap)
            if gap > tolerance:
                bad.append(f"iteration {a['iteration']} {key}: {x!r} vs {y!r}")
    return bad, largest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=("ttt", "kuhn"), default="ttt",
                        help="the Tic-Tac-Toe example's config or `mage train`'s defaults (default: %(default)s)")
    parser.add_argument("--iterations", type=int, default=3, help="timed iterations (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=1, help="iterations before the timed ones (default: %(default)s)")
    parser.add_argument("--groups", type=int, default=0, help="groups per iteration (default: the config's)")
    parser.add_argument("--tolerance", type=float, default=1e-5,
                        help="largest relative difference of a float metric (default: %(default)s)")
    parser.add_argument("--baseline", nargs="+", default=["packed_forward=false"], metavar="NAME=VALUE",
                        help="settings of the first run (default: %(default)s)")
    parser.add_argument("--candidate", nargs="+", default=["packed_forward=true"], metavar="NAME=VALUE",
                        help="settings of the second run (default: %(default)s)")
    args = parser.parse_args()

    total = args.warmup + args.iterations
    labels = {"baseline": " ".join(args.baseline), "candidate": " ".join(args.candidate)}
    runs = {}
    with tempfile.TemporaryDirectory() as folder:
        configs = {label: config_of(args.env, total, args.groups, parse_pairs(pairs, flag=f"--{label}"),
                                    f"{folder}/{label}")
                   for label, pairs in (("baseline", args.baseline), ("candidate", args.candidate))}
        for label, config in configs.items():  # both settings checked before either trains
            runs[label] = train(config)
    print(f"{args.env}: {args.iterations} timed iterations after {args.warmup} warm-up, seconds per iteration")
    mean = {}
    for label, run in runs.items():
        means = {stage: sum(values[args.warmup:]) / args.iterations for stage, values in run.stages.items()}
        mean[label] = means["iteration"]
        print(f"  {label} ({labels[label]}) " + "  ".join(f"{stage} {value:7.3f}" for stage, value in means.items()))
    print(f"speed-up baseline/candidate: {mean['baseline'] / mean['candidate']:.2f}x")
    bad, largest = disagreements(runs["baseline"].history, runs["candidate"].history, args.tolerance)
    print(f"metrics agree: {'yes' if not bad else 'NO'} (returns exactly; largest other difference {largest:.2e})")
    for line in bad:
        print("  " + line)
    if bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
