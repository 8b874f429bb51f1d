"""The single-agent configs' state sizes and prompt lengths, in the tiny model's tokens.

For each of ``examples/sokoban.yaml``, ``household.yaml`` and ``webshop.yaml`` (or the
``--configs`` given): the embedded tiny model's tokenizer as a run builds it (the games'
vocabulary, then the words of the task's prompts on training instances appended), then
``--meta-episodes`` meta-episodes played at random (a random label at every turn) with the
training options and with each evaluation's options. Reported per config and split: the
vocabulary size, the legal actions per turn (mean, max), the acting prompts' length in
tokens (mean, max) and the share of ``<unk>`` tokens in them (words a training prompt
never showed), the longest label (in tokens: 1 means one-token answers work).

Run: ``python benchmarks/task_prompts.py [--meta-episodes 8] [--out benchmarks/results/task-prompts.json]``
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

import gymnasium as gym

import mage_envs  # noqa: F401  (registers the task ids)
from mage_agent.build import env_kwargs, tiny_config
from mage_agent.cli import evaluations
from mage_agent.config import load_config
from mage_agent.tiny import build_tokenizer, env_corpus, extend_tokenizer, task_corpus

EXAMPLES = Path(__file__).parents[1] / "examples"
CONFIGS = ("sokoban.yaml", "household.yaml", "webshop.yaml")


def play(env_id: str, kwargs: dict[str, Any], tokenizer: Any, meta_episodes: int, seed: int) -> dict[str, float]:
    """Random play's statistics: legal actions and acting prompts' tokens per turn."""
    rng = random.Random(seed)
    env = gym.make(env_id, **kwargs)
    legal_counts, lengths, unknown, label_tokens = [], [], 0, 1
    for game in range(meta_episodes):
        obs, info = env.reset(seed=seed + game)
        while True:
            labels = info.get("action_labels") or info.get("legal_actions") or []
            if info.get("phase", "act") == "act" and labels:
                ids = tokenizer(obs, add_special_tokens=False)["input_ids"]
                lengths.append(len(ids))
                unknown += sum(i == tokenizer.unk_token_id for i in ids)
                legal_counts.append(len(labels))
                label_tokens = max(label_tokens, *(len(tokenizer(w, add_special_tokens=False)["input_ids"])
                                                   for w in labels))
            answer = rng.choice(labels) if labels and info.get("phase", "act") == "act" else "<reflection>ok</reflection>"
            obs, _, terminated, truncated, info = env.step(answer)
            if terminated or truncated:
                break
    env.close()
    return {"turns": len(lengths), "legal_mean": sum(legal_counts) / len(legal_counts), "legal_max": max(legal_counts),
            "tokens_mean": sum(lengths) / len(lengths), "tokens_max": max(lengths),
            "unk_share": unknown / sum(lengths), "label_tokens_max": label_tokens}


def measure(path: Path, meta_episodes: int) -> dict[str, Any]:
    config = load_config(path)
    tiny = tiny_config(config)
    games = build_tokenizer(env_corpus(tiny.corpus_games, tiny.seed))
    tokenizer = extend_tokenizer(games, task_corpus(config.env.env_id, env_kwargs(config), tiny.task_games, tiny.seed))
    row: dict[str, Any] = {"env_id": config.env.env_id, "games_vocabulary": len(games), "vocabulary": len(tokenizer)}
    row["train"] = play(config.env.env_id, env_kwargs(config), tokenizer, meta_episodes, seed=10_000)
    for suffix, evaluated in evaluations(config).items():
        kwargs = {**env_kwargs(evaluated), **evaluated.env.eval_env_options}
        row[f"eval{suffix}"] = play(config.env.env_id, kwargs, tokenizer, meta_episodes, seed=config.run.eval_seed)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", nargs="*", default=[str(EXAMPLES / name) for name in CONFIGS])
    parser.add_argument("--meta-episodes", type=int, default=8)
    parser.add_argument("--out", default="benchmarks/results/task-prompts.json")
    args = parser.parse_args()
    results = {Path(path).stem: measure(Path(path), args.meta_episodes) for path in args.configs}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    for name, row in results.items():
        splits = {k: v for k, v in row.items() if isinstance(v, dict)}
        print(f"{name}: vocabulary {row['games_vocabulary']} -> {row['vocabulary']}")
        for split, stats in splits.items():
            print(f"  {split:<10} legal {stats['legal_mean']:.1f} (max {stats['legal_max']}), prompt tokens "
                  f"{stats['tokens_mean']:.0f} (max {stats['tokens_max']}), <unk> {100 * stats['unk_share']:.2f}%, "
                  f"label tokens {stats['label_tokens_max']}")


if __name__ == "__main__":
    main()
