"""Where a fresh-deal agent falls short: what its early hands show, or how it reads them.

For each trained run (a fresh-deal Kuhn Poker run: ``repeat_instance: false``), the final
checkpoint plays the run's evaluation twice more (the same seeds and stratified deals, the
training styles), one meta-episode at a time with the same sampling seeds: once alone, once
behind :class:`~mage_envs.oracle.BayesFinalHand`, where the Bayes agent watches the model's
early hands and plays the last as the best response to what they showed. The early hands
of the two are the same (their first hands are checked equal), so the final hands compare
meta-episode by meta-episode. Beside the Bayes-optimal agent's own final hand on the same
meta-episodes (``bayes_by_episode`` in ``eval.json``), that splits the shortfall in two:

* **unread**: the watcher's final hand minus the model's: what the model's own early hands
  showed and its final hand did not use;
* **unshown**: the Bayes agent's minus the watcher's: what the model's early hands did not
  show (probes it did not make).

Run: ``python benchmarks/reading.py runs/learning/fresh-deals-s*`` (``--results`` names the
JSON; a run already in it is not played again).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
from learning import evaluation_config, mean_ci  # benchmarks/learning.py: the script's folder is on sys.path

from mage_agent.agents import PolicyAgent
from mage_agent.build import build_policy, env_kwargs, policy_agent, population_of
from mage_envs.evaluation import evaluate
from mage_envs.oracle import BayesFinalHand

ROOT = Path(__file__).resolve().parent.parent


class MetaEpisodeSeeded:
    """An agent whose sampling seeds start afresh with every meta-episode (the ``j``-th from
    ``seed + j``): its early hands are then the same whatever its final hand did, which the
    watcher replaces (a final hand of other length would shift a running seed stream)."""

    def __init__(self, make: Callable[[int], PolicyAgent], seed: int) -> None:
        self.make, self.seed = make, seed
        self.agent: PolicyAgent | None = None
        self.last_index: int | None = None

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        index = int(info["episode_index"])
        if self.agent is None or (index == 0 and self.last_index != 0):   # a new meta-episode
            self.agent = self.make(self.seed)
            self.seed += 1
        self.last_index = index
        return self.agent(observation, info)


def read_run(run: Path) -> dict[str, float]:
    """The model's, the watcher's and the Bayes agent's final hands (and the first two's first
    hands) in ``run``'s evaluation, each the mean over the training styles."""
    report = json.loads((run / "eval.json").read_text())
    if "bayes_by_episode" not in report:
        raise SystemExit(f"{run}: not a fresh-deal Kuhn Poker run whose memory shows earlier hands (its eval.json "
                         "has no bayes_by_episode)")
    meta_episodes = next(iter(report["opponents"].values()))["meta_episodes"]
    config, eval_config, checkpoint = evaluation_config(run, meta_episodes)
    population = population_of(eval_config)
    styles = [name for name in report["opponents"] if name in population]
    policy = build_policy(config, run, checkpoint)

    def model(env: object) -> MetaEpisodeSeeded:   # one per opponent, seeded alike in both evaluations
        return MetaEpisodeSeeded(lambda seed: policy_agent(policy, config, seed), config.run.eval_seed)

    kwargs = {k: v for k, v in env_kwargs(eval_config).items() if k != "opponent"}
    alone, watched = (
        evaluate(None, config.env.env_id, opponents=styles, meta_episodes=meta_episodes, seed=report["seed"],
                 env_kwargs=kwargs, oracle=False, progress=False, agent_name=name, make_agent=make)
        for name, make in (("policy", model), ("bayes-final-hand", lambda env: BayesFinalHand(model(env), env,
                                                                                              population))))

    def mean(result_of, episode: int) -> float:
        return float(np.mean([result_of(s)[episode] for s in styles]))

    return {
        "model": mean(lambda s: alone.opponents[s].mean_return_by_episode, -1),
        "watcher": mean(lambda s: watched.opponents[s].mean_return_by_episode, -1),
        "bayes": mean(lambda s: report["bayes_by_episode"][s], -1),
        "model_first": mean(lambda s: alone.opponents[s].mean_return_by_episode, 0),
        "watcher_first": mean(lambda s: watched.opponents[s].mean_return_by_episode, 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders of fresh-deal Kuhn Poker training")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "reading.json")
    args = parser.parse_args()
    table = json.loads(args.results.read_text()) if args.results.exists() else {}
    for run in args.runs:
        if run.name not in table:
            table[run.name] = read_run(run)
            args.results.parent.mkdir(parents=True, exist_ok=True)
            args.results.write_text(json.dumps(table, indent=2))
        row = table[run.name]
        print(f"{run.name:<28} model {row['model']:+.3f}  watcher {row['watcher']:+.3f}  bayes {row['bayes']:+.3f}"
              f"  unread {row['watcher'] - row['model']:+.3f}  unshown {row['bayes'] - row['watcher']:+.3f}")
    rows = [table[run.name] for run in args.runs]
    if unpaired := [run.name for run, row in zip(args.runs, rows) if row["model_first"] != row["watcher_first"]]:
        raise SystemExit(f"the model's early hands differ behind the watcher in {', '.join(unpaired)}")
    for name, values in (("model", [r["model"] for r in rows]), ("watcher", [r["watcher"] for r in rows]),
                         ("bayes", [r["bayes"] for r in rows]),
                         ("unread", [r["watcher"] - r["model"] for r in rows]),
                         ("unshown", [r["bayes"] - r["watcher"] for r in rows])):
        mean, half = mean_ci(values)
        print(f"  {name:<8} {mean:+.3f} ± {half:.3f} over {len(values)} runs")


if __name__ == "__main__":
    main()
