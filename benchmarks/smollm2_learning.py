"""Does a pretrained language model learn the MAGE recipe? SmolLM2-135M + LoRA on Kuhn Poker.

Each variant is a set of overrides on ``examples/smollm2_kuhn.yaml`` (the natural-language
``full`` prompt, the env's memory, one action token per turn, LoRA on the attention of the
last 6 layers, 16 x 8 meta-episodes an iteration):

* ``smollm2``             — the config as it stands (repeated deals);
* ``smollm2-fresh-deals`` — a new deal every hand: the style must be read from the betting
  (150 iterations, the entropy weight held for the first 70%);
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
eval --agent policy --model`` loads. A row also keeps the run's per-iteration curves (returns,
entropy, invalid answers, reflection length), the final hand's standard error stratified by
(deal, seat) as the evaluation is, and the model's own reflections; ``--summarise-only``
prints the README's table, the per-seed table of docs/training-results.md and the fresh-deal
table from the stored rows. A run longer than a machine's session is stopped and ``--park``ed:
its newest checkpoint (adapter and optimizer state, about 5 MB) and untrained evaluation go to
``benchmarks/results/smollm2-parked/<variant>-s<seed>``, from which the same command resumes
it on a fresh clone.

    python benchmarks/smollm2_learning.py --seeds 0 1 2 --variants smollm2
    python benchmarks/smollm2_learning.py --seeds 0 1 2 --summarise-only
    python benchmarks/smollm2_learning.py --seeds 1 --variants smollm2-free-text --park
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
#: Runs stopped before they finished, as ``--park`` left them (or an untrained evaluation alone):
#: a fresh machine resumes from here.
PARKED = ROOT / "benchmarks" / "results" / "smollm2-parked"
#: A checkpoint's tokenizer files: the tokenizer loads from the base model.
TOKENIZER_FILES = shutil.ignore_patterns("tokenizer*", "chat_template.jinja", "special_tokens_map.json")
BASE_CONFIG = ROOT / "examples" / "smollm2_kuhn.yaml"
VARIANTS: dict[str, dict[str, Any]] = {
    "smollm2": {},
    # the tiny model's fresh-deal recipe (examples/fresh_deals.yaml): the entropy weight held for
    # 70% of the run, so the final hand keeps trying the answers that tell the styles apart
    "smollm2-fresh-deals": {"repeat_instance": False, "entropy_hold": 0.7, "iterations": 150},
    "smollm2-reflection": {"reflection": True, "max_new_tokens": 48},
    # a KL penalty to the untrained model (the adapter switched off): without it, seed 1's run
    # broke its language at iteration 16; with k3's penalty, whose gradient grows as exp(d) on
    # tokens the reference likes far more, one update's gradient norm hit 70 at iteration 15 and
    # the language broke at 16; with k2's, 21 iterations oscillated between 0% and 31% invalid
    # answers ("checkcheckcheck…"), updates of approx. KL up to 0.16 a token: a lower learning
    # rate. At 3e-4 the invalid answers fell to 1.8% by iteration 15, then rose to 9% by 21, all
    # "<action>callcallcall…" cut off at the 8-token budget, which the loss masked out: nothing
    # pushed them down. So those are trained on, with the penalty that followed
    # (docs/training-results.md, "free-text answers")
    "smollm2-free-text": {"action_tokens": False, "max_new_tokens": 8, "kl_coef": 0.05, "kl_estimator": "k2",
                          "learning_rate": 3.0e-4, "train_truncated": True},
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
    parked = PARKED / folder.name
    unpark(parked, folder)
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
    shutil.rmtree(parked, ignore_errors=True)
    history = _history(folder / "metrics.jsonl")
    return {"variant": variant, "seed": seed, "iterations": config.run.iterations,
            "trained": styles_of(trained, folder / "bench_trained.transcript.jsonl"),
            "untrained": styles_of(untrained, folder / "bench_untrained.transcript.jsonl"),
            "best_nonadaptive": trained.get("best_nonadaptive_value"),
            "seconds": sum(m.get("seconds", 0.0) for m in history), "curves": curves(history),
            "reflections": {"trained": reflections(folder / "bench_trained.transcript.jsonl"),
                            "untrained": reflections(folder / "bench_untrained.transcript.jsonl")}}


def styles_of(report: dict, transcript: Path) -> dict[str, dict[str, float]]:
    """:func:`learning.per_style` of every training and held-out style, with each one's
    invalid-answer rate and the final hand's stratified standard error (from the transcript)."""
    styles = per_style(report, TRAINING + HELDOUT)
    strata = final_hand_strata(transcript)
    for style, row in styles.items():
        row["invalid"] = report["opponents"][style]["invalid_action_rate"]
        if style in strata:
            row["final_stderr"] = stratified_stderr(list(strata[style].values()))
    return styles


def final_hand_strata(transcript: Path) -> dict[str, dict[tuple, list[float]]]:
    """Per opponent, the final hand's returns grouped by the (deal, seat) it was played on:
    the strata of the stratified evaluation."""
    from mage_envs.oracle.winnable import instance_deal

    strata: dict[str, dict[tuple, list[float]]] = {}
    for line in transcript.read_text().splitlines() if transcript.exists() else []:
        record = json.loads(line)
        if "returns" not in record or not record.get("episode_instances"):
            continue
        instance, seat = record["episode_instances"][-1]
        cell = (instance_deal("kuhn_poker", instance), seat)
        strata.setdefault(record["opponent"], {}).setdefault(cell, []).append(record["returns"][-1])
    return strata


def stratified_stderr(strata: list[list[float]]) -> float:
    """The standard error of the mean of a stratified sample, each stratum weighed by its
    share of the sample: deal luck, which stratification removes, does not count.

    Example:
        >>> round(stratified_stderr([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]]), 6)   # no spread within a deal
        0.0
        >>> round(stratified_stderr([[1.0, -1.0], [1.0, -1.0]]), 3)   # sqrt(2 * 0.5**2 * 2 / 2)
        0.707
    """
    total = sum(len(values) for values in strata)
    return float(np.sqrt(sum((len(v) / total) ** 2 * np.var(v, ddof=1) / len(v) for v in strata if len(v) > 1)))


#: the per-iteration training metrics a row keeps (those a run logs)
CURVES = ("return_ep1", "return_ep3", "entropy", "invalid_rate", "reflection_tokens")


def curves(history: list[dict]) -> dict[str, list[float]]:
    """The per-iteration metrics of :data:`CURVES` that the run logged, rounded.

    Example:
        >>> curves([{"return_ep1": 0.123456, "invalid_rate": 0.5}, {"return_ep1": -1.0, "invalid_rate": 0.0}])
        {'return_ep1': [0.1235, -1.0], 'invalid_rate': [0.5, 0.0]}
    """
    return {key: [round(float(m[key]), 4) for m in history] for key in CURVES if history and key in history[0]}


def reflections(transcript: Path, per_style: int = 2) -> list[dict]:
    """The reflections the model wrote in a transcript's kept steps, the first
    ``per_style`` meta-episodes per training style: opponent, after which hand, the text."""
    found: list[dict] = []
    if not transcript.exists():
        return found
    taken: dict[str, int] = {}
    for line in transcript.read_text().splitlines():
        record = json.loads(line)
        style = record.get("opponent")
        steps = [s for s in record.get("steps") or [] if s["phase"] == "reflect"]
        if style not in TRAINING or not steps or taken.get(style, 0) >= per_style:
            continue
        taken[style] = taken.get(style, 0) + 1
        found += [{"opponent": style, "after_hand": s["episode"] + 1, "text": s["answer"]} for s in steps]
    return found


def keep_adapter(checkpoint: Path, target: Path) -> None:
    """Copy a checkpoint's adapter and state (not its optimizer, nor the tokenizer, which
    loads from the base model) to ``target``, a folder that ``mage eval --agent policy
    --model target`` evaluates with the run's settings."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(checkpoint / "model", target / "model", ignore=TOKENIZER_FILES)
    shutil.copy2(checkpoint / "state.json", target / "state.json")


def park(folder: Path, target: Path) -> None:
    """Copy what the stopped run in ``folder`` needs to resume on another machine to
    ``target``: its newest checkpoint with the optimizer state (without the tokenizer) and
    the untrained model's evaluation with its transcript (finished or not) and the invalid
    answers kept so far (the trainer trims them to the checkpoint on resuming)."""
    from mage_agent.checkpoint import latest_checkpoint

    checkpoint = latest_checkpoint(folder / "checkpoints")
    if checkpoint is None:
        raise SystemExit(f"{folder}: no checkpoint to park")
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(checkpoint, target / "checkpoints" / checkpoint.name, ignore=TOKENIZER_FILES)
    (target / "checkpoints" / "latest").write_text(checkpoint.name)
    for name in ("bench_untrained.json", "bench_untrained.transcript.jsonl", "invalid_answers.jsonl"):
        if (folder / name).exists():
            shutil.copy2(folder / name, target / name)


def unpark(parked: Path, folder: Path) -> None:
    """Put a run that :func:`park` left in ``parked`` back into ``folder`` for its trainer to
    resume, unless ``folder`` holds a checkpoint of its own."""
    from mage_agent.checkpoint import latest_checkpoint

    if parked.exists() and latest_checkpoint(folder / "checkpoints") is None:
        shutil.copytree(parked, folder, dirs_exist_ok=True)


def _history(path: Path) -> list[dict]:
    """The iterations logged in a run's ``metrics.jsonl`` (none if it is missing)."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def mean_by_tens(values: list[float]) -> list[float]:
    """The means of ``values`` over consecutive windows of ten (the last one may be shorter).

    Example:
        >>> mean_by_tens([float(i) for i in range(12)])
        [4.5, 10.5]
    """
    return [float(np.mean(values[start:start + 10])) for start in range(0, len(values), 10)]


def by_tens(history: list[dict]) -> list[dict]:
    """A run's training metrics by tens of iterations: the batch's mean return in the first
    and final hand, the policy's entropy (a collapsing run plays hand 3 like hand 1) and,
    where logged, the invalid-answer rate.

    Example:
        >>> by_tens([{"iteration": i + 1, "return_ep1": 0.0, "return_ep3": i / 10, "entropy": 0.5} for i in range(12)])
        [{'iterations': '1-10', 'R1': 0.0, 'R3': 0.45, 'entropy': 0.5}, {'iterations': '11-12', 'R1': 0.0, 'R3': 1.05, 'entropy': 0.5}]
    """
    spans = [f"{history[start]['iteration']}-{history[min(start + 9, len(history) - 1)]['iteration']}"
             for start in range(0, len(history), 10)]
    sources = (("R1", "return_ep1"), ("R3", "return_ep3"), ("entropy", "entropy"), ("invalid", "invalid_rate"))
    means = {key: mean_by_tens([float(m[source]) for m in history])
             for key, source in sources if all(source in m for m in history)}
    return [{"iterations": span, **{key: round(values[i], 3) for key, values in means.items()}}
            for i, span in enumerate(spans)]


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
        by_seed = [training_mean(r["trained"]) for r in runs]
        table[variant] = {
            "seeds": [r["seed"] for r in runs], "styles": styles,
            "every_seed_every_style_80": all(r["trained"][s]["share"] >= 0.8 for r in runs for s in TRAINING),
            "minutes_per_run": mean_ci([r["seconds"] / 60 for r in runs]),
            "paired_with": PAIRED_WITH.get(variant),
            "final_training_by_seed": by_seed,
            "final_training": mean_ci([mean for mean, _ in by_seed]),
        }
        if all("bayes" in r["trained"][s] for r in runs for s in TRAINING):
            bayes = [float(np.mean([r["trained"][s]["bayes"] for s in TRAINING])) for r in runs]
            table[variant]["bayes_training_by_seed"] = bayes
            table[variant]["share_of_bayes_by_seed"] = [m / b for (m, _), b in zip(by_seed, bayes)]
        if all(r.get("best_nonadaptive") is not None for r in runs):
            table[variant]["above_nonadaptive_95_by_seed"] = [
                mean - half > r["best_nonadaptive"] for (mean, half), r in zip(by_seed, runs)]
        if all("invalid_rate" in r.get("curves", {}) for r in runs):
            table[variant]["invalid_below_1pct_from"] = [below_from(r["curves"]["invalid_rate"], 0.01) for r in runs]
        references = {q["seed"]: q for q in rows if q["variant"] == PAIRED_WITH.get(variant)}
        paired = [mean - training_mean(references[r["seed"]]["trained"])[0]
                  for (mean, _), r in zip(by_seed, runs) if r["seed"] in references]
        if paired:
            table[variant]["minus_reference_by_seed"] = paired
    return table


def training_mean(styles: dict[str, dict[str, float]]) -> tuple[float, float]:
    """The final hand's mean over the training styles and the half-width of its 95% CI over
    the meta-episodes evaluated (stratified by deal and seat; NaN for rows stored without
    standard errors).

    Example:
        >>> training_mean({s: {"final": 0.3, "final_stderr": 0.05} for s in TRAINING})
        (0.3, 0.057)
    """
    finals = [styles[s]["final"] for s in TRAINING]
    errors = [styles[s].get("final_stderr", float("nan")) for s in TRAINING]
    return float(np.mean(finals)), round(1.96 * float(np.sqrt(np.sum(np.square(errors)))) / len(errors), 3)


def below_from(rates: list[float], bound: float) -> int | None:
    """The first iteration (1-based) from which every logged rate is below ``bound``.

    Example:
        >>> below_from([0.5, 0.0, 0.2, 0.005, 0.0], 0.01), below_from([0.0, 0.3], 0.01)
        (4, None)
    """
    above = [i for i, rate in enumerate(rates) if rate >= bound]
    first = above[-1] + 2 if above else 1
    return first if first <= len(rates) else None


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


def describe(variant: str, row: dict, runs: list[dict]) -> str:
    """What a variant's summary says seed by seed beyond the style table: the final hand's
    mean over the training styles (95% CI over the meta-episodes evaluated) beside the Bayes
    agent and the best non-adaptive value, the invalid-answer rate, the reflections' length,
    and the paired difference."""
    lines = [f"{variant}:"]
    for (mean, half), r in zip(row["final_training_by_seed"], sorted(runs, key=lambda r: r["seed"])):
        line = f"  seed {r['seed']}: final hand over the training styles {mean:+.3f} ± {half:.3f}"
        if "bayes_training_by_seed" in row:
            bayes = row["bayes_training_by_seed"][row["seeds"].index(r["seed"])]
            line += f" (Bayes agent {bayes:+.3f}: {mean / bayes:.0%})"
        if r.get("best_nonadaptive") is not None:
            line += f"; above the best non-adaptive {r['best_nonadaptive']:+.3f} with 95% confidence: " \
                    f"{mean - half > r['best_nonadaptive']}"
        lines.append(line)
        history = r.get("curves", {})
        if "invalid_rate" in history and max(history["invalid_rate"], default=0) > 0:
            lines.append("    invalid answers by tens of iterations: "
                         + " ".join(f"{x:.1%}" for x in mean_by_tens(history["invalid_rate"]))
                         + f"; below 1% from iteration {below_from(history['invalid_rate'], 0.01)}")
        if "reflection_tokens" in history:
            lines.append("    reflection tokens by tens of iterations: "
                         + " ".join(f"{x:.0f}" for x in mean_by_tens(history["reflection_tokens"])))
    if "minus_reference_by_seed" in row:
        lines.append(f"  minus {row['paired_with']}, seed by seed: "
                     + " ".join(f"{d:+.3f}" for d in row["minus_reference_by_seed"]))
    return "\n".join(lines)


def fresh_deal_table(run: dict) -> str:
    """One fresh-deal run per style: the untrained and trained final hand, the trained first
    hand, the final hand's 95% CI over the meta-episodes, and beside it the Bayes-optimal
    agent's final hand on the same meta-episodes and the best response's on the same deals.

    Example:
        >>> cell = {"first": 0.1, "final": 0.2, "final_stderr": 0.05, "ceiling": 0.4, "bayes": 0.25}
        >>> print(fresh_deal_table({"trained": {"maniac": cell}, "untrained": {"maniac": cell}}).splitlines()[-1])
        | maniac (held out) | +0.200 | +0.100 | +0.200 ± 0.098 | +0.250 | +0.400 |
    """
    lines = ["| style | untrained final | trained first hand | trained final hand | Bayes agent's final | "
             "best response's final |", "|---|---|---|---|---|---|"]

    def signed(x: float | None) -> str:
        return "—" if x is None else f"{x:+.3f}".replace("-", "−")

    for style in [s for s in TRAINING + HELDOUT if s in run["trained"]]:
        t = run["trained"][style]
        name = style if style in TRAINING else f"{style} (held out)"
        lines.append(f"| {name} | {signed(run['untrained'][style]['final'])} | {signed(t['first'])} | "
                     f"{signed(t['final'])} ± {1.96 * t['final_stderr']:.3f} | {signed(t.get('bayes'))} | "
                     f"{signed(t['ceiling'])} |")
    return "\n".join(lines)


def per_seed_table(rows: list[dict], variant: str) -> str:
    """One variant's rows seed by seed (docs/training-results.md): per style (held out
    marked), the untrained and trained final hand, the trained first hand, the ceiling on
    the instances evaluated and the final hand's share of it.

    Example:
        >>> cell = {"first": 0.1, "final": 0.3, "ceiling": 0.3, "share": 1.0}
        >>> row = {"variant": "v", "seed": 4, "trained": {"maniac": cell}, "untrained": {"maniac": {**cell, "final": -0.5}}}
        >>> print(per_seed_table([row], "v").splitlines()[-1])
        | maniac (held out) | 4 | −0.500 | +0.100 | +0.300 | +0.300 | 100% |
    """
    runs = sorted((r for r in rows if r["variant"] == variant), key=lambda r: r["seed"])
    lines = ["| style | seed | untrained final | trained first hand | trained final hand | ceiling | share |",
             "|---|---|---|---|---|---|---|"]
    for style in [s for s in TRAINING + HELDOUT if s in runs[0]["trained"]]:
        name = style if style in TRAINING else f"{style} (held out)"
        for r in runs:
            t = r["trained"][style]
            cells = [r["untrained"][style]["final"], t["first"], t["final"], t["ceiling"]]
            lines.append(f"| {name} | {r['seed']} | " + " | ".join(f"{x:+.3f}".replace("-", "−") for x in cells)
                         + f" | {t['share']:.0%} |")
    return "\n".join(lines)


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
    parser.add_argument("--park", action="store_true",
                        help=f"copy these stopped runs' newest checkpoints to {PARKED.relative_to(ROOT)}, from "
                             "which the same command resumes them on a fresh machine, and stop")
    args = parser.parse_args()
    if args.park:
        for variant in args.variants:
            for seed in args.seeds:
                park(run_dir(str(args.output_dir), variant, seed), PARKED / f"{variant}-s{seed}")
        return
    if args.curves:
        for path in args.curves:
            print(path.name)
            for row in by_tens(_history(path)):
                print(f"  iterations {row['iterations']:>7}: hand 1 {row['R1']:+.3f}  hand 3 {row['R3']:+.3f}  "
                      f"entropy {row['entropy']:.2f}" + (f"  invalid {row['invalid']:.1%}" if "invalid" in row else ""))
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
    for variant, row in table.items():
        print(describe(variant, row, [r for r in rows if r["variant"] == variant]))
    if "smollm2" in table:
        print(markdown_table(table["smollm2"]))
        print(per_seed_table(rows, "smollm2"))
    for r in rows:
        if r["variant"] == "smollm2-fresh-deals":
            print(f"smollm2-fresh-deals, seed {r['seed']}:\n{fresh_deal_table(r)}")


if __name__ == "__main__":
    main()
