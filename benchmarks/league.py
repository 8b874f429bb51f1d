"""The league against the default on Kuhn Poker's CFR row, over seeds (issue 34, item 6).

The default CPU configuration from ``benchmarks/learning.py``'s runs on seeds 20-29 (no
default was chosen on them), read, never written, from ``--default-dir``, and the league:

* ``default``     — ``iterations-600-other-seeds``: the defaults at 600 iterations;
* ``default-900`` — ``mage-other-seeds``: the defaults (900 iterations);
* ``random-style`` — ``random-style-other-seeds``: the defaults (900 iterations) with
  ``random-style`` in the population (today's default population);
* ``random-style-league``, ``equilibrium`` — ``random-style-league-other-seeds`` and
  ``equilibrium-other-seeds``: that population with a league of best responses, or with the
  first hand pulled toward Nash (``equilibrium_coef: 1``);
* ``league``      — the defaults at 600 iterations with ``--league true --league-sampling pfsp``
  (a snapshot every 100 iterations, 4 kept), trained here into ``--output-dir`` and paired
  with ``default`` by seed.

Every run's last checkpoint is measured against ``cfr-argmax`` (the argmax of the CFR
policy, deterministic; the paper's CFR row) and ``nash``: the win rate and return of every
hand over 300 stratified meta-episodes per opponent, beside the deal-known ceiling, the
winnable fraction (deterministic opponents only) and the best response's value; its first
hand's exact exploitability at every checkpoint. One JSON per run goes to
``benchmarks/results/league/``; a run with its JSON is skipped, a killed training continues
from its last checkpoint, so the benchmark resumes where it stopped. ``--summarise-only``
tabulates the JSON (mean ± 95% CI over seeds, paired by seed) into
``benchmarks/results/league.json``; ``--plot`` draws ``docs/league_seeds.png`` from it.

    nice -n 10 python benchmarks/league.py --seeds 20 21 22
    python benchmarks/league.py --summarise-only --plot
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from learning import mean_ci, run_config  # noqa: E402  (the sibling benchmark's config and statistics)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
ITERATIONS = 600
LEAGUE = {"league": True, "league_sampling": "pfsp", "league_interval": 100, "league_pool_size": 4}
#: The CFR row's opponents: the deterministic argmax of CFR (the paper's) and its mixed equilibrium.
OPPONENTS = ["cfr-argmax", "nash"]
META_EPISODES = 300
#: The runs of benchmarks/learning.py each default variant reads.
DEFAULT_RUNS = {"default": "iterations-600-other-seeds", "default-900": "mage-other-seeds",
                "random-style": "random-style-other-seeds", "random-style-league": "random-style-league-other-seeds",
                "equilibrium": "equilibrium-other-seeds"}
VARIANTS = [*DEFAULT_RUNS, "league"]


def run_folder(variant: str, seed: int, default_dir: Path, output_dir: Path) -> Path:
    """Where a variant's run of ``seed`` lives.

    Example:
        >>> run_folder("default", 20, Path("d"), Path("o")).as_posix(), run_folder("league", 20, Path("d"), Path("o")).name
        ('d/iterations-600-other-seeds-s20', 'league-s20')
    """
    if variant in DEFAULT_RUNS:
        return default_dir / f"{DEFAULT_RUNS[variant]}-s{seed}"
    return output_dir / f"league-s{seed}"


def train_league(seed: int, folder: Path) -> None:
    """Train the league variant of ``seed`` into ``folder``, continuing from its newest checkpoint."""
    from mage_agent.checkpoint import latest_checkpoint
    from mage_agent.trainer import Trainer

    config = run_config(("league", seed, ITERATIONS, str(folder.parent), LEAGUE))
    newest = latest_checkpoint(folder / "checkpoints")
    done = json.loads((newest / "state.json").read_text())["iteration"] if newest else 0
    if done < ITERATIONS:
        Trainer(config, resume=newest is not None, progress=False, overwrite=True).train()


def checkpoints(folder: Path) -> list[Path]:
    """The run's checkpoints, oldest first."""
    return sorted(p for p in (folder / "checkpoints").glob("iter-*") if (p / "state.json").exists())


def measure_run(folder: Path) -> dict[str, Any]:
    """Exploitability per checkpoint; the last one's hands against the CFR row's opponents."""
    from mage_agent.build import build_policy
    from mage_agent.cli import evaluate_policy
    from mage_agent.config import TrainConfig, apply_overrides
    from mage_agent.exploitability import measure
    from mage_envs.oracle import winnable_fraction

    track = []
    for checkpoint in checkpoints(folder):
        config = TrainConfig.from_dict(json.loads((checkpoint / "state.json").read_text())["config"])
        policy = build_policy(config, folder, checkpoint)
        report, _ = measure(policy, config)
        first = report["first_hand"]
        track.append({"iteration": int(checkpoint.name.split("-")[1]), "exploitability": first["exploitability"],
                      "nash_conv": first["nash_conv"]})
    played = apply_overrides(config, {"eval_meta_episodes": META_EPISODES})
    with_table = apply_overrides(config, {"population": {name: 1.0 for name in OPPONENTS}, "single_opponent": ""})
    exact, _ = measure(policy, with_table)
    evaluation = Path(folder.name + ".eval.json")
    data = evaluate_policy(policy, played, RESULTS / "league" / evaluation, folder.name, progress=False,
                           verbose=False, opponents=OPPONENTS)
    (RESULTS / "league" / evaluation).unlink()
    (RESULTS / "league" / evaluation.with_suffix(".png")).unlink()
    against = {}
    for name in OPPONENTS:
        result = data["opponents"][name]
        try:
            winnable: float | None = winnable_fraction("kuhn_poker", name)
        except ValueError:   # a mixed opponent: no instance is won or lost for sure
            winnable = None
        against[name] = {
            "return_by_hand": result["mean_return_by_episode"], "stderr_by_hand": result["stderr_return_by_episode"],
            "win_rate_by_hand": result["win_rate_by_episode"], "loss_rate_by_hand": result["loss_rate_by_episode"],
            "first_hand_exact": exact["first_hand"]["value"][name],
            "best_response_value": result["best_response_value"], "deal_known_ceiling": result["instance_optimal_value"],
            "winnable_fraction": winnable,
        }
    return {"run": folder.name, "iteration": track[-1]["iteration"], "exploitability": track, "against": against,
            "ratings": ratings(folder / "metrics.jsonl")}


def ratings(metrics: Path, every: int = 10) -> list[dict[str, Any]]:
    """A league run's OpenSkill ordinals (``rating/<member>`` in ``metrics.jsonl``) of the
    learner and the archetypes every ``every`` iterations (empty for a run without a league).

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "metrics.jsonl"
        >>> _ = path.write_text('{"iteration": 10, "rating/learner": 26.0, "rating/snapshot-000100": 25.0}\\n')
        >>> ratings(path)
        [{'iteration': 10, 'learner': 26.0}]
    """
    out = []
    for line in metrics.read_text().splitlines():
        row = json.loads(line)
        if row["iteration"] % every == 0 and "rating/learner" in row:
            out.append({"iteration": row["iteration"], **{key.split("/", 1)[1]: value for key, value in row.items()
                                                          if key.startswith("rating/") and "snapshot" not in key}})
    return out


def measure_seed(variant: str, seed: int, default_dir: Path, output_dir: Path) -> Path:
    """Train (league) and measure one run unless its JSON exists; the JSON's path."""
    out = RESULTS / "league" / f"{variant}-s{seed}.json"
    if out.exists():
        return out
    folder = run_folder(variant, seed, default_dir, output_dir)
    if variant == "league":
        train_league(seed, folder)
    elif not checkpoints(folder):
        raise FileNotFoundError(f"{folder} has no checkpoint (the default runs come from benchmarks/learning.py "
                                f"--variants {DEFAULT_RUNS[variant]} --seeds 20 ... 29)")
    result = {"variant": variant, "seed": seed, **measure_run(folder)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    return out


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per variant and opponent: mean ± 95% CI over seeds of the win rate and return of every
    hand, the exploitability at every checkpoint and at the end; the league minus the default,
    paired by seed; the oracles' values (the same for every run)."""
    table: dict[str, Any] = {"variants": {}, "oracles": {}}
    by_variant: dict[str, dict[int, dict[str, Any]]] = {}
    for result in results:
        by_variant.setdefault(result["variant"], {})[result["seed"]] = result
    for variant, runs in sorted(by_variant.items()):
        seeds = sorted(runs)
        iterations = [point["iteration"] for point in runs[seeds[0]]["exploitability"]]
        row: dict[str, Any] = {"seeds": seeds, "exploitability_by_seed": [runs[s]["exploitability"][-1]["exploitability"]
                                                                          for s in seeds]}
        row["exploitability"] = mean_ci(row["exploitability_by_seed"])
        row["exploitability_track"] = {"iteration": iterations, "mean_ci": [
            mean_ci([runs[s]["exploitability"][k]["exploitability"] for s in seeds]) for k in range(len(iterations))]}
        for name in OPPONENTS:
            hands = len(runs[seeds[0]]["against"][name]["return_by_hand"])
            row[name] = {key: [mean_ci([runs[s]["against"][name][key][h] for s in seeds]) for h in range(hands)]
                         for key in ("return_by_hand", "win_rate_by_hand", "loss_rate_by_hand")}
            row[name]["first_hand_exact"] = mean_ci([runs[s]["against"][name]["first_hand_exact"] for s in seeds])
            row[name]["final_by_seed"] = [round(runs[s]["against"][name]["return_by_hand"][-1], 3) for s in seeds]
            row[name]["final_win_rate_by_seed"] = [round(runs[s]["against"][name]["win_rate_by_hand"][-1], 3)
                                                   for s in seeds]
            table["oracles"][name] = {key: runs[seeds[0]]["against"][name][key]
                                      for key in ("best_response_value", "deal_known_ceiling", "winnable_fraction")}
        rated: list[list[dict[str, Any]]] = [runs[s].get("ratings") or [] for s in seeds]
        if all(rated):
            members = [key for key in rated[0][0] if key != "iteration"]
            row["ratings"] = {"iteration": [point["iteration"] for point in rated[0]], **{
                member: [mean_ci([r[k][member] for r in rated]) for k in range(len(rated[0]))] for member in members}}
        table["variants"][variant] = row
    if {"default", "league"} <= set(by_variant):
        default, league = by_variant["default"], by_variant["league"]
        paired = sorted(set(default) & set(league))
        table["paired"] = {"seeds": paired, "exploitability": mean_ci(
            [league[s]["exploitability"][-1]["exploitability"] - default[s]["exploitability"][-1]["exploitability"]
             for s in paired]), **{name: {key: mean_ci([league[s]["against"][name][key][-1]
                                                       - default[s]["against"][name][key][-1] for s in paired])
                                         for key in ("return_by_hand", "win_rate_by_hand")} for name in OPPONENTS}}
    return table


def plot(table: dict[str, Any], path: Path) -> None:
    """Exploitability over iterations (mean ± 95% CI over seeds), the return by hand
    against each of the CFR row's opponents, per variant, and the league's ratings."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rated = {variant: row["ratings"] for variant, row in table["variants"].items() if "ratings" in row}
    panels = 1 + len(OPPONENTS) + len(rated)
    fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.4))
    for variant, row in table["variants"].items():
        label = f"{variant} ({len(row['seeds'])} seeds)"
        track = row["exploitability_track"]
        mean = np.array([m for m, _ in track["mean_ci"]])
        half = np.nan_to_num(np.array([h for _, h in track["mean_ci"]], dtype=float))
        axes[0].plot(track["iteration"], mean, marker="o", label=label)
        axes[0].fill_between(track["iteration"], mean - half, mean + half, alpha=0.2)
        for ax, name in zip(axes[1:], OPPONENTS):
            values = row[name]["return_by_hand"]
            hands = np.arange(1, len(values) + 1)
            ax.errorbar(hands, [m for m, _ in values], yerr=np.nan_to_num([h for _, h in values]), marker="o",
                        capsize=3, label=label)
    axes[0].set(title="first hand's exploitability", xlabel="iteration", ylabel="chips per hand")
    axes[0].legend(fontsize=8)
    for ax, name in zip(axes[1:], OPPONENTS):
        oracle = table["oracles"][name]
        ax.axhline(oracle["deal_known_ceiling"], ls="--", c="gray", lw=1, label="deal-known ceiling")
        ax.axhline(oracle["best_response_value"], ls=":", c="k", lw=1, label="best response")
        ax.set(title=f"against {name}", xlabel="hand", ylabel="mean return", xticks=[1, 2, 3])
        ax.legend(fontsize=8)
    for ax, (variant, track) in zip(axes[1 + len(OPPONENTS):], rated.items()):
        for member, values in track.items():
            if member != "iteration":
                ax.plot(track["iteration"], [m for m, _ in values], label=member)
        ax.set(title=f"{variant}: OpenSkill ordinal (mean over seeds)", xlabel="iteration", ylabel="ordinal")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[20, 21, 22])
    parser.add_argument("--variants", nargs="+", default=VARIANTS, choices=VARIANTS)
    parser.add_argument("--default-dir", type=Path, default=ROOT / "runs" / "learning",
                        help="where benchmarks/learning.py's iterations-600-other-seeds runs are (read only)")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "runs" / "league", help="where league runs train")
    parser.add_argument("--summarise-only", action="store_true", help="tabulate the stored JSON; train nothing")
    parser.add_argument("--plot", action="store_true", help="also draw docs/league_seeds.png")
    args = parser.parse_args()
    if not args.summarise_only:
        for seed in args.seeds:
            for variant in args.variants:
                print(measure_seed(variant, seed, args.default_dir, args.output_dir), flush=True)
    results = [json.loads(p.read_text()) for p in sorted((RESULTS / "league").glob("*-s*.json"))]
    table = summarise(results)
    (RESULTS / "league.json").write_text(json.dumps(table, indent=1))
    if args.plot:
        plot(table, ROOT / "docs" / "league_seeds.png")
    for variant, row in table["variants"].items():
        print(f"{variant:<8} seeds {row['seeds']} exploitability {row['exploitability']}")
        for name in OPPONENTS:
            print(f"  {name:<10} return by hand {row[name]['return_by_hand']}  win rate {row[name]['win_rate_by_hand']}")


if __name__ == "__main__":
    main()
