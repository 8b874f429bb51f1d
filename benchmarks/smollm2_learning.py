"""Does a pretrained language model learn the MAGE recipe? SmolLM2-135M + LoRA on Kuhn Poker.

Each variant is a set of overrides on ``examples/smollm2_kuhn.yaml`` (the natural-language
``full`` prompt, the env's memory, one action token per turn, LoRA on the attention of the
last 6 layers, 16 x 8 meta-episodes an iteration):

* ``smollm2``             — the config as it stands (repeated deals);
* ``smollm2-fresh-deals`` — a new deal every hand: the style must be read from the betting;
* ``smollm2-reflection``  — the model writes its own reflections between hands (free text,
  trained on), paired by seed with ``smollm2``;
* ``smollm2-free-text``   — every answer in free text (``<action>`` prefix, stop at
  ``</action>``) instead of one action token.

Every run is evaluated before training (the untrained model) and after, with the same
stratified protocol as ``benchmarks/learning.py`` (the three training styles and the held-out
ones; each return beside the deal-known ceiling on the very instances evaluated; with fresh
deals beside the Bayes-optimal agent on the same meta-episodes). Runs resume from their
checkpoints, and evaluations from their transcripts, so a killed benchmark continues where
it stopped; the raw per-seed rows go to ``benchmarks/results/smollm2-learning.json`` and
each trained adapter (its final checkpoint without the optimizer state and the tokenizer,
about 1.5 MB) to ``benchmarks/results/smollm2-adapters/<variant>-s<seed>``, which ``mage
eval --agent policy --model`` loads.

    python benchmarks/smollm2_learning.py --seeds 0 1 2 --variants smollm2
    python benchmarks/smollm2_learning.py --seeds 0 1 2 --summarise-only
    python benchmarks/smollm2_learning.py --curves benchmarks/results/smollm2-cpu-trials/*.jsonl
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from learning import HELDOUT, TRAINING, mean_ci, per_style, run_dir  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ADAPTERS = ROOT / "benchmarks" / "results" / "smollm2-adapters"
BASE_CONFIG = ROOT / "examples" / "smollm2_kuhn.yaml"
VARIANTS: dict[str, dict[str, Any]] = {
    "smollm2": {},
    "smollm2-fresh-deals": {"repeat_instance": False},
    "smollm2-reflection": {"reflection": True, "max_new_tokens": 48},
    "smollm2-free-text": {"action_tokens": False, "max_new_tokens": 8},
}
#: The variant each is compared with, seed by seed.
PAIRED_WITH = {"smollm2-reflection": "smollm2", "smollm2-free-text": "smollm2"}


def run_config(variant: str, seed: int, out: Path, eval_meta_episodes: int) -> Any:
    """The training config of one (variant, seed) run; its evaluations cover every training
    and held-out style."""
    from mage_agent.config import apply_overrides, load_config

    return apply_overrides(load_config(BASE_CONFIG), {
        **VARIANTS[variant], "seed": seed, "output_dir": str(run_dir(str(out), variant, seed)), "heldout": HELDOUT,
        "eval_meta_episodes": eval_meta_episodes})


def evaluate_once(policy: Callable[[], Any], config: Any, path: Path, name: str) -> dict:
    """``path``'s report, evaluating ``policy()`` (resumable from its transcript) only if it
    is missing."""
    from mage_agent.cli import evaluate_policy

    if not path.exists():
        evaluate_policy(policy(), config, path, name, progress=True, verbose=False,
                        transcript=path.with_suffix(".transcript.jsonl"))
    return json.loads(path.read_text())


def run_one(variant: str, seed: int, out: Path, eval_meta_episodes: int) -> dict:
    """Evaluate the untrained model, train (resuming), evaluate the trained one."""
    from mage_agent.build import build_policy
    from mage_agent.checkpoint import latest_checkpoint
    from mage_agent.config import apply_overrides
    from mage_agent.trainer import Trainer

    config = run_config(variant, seed, out, eval_meta_episodes)
    folder = Path(config.run.output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    untrained = evaluate_once(lambda: build_policy(config, folder), config, folder / "bench_untrained.json", "untrained")
    checkpoint = latest_checkpoint(folder / "checkpoints")
    done = checkpoint is not None and json.loads((checkpoint / "state.json").read_text())["iteration"] >= config.run.iterations
    if not done:   # the benchmark evaluates, not the trainer
        Trainer(apply_overrides(config, {"eval_meta_episodes": 0}), resume=checkpoint is not None,
                overwrite=checkpoint is None).train()
        checkpoint = latest_checkpoint(folder / "checkpoints")
    if checkpoint is None:
        raise RuntimeError(f"{folder}: the training wrote no checkpoint")
    trained = evaluate_once(lambda: build_policy(config, folder, checkpoint), config, folder / "bench_trained.json",
                            variant)
    keep_adapter(checkpoint, ADAPTERS / f"{variant}-s{seed}")
    return {"variant": variant, "seed": seed, "iterations": config.run.iterations,
            "trained": per_style(trained, TRAINING + HELDOUT), "untrained": per_style(untrained, TRAINING + HELDOUT),
            "seconds": sum(m.get("seconds", 0.0) for m in _history(folder / "metrics.jsonl"))}


def keep_adapter(checkpoint: Path, target: Path) -> None:
    """Copy a checkpoint's adapter and state (not its optimizer, nor the tokenizer, which
    loads from the base model) to ``target``, a folder that ``mage eval --agent policy
    --model target`` evaluates with the run's settings."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(checkpoint / "model", target / "model",
                    ignore=shutil.ignore_patterns("tokenizer*", "chat_template.jinja", "special_tokens_map.json"))
    shutil.copy2(checkpoint / "state.json", target / "state.json")


def _history(path: Path) -> list[dict]:
    """The iterations logged in a run's ``metrics.jsonl`` (none if it is missing)."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def by_tens(history: list[dict]) -> list[dict]:
    """A run's training metrics by tens of iterations: the batch's mean return in the first
    and final hand and the policy's entropy (a collapsing run plays hand 3 like hand 1).

    Example:
        >>> by_tens([{"iteration": i + 1, "return_ep1": 0.0, "return_ep3": i / 10, "entropy": 0.5} for i in range(12)])
        [{'iterations': '1-10', 'R1': 0.0, 'R3': 0.45, 'entropy': 0.5}, {'iterations': '11-12', 'R1': 0.0, 'R3': 1.05, 'entropy': 0.5}]
    """
    rows = []
    for start in range(0, len(history), 10):
        window = history[start:start + 10]
        rows.append({"iterations": f"{window[0]['iteration']}-{window[-1]['iteration']}",
                     **{key: round(float(np.mean([m[source] for m in window])), 3)
                        for key, source in (("R1", "return_ep1"), ("R3", "return_ep3"), ("entropy", "entropy"))}})
    return rows


def summarise(rows: list[dict]) -> dict[str, dict]:
    """Per variant: means over seeds with 95% CIs of the final hand, its share of the
    ceiling, final minus first hand and trained minus untrained, per style; whether every
    seed reaches 80% of every training style's ceiling."""
    table: dict[str, dict] = {}
    for variant in VARIANTS:
        runs = sorted((r for r in rows if r["variant"] == variant), key=lambda r: r["seed"])
        if not runs:
            continue
        styles = {}
        for style in TRAINING + HELDOUT:
            trained = [r["trained"][style] for r in runs]
            untrained = [r["untrained"][style] for r in runs]
            styles[style] = {
                "first": mean_ci([t["first"] for t in trained]),
                "final": mean_ci([t["final"] for t in trained]),
                "share_by_seed": [round(t["share"], 3) for t in trained],
                "share": mean_ci([t["share"] for t in trained]),
                "final_minus_first": mean_ci([t["final"] - t["first"] for t in trained]),
                "trained_minus_untrained": mean_ci([t["final"] - u["final"] for t, u in zip(trained, untrained)]),
                "untrained_final": mean_ci([u["final"] for u in untrained]),
                "ceiling": float(np.mean([t["ceiling"] for t in trained])),
            }
        table[variant] = {
            "seeds": [r["seed"] for r in runs], "styles": styles,
            "every_seed_every_style_80": all(r["trained"][s]["share"] >= 0.8 for r in runs for s in TRAINING),
            "minutes_per_run": mean_ci([r["seconds"] / 60 for r in runs]),
            "paired_with": PAIRED_WITH.get(variant),
        }
    return table


def markdown_table(row: dict) -> str:
    """One variant's summary as the README's table: per style (held out starred), means over
    seeds with the half-width of their 95% CI, and each seed's share of the ceiling.

    Example:
        >>> cell = {"first": (0.1, 0.02), "final": (0.3, 0.01), "final_minus_first": (0.2, 0.03),
        ...         "trained_minus_untrained": (0.5, 0.1), "untrained_final": (-0.2, 0.1), "ceiling": 0.3,
        ...         "share_by_seed": [1.0, 0.98]}
        >>> print(markdown_table({"seeds": [0, 1], "styles": {"aggressive": cell}}).splitlines()[-1])
        | share of the ceiling, seed by seed | 100% / 98% |
    """
    styles = list(row["styles"])
    names = [s if s in TRAINING else f"{s}*" for s in styles]

    def signed(x: float) -> str:
        return f"{x:+.2f}".replace("-", "−")

    def cells(key: str) -> str:
        return " | ".join(signed(mean) + ("" if np.isnan(half) else f" ± {half:.2f}")
                          for mean, half in (row["styles"][s][key] for s in styles))

    seeds = ", ".join(str(seed) for seed in row["seeds"])
    return "\n".join([
        f"| SmolLM2-135M + LoRA, seeds {seeds} | {' | '.join(names)} |",
        "|---" * (len(styles) + 1) + "|",
        f"| untrained, final hand | {cells('untrained_final')} |",
        f"| trained, first hand | {cells('first')} |",
        f"| trained, final hand | {cells('final')} |",
        f"| final − first hand | {cells('final_minus_first')} |",
        f"| trained − untrained, final hand | {cells('trained_minus_untrained')} |",
        "| deal-known ceiling | " + " | ".join(signed(row["styles"][s]["ceiling"]) for s in styles) + " |",
        "| share of the ceiling, seed by seed | "
        + " | ".join(" / ".join(f"{x:.0%}" for x in row["styles"][s]["share_by_seed"]) for s in styles) + " |",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--variants", nargs="+", default=["smollm2"], choices=list(VARIANTS))
    parser.add_argument("--eval-meta-episodes", type=int, default=120, help="per style, stratified")
    parser.add_argument("--output-dir", type=Path, default=ROOT / "runs" / "smollm2-learning")
    parser.add_argument("--summarise-only", action="store_true", help="tabulate the finished runs only")
    parser.add_argument("--curves", type=Path, nargs="+", metavar="METRICS",
                        help="print these runs' metrics.jsonl by tens of iterations (e.g. "
                             "benchmarks/results/smollm2-cpu-trials/*.jsonl) and stop")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "smollm2-learning.json")
    args = parser.parse_args()
    if args.curves:
        for path in args.curves:
            print(path.name)
            for row in by_tens(_history(path)):
                print(f"  iterations {row['iterations']:>7}: hand 1 {row['R1']:+.3f}  hand 3 {row['R3']:+.3f}  "
                      f"entropy {row['entropy']:.2f}")
        return
    stored = json.loads(args.results.read_text())["rows"] if args.results.exists() else []
    fresh = []
    for variant in args.variants:
        for seed in args.seeds:
            if args.summarise_only:
                if not (run_dir(str(args.output_dir), variant, seed) / "bench_trained.json").exists():
                    continue
            fresh.append(run_one(variant, seed, args.output_dir, args.eval_meta_episodes))
    keys = {(r["variant"], r["seed"]) for r in fresh}
    rows = [r for r in stored if (r["variant"], r["seed"]) not in keys] + fresh
    table = summarise(rows)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows,
                                        "table": table}, indent=1))
    for variant, row in table.items():
        cells = "  ".join(f"{s} {row['styles'][s]['final'][0]:+.2f} ({row['styles'][s]['share'][0]:.0%})" for s in TRAINING)
        print(f"{variant:<20} seeds {row['seeds']}  final hand {cells}  "
              f"every seed >= 80%: {row['every_seed_every_style_80']}")
    if "smollm2" in table:
        print(markdown_table(table["smollm2"]))


if __name__ == "__main__":
    main()
