"""SmolLM2-135M + LoRA on an H200: what 40-150 iterations of the CPU config do.

The runs were made by ``benchmarks/gpu_smollm2.sh`` (``mage train --config
examples/smollm2_kuhn.yaml --device cuda`` with the config's settings of then: adapters on every
layer, LoRA alpha 32, 8 x 8 meta-episodes, 40 iterations; the same code as on CPU, bfloat16 by ``dtype:
auto``); their metrics and evaluations are kept in ``benchmarks/results/smollm2-gpu/``. This
script re-derives the tables from them, without the GPU:

* ``s0``-``s2``: the config as it stood (8 groups x 8 copies, 40 iterations), each
  evaluated untrained and trained (120 stratified meta-episodes per style);
* ``big-s0``: 16 x 8 copies (stopped by its time limit at iteration 37, not evaluated);
* ``long-*``: up to 150 iterations without evaluation (stopped by the time limit), with the
  config's entropy weight (0.03) and with 0.1: training returns by tens of iterations.

    python benchmarks/smollm2_gpu.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learning import HELDOUT, TRAINING, mean_ci  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "smollm2-gpu"


def hands(report: dict, style: str) -> tuple[float, float, float]:
    """(first hand, final hand, deal-known ceiling on the instances evaluated) against ``style``."""
    entry = report["opponents"][style]
    returns = entry["mean_return_by_episode"]
    return returns[0], returns[-1], entry["instance_optimal_value"]


def evaluated_table(folder: Path) -> str:
    """Untrained and trained returns by style over the evaluated seeds, mean and 95% CI."""
    seeds = sorted(p for p in folder.glob("s[0-9]*") if (p / "eval.json").exists())
    lines = [f"{len(seeds)} seeds ({', '.join(p.name for p in seeds)}), mean ± 95% CI over seeds",
             "| opponent | untrained, hand 3 | trained, hand 1 | trained, hand 3 | hand 3 − hand 1 | "
             "trained − untrained (hand 3) | deal-known ceiling |",
             "|---|---|---|---|---|---|---|"]
    for style in TRAINING + HELDOUT:
        untrained = [hands(json.loads((p / "eval_untrained.json").read_text()), style) for p in seeds]
        trained = [hands(json.loads((p / "eval.json").read_text()), style) for p in seeds]
        cells = [mean_ci([t[1] for t in untrained]), mean_ci([t[0] for t in trained]), mean_ci([t[1] for t in trained]),
                 mean_ci([t[1] - t[0] for t in trained]), mean_ci([t[1] - u[1] for t, u in zip(trained, untrained)])]
        name = style + (" (held out)" if style in HELDOUT else "")
        lines.append(f"| {name} | " + " | ".join(f"{m:+.3f} ± {h:.3f}" for m, h in cells)
                     + f" | {np.mean([t[2] for t in trained]):+.3f} |")
    return "\n".join(lines)


def training_windows(folder: Path, width: int = 10) -> str:
    """Training returns of hands 1 and 3, the entropy and the clip fraction, by windows of iterations."""
    lines = []
    for run in sorted(folder.iterdir()):
        metrics_file = run / "metrics.jsonl"
        if not run.is_dir() or not metrics_file.exists():
            continue
        metrics = [json.loads(line) for line in metrics_file.read_text().splitlines()]
        seconds = np.mean([m["seconds"] for m in metrics])
        lines.append(f"{run.name}: {len(metrics)} iterations, {metrics[0]['meta_episodes']} meta-episodes each, "
                     f"{seconds:.1f} s per iteration")
        for start in range(0, len(metrics), width):
            window = metrics[start:start + width]
            mean = {key: float(np.mean([m[key] for m in window]))
                    for key in ("return_ep1", "return_ep3", "entropy", "clip_fraction")}
            lines.append(f"  iterations {start + 1:>3}-{start + len(window):<3} hand 1 {mean['return_ep1']:+.2f}  "
                         f"hand 3 {mean['return_ep3']:+.2f}  entropy {mean['entropy']:.3f}  "
                         f"clip {mean['clip_fraction']:.2f}")
    return "\n".join(lines)


def main() -> None:
    print(evaluated_table(RESULTS))
    print()
    print(training_windows(RESULTS))


if __name__ == "__main__":
    main()
