"""Two learners in self-play on PettingZoo's API: the exact exploitability of their first hand over training.

Each seed trains two embedded tiny models against each other through
:class:`~mage_envs.pettingzoo.MetaEpisodeAEC` on Kuhn Poker (:mod:`mage_agent.two_learners`:
the default config otherwise, ``--iterations`` long), measuring the joint first-hand
profile's NashConv and exploitability every ``--every`` iterations. One JSON per seed goes
to ``benchmarks/results/two_learners/`` (a seed with its JSON is skipped: the benchmark
resumes where it stopped); the summary (mean ± 95% CI over seeds at every measured
iteration) to ``benchmarks/results/two_learners.json`` and, with ``--plot``,
``docs/two_learners.png``.

    nice -n 10 python benchmarks/two_learners.py --seeds 0 1 --iterations 200
    python benchmarks/two_learners.py --summarise-only --plot
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from learning import mean_ci  # noqa: E402  (the sibling benchmark's statistics)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def run_seed(seed: int, iterations: int, every: int, output_dir: Path) -> Path:
    """Train one seed unless its JSON exists; the JSON's path."""
    from mage_agent.config import TrainConfig, apply_overrides
    from mage_agent.two_learners import TwoLearners

    out = RESULTS / "two_learners" / f"s{seed}.json"
    if out.exists():
        return out
    config = apply_overrides(TrainConfig(), {"iterations": iterations, "seed": seed, "exploitability_every": every,
                                             "output_dir": str(output_dir / f"s{seed}"), "tensorboard": False})
    started = time.perf_counter()
    history = TwoLearners(config).train()
    track = [{key: m[key] for key in ("iteration", "exploitability", "nash_conv", "value_vs_best_response")}
             for m in history if "exploitability" in m]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"seed": seed, "iterations": iterations, "seconds": time.perf_counter() - started,
                               "exploitability": track,
                               "final_return_player_0": [m["final_return"]["player_0"] for m in history]}, indent=1))
    return out


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean ± 95% CI over seeds of the exploitability at every measured iteration, and of
    its first and last measurement and their difference, paired by seed."""
    iterations = [point["iteration"] for point in results[0]["exploitability"]]
    at = [[r["exploitability"][k]["exploitability"] for r in results] for k in range(len(iterations))]
    first, last = at[0], at[-1]
    return {"seeds": [r["seed"] for r in results], "iterations": iterations,
            "exploitability": [mean_ci(values) for values in at],
            "first": mean_ci(first), "last": mean_ci(last), "last_minus_first": mean_ci([b - a for a, b in zip(first, last)]),
            "minimum_by_seed": [min(values) for values in zip(*at)], "last_by_seed": last,
            "seconds_per_iteration": mean_ci([r["seconds"] / r["iterations"] for r in results])}


def plot(results: list[dict[str, Any]], summary: dict[str, Any], path: Path) -> None:
    """Each seed's exploitability over iterations and their mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for result in results:
        track = result["exploitability"]
        ax.plot([p["iteration"] for p in track], [p["exploitability"] for p in track], lw=1, alpha=0.5,
                label=f"seed {result['seed']}")
    ax.plot(summary["iterations"], [m for m, _ in summary["exploitability"]], c="k", lw=2, label="mean")
    ax.axhline(11 / 24, ls=":", c="gray", lw=1, label="uniform random (11/24)")
    ax.set(title="two learners, self-play: first hand's exploitability", xlabel="iteration", ylabel="chips per hand",
           ylim=(0, 0.55))
    ax.legend(fontsize=7, ncol=3, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--every", type=int, default=10, help="iterations between exploitability measurements")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "runs" / "two_learners")
    parser.add_argument("--summarise-only", action="store_true", help="tabulate the stored JSON; train nothing")
    parser.add_argument("--plot", action="store_true", help="also draw docs/two_learners.png")
    args = parser.parse_args()
    if not args.summarise_only:
        for seed in args.seeds:
            print(run_seed(seed, args.iterations, args.every, args.output_dir), flush=True)
    results = [json.loads(p.read_text()) for p in sorted((RESULTS / "two_learners").glob("s*.json"))]
    summary = summarise(results)
    (RESULTS / "two_learners.json").write_text(json.dumps(summary, indent=1))
    if args.plot:
        plot(results, summary, ROOT / "docs" / "two_learners.png")
    print(f"seeds {summary['seeds']}: exploitability {summary['first']} -> {summary['last']} "
          f"(paired difference {summary['last_minus_first']})")


if __name__ == "__main__":
    main()
