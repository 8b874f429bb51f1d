"""Tic-Tac-Toe learning result: the example's training run, evaluated by game index.

Trains ``examples/train_tic_tac_toe.py``'s configuration (fixed-order heuristics and a
random player; three games per meta-episode on one seat) for each ``--seeds`` seed, unless
that run already finished (a killed benchmark resumes from the run's last checkpoint),
then evaluates the trained policy, and the untrained one beside it, against the training
pool, the held-out orders and ``mcts-1000`` (a strong search bot: a draw is the best one can
hope for). Writes win / draw / loss rates by game index to ``benchmarks/results/ttt_learning.json``
and, with ``--docs``, a table to ``docs/ttt_learning.md``. ``--pool mcts`` adds the paper's
training opponent, ``mcts-100``, to the pool (``examples/tic_tac_toe_mcts.yaml``; runs in
``ttt-mcts-s<seed>``, results in ``ttt_learning_mcts.json`` and ``docs/ttt_learning_mcts.md``);
``--pool mcts-minimax`` trains that pool with ``minimax_coef: 1`` (the learner pulled toward the
moves that keep the game value, where it could lose it), ``mcts-minimax4`` with ``minimax_coef: 4``,
``mcts-solver-minimax4`` that with the exact solver (``minimax``) in the pool as well.

    python benchmarks/ttt_learning.py --seeds 0 --iterations 150 --docs
    python benchmarks/ttt_learning.py --pool mcts --seeds 0 1 2 --iterations 240 --docs
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
from train_tic_tac_toe import HELD_OUT, TRAIN_POPULATION, example_config  # noqa: E402

STRONG = ["mcts-1000"]
#: The example's population with the paper's training opponent.
MCTS_POPULATION = {**TRAIN_POPULATION, "mcts-100": 1.0}
#: pool name -> (the training population, the run folders' prefix, further settings)
POOLS: dict[str, tuple[dict[str, float], str, dict[str, float]]] = {
    "example": (TRAIN_POPULATION, "ttt", {}),
    "mcts": (MCTS_POPULATION, "ttt-mcts", {}),
    "mcts-minimax": (MCTS_POPULATION, "ttt-mcts-minimax", {"minimax_coef": 1.0}),
    "mcts-minimax4": (MCTS_POPULATION, "ttt-mcts-minimax4", {"minimax_coef": 4.0}),
    # and the exact solver as an opponent (random among its optimal moves): the lines a strong
    # search bot plays, which mcts-100 rarely reaches, are met in training too
    "mcts-solver-minimax4": ({**MCTS_POPULATION, "minimax": 1.0}, "ttt-mcts-solver-minimax4", {"minimax_coef": 4.0}),
}


def train(seed: int, iterations: int, out: Path, pool: str = "example", threads: int = 1) -> Path:
    """The run's folder after training (resumed, or skipped when already finished)."""
    from mage_agent.checkpoint import latest_checkpoint
    from mage_agent.config import apply_overrides
    from mage_agent.trainer import Trainer

    population, prefix, settings = POOLS[pool]
    folder = out / f"{prefix}-s{seed}"
    config = apply_overrides(example_config(iterations, 0, str(folder), seed, threads),
                             {"checkpoint_every": 10, "tensorboard": False, "population": population, **settings})
    checkpoint = latest_checkpoint(folder / "checkpoints")
    if checkpoint is None or checkpoint.name != f"iter-{iterations:06d}":
        Trainer(config, resume=checkpoint is not None, overwrite=checkpoint is None).train()
    return folder


def temperature_tag(temperature: float | None, sep: str = "-") -> str:
    """What evaluation files' names add for an evaluation temperature other than the run's.

    Example:
        >>> temperature_tag(None), temperature_tag(0.1), temperature_tag(0.5, "_")
        ('', '-t0.1', '_t0.5')
    """
    return "" if temperature is None else f"{sep}t{temperature:g}"


def evaluate_run(folder: Path, meta_episodes: int, strong_meta_episodes: int, temperature: float | None = None) -> dict:
    """Reports of the untrained and the trained policy (each written once per checkpoint,
    meta-episode count and sampling temperature, then read back); ``temperature`` replaces the
    run's own (1.0) in the evaluation only.
    Against ``mcts-1000`` no oracle runs (estimating its best response would search the whole
    tree with the bot at every position); a draw is what perfect play gets against it."""
    from mage_agent.build import build_policy, population_of
    from mage_agent.checkpoint import latest_checkpoint
    from mage_agent.cli import evaluate_policy
    from mage_agent.config import TrainConfig, apply_overrides

    checkpoint = latest_checkpoint(folder / "checkpoints")
    assert checkpoint is not None
    config = TrainConfig.from_dict(json.loads((checkpoint / "state.json").read_text())["config"])
    tag = temperature_tag(temperature)
    if temperature is not None:
        config = apply_overrides(config, {"temperature": temperature})
    reports = {}
    for stage, start in (("untrained", None), ("trained", checkpoint)):
        name = "untrained" if start is None else start.name   # a longer run or other counts: new files
        pool = folder / f"eval-{name}-pool-{meta_episodes}{tag}.json"
        strong = folder / f"eval-{name}-strong-{strong_meta_episodes}{tag}.json"
        # path -> (meta-episodes, opponents, oracle values); each runs only if its file is missing
        evaluations = {pool: (meta_episodes, list(population_of(config)) + HELD_OUT, True),
                       strong: (strong_meta_episodes, STRONG, False)}
        policy = None
        for path, (count, opponents, oracle) in evaluations.items():
            if path.exists():
                continue
            if policy is None:
                policy = build_policy(config, folder, start)
            evaluate_policy(policy, apply_overrides(config, {"eval_meta_episodes": count}), path, f"ttt-{stage}",
                            verbose=False, opponents=opponents, oracle=oracle)
        reports[f"{stage}/pool"] = json.loads(pool.read_text())
        reports[f"{stage}/strong"] = json.loads(strong.read_text())
    return reports


def rates(result: dict) -> list[str]:
    """``W/D/L`` percentages of each game index."""
    return [f"{100 * w:.0f}/{100 * d:.0f}/{100 * loss:.0f}" for w, d, loss in
            zip(result["win_rate_by_episode"], result["draw_rate_by_episode"], result["loss_rate_by_episode"])]


def room_for_adaptation(report: dict) -> str:
    """The training pool's best non-adaptive value beside its mean best response: what
    learning within a meta-episode could add at most.

    Example:
        >>> pool = {"a": {"best_response_value": 1.0}, "b": {"best_response_value": 0.5}}
        >>> room_for_adaptation({"opponents": pool, "training_population": {"a": 1, "b": 1},
        ...                      "best_nonadaptive_value": 0.7})
        'Room for adaptation: the best non-adaptive value against the training pool is +0.700, the mean best response +0.750: learning within a meta-episode can add at most 0.050 a game.'
        >>> room_for_adaptation({"opponents": pool, "training_population": {"a": 1}, "best_nonadaptive_value": None})[:41]
        'Room for adaptation: not computed for thi'
    """
    pool = report["training_population"]
    fixed = report["best_nonadaptive_value"]
    if fixed is None:   # a member without a policy table (a search bot): no exact best non-adaptive value
        return ("Room for adaptation: not computed for this pool (the best non-adaptive value needs every "
                "member's policy as a table; a search bot such as mcts-100 has none).")
    best = sum(report["opponents"][name]["best_response_value"] * w for name, w in pool.items()) / sum(pool.values())
    return (f"Room for adaptation: the best non-adaptive value against the training pool is {fixed:+.3f}, "
            f"the mean best response {best:+.3f}: learning within a meta-episode can add at most "
            f"{best - fixed:.3f} a game.")


def role(pool: str, name: str) -> str:
    """What an opponent is in the tables: ``training``, ``held out`` or ``strong``.

    Example:
        >>> role("pool", "random"), role("pool", "preferred-cell-spiral"), role("strong", "mcts-1000")
        ('training', 'held out', 'strong')
        >>> role("pool", "mcts-100")
        'training'
    """
    return "strong" if pool == "strong" else "held out" if name in HELD_OUT else "training"


def best_response_text(values: list[float | None]) -> str:
    """The best response's value over seeds (their mean); none is computed against a strong
    bot, where a draw is what perfect play gets.

    Example:
        >>> best_response_text([1.0, 0.5]), best_response_text([None])
        ('+0.750', '0 (a draw)')
    """
    if any(value is None for value in values):
        return "0 (a draw)"
    return f"{sum(v for v in values if v is not None) / len(values):+.3f}"


def over_seeds(by_seed: dict[int, dict]) -> list[str]:
    """Table rows, one per opponent: the untrained policy's final game, the trained one's
    first and final game (each the mean over seeds with the half-width of its 95% interval),
    the trained final game's win / draw / loss percentages averaged over seeds, and the best
    response's value (mean over seeds).

    Example:
        >>> result = lambda r, w, d: {"mean_return_by_episode": [0.0, r], "win_rate_by_episode": [0.5, w],
        ...                           "draw_rate_by_episode": [0.0, d], "loss_rate_by_episode": [0.5, 1 - w - d],
        ...                           "best_response_value": 1.0}
        >>> reports = lambda r: {f"{stage}/{pool}": {"opponents": {"random": result(r, r, 0.0)} if pool == "pool" else {}}
        ...                      for stage in ("untrained", "trained") for pool in ("pool", "strong")}
        >>> over_seeds({0: reports(0.5), 1: reports(0.7)})
        ['| random | training | +0.600 ± 1.271 | +0.000 ± 0.000 | +0.600 ± 1.271 | 60/0/40 | +1.000 |']
    """
    from learning import mean_ci

    rows = []
    first = next(iter(by_seed.values()))
    for pool in ("pool", "strong"):
        for name in first[f"trained/{pool}"]["opponents"]:
            results = [reports[f"trained/{pool}"]["opponents"][name] for reports in by_seed.values()]
            untrained = mean_ci([reports[f"untrained/{pool}"]["opponents"][name]["mean_return_by_episode"][-1]
                                 for reports in by_seed.values()])
            game_one, final = (mean_ci([r["mean_return_by_episode"][k] for r in results]) for k in (0, -1))
            outcomes = [100 * sum(r[f"{kind}_rate_by_episode"][-1] for r in results) / len(results)
                        for kind in ("win", "draw", "loss")]
            best = best_response_text([r.get("best_response_value") for r in results])
            returns = " | ".join(f"{mean:+.3f} ± {half:.3f}" for mean, half in (untrained, game_one, final))
            rows.append(f"| {name} | {role(pool, name)} | {returns} | "
                        f"{'/'.join(f'{share:.0f}' for share in outcomes)} | {best} |")
    return rows


def paired_rows(summary: dict, other: dict) -> list[str]:
    """Table rows of the trained final game against ``other`` (another pool's stored results,
    the same seeds), paired by seed: the mean difference of the loss rate and of the return,
    each with the half-width of its 95% interval, per opponent both evaluated.

    Example:
        >>> final = lambda loss, r: {"trained/pool": {}, "trained/strong": {"mcts-1000": {
        ...     "loss_rate_by_episode": [0.5, loss], "mean_return_by_episode": [0.0, r]}}}
        >>> paired_rows({"0": final(0.0, 0.0), "1": final(0.1, -0.1)}, {"0": final(0.5, -0.5), "1": final(0.4, -0.4)})
        ['| mcts-1000 | 0.050 | 0.450 | -0.400 ± 1.271 | +0.400 ± 1.271 |']
    """
    from learning import mean_ci

    seeds = [seed for seed in summary if seed in other]
    if not seeds:
        raise ValueError(f"nothing to pair: the results compared with hold seeds {sorted(other)}, these {sorted(summary)}")

    def finals(results: dict, pool: str, name: str, key: str) -> list[float]:
        """The final game's ``key`` against ``name`` on each paired seed."""
        return [results[seed][pool][name][key][-1] for seed in seeds]

    rows = []
    for pool in ("trained/pool", "trained/strong"):
        for name in summary[seeds[0]][pool]:
            if any(name not in other[seed][pool] for seed in seeds):
                continue
            ours, theirs = (finals(results, pool, name, "loss_rate_by_episode") for results in (summary, other))
            loss = mean_ci([a - b for a, b in zip(ours, theirs)])
            gain = mean_ci([a - b for a, b in zip(*(finals(results, pool, name, "mean_return_by_episode")
                                                    for results in (summary, other)))])
            rows.append(f"| {name} | {sum(ours) / len(ours):.3f} | {sum(theirs) / len(theirs):.3f} | "
                        f"{loss[0]:+.3f} ± {loss[1]:.3f} | {gain[0]:+.3f} ± {gain[1]:.3f} |")
    return rows


def write_docs(by_seed: dict[int, dict], iterations: int, path: Path, pool: str = "example",
               temperature: float | None = None, paired: tuple[Path, list[str]] | None = None) -> None:
    command, source = (("python benchmarks/ttt_learning.py", "`examples/train_tic_tac_toe.py`'s configuration")
                       if pool == "example" else
                       (f"python benchmarks/ttt_learning.py --pool {pool}",
                        "`examples/train_tic_tac_toe.py`'s configuration with `mcts-100` in the pool "
                        "(`examples/tic_tac_toe_mcts.yaml`)" + (
                            f", and {', '.join(f'`{k}: {v:g}`' for k, v in POOLS[pool][2].items())}"
                            if POOLS[pool][2] else "")))
    if temperature is not None:
        command += f" --eval-temperature {temperature:g}"
    title = {"example": "", "mcts": ": mcts-100 in the pool"}.get(pool, f": mcts-100 in the pool ({pool})")
    if temperature is not None:
        title += f", evaluated at temperature {temperature:g}"
    lines = ["# Tic-Tac-Toe learning result" + title, "",
             f"`{command}` — {source}, "
             f"{iterations} iterations, the embedded tiny model on CPU. Three games per meta-episode on one seat; "
             "cells are win / draw / loss percentages of game 1, 2 and 3, then the final game's mean return "
             "beside the best response's value (±1 a game).", ""]
    if len(by_seed) > 1:
        lines += [f"## Over seeds {', '.join(map(str, by_seed))}", "",
                  "Returns are the mean over seeds ± the half-width of its 95% confidence interval (Student t); "
                  "win / draw / loss of the final game are averaged over seeds.", "",
                  "| opponent | role | untrained final game | trained game 1 | trained final game | "
                  "trained final game W/D/L (%) | best response |",
                  "|---|---|---|---|---|---|---|", *over_seeds(by_seed), ""]
    if paired is not None:
        other, rows = paired
        lines += [f"## Against `{other.stem}`, paired by seed", "",
                  f"The trained final game beside the same seeds' in `{other.as_posix()}`: loss rates "
                  "(mean over seeds) and the differences (this pool minus that one) with the half-width of their "
                  "95% interval.", "",
                  "| opponent | loss rate | loss rate there | loss rate, difference | return, difference |",
                  "|---|---|---|---|---|", *rows, ""]
    for seed, reports in by_seed.items():
        lines += [f"## Seed {seed}", "", room_for_adaptation(reports["trained/pool"]), "",
                  "| opponent | role | untrained: game 1, 2, 3 | trained: game 1, 2, 3 | "
                  "trained final return | best response |", "|---|---|---|---|---|---|"]
        for pool in ("pool", "strong"):
            for name, trained in reports[f"trained/{pool}"]["opponents"].items():
                untrained = reports[f"untrained/{pool}"]["opponents"][name]
                best = best_response_text([trained.get("best_response_value")])
                lines.append(f"| {name} | {role(pool, name)} | {' · '.join(rates(untrained))} | {' · '.join(rates(trained))} | "
                             f"{trained['mean_return_by_episode'][-1]:+.3f} ± "
                             f"{trained['stderr_return_by_episode'][-1]:.3f} | {best} |")
        lines.append("")
    path.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--iterations", type=int, default=150)
    parser.add_argument("--meta-episodes", type=int, default=120, help="per opponent of the pool")
    parser.add_argument("--strong-meta-episodes", type=int, default=40, help="against mcts-1000")
    parser.add_argument("--pool", choices=sorted(POOLS), default="example",
                        help="the example's pool, or it with mcts-100 (the paper's training opponent), or that "
                             "with minimax_coef 1 (mcts-minimax) or 4 (mcts-minimax4), or that with the solver in the "
                             "pool (mcts-solver-minimax4)")
    parser.add_argument("--output-dir", type=Path, default=Path("runs/ttt-learning"))
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads of training (2 on a 2-core machine of its own: about 1.55 times faster)")
    parser.add_argument("--results", type=Path, default=None,
                        help="default: benchmarks/results/ttt_learning.json (ttt_learning_<pool>.json for another pool)")
    parser.add_argument("--eval-temperature", type=float, default=None,
                        help="evaluate at this sampling temperature instead of the run's 1.0 (results and docs "
                             "get a _t<T> suffix)")
    parser.add_argument("--compare-with", type=Path, default=None, metavar="RESULTS",
                        help="another pool's results JSON (the same seeds): with --docs, the docs add the final "
                             "game's loss rate and return against it, paired by seed")
    parser.add_argument("--docs", action="store_true", help="also write docs/ttt_learning[_<pool>].md")
    args = parser.parse_args()
    suffix = ("" if args.pool == "example" else f"_{args.pool}") + temperature_tag(args.eval_temperature, "_")
    if args.results is None:
        args.results = ROOT / "benchmarks" / "results" / f"ttt_learning{suffix}.json"
    by_seed = {seed: evaluate_run(train(seed, args.iterations, args.output_dir, args.pool, args.threads), args.meta_episodes,
                                  args.strong_meta_episodes, args.eval_temperature) for seed in args.seeds}
    summary = {str(seed): {key: {name: {k: r[k] for k in ("mean_return_by_episode", "win_rate_by_episode",
                                                     "draw_rate_by_episode", "loss_rate_by_episode",
                                                     "stderr_return_by_episode")}
                            for name, r in report["opponents"].items()} for key, report in reports.items()}
               for seed, reports in by_seed.items()}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "results": summary}, indent=1))
    if args.docs:
        paired = None if args.compare_with is None else (
            args.compare_with, paired_rows(summary, json.loads(args.compare_with.read_text())["results"]))
        write_docs(by_seed, args.iterations, ROOT / "docs" / f"ttt_learning{suffix}.md", args.pool, args.eval_temperature,
                   paired)
    for seed, reports in by_seed.items():
        for name, result in reports["trained/pool"]["opponents"].items():
            print(f"seed {seed} {name:<30} W/D/L by game {' '.join(rates(result))}")
        for name, result in reports["trained/strong"]["opponents"].items():
            print(f"seed {seed} {name:<30} W/D/L by game {' '.join(rates(result))}")


if __name__ == "__main__":
    main()
