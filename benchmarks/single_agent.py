"""Single-agent meta-RL on Sokoban, Household and WebShop: untrained, trained and the
oracle, success by attempt index, over seeds, resumable.

Each variant is an example config (``examples/<task>.yaml``) with overrides:

* ``sokoban``, ``household``, ``webshop`` — the configs as they are (differential reward);
* ``sokoban-cumulative`` — Sokoban rewarding every attempt's return (paired by seed with
  ``sokoban``: the final-episode objective's claim);
* ``sokoban-7x7`` — 7x7 rooms with 2 boxes, 40 steps, 30 iterations (about 30 minutes at 63 s an
  iteration; ``examples/sokoban.yaml`` otherwise).

Per (variant, seed) the run trains in ``--output-dir/<variant>-s<seed>`` (a killed run
continues from its last checkpoint), then the untrained model (the run's ``base_model``),
the trained one and the task's oracle (Sokoban's A* solver, the Household and WebShop
experts: ``expert_actions()`` from the current state) are evaluated on every evaluation of
the config (``eval_env_options``: instances never trained on; WebShop's OOD split too).
The oracle's plan length at the start of every evaluated instance is kept too (Sokoban: the
A* optimal length, and whether it fits the step budget on every room). The raw result of
each seed is ``<folder>/single_agent.json``, and with ``--kept-dir`` also
``<kept-dir>/<variant>-s<seed>.json`` (commit that folder: a fresh checkout then re-runs only
the seeds it lacks); a seed with one is never re-run. The summary (mean and 95% CI over seeds of success by attempt index, and the paired
differences of ``sokoban-cumulative`` against ``sokoban``) goes to ``--out``.

Run: ``python benchmarks/single_agent.py --variants sokoban sokoban-cumulative --seeds 0 1 2 3 4
--kept-dir benchmarks/results/single-agent``
(``--iterations`` and ``--eval-meta-episodes`` shorten a trial). The plot of success by
attempt index (``--plot``, ``docs/single_agent.png``) is drawn from the same results;
``--summary-only`` re-derives the summary and the plot from the runs that have a result.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learning import mean_ci  # noqa: E402  (the sibling benchmark's statistics)

EXAMPLES = Path(__file__).parents[1] / "examples"
#: variant -> (example config, overrides)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "sokoban": ("sokoban", {}),
    "sokoban-cumulative": ("sokoban", {"reward_mode": "cumulative"}),
    "sokoban-7x7": ("sokoban", {"env_options": {"width": 7, "height": 7, "num_boxes": 2, "max_steps": 40,
                                                "instance_split": "train"}, "iterations": 30}),
    "household": ("household", {}),
    "webshop": ("webshop", {}),
}
#: variant -> the variant it is paired with, seed by seed
PAIRS = {"sokoban-cumulative": "sokoban"}


def variant_config(variant: str, seed: int, out: Path, iterations: int | None, meta_episodes: int | None):
    """The training config of one (variant, seed): the example's, with the variant's overrides
    (its ``env_options`` added to the example's, not replacing them).

    Example:
        >>> config = variant_config("sokoban-7x7", 0, Path("runs"), None, None)
        >>> options = config.env.env_options
        >>> options["width"], options["num_boxes"], options["spatial_hints"], options["prompt_style"]
        (7, 2, True, 'compact')
    """
    from mage_agent.config import apply_overrides, load_config

    example, overrides = VARIANTS[variant]
    base = load_config(EXAMPLES / f"{example}.yaml")
    settings = {"seed": seed, "output_dir": str(out / f"{variant}-s{seed}"), "tensorboard": False, **overrides}
    if "env_options" in overrides:
        settings["env_options"] = {**base.env.env_options, **overrides["env_options"]}
    if iterations is not None:
        settings["iterations"] = iterations
    if meta_episodes is not None:
        settings["eval_meta_episodes"] = meta_episodes
    return apply_overrides(base, settings)


class ExpertAgent:
    """The task's oracle: the first of ``expert_actions()`` from the current state (a move up
    when a Sokoban room can no longer be solved), and an empty reflection."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        if info.get("phase", "act") != "act":
            return "<reflection></reflection>"
        plan = self.env.unwrapped.expert_actions()
        return f"<action>{plan[0] if plan else info['legal_actions'][0]}</action>"


def oracle_lengths(env_id: str, kwargs: dict[str, Any], seed: int, meta_episodes: int) -> dict[str, float]:
    """The oracle's plan length at the start of each evaluated instance (Sokoban: the A*
    solver's optimal length), its mean and maximum, and whether it fits the step budget on
    every instance (success within the budget is reachable everywhere)."""
    import gymnasium as gym

    env = gym.make(env_id, **kwargs)
    task: Any = env.unwrapped  # a single-agent task: it has expert_actions() and max_steps
    lengths = []
    for j in range(meta_episodes):
        env.reset(seed=seed + j)
        lengths.append(len(task.expert_actions() or []))
    env.close()
    budget = task.max_steps
    return {"mean": float(np.mean(lengths)), "max": int(max(lengths)), "max_steps": budget,
            "all_within_budget": bool(max(lengths) <= budget)}


def successes(report: dict) -> list[float]:
    """Success by attempt index in an evaluation report."""
    return list(report["opponents"]["default"]["success_by_episode"])


def scores(report: dict) -> list[float]:
    """The mean return (WebShop: the score in [0, 1]) by attempt index in an evaluation report."""
    return list(report["opponents"]["default"]["mean_return_by_episode"])


def run_one(config) -> dict:
    """Train (or continue) one run, evaluate untrained, trained and the oracle; the raw result."""
    from mage_agent.build import build_policy, eval_env_kwargs
    from mage_agent.checkpoint import latest_checkpoint
    from mage_agent.cli import evaluate_policy, evaluations
    from mage_agent.trainer import Trainer
    from mage_envs.evaluation import evaluate

    folder = Path(config.run.output_dir)
    checkpoint = latest_checkpoint(folder / "checkpoints")
    done = checkpoint is not None and int(json.loads((checkpoint / "state.json").read_text())["iteration"]) \
        == config.run.iterations
    if not done:
        Trainer(config, resume=checkpoint is not None, progress=False, overwrite=checkpoint is None).train()
        checkpoint = latest_checkpoint(folder / "checkpoints")
    untrained, trained = build_policy(config, folder), build_policy(config, folder, checkpoint)
    result: dict[str, Any] = {"variant": folder.name.rpartition("-s")[0], "seed": config.run.seed,
                              "iterations": config.run.iterations, "evaluations": {}}
    for suffix, evaluated in evaluations(config).items():
        split = suffix.lstrip("_") or "eval"
        rows, returns = {}, {}
        for name, policy in (("untrained", untrained), ("trained", trained)):
            report = evaluate_policy(policy, evaluated, folder / f"eval_{name}{suffix}.json", name, progress=False,
                                     verbose=False, oracle=False)
            rows[name], returns[name] = successes(report), scores(report)
        oracle = evaluate(None, config.env.env_id, meta_episodes=config.run.eval_meta_episodes,
                          seed=config.run.eval_seed, env_kwargs=eval_env_kwargs(evaluated), oracle=False,
                          progress=False, agent_name="oracle", make_agent=ExpertAgent)
        rows["oracle"] = list(oracle.opponents["default"].success_by_episode)
        returns["oracle"] = list(oracle.opponents["default"].mean_return_by_episode)
        result["evaluations"][split] = rows
        result.setdefault("scores", {})[split] = returns
        result.setdefault("oracle_lengths", {})[split] = oracle_lengths(config.env.env_id, eval_env_kwargs(evaluated),
                                                                         config.run.eval_seed,
                                                                         config.run.eval_meta_episodes)
    (folder / "single_agent.json").write_text(json.dumps(result, indent=2))
    return result


def summarise(results: list[dict]) -> dict[str, Any]:
    """Per variant and evaluation: success by attempt index (mean, CI) of each agent and the
    gain from the first to the final attempt; per pair, the seed-by-seed differences of the
    trained first and final attempts.

    Example:
        >>> rows = [{"variant": "sokoban", "seed": s, "evaluations": {"eval": {"trained": [0.2 + s / 10, 0.8]}}}
        ...         for s in range(2)]
        >>> summarise(rows)["sokoban"]["eval"]["trained"]["gain"][0]
        0.55
    """
    table: dict[str, Any] = {}
    by_key = {(r["variant"], r["seed"]): r for r in results}
    for variant in dict.fromkeys(r["variant"] for r in results):
        seeds = sorted(s for v, s in by_key if v == variant)
        table[variant] = {"seeds": seeds}
        for split in by_key[(variant, seeds[0])]["evaluations"]:
            rows = {}
            for agent in by_key[(variant, seeds[0])]["evaluations"][split]:
                per_seed = np.array([by_key[(variant, s)]["evaluations"][split][agent] for s in seeds])
                rows[agent] = {"by_attempt": [mean_ci(list(column)) for column in per_seed.T],
                               "gain": mean_ci(list(per_seed[:, -1] - per_seed[:, 0])), "per_seed": per_seed.tolist()}
            table[variant][split] = rows
        if all("scores" in by_key[(variant, s)] for s in seeds):   # mean return by attempt (WebShop: the score)
            table[variant]["scores"] = {
                split: {agent: [mean_ci(list(column)) for column in
                                np.array([by_key[(variant, s)]["scores"][split][agent] for s in seeds]).T]
                        for agent in agents}
                for split, agents in by_key[(variant, seeds[0])]["scores"].items()}
    for variant, reference in PAIRS.items():
        if variant not in table or reference not in table:
            continue
        seeds = sorted(set(table[variant]["seeds"]) & set(table[reference]["seeds"]))
        a = np.array([by_key[(variant, s)]["evaluations"]["eval"]["trained"] for s in seeds])
        b = np.array([by_key[(reference, s)]["evaluations"]["eval"]["trained"] for s in seeds])
        table[variant]["paired_with"] = {"reference": reference, "seeds": seeds,
                                         "first_minus_reference": mean_ci(list(a[:, 0] - b[:, 0])),
                                         "final_minus_reference": mean_ci(list(a[:, -1] - b[:, -1]))}
    return table


#: The paper's final-attempt success per task (MAGE; GiGPO where the paper gives it): its
#: settings only (the paper's Sokoban trains the final-episode reward; it reports no 7x7 rooms).
PAPER = {"sokoban": "77.3%", "household": "91.4% on ALFWorld (GiGPO 88.3%)", "webshop": "100% (GiGPO 79.7%)"}


def markdown_table(table: dict[str, Any]) -> str:
    """The paper's row beside ours per variant: untrained and trained success on the first and
    final attempts (mean ± 95% CI over seeds) and the oracle's.

    Example:
        >>> rows = [{"variant": "sokoban", "seed": s, "evaluations": {"eval": {
        ...     "untrained": [0.3, 0.3], "trained": [0.5, 0.6 + s / 10], "oracle": [1.0, 1.0]}}} for s in range(2)]
        >>> print(markdown_table(summarise(rows)).splitlines()[-1])
        | sokoban | 2 | 77.3% | 30% → 30% | 50% → 65% ± 64% | +15% ± 64% | 100% |
    """
    def cell(pair: Any) -> str:
        mean, half = pair
        return f"{mean:.0%}" + ("" if half != half or half == 0 else f" ± {half:.0%}")   # NaN: one seed

    lines = ["| variant | seeds | paper, final attempt | untrained, first → final | trained, first → final "
             "| trained gain | oracle |", "|---|---|---|---|---|---|---|"]
    for variant, entry in table.items():
        rows = entry["eval"]
        untrained, trained = rows["untrained"]["by_attempt"], rows["trained"]["by_attempt"]
        gain = rows["trained"]["gain"]
        lines.append(f"| {variant} | {len(entry['seeds'])} | {PAPER.get(variant, '—')} "
                     f"| {cell(untrained[0])} → {cell(untrained[-1])} | {cell(trained[0])} → {cell(trained[-1])} "
                     f"| {gain[0]:+.0%}" + ("" if gain[1] != gain[1] else f" ± {gain[1]:.0%}")
                     + f" | {cell(rows['oracle']['by_attempt'][-1]) if 'oracle' in rows else ''} |")
    scored = {variant: entry["scores"] for variant, entry in table.items() if "scores" in entry}
    if scored:
        lines += ["", "Mean return by attempt (WebShop: the score in [0, 1]), first → final, mean ± 95% CI over seeds:", "",
                  "| variant | split | untrained | trained | oracle |", "|---|---|---|---|---|"]
        for variant, splits in scored.items():
            for split, agents in splits.items():
                lines.append(f"| {variant} | {split} | " + " | ".join(
                    f"{agents[a][0][0]:.3f} → {agents[a][-1][0]:.3f}"
                    + ("" if agents[a][-1][1] != agents[a][-1][1] else f" ± {agents[a][-1][1]:.3f}")
                    for a in ("untrained", "trained", "oracle")) + " |")
    return "\n".join(lines)


def plot(table: dict[str, Any], path: Path) -> Path:
    """Success by attempt index on the evaluation instances, one panel per variant: the
    untrained and trained models (mean and 95% CI over seeds) and the oracle.

    Example:
        >>> import tempfile
        >>> rows = [{"variant": "sokoban", "seed": s, "evaluations": {"eval": {
        ...     "untrained": [0.3, 0.3], "trained": [0.5 + s / 10, 0.6], "oracle": [1.0, 1.0]}}} for s in range(2)]
        >>> plot(summarise(rows), Path(tempfile.mkdtemp()) / "single_agent.png").exists()
        True
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = list(table)
    fig, axes = plt.subplots(1, len(variants), figsize=(4.2 * len(variants), 3.6), squeeze=False)
    for ax, variant in zip(axes[0], variants):
        rows = table[variant]["eval"]
        for agent, style in (("untrained", ":"), ("trained", "-"), ("oracle", "--")):
            if agent not in rows:
                continue
            means, halves = zip(*rows[agent]["by_attempt"])
            attempts = range(1, len(means) + 1)
            ax.errorbar(attempts, means, yerr=np.nan_to_num(halves), linestyle=style, marker="o", capsize=3,
                        label=agent)
        seeds = len(table[variant]["seeds"])
        ax.set(title=f"{variant} ({seeds} seed{'s' if seeds > 1 else ''})", xlabel="attempt", ylim=(0, 1.05),
               xticks=list(attempts))
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("success on unseen instances")
    axes[0][0].legend(loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", nargs="+", default=["sokoban", "sokoban-cumulative"], choices=list(VARIANTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--iterations", type=int, default=None, help="override the configs' iterations")
    parser.add_argument("--eval-meta-episodes", type=int, default=None, help="override the configs' evaluations")
    parser.add_argument("--output-dir", default="runs/single-agent")
    parser.add_argument("--out", default="benchmarks/results/single-agent.json")
    parser.add_argument("--plot", default="docs/single_agent.png", help="the plot of success by attempt index")
    parser.add_argument("--kept-dir", default=None, metavar="DIR",
                        help="also keep each seed's raw result here as <variant>-s<seed>.json (the committed "
                             "copy, e.g. benchmarks/results/single-agent): a result found there is never re-run")
    parser.add_argument("--summary-only", action="store_true",
                        help="summarise and plot the runs that have a result, train nothing")
    args = parser.parse_args()
    out, results = Path(args.output_dir), []
    for seed in args.seeds:   # seed by seed, so that the paired variants of a seed finish together
        for variant in args.variants:
            config = variant_config(variant, seed, out, args.iterations, args.eval_meta_episodes)
            places = [Path(config.run.output_dir) / "single_agent.json"]
            if args.kept_dir:
                places.insert(0, Path(args.kept_dir) / f"{variant}-s{seed}.json")
            kept = next((place for place in places if place.exists()), None)
            if kept is None and args.summary_only:
                continue
            results.append(json.loads(kept.read_text()) if kept else run_one(config))
            if args.kept_dir:
                places[0].parent.mkdir(parents=True, exist_ok=True)
                places[0].write_text(json.dumps(results[-1], indent=2))
            print(f"{variant} s{seed}: {results[-1]['evaluations']}", flush=True)
    if not results:
        raise SystemExit(f"no run under {out} has a result yet")
    summary = summarise(results)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"results": results, "summary": summary}, indent=2))
    print(markdown_table(summary))
    print(f"saved {args.out} and {plot(summary, Path(args.plot))}")


if __name__ == "__main__":
    main()
