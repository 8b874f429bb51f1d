"""Where a fresh-deal agent falls short: what its early hands show, or how it reads them.

For each trained run (a fresh-deal Kuhn Poker run: ``repeat_instance: false``), the final
checkpoint plays the run's own evaluation again (the same seeds and stratified deals, the
training styles), but behind :class:`~mage_envs.oracle.BayesFinalHand`: the model plays
every hand but the last, the Bayes agent watches and plays the last as the best response
to what those hands showed. Beside the model's own final hand (its ``eval.json``) and the
Bayes-optimal agent's on the same meta-episodes (``bayes_by_episode``), that splits the
shortfall in two:

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

import numpy as np
from learning import evaluation_config, mean_ci  # benchmarks/learning.py: the script's folder is on sys.path

from mage_agent.agents import PolicyAgent
from mage_agent.build import build_policy, env_kwargs, population_of, sampling_of
from mage_envs.evaluation import evaluate
from mage_envs.oracle import BayesFinalHand

ROOT = Path(__file__).resolve().parent.parent


def read_run(run: Path) -> dict[str, float]:
    """The model's, the watcher's and the Bayes agent's final hands in ``run``'s evaluation,
    each the mean over the training styles."""
    report = json.loads((run / "eval.json").read_text())
    meta_episodes = next(iter(report["opponents"].values()))["meta_episodes"]
    config, eval_config, checkpoint = evaluation_config(run, meta_episodes)
    if config.env.repeat_instance:
        raise SystemExit(f"{run}: a repeated-deal run (the deal-known play is its ceiling, not the Bayes agent)")
    population = population_of(eval_config)
    styles = [name for name in report["opponents"] if name in population]
    policy = build_policy(config, run, checkpoint)

    def watcher(env):
        agent = PolicyAgent(policy, sampling_of(config), action_tokens=config.rollout.action_tokens,
                            seed=config.run.eval_seed, answer_prefix=config.rollout.answer_prefix,
                            answer_question=config.rollout.answer_question)
        return BayesFinalHand(agent, env, population)

    kwargs = {k: v for k, v in env_kwargs(eval_config).items() if k != "opponent"}
    watched = evaluate(None, config.env.env_id, opponents=styles, meta_episodes=meta_episodes, seed=report["seed"],
                       env_kwargs=kwargs, oracle=False, progress=False, agent_name="bayes-final-hand",
                       make_agent=watcher)
    return {
        "model": float(np.mean([report["opponents"][s]["mean_return_by_episode"][-1] for s in styles])),
        "watcher": float(np.mean([watched.opponents[s].mean_return_by_episode[-1] for s in styles])),
        "bayes": float(np.mean([report["bayes_by_episode"][s][-1] for s in styles])),
        "model_first": float(np.mean([report["opponents"][s]["mean_return_by_episode"][0] for s in styles])),
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
    for name, values in (("model", [r["model"] for r in rows]), ("watcher", [r["watcher"] for r in rows]),
                         ("bayes", [r["bayes"] for r in rows]),
                         ("unread", [r["watcher"] - r["model"] for r in rows]),
                         ("unshown", [r["bayes"] - r["watcher"] for r in rows])):
        mean, half = mean_ci(values)
        print(f"  {name:<8} {mean:+.3f} ± {half:.3f} over {len(values)} runs")


if __name__ == "__main__":
    main()
