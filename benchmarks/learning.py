"""The MAGE recipe against its ablations at equal budget, over several seeds.

Variants (each a set of `mage train` overrides on the default CPU configuration):

* ``mage``         — differential reward, population, per-archetype normalisation;
* ``cumulative``   — reward every episode's return instead of the final one;
* ``global-norm``  — advantage std pooled over the whole batch;
* ``single-opp``   — train against ``aggressive`` only;
* ``no-memory``    — the control: earlier episodes are not shown (nothing to adapt from).

Every run is evaluated on the training archetypes with the same seeds; the table reports
the first- and final-episode returns averaged over archetypes (mean ± SE over seeds) and
the adaptation gain over the best non-adaptive value. Results go to
``benchmarks/results/learning.json``, ``docs/learning.md`` and ``docs/learning.png``.

    python benchmarks/learning.py --seeds 0 1 2 --iterations 200 --jobs 2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
from pathlib import Path

import numpy as np

VARIANTS: dict[str, dict] = {
    "mage": {},
    "cumulative": {"reward_mode": "cumulative"},
    "global-norm": {"scope": "global"},
    "single-opp": {"single_opponent": "aggressive"},
    "no-memory": {"memory": False},
}
TRAINING_ARCHETYPES = ["conservative", "aggressive", "intermediate"]
ROOT = Path(__file__).resolve().parent.parent


def run_one(job: tuple[str, int, int, int, str]) -> dict:
    """Train one (variant, seed) and evaluate it; returns the per-archetype results."""
    variant, seed, iterations, eval_meta_episodes, out = job
    from mage_agent.config import TrainConfig, apply_overrides
    from mage_agent.trainer import Trainer

    overrides = {"iterations": iterations, "seed": seed, "output_dir": f"{out}/{variant}-s{seed}",
                 "eval_meta_episodes": eval_meta_episodes, "tensorboard": False, "checkpoint_every": 0,
                 "heldout": [], **VARIANTS[variant]}
    trainer = Trainer(apply_overrides(TrainConfig(), overrides), progress=False, overwrite=True)
    trainer.train()
    return {"variant": variant, "seed": seed, "report": evaluate_run(Path(overrides["output_dir"]))}


def evaluate_run(run_dir: Path) -> dict:
    """Evaluate a run's last checkpoint on the full training population (whatever the
    variant trained against) and write ``run_dir/eval.json``."""
    from mage_agent.build import build_policy
    from mage_agent.checkpoint import latest_checkpoint
    from mage_agent.cli import evaluate_policy
    from mage_agent.config import TrainConfig, apply_overrides

    checkpoint = latest_checkpoint(run_dir / "checkpoints")
    if checkpoint is None:
        raise FileNotFoundError(f"{run_dir} has no checkpoint")
    config = TrainConfig.from_dict(json.loads((checkpoint / "state.json").read_text())["config"])
    eval_config = apply_overrides(config, {"single_opponent": "", "population": {k: 1.0 for k in TRAINING_ARCHETYPES}})
    policy = build_policy(config, run_dir, checkpoint)
    return evaluate_policy(policy, eval_config, run_dir / "eval.json", run_dir.name.rpartition("-s")[0],
                           progress=False)


def finished_runs(folder: Path, iterations: int) -> list[dict]:
    """The runs under ``folder`` (``<variant>-s<seed>``) that reached ``iterations``;
    a finished run without ``eval.json`` is evaluated from its last checkpoint."""
    from mage_agent.checkpoint import latest_checkpoint

    results = []
    for run_dir in sorted(p for p in folder.glob("*-s*") if p.is_dir()):
        variant, _, seed = run_dir.name.rpartition("-s")
        checkpoint = latest_checkpoint(run_dir / "checkpoints")
        if variant not in VARIANTS or checkpoint is None or checkpoint.name != f"iter-{iterations:06d}":
            continue
        path = run_dir / "eval.json"
        report = json.loads(path.read_text()) if path.exists() else evaluate_run(run_dir)
        results.append({"variant": variant, "seed": int(seed), "report": report})
    return results


def summarise(results: list[dict]) -> dict[str, dict[str, float]]:
    """Mean ± SE over seeds of the archetype-averaged first/final returns and the gain."""
    table: dict[str, dict[str, float]] = {}
    for variant in VARIANTS:
        runs = [r["report"] for r in sorted(results, key=lambda r: r["seed"]) if r["variant"] == variant]
        if not runs:
            continue
        first = [np.mean([run["opponents"][a]["mean_return_by_episode"][0] for a in TRAINING_ARCHETYPES]) for run in runs]
        final = [np.mean([run["opponents"][a]["mean_return_by_episode"][-1] for a in TRAINING_ARCHETYPES]) for run in runs]
        gain = [f - run["best_nonadaptive_value"] for f, run in zip(final, runs)]
        se = lambda xs: float(np.std(xs, ddof=1) / np.sqrt(len(xs))) if len(xs) > 1 else float("nan")  # noqa: E731
        table[variant] = {"seeds": len(runs), "finals": [round(float(f), 3) for f in final],
                          "first": float(np.mean(first)), "first_se": se(first),
                          "final": float(np.mean(final)), "final_se": se(final),
                          "gain": float(np.mean(gain)), "gain_se": se(gain)}
    return table


def write_docs(table: dict, iterations: int, ceiling: float, nonadaptive: float) -> None:
    lines = [
        "# Learning benchmark: the MAGE recipe against its ablations",
        "",
        f"`python benchmarks/learning.py` — the default CPU configuration, {iterations} iterations per run,",
        "evaluated on the three training archetypes (conservative, aggressive, intermediate) with",
        "repeated deals; returns in chips per hand averaged over archetypes, mean ± standard error",
        f"over seeds. Best non-adaptive value: {nonadaptive:+.3f}; knowing the deal: {ceiling:+.3f}.",
        "",
        "| variant | seeds | episode 1 return | final-episode return | gain over non-adaptive | final, seed by seed |",
        "|---|---|---|---|---|---|",
    ]
    for variant, row in table.items():
        lines.append(f"| {variant} | {row['seeds']} | {row['first']:+.3f} ± {row['first_se']:.3f} | "
                     f"{row['final']:+.3f} ± {row['final_se']:.3f} | {row['gain']:+.3f} ± {row['gain_se']:.3f} | "
                     + " ".join(f"{value:+.3f}" for value in row["finals"]) + " |")
    lines += ["", "![learning](learning.png)", ""]
    (ROOT / "docs" / "learning.md").write_text("\n".join(lines))


def plot(table: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(table)
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(x - 0.2, [table[n]["first"] for n in names], 0.4, yerr=[table[n]["first_se"] for n in names],
           label="episode 1", capsize=3)
    ax.bar(x + 0.2, [table[n]["final"] for n in names], 0.4, yerr=[table[n]["final_se"] for n in names],
           label="final episode", capsize=3)
    for i, name in enumerate(names):  # the seeds themselves: the outcome is often bimodal
        finals = table[name]["finals"]
        ax.scatter(i + 0.2 + np.linspace(-0.08, 0.08, len(finals)), finals, color="black", s=12, zorder=3,
                   label="final episode, one seed" if i == 0 else None)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(x, names)
    ax.set_ylabel("return (chips per hand)")
    ax.set_title("MAGE vs ablations (mean ± SE over seeds)")
    ax.legend()
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--eval-meta-episodes", type=int, default=300)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--output-dir", default="runs/learning")
    parser.add_argument("--summarise-only", action="store_true",
                        help="do not train: tabulate the runs already finished in --output-dir")
    args = parser.parse_args()
    if args.summarise_only:
        results = finished_runs(Path(args.output_dir), args.iterations)
    else:
        jobs = [(v, s, args.iterations, args.eval_meta_episodes, args.output_dir)
                for s in args.seeds for v in args.variants]
        with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
            results = pool.map(run_one, jobs, chunksize=1)
    from mage_envs.oracle import best_nonadaptive_value, instance_optimal_value

    nonadaptive = best_nonadaptive_value("kuhn_poker", TRAINING_ARCHETYPES).value
    ceiling = float(np.mean([instance_optimal_value("kuhn_poker", a) for a in TRAINING_ARCHETYPES]))
    table = summarise(results)
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "learning.json").write_text(json.dumps({"args": vars(args), "table": table, "runs": results}, indent=1))
    write_docs(table, args.iterations, ceiling, nonadaptive)
    plot(table, ROOT / "docs" / "learning.png")
    for variant, row in table.items():
        print(f"{variant:<12} ep1 {row['first']:+.3f}±{row['first_se']:.3f}  final {row['final']:+.3f}±{row['final_se']:.3f}"
              f"  gain {row['gain']:+.3f}±{row['gain_se']:.3f}")


if __name__ == "__main__":
    main()
