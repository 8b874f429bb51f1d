"""What the first hand's equilibrium anchor costs: `mage train`'s default against the same run
with ``equilibrium_coef: 1``, side by side in one process.

Both trainers (same seed, default config otherwise, exploitability probe off) run their
iterations alternately, one each in turn, so a busy machine slows both alike; the ratio of
their mean seconds per iteration is the anchor's overhead (its KL at the 12 first-hand
information states, forward and backward, before every optimizer step). The default run's
length (900 iterations) times its measured seconds per iteration gives each run's expected
time.

    python benchmarks/anchor_overhead.py --iterations 60 --output benchmarks/results/anchor-overhead.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def main() -> None:
    from mage_agent.config import TrainConfig, apply_overrides
    from mage_agent.trainer import Trainer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp())
    runs = {name: Trainer(apply_overrides(TrainConfig(), {
        "output_dir": str(root / name), "equilibrium_coef": coef, "exploitability_every": 0, "eval_meta_episodes": 0,
        "tensorboard": False}), progress=False) for name, coef in (("default", 0.0), ("equilibrium_coef 1", 1.0))}
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for iteration in range(args.iterations):
        for name, trainer in runs.items():
            start = time.perf_counter()
            trainer.run_iteration(iteration)
            seconds[name].append(time.perf_counter() - start)
    full = TrainConfig().run.iterations
    result = {"iterations": args.iterations, "runs": {
        name: {"seconds_per_iteration": round(sum(s) / len(s), 4), f"expected_seconds_for_{full}": round(sum(s) / len(s) * full)}
        for name, s in seconds.items()}}
    base, anchored = (result["runs"][name]["seconds_per_iteration"] for name in runs)
    result["ratio"] = round(anchored / base, 3)
    print(json.dumps(result, indent=1))
    if args.output:
        args.output.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
