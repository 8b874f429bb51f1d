"""The MAGE recipe against its ablations at equal budget, over seeds, paired by seed.

Each variant is a set of `mage train` overrides on the default CPU configuration, against the
three training styles (``conservative``, ``aggressive``, ``intermediate``: the default population
until ``random-style`` joined it) unless it sets its own population:

* ``mage``            — the defaults: differential reward, population, per-archetype groups,
  900 iterations (the three styles; today's default is ``random-style-other-seeds``);
* ``iterations-600``  — the default of the release before, 600 iterations. Every variant below
  was measured at that release and keeps its length (600 unless it sets its own); those
  compared with the default are compared with this one;
* ``cumulative``      — reward every episode's return instead of the final one;
* ``global-norm``     — a group's copies meet different archetypes and share one baseline
  and standard deviation (statistics pooled over archetypes);
* ``single-<style>``  — train against one training style only;
* ``no-memory``       — the control: earlier episodes are not shown (nothing to adapt from);
* ``std-normalize``   — advantages divided by a per-archetype std (the adopted mean-only off);
* ``symmetric-clip``  — PPO's symmetric clip (the adopted clip-higher off);
* ``constant-lr``     — a constant learning rate after warm-up (the adopted cosine decay off);
* ``constant-entropy``— a constant entropy weight (the adopted linear decay off; the default
  of the release before this one);
* ``entropy-hold-0.3``— the entropy weight held for the first 30% of the run, then decayed;
* ``stabilisers-off`` — mean-only advantages alone: symmetric clip, constant rate and entropy
  weight, 200 iterations;
* ``previous-default``— those and mean-only off, at 200 iterations (the release before those);
* ``fresh-deals``     — a new deal every hand (``repeat_instance: false``): the style must be
  read from the betting across deals; ``fresh-deals-cumulative`` rewards every hand there,
  ``fresh-deals-final`` the final hand only (no credit for winning a probing hand),
  ``fresh-deals-900`` trains 900 iterations, ``fresh-deals-gigpo`` adds GiGPO's step-level
  term (turns with the same prompt share a baseline), ``fresh-deals-gamma-0.9`` discounts
  less across hands (``gamma_traj`` 0.9: the final hand weighs 0.81 of an early hand's
  return instead of 0.36, so probing pays more), ``fresh-deals-dynamic`` DAPO's dynamic
  sampling, ``fresh-deals-constant-entropy`` a constant entropy weight (exploration kept to
  the end), ``fresh-deals-entropy-hold`` the entropy weight held for 70% of the run, then
  decayed linearly (exploration, then a sharp final policy), ``fresh-deals-return-std``
  advantages divided by the std of each archetype's returns (each paired with ``fresh-deals``);
* ``stakes``, ``stakes-std``, ``stakes-global`` — reward scales that differ tenfold between
  archetypes (``reward_weights``: ``aggressive`` is played for ten times the stakes), under the
  default mean-only advantages, per-archetype mean and std, and batch-wide mean and std (the
  test of per-archetype normalisation);
* ``stakes-return-std`` — the same stakes, advantages divided by the std of each archetype's
  returns (its reward scale) instead of the std of its advantages. The ``stakes-*`` variants
  are paired with ``stakes``;
* ``return-std``      — the same advantages without stakes (is the scale-free option free?);
* ``iterations-400`` — the default's length before it became 600 iterations;
* ``random-style-other-seeds`` — the defaults with ``random-style`` (a pure style drawn for
  each meta-episode) in the population, on seeds 20-29, paired with ``mage-other-seeds``: the
  default since (``mage train``'s Kuhn Poker population);
  ``fresh-deals-random-style-other-seeds`` the same population with ``examples/fresh_deals.yaml``'s
  settings (not paired: no fresh-deal run of the default population is on those seeds);
  ``random-style-league-other-seeds`` adds a league of the learner's first hand and the exact
  best response to it, refreshed every 2 iterations (paired with ``random-style-other-seeds``);
  ``equilibrium-other-seeds`` pulls the first hand toward Nash instead (``equilibrium_coef: 1``,
  paired with ``random-style-other-seeds``): the default since;
* ``fresh-deals-config-other-seeds`` — ``examples/fresh_deals.yaml`` on seeds 20-29, and
  ``fresh-deals-equilibrium-other-seeds`` the same with ``equilibrium_coef: 1``, paired with it;
* ``<variant>-plain`` — runs made before the packed forward was the default, at 400
  iterations unless the variant sets its own (``packed_forward: false``), compared among
  themselves (not run unless named);
  ``<ablation>-constant-entropy-plain`` are ablations at the release before that (constant
  entropy weight).

Every run is evaluated, stratified over the 12 (deal, seat) instances of Kuhn Poker, on the
three training styles and the held-out ones; each return is compared with the deal-known
ceiling on the very instances evaluated (``instance_optimal_value``). Evaluated runs are
kept in ``--output-dir`` and never re-trained (a warning names any trained with settings
other than its variant's); a run killed midway continues from its last
checkpoint (every 100 iterations) if its settings are the variant's, and starts over if
not, so a killed benchmark resumes where it stopped.
Results go to ``benchmarks/results/learning.json``, ``docs/learning.md`` and
``docs/learning.png``; runs are not committed, so a variant with no evaluated run in
``--output-dir`` keeps its row from the results file (named on stderr) and is paired as before
(fresh-deal rows only with rows measured under their protocol).

    python benchmarks/learning.py --seeds 0 1 2 3 4 5 6 7 8 9 --variants mage cumulative --jobs 2
    python benchmarks/learning.py --summarise-only --seeds 0 1 2 3 4 5 6 7 8 9

With ``--kept-dir DIR`` each evaluated run's ``eval.json`` is also copied to
``DIR/<variant>-s<seed>.json`` when the benchmark ends (``benchmarks/results/learning-kept``
holds those of the runs measured since; commit it), and a run that DIR holds counts as
evaluated, so a fresh checkout trains only the seeds it lacks.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from mage_agent.config import TrainConfig

TRAINING = ["conservative", "aggressive", "intermediate"]
HELDOUT = ["bluffer", "calling-station", "maniac"]
STAKES = {"aggressive": 10.0}
VARIANTS: dict[str, dict] = {
    "mage": {},
    "iterations-600": {},
    "cumulative": {"reward_mode": "cumulative"},
    "global-norm": {"scope": "global", "group_opponents": "mixed"},
    **{f"single-{style}": {"single_opponent": style} for style in TRAINING},
    "no-memory": {"memory": False},
    "std-normalize": {"std_normalize": True},
    "symmetric-clip": {"clip_high": 0.2},
    "constant-lr": {"schedule": "constant"},
    "constant-entropy": {"entropy_schedule": "constant"},
    "entropy-hold-0.3": {"entropy_hold": 0.3},
    "stabilisers-off": {"clip_high": 0.2, "schedule": "constant", "entropy_schedule": "constant", "iterations": 200},
    "previous-default": {"std_normalize": True, "clip_high": 0.2, "schedule": "constant",
                         "entropy_schedule": "constant", "iterations": 200},
    "fresh-deals": {"repeat_instance": False},
    "fresh-deals-cumulative": {"repeat_instance": False, "reward_mode": "cumulative"},
    "fresh-deals-900": {"repeat_instance": False, "iterations": 900},
    "fresh-deals-final": {"repeat_instance": False, "reward_mode": "final"},
    "fresh-deals-gigpo": {"repeat_instance": False, "estimator": "gigpo"},
    "fresh-deals-gamma-0.9": {"repeat_instance": False, "gamma_traj": 0.9},
    "fresh-deals-dynamic": {"repeat_instance": False, "dynamic_sampling": True},
    "fresh-deals-constant-entropy": {"repeat_instance": False, "entropy_schedule": "constant"},
    "fresh-deals-return-std": {"repeat_instance": False, "std_normalize": True, "std_of": "returns"},
    "fresh-deals-entropy-hold": {"repeat_instance": False, "entropy_hold": 0.7},
    "fresh-deals-entropy-hold-1200": {"repeat_instance": False, "entropy_hold": 0.7, "iterations": 1200},
    "stakes": {"reward_weights": STAKES},
    "stakes-std": {"reward_weights": STAKES, "std_normalize": True},
    "stakes-global": {"reward_weights": STAKES, "std_normalize": True, "scope": "global", "group_opponents": "mixed"},
    "stakes-return-std": {"reward_weights": STAKES, "std_normalize": True, "std_of": "returns"},
    "return-std": {"std_normalize": True, "std_of": "returns"},
}
#: What a fresh-deal row was measured under: 2 since fresh deals follow the seed and every
#: hand of an evaluation is stratified (rows without it came before; they pair among themselves).
FRESH_PROTOCOL = 2
#: The variant each is compared with, seed by seed (the default unless named here).
PAIRED_WITH = {f"stakes-{name}": "stakes" for name in ("std", "global", "return-std")}
PAIRED_WITH.update({f"fresh-deals-{name}": "fresh-deals" for name in ("cumulative", "900", "final", "gigpo", "gamma-0.9",
                                                                      "dynamic", "constant-entropy", "return-std",
                                                                      "entropy-hold")})
PAIRED_WITH["fresh-deals-entropy-hold-1200"] = "fresh-deals-entropy-hold"
#: The default's length before it became 600 iterations.
VARIANTS["iterations-400"] = {"iterations": 400}
#: Runs made before the packed forward became the default, at 400 iterations (or their own), kept as
#: ``<variant>-plain`` (``packed_forward: false``: the same algorithm to float rounding, 1.8
#: times slower) and compared among themselves; ``mage-plain`` against ``iterations-400``
#: measures the switch. The ``<ablation>-constant-entropy-plain`` runs are ablations at the
#: release before that (constant entropy weight), compared with ``constant-entropy-plain``.
AT_CONSTANT_ENTROPY = ("cumulative", "global-norm", "no-memory", "fresh-deals")
RUN_PLAIN = {name: VARIANTS[name] for name in ("mage", "constant-entropy", "stabilisers-off", "fresh-deals",
                                              "fresh-deals-cumulative", "stakes", "stakes-std", "stakes-global",
                                              "stakes-return-std")}
RUN_PLAIN.update({f"{name}-constant-entropy": {**VARIANTS[name], "entropy_schedule": "constant"}
                  for name in AT_CONSTANT_ENTROPY})
PLAIN_VARIANTS = {f"{name}-plain": {"iterations": 400, **overrides, "packed_forward": False}
                  for name, overrides in RUN_PLAIN.items()}
VARIANTS.update(PLAIN_VARIANTS)
PAIRED_WITH.update({f"{name}-plain": "constant-entropy-plain" if name.endswith("-constant-entropy")
                    else f"{PAIRED_WITH.get(name, 'mage')}-plain" for name in RUN_PLAIN})
PAIRED_WITH["mage-plain"] = "iterations-400"
#: The default trains 900 iterations (this release); every other variant was measured before, at
#: 600 unless it sets its own length, and is compared with ``iterations-600`` (that release's
#: default) where it was compared with the default.
VARIANTS.update({name: {"iterations": 600, **overrides} for name, overrides in VARIANTS.items() if name != "mage"})
#: The method's claims rerun at the default's length: ``<ablation>-900`` against the default
#: (the stakes ones against ``stakes-900``).
AT_DEFAULT_LENGTH = ("cumulative", "global-norm", "stakes", "stakes-global", "stakes-return-std", "no-memory",
                     *(f"single-{style}" for style in TRAINING), "stabilisers-off")
VARIANTS.update({f"{name}-900": {**VARIANTS[name], "iterations": 900} for name in AT_DEFAULT_LENGTH})
PAIRED_WITH.update({f"{name}-900": "stakes-900" if name.startswith("stakes-") else "mage" for name in AT_DEFAULT_LENGTH})
#: The defaults on seeds that no default was chosen on (run with ``--seeds 20 ... 29``; the
#: defaults were chosen on seeds 0-19): this release's and the release before's.
OTHER_SEEDS = {"mage-other-seeds": {"iterations": 900}, "iterations-600-other-seeds": {"iterations": 600}}
VARIANTS.update(OTHER_SEEDS)
#: The default with ``random-style`` (a pure style drawn per meta-episode, never a held-out one)
#: added to the population at equal weight: chosen on seed 0 alone, measured on seeds 20-29
#: beside ``mage-other-seeds``.
RANDOM_STYLE_POPULATION = {"conservative": 1.0, "aggressive": 1.0, "intermediate": 1.0, "random-style": 1.0}
VARIANTS["random-style-other-seeds"] = {"iterations": 900, "population": RANDOM_STYLE_POPULATION}
PAIRED_WITH["random-style-other-seeds"] = "mage-other-seeds"
#: That population with a league whose snapshot, every 2 iterations, brings the learner's first
#: hand and the exact best response to it (one of each kept, half the groups): chosen among the
#: league trials of seed 0 (benchmarks/results/league-trials-s0.json), paired with the above.
RANDOM_STYLE_LEAGUE = {"league": True, "league_members": "both", "league_sampling": "uniform",
                       "league_interval": 2, "league_pool_size": 1, "league_share": 0.5}
VARIANTS["random-style-league-other-seeds"] = {"iterations": 900, "population": RANDOM_STYLE_POPULATION,
                                               **RANDOM_STYLE_LEAGUE}
PAIRED_WITH["random-style-league-other-seeds"] = "random-style-other-seeds"
#: That population with the first hand pulled toward the equilibrium (``equilibrium_coef``: the
#: loss adds KL(nash || policy) at the first hand's information states): one trial on seed 0,
#: weight 1 set before it, measured on seeds 20-29, paired with ``random-style-other-seeds``.
VARIANTS["equilibrium-other-seeds"] = {"iterations": 900, "population": RANDOM_STYLE_POPULATION,
                                       "equilibrium_coef": 1.0}
PAIRED_WITH["equilibrium-other-seeds"] = "random-style-other-seeds"
#: ``examples/fresh_deals.yaml`` (``fresh-deals-entropy-hold-1200``) on seeds 20-29, and the same
#: with the first hand anchored to the equilibrium (one trial on seed 0 before: 95% of the
#: Bayes-optimal agent against 89%), paired with it.
VARIANTS["fresh-deals-config-other-seeds"] = dict(VARIANTS["fresh-deals-entropy-hold-1200"])
VARIANTS["fresh-deals-equilibrium-other-seeds"] = {**VARIANTS["fresh-deals-entropy-hold-1200"], "equilibrium_coef": 1.0}
PAIRED_WITH["fresh-deals-equilibrium-other-seeds"] = "fresh-deals-config-other-seeds"
#: The same population with fresh deals (``examples/fresh_deals.yaml``'s settings), seeds 20-29:
#: no fresh-deal run of the default population exists on those seeds, so it is not paired.
UNPAIRED_OTHER_SEEDS = {"fresh-deals-random-style-other-seeds": {
    "repeat_instance": False, "entropy_hold": 0.7, "iterations": 1200, "population": RANDOM_STYLE_POPULATION}}
VARIANTS.update(UNPAIRED_OTHER_SEEDS)
PAIRED_WITH.update({name: "iterations-600" for name in VARIANTS if name not in PAIRED_WITH
                    and name not in ("mage", "iterations-600", "fresh-deals-config-other-seeds", *OTHER_SEEDS,
                                     *UNPAIRED_OTHER_SEEDS)})
ROOT = Path(__file__).resolve().parent.parent
#: Iterations between a run's checkpoints: a killed benchmark continues each run from its last.
CHECKPOINT_EVERY = 100


def fresh_deals(variant: str) -> bool:
    """Whether ``variant`` deals afresh every hand (``repeat_instance: false``).

    Example:
        >>> fresh_deals("fresh-deals-gigpo"), fresh_deals("mage")
        (True, False)
    """
    return not VARIANTS[variant].get("repeat_instance", True)


def run_dir(out: str, variant: str, seed: int) -> Path:
    return Path(out) / f"{variant}-s{seed}"


def run_config(job: tuple[str, int, int, str, dict]) -> TrainConfig:
    """The training config of one (variant, seed) job: the variant's overrides on the defaults
    the variants were measured against (the three training styles, no first-hand anchor)."""
    from mage_agent.config import TrainConfig, apply_overrides

    variant, seed, iterations, out, overrides = job
    return apply_overrides(TrainConfig(), {
        "iterations": iterations, "seed": seed, "output_dir": str(run_dir(out, variant, seed)), "eval_meta_episodes": 0,
        "tensorboard": False, "checkpoint_every": CHECKPOINT_EVERY, "population": dict.fromkeys(TRAINING, 1.0),
        "equilibrium_coef": 0.0, **overrides})


def run_one(job: tuple[str, int, int, str, dict]) -> dict:
    """Train one (variant, seed) unless it already finished, then evaluate it once."""
    from mage_agent.trainer import Trainer

    variant, seed, _, out, _ = job
    folder, config = run_dir(out, variant, seed), run_config(job)
    if (folder / "eval.json").exists():
        warn_if_other_settings(folder, config)
    else:
        stored = _stored(folder, config)
        checkpointed = stored[0] if stored and not stored[1] else None
        if checkpointed != config.run.iterations:
            Trainer(config, resume=checkpointed is not None, progress=False, overwrite=True).train()
        evaluate_run(folder)
    return {"variant": variant, "seed": seed, "report": json.loads((folder / "eval.json").read_text())}


def restore_kept(kept: Path, jobs: list[tuple[str, int, int, str, dict]]) -> None:
    """Put each job's kept evaluation (``kept/<variant>-s<seed>.json``) in its run folder
    as ``eval.json`` where that has none: the run then counts as evaluated."""
    for variant, seed, _, out, _ in jobs:
        source, folder = kept / f"{variant}-s{seed}.json", run_dir(out, variant, seed)
        if source.exists() and not (folder / "eval.json").exists():
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, folder / "eval.json")


def keep(kept: Path, jobs: list[tuple[str, int, int, str, dict]]) -> None:
    """Copy each evaluated job's ``eval.json`` to ``kept/<variant>-s<seed>.json``.

    Example (a run evaluated, kept, and put back in an empty output folder):
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> jobs = [("mage", 3, 900, str(root / "runs"), {})]
        >>> (root / "runs" / "mage-s3").mkdir(parents=True)
        >>> _ = (root / "runs" / "mage-s3" / "eval.json").write_text("{}")
        >>> keep(root / "kept", jobs)
        >>> shutil.rmtree(root / "runs"); restore_kept(root / "kept", jobs)
        >>> (root / "runs" / "mage-s3" / "eval.json").read_text()
        '{}'
    """
    kept.mkdir(parents=True, exist_ok=True)
    for variant, seed, _, out, _ in jobs:
        report = run_dir(out, variant, seed) / "eval.json"
        if report.exists():
            shutil.copyfile(report, kept / f"{variant}-s{seed}.json")


def _stored(folder: Path, config: TrainConfig, unset: bool = True) -> tuple[int, list[str]] | None:
    """The iteration of the newest checkpoint in ``folder`` and the settings (that change
    results) it holds otherwise than ``config`` (``unset=False``: not those its code predates);
    ``None`` without a checkpoint."""
    from mage_agent.checkpoint import latest_checkpoint
    from mage_agent.trainer import setting_changes

    checkpoint = latest_checkpoint(folder / "checkpoints")
    if checkpoint is None:
        return None
    state = json.loads((checkpoint / "state.json").read_text())
    return int(state["iteration"]), setting_changes(state["config"], config, unset)


def warn_if_other_settings(folder: Path, config: TrainConfig) -> None:
    """Say on stderr when an evaluated run that is kept was trained with settings other than
    its variant's (settings its code predates are not counted)."""
    stored = _stored(folder, config, unset=False)
    if stored and stored[1]:
        print(f"{folder.name}: kept, but trained with other settings ({', '.join(stored[1])}); "
              "remove the folder to retrain it", file=sys.stderr)


def evaluation_config(folder: Path, meta_episodes: int = 300) -> tuple[TrainConfig, TrainConfig, Path]:
    """A run's training config (from its last checkpoint), the config it is evaluated with
    (every training style and the held-out ones, whatever the variant trained against) and
    the checkpoint."""
    from mage_agent.checkpoint import latest_checkpoint
    from mage_agent.config import TrainConfig, apply_overrides

    checkpoint = latest_checkpoint(folder / "checkpoints")
    if checkpoint is None:
        raise FileNotFoundError(f"{folder} has no checkpoint")
    config = TrainConfig.from_dict(json.loads((checkpoint / "state.json").read_text())["config"])
    eval_config = apply_overrides(config, {"single_opponent": "", "population": {k: 1.0 for k in TRAINING},
                                           "heldout": HELDOUT, "eval_meta_episodes": meta_episodes})
    return config, eval_config, checkpoint


def evaluate_run(folder: Path, meta_episodes: int = 300) -> dict:
    """Evaluate a run's last checkpoint on every training and held-out style (whatever the
    variant trained against), stratified over instances; writes ``folder/eval.json``."""
    from mage_agent.build import build_policy
    from mage_agent.cli import evaluate_policy

    config, eval_config, checkpoint = evaluation_config(folder, meta_episodes)
    policy = build_policy(config, folder, checkpoint)
    return evaluate_policy(policy, eval_config, folder / "eval.json", folder.name.rpartition("-s")[0],
                           progress=False, verbose=False)


def per_style(report: dict, styles: list[str]) -> dict[str, dict[str, float]]:
    """First and final hand, and the final hand's share of its ceiling, on the very
    instances evaluated: the deal-known value with repeated deals, the best response's value
    on the final hands' deals with fresh deals (its expectation in reports that predate it)."""
    out = {}
    for style in styles:
        result = report["opponents"][style]
        returns = result["mean_return_by_episode"]
        ceiling = result["instance_optimal_value"]
        if ceiling is None:
            on_sample = result.get("best_response_by_episode")
            ceiling = on_sample[-1] if on_sample else result["best_response_value"]
        out[style] = {"first": returns[0], "final": returns[-1], "ceiling": ceiling, "share": returns[-1] / ceiling}
        bayes = (report.get("bayes_by_episode") or {}).get(style)
        if bayes is not None:   # fresh deals: the Bayes-optimal agent's final hand on the same meta-episodes
            out[style]["bayes"] = bayes[-1]
    return out


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% confidence interval (Student t over seeds).

    Example:
        >>> mean_ci([1.0, 2.0, 3.0])
        (2.0, 2.484)
    """
    from scipy import stats

    xs = np.asarray(values, dtype=float)
    if len(xs) < 2:
        return float(xs.mean()), float("nan")
    half = stats.t.ppf(0.975, len(xs) - 1) * xs.std(ddof=1) / np.sqrt(len(xs))
    return float(xs.mean()), round(float(half), 3)


def summarise(results: list[dict], stored: dict[str, dict] | None = None) -> dict[str, dict]:
    """Per variant: per-seed, per-style results; their means with 95% CIs; the targets.

    A variant without results keeps its row from ``stored`` (an earlier table: runs are
    not committed, so a fresh checkout tabulates what it reruns beside what it keeps), and
    every variant is then paired with its reference, stored or not; fresh-deal rows only
    with rows of their ``fresh_protocol`` (the deals and evaluation they were measured under)."""
    table: dict[str, dict[str, Any]] = {}
    by_key = {(r["variant"], r["seed"]): r["report"] for r in results}
    for variant in VARIANTS:
        seeds = sorted(seed for v, seed in by_key if v == variant)
        if not seeds:
            if stored and variant in stored:
                table[variant] = {key: value for key, value in stored[variant].items() if key != "paired"}
            continue
        train = {seed: per_style(by_key[variant, seed], TRAINING) for seed in seeds}
        held = {seed: per_style(by_key[variant, seed], HELDOUT) for seed in seeds}
        final = [float(np.mean([train[s][a]["final"] for a in TRAINING])) for s in seeds]
        ceiling = [float(np.mean([train[s][a]["ceiling"] for a in TRAINING])) for s in seeds]
        first = [float(np.mean([train[s][a]["first"] for a in TRAINING])) for s in seeds]
        row: dict[str, Any] = {
            "seeds": seeds,
            "final_by_seed": [round(float(x), 3) for x in final],
            "final": mean_ci(final),
            "share_of_mean_ceiling": mean_ci([f / c for f, c in zip(final, ceiling)]),
            "first": mean_ci(first),
            "gain_within": mean_ci([f - g for f, g in zip(final, first)]),
            "style_final": {a: mean_ci([train[s][a]["final"] for s in seeds]) for a in TRAINING},
            "style_share_by_seed": {a: [round(train[s][a]["share"], 3) for s in seeds] for a in TRAINING},
            "heldout_first": {a: mean_ci([held[s][a]["first"] for s in seeds]) for a in HELDOUT},
            "heldout_final": {a: mean_ci([held[s][a]["final"] for s in seeds]) for a in HELDOUT},
            "heldout_share": {a: mean_ci([held[s][a]["share"] for s in seeds]) for a in HELDOUT},
            "no_collapse": all(x >= 0.20 for x in final),
            "every_style_80": all(train[s][a]["share"] >= 0.8 for s in seeds for a in TRAINING),
            "seeds_all_90": sum(all(train[s][a]["share"] >= 0.9 for a in TRAINING) for s in seeds),
        }
        if fresh_deals(variant):
            row["fresh_protocol"] = FRESH_PROTOCOL
        if all("bayes" in train[s][a] for s in seeds for a in TRAINING):
            bayes = [np.mean([train[s][a]["bayes"] for a in TRAINING]) for s in seeds]
            row["share_of_bayes"] = mean_ci([f / b for f, b in zip(final, bayes)])
        table[variant] = row
    for variant, row in table.items():
        reference = PAIRED_WITH.get(variant, "mage")
        if variant == reference or reference not in table:
            continue
        fresh = fresh_deals(variant)
        if fresh != fresh_deals(reference):
            continue  # fresh deals against repeated ones: another ceiling
        if fresh and row.get("fresh_protocol") != table[reference].get("fresh_protocol"):
            continue  # measured under other deals and another evaluation
        by_seed = dict(zip(table[reference]["seeds"], table[reference]["final_by_seed"]))
        diffs = [final - by_seed[s] for s, final in zip(row["seeds"], row["final_by_seed"]) if s in by_seed]
        if diffs:
            row["paired"] = {"reference": reference, "difference": mean_ci(diffs)}
    return table


def _pm(value: tuple[float, float]) -> str:
    """``mean ± half-width``; a single seed has no interval.

    Example:
        >>> _pm((0.25, 0.01)), _pm((0.25, float("nan")))
        ('+0.250 ± 0.010', '+0.250 (one seed)')
    """
    if np.isnan(value[1]):
        return f"{value[0]:+.3f} (one seed)"
    return f"{value[0]:+.3f} ± {value[1]:.3f}"


def _share(value: tuple[float, float]) -> str:
    """A share as ``mean% ± half-width%``; a single seed has no interval.

    Example:
        >>> _share((0.756, 0.081)), _share((0.5, float("nan")))
        ('76% ± 8%', '50% (one seed)')
    """
    return f"{value[0]:.0%} (one seed)" if np.isnan(value[1]) else f"{value[0]:.0%} ± {value[1]:.0%}"


def write_docs(table: dict, iterations: int, nonadaptive: float, adaptive: float, path: Path) -> None:
    lines = [
        "# Learning benchmark: the MAGE recipe against its ablations",
        "",
        "`python benchmarks/learning.py` — the default CPU configuration, each run as long as its",
        "variant says (the iterations column), evaluated on 300 meta-episodes per style, stratified over Kuhn",
        "Poker's 12 (deal, seat) instances, so returns and the deal-known ceiling share one sample (with",
        "fresh deals every hand is stratified and the share is of the best response's value on the final",
        "hands' own deals, the ceiling without knowing the deal: +0.278 over the three styles). Returns in chips per hand;",
        "`a ± b` is the mean over seeds with the half-width of its 95% confidence interval (Student t).",
        f"Best non-adaptive value against the training styles: {nonadaptive:+.3f}. With fresh deals the",
        f"Bayes-optimal agent's final hand (the most any agent can reach, in expectation: `bayes_adaptive_value`)"
        f" is {adaptive:+.3f}.",
        "`mage` is the default (900 iterations) on the three training styles, the default population until",
        "`random-style` joined it (today's default is `random-style-other-seeds`); every row trains on those",
        "three unless its variant sets a population. Every other row was measured before `mage` became the",
        "default, at the length its iterations column says, and rows once paired with the default are paired",
        "with `iterations-600`, that release's default.",
        '',
        '## What these numbers are',
        '',
        'Every row is the embedded tiny model: a 2-layer, 64-wide Llama (about 100k parameters) with random',
        'initial weights and a 318-word vocabulary built from the game prompts. It samples one token among the',
        "legal moves, reads a memory the environment writes (each earlier hand's summary) and writes no",
        'reflections: a small policy over tokenised game text, not a language model. With repeated deals (the',
        "paper's protocol, the default) hand 1's showdown shows the deal of the later hands, and knowing the deal",
        'while ignoring the style is already worth +0.361 of the +0.389 ceiling (93%); reading the style is what',
        "fresh deals test, so the fresh-deal rows' share of the Bayes-optimal agent is the headline for",
        "adaptation. The defaults were chosen on seeds 0–19; `mage-other-seeds` is the three-style default on seeds 20–29 (`random-style-other-seeds` today's). The method's defaults",
        "differ from the paper's in two places ([method.md](method.md)): `gamma_traj` 0.6 credits a hand-1",
        'action with 0.4 R1 + 0.24 R2 + 0.36 R3 (not the telescoped R3), and advantages are centred per group',
        'without the per-archetype standard deviation (`std-normalize` is that variant).',
        "",
        "## Training styles (conservative, aggressive, intermediate)",
        "",
        "| variant | iterations | seeds | hand 1 | final hand | final − hand 1 | final − reference (paired) "
        "| final, seed by seed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for variant, row in table.items():
        paired = f"{_pm(row['paired']['difference'])} ({row['paired']['reference']})" if "paired" in row else "—"
        length = VARIANTS[variant].get("iterations", iterations)
        lines.append(f"| {variant} | {length} | {len(row['seeds'])} | {_pm(row['first'])} | {_pm(row['final'])} | "
                     f"{_pm(row['gain_within'])} | {paired} | "
                     + " ".join(f"{x:+.3f}" for x in row["final_by_seed"]) + " |")
    lines += ["", "Final hand per style (mean ± 95% CI) and its share of the on-sample ceiling, seed by seed;",
              "the final hand over the styles' mean ceiling (mean ± 95% CI over seeds); with fresh deals, also",
              "over the Bayes-optimal agent's final hand on the very meta-episodes evaluated (an on-sample",
              "reference: that agent is optimal in expectation; runs evaluated before it was recorded show —):", "",
              "| variant | " + " | ".join(TRAINING) + " | share of the mean ceiling | share of the Bayes-optimal "
              "agent's | seeds with every style ≥ 90% |",
              "|---|---|---|---|---|---|---|"]
    for variant, row in table.items():
        cells = [f"{_pm(row['style_final'][a])} ({' '.join(f'{x:.2f}' for x in row['style_share_by_seed'][a])})"
                 for a in TRAINING]
        bayes = _share(row["share_of_bayes"]) if "share_of_bayes" in row else "—"
        lines.append(f"| {variant} | " + " | ".join(cells) + f" | {_share(row['share_of_mean_ceiling'])} | {bayes} | "
                     f"{row['seeds_all_90']} of {len(row['seeds'])} |")
    lines += ["", "## Held-out styles (never trained against)", "",
              "| variant | " + " | ".join(f"{a}: hand 1 → final (share)" for a in HELDOUT) + " |",
              "|---|---|---|---|"]
    for variant, row in table.items():
        cells = [f"{row['heldout_first'][a][0]:+.3f} → {_pm(row['heldout_final'][a])} "
                 f"({row['heldout_share'][a][0]:.2f})" for a in HELDOUT]
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    stale = [v for v, row in table.items() if fresh_deals(v) and row.get("fresh_protocol") != FRESH_PROTOCOL]
    if stale:
        lines += ["", "Fresh-deal rows from earlier releases (" + ", ".join(f"`{v}`" for v in stale) + ") were "
                  "trained before fresh deals followed the seed and evaluated with only the first hand stratified: "
                  "their shares are of another sample's ceiling, and they are paired only among themselves."]
    missing = [v for v in VARIANTS if v not in table]
    if missing:
        lines += ["", "Not yet run at these defaults: " + ", ".join(f"`{v}`" for v in missing) + "."]
    lines += ["", "![learning](learning.png)", "", "## Tic-Tac-Toe", "",
              "The paper's other game, against a pool of fixed-order heuristics and a random player, with "
              "`mcts-1000` as the strong opponent: win / draw / loss by game index, over seeds, in "
              "[ttt_learning.md](ttt_learning.md) (`python benchmarks/ttt_learning.py --seeds 0 1 2 --docs`).", ""]
    path.write_text("\n".join(lines))


def plot(table: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(table)
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(names)), 4.2))
    for offset, key, label in ((-0.2, "first", "hand 1"), (0.2, "final", "final hand")):
        ax.bar(x + offset, [table[n][key][0] for n in names], 0.4, yerr=[table[n][key][1] for n in names],
               label=label, capsize=3)
    for i, name in enumerate(names):  # the seeds themselves
        finals = table[name]["final_by_seed"]
        ax.scatter(i + 0.2 + np.linspace(-0.08, 0.08, len(finals)), finals, color="black", s=10, zorder=3,
                   label="final hand, one seed" if i == 0 else None)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(x, names, rotation=20)
    ax.set_ylabel("return against the training styles (chips per hand)")
    ax.set_title("MAGE vs ablations (mean and 95% CI over seeds)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--iterations", type=int, default=None,
                        help="every run's length (default: the variant's own, else the config's)")
    parser.add_argument("--variants", nargs="*", default=[v for v in VARIANTS if v not in PLAIN_VARIANTS],
                        choices=list(VARIANTS), help="default: all but the -plain runs of earlier releases")
    parser.add_argument("--extra-variant", nargs=2, action="append", default=[], metavar=("NAME", "JSON"),
                        help="a further variant: its name and its overrides, e.g. entropy '{\"entropy_coef\": 0.2}'")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--output-dir", default="runs/learning")
    parser.add_argument("--summarise-only", action="store_true",
                        help="do not train: tabulate the runs already evaluated in --output-dir")
    parser.add_argument("--kept-dir", type=Path, default=None,
                        help="keep each evaluated run's eval.json here as <variant>-s<seed>.json (commit it) and "
                             "take the runs it holds as evaluated: a fresh checkout trains only the seeds it lacks")
    parser.add_argument("--docs", action="store_true", help="also write docs/learning.md and docs/learning.png")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "learning.json",
                        help="where the table goes (JSON)")
    args = parser.parse_args()
    stored = json.loads(args.results.read_text())["table"] if args.results.exists() else {}
    for name, overrides in args.extra_variant:
        VARIANTS[name] = json.loads(overrides)
        args.variants.append(name)
    from mage_agent.config import TrainConfig

    iterations = args.iterations or TrainConfig().run.iterations
    forced = {"iterations": args.iterations} if args.iterations else {}
    jobs = [(v, s, iterations, args.output_dir, {**VARIANTS[v], **forced}) for s in args.seeds for v in args.variants]
    if args.kept_dir:
        restore_kept(args.kept_dir, jobs)
    if args.summarise_only:
        done = [job for job in jobs if (run_dir(job[3], job[0], job[1]) / "eval.json").exists()]
        for job in done:
            warn_if_other_settings(run_dir(job[3], job[0], job[1]), run_config(job))
        results = [{"variant": v, "seed": s, "report": json.loads((run_dir(o, v, s) / "eval.json").read_text())}
                   for v, s, _, o, _ in done]
    else:
        with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
            results = pool.map(run_one, jobs, chunksize=1)
        if args.kept_dir:
            keep(args.kept_dir, jobs)
    from mage_envs.oracle import bayes_adaptive_value, best_nonadaptive_value

    nonadaptive = best_nonadaptive_value("kuhn_poker", TRAINING).value
    adaptive = bayes_adaptive_value("kuhn_poker", TRAINING, TrainConfig().env.num_episodes).value
    table = summarise(results, stored)
    kept = [variant for variant in table if variant not in {r["variant"] for r in results}]
    if kept:
        print(f"kept from {args.results} (no evaluated runs in {args.output_dir}): {', '.join(kept)}",
              file=sys.stderr)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps({"args": vars(args), "table": table}, indent=1, default=str))
    if args.docs:
        write_docs(table, iterations, nonadaptive, adaptive, ROOT / "docs" / "learning.md")
        plot(table, ROOT / "docs" / "learning.png")
    for variant, row in table.items():
        print(f"{variant:<20} hand1 {_pm(row['first'])}  final {_pm(row['final'])}  "
              f"style shares ≥80% {row['every_style_80']}  all ≥90% on {row['seeds_all_90']}/{len(row['seeds'])}  "
              f"no collapse {row['no_collapse']}")


if __name__ == "__main__":
    main()
