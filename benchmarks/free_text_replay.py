"""Replay a run's next iterations from one of its checkpoints, with other loss settings.

Copies ``--checkpoint`` into a scratch run folder per ``--format-coef`` value and trains
``--iterations`` iterations from there with the checkpoint's own config, only
``algo.format_coef`` changed. The rollouts draw the same seeds, so with the run's own settings
the replay repeats the run bit for bit, and another setting shows what it would have changed.
Writes each iteration's invalid-answer rate, ``choice_mass``, approx. KL, KL to the reference,
gradient norm, ``sampling_gap`` and hand-1 return to ``benchmarks/results/free-text-replay.json``.

The SmolLM2 free-text run of docs/training-results.md broke at iteration 82 (23% invalid
answers); its iteration-80 checkpoint is in the repository's history:

    git archive 05b345e benchmarks/results/smollm2-parked/smollm2-free-text-s1/checkpoints/iter-000080 \\
        | tar -x -C /tmp
    python benchmarks/free_text_replay.py --format-coef 0 1 \\
        --checkpoint /tmp/benchmarks/results/smollm2-parked/smollm2-free-text-s1/checkpoints/iter-000080
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KEYS = ("iteration", "invalid_rate", "choice_mass", "approx_kl", "kl", "grad_norm", "sampling_gap", "return_ep1")


def replay(checkpoint: Path, format_coef: float, iterations: int, scratch: Path, threads: int) -> list[dict[str, Any]]:
    """The metrics of ``iterations`` iterations trained from ``checkpoint`` with ``format_coef``."""
    from mage_agent.config import TrainConfig, apply_overrides
    from mage_agent.trainer import Trainer

    folder = scratch / f"format-coef-{format_coef:g}"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(checkpoint, folder / "checkpoints" / checkpoint.name)
    (folder / "checkpoints" / "latest").write_text(checkpoint.name)
    stored = TrainConfig.from_dict(json.loads((checkpoint / "state.json").read_text())["config"])
    config = apply_overrides(stored, {"output_dir": str(folder), "format_coef": format_coef, "eval_meta_episodes": 0,
                                      "tensorboard": False, "threads": threads})
    trainer = Trainer(config, resume=True, progress=False)
    rows = []
    for iteration in range(trainer.start_iteration, trainer.start_iteration + iterations):
        metrics, _ = trainer.run_iteration(iteration)
        rows.append({key: metrics[key] for key in KEYS if key in metrics})
        print(f"format_coef {format_coef:g}: {json.dumps(rows[-1])}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, required=True, help="a run's iter-NNNNNN checkpoint folder")
    parser.add_argument("--format-coef", type=float, nargs="+", default=[0.0, 1.0])
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--scratch", type=Path, default=Path("runs/free-text-replay"))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "free-text-replay.json")
    args = parser.parse_args()
    if not (args.checkpoint / "state.json").exists():
        parser.error(f"{args.checkpoint} is no checkpoint folder (no state.json); see this script's docstring")
    runs = {f"{coef:g}": replay(args.checkpoint, coef, args.iterations, args.scratch, args.threads)
            for coef in args.format_coef}
    args.out.write_text(json.dumps({"checkpoint": str(args.checkpoint), "iterations": args.iterations,
                                    "format_coef": runs}, indent=1))


if __name__ == "__main__":
    main()
