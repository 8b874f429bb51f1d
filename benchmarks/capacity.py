"""Capacity check: can the embedded tiny model, given the default prompts and memory,
represent the deal-known play that the learning targets measure against?

The same model as `mage train` (same tokenizer, compact prompts, episode summaries as
memory, one action token) is trained by supervised learning, not RL, on an oracle's
actions: in the early hands it probes (check / call, so every hand reaches a showdown and
the memory shows the opponent's card), in the final hand it plays
:func:`~mage_envs.oracle.winnable.deal_known_action`. It is then evaluated like a trained
run (stratified, 300 meta-episodes per style, sampling at temperature 1). If its final hand
reaches the deal-known ceiling, the model and prompt are not the limit and RL is; if not,
they are.

    python benchmarks/capacity.py --steps 400
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

TRAINING = ["conservative", "aggressive", "intermediate"]
#: What the oracle plays in the early hands, by preference among the legal actions:
#: ``passive`` checks and calls (every hand reaches a showdown), ``bet`` bets and calls
#: (a fold to the bet tells the styles apart), ``bet-then-passive`` bets in hand 1 only.
PROBES = {"passive": [("call", "check")], "bet": [("bet", "call")], "bet-then-passive": [("bet", "call"), ("call", "check")]}
ROOT = Path(__file__).resolve().parent.parent


def oracle_turns(config, meta_episodes: int, seed: int, probe: str) -> list[tuple[str, list[str], str]]:
    """(prompt, legal actions, oracle action) of every acting turn of ``meta_episodes``
    meta-episodes per training style, on stratified instances."""
    from mage_agent.build import env_kwargs
    from mage_envs.oracle.winnable import deal_known_action, stratified_instances

    kwargs = env_kwargs(config)
    rows = []
    instances = stratified_instances("kuhn_poker", meta_episodes, seed)
    for style in TRAINING:
        env = gym.make(config.env.env_id, **{**kwargs, "opponent": style})
        for j, instance in enumerate(instances):
            obs, info = env.reset(seed=seed + j, options={"instance": instance})
            done = False
            while not done:
                legal = info["legal_actions"]
                hand = info["episode_index"]
                if hand < info["num_episodes"] - 1:
                    preference = PROBES[probe][min(hand, len(PROBES[probe]) - 1)]
                    action = next(a for a in preference if a in legal)
                else:
                    state = env.unwrapped.state
                    best = deal_known_action("kuhn_poker", style, state, info["instance"], info["seat"])
                    action = {i: name for name, i in env.unwrapped.action_names(state).items()}[best]
                rows.append((obs, legal, action))
                obs, _, terminated, truncated, info = env.step(action)
                done = terminated or truncated
        env.close()
    return rows


def train_supervised(policy, rows, steps: int, batch: int, lr: float, seed: int) -> list[float]:
    """Cross-entropy on the oracle's action token among the legal action tokens."""
    rng = random.Random(seed)
    prompts = policy.encode_prompts([r[0] for r in rows])
    allowed = [policy.single_token_ids(r[1]) for r in rows]
    targets = [policy.single_token_ids([r[2]]) for r in rows]
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        chosen = [rng.randrange(len(rows)) for _ in range(batch)]
        logprobs, _, _ = policy.completion_logprobs([prompts[i] for i in chosen], [targets[i] for i in chosen],
                                                    allowed_ids=[allowed[i] for i in chosen])
        loss = -logprobs[:, 0].mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--probe", choices=list(PROBES), default="bet-then-passive")
    parser.add_argument("--output", default=None, help="default: benchmarks/results/capacity-<probe>.json")
    args = parser.parse_args()

    from mage_agent.build import build_policy
    from mage_agent.cli import evaluate_policy
    from mage_agent.config import TrainConfig, apply_overrides

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    out = Path(tempfile.mkdtemp())
    config = apply_overrides(TrainConfig(), {"seed": args.seed, "output_dir": str(out), "heldout": []})
    policy = build_policy(config, out)
    rows = oracle_turns(config, 120, seed=args.seed, probe=args.probe)
    labels: dict[str, set[str]] = {}
    for prompt, _, action in rows:
        labels.setdefault(prompt, set()).add(action)
    ambiguous = sum(len(actions) > 1 for actions in labels.values())
    losses = train_supervised(policy, rows, args.steps, args.batch, args.learning_rate, args.seed)
    report = evaluate_policy(policy, config, out / "eval.json", "supervised", progress=False, verbose=False)
    result = {"args": vars(args), "turns": len(rows), "prompts": len(labels), "ambiguous_prompts": ambiguous,
              "final_loss": float(np.mean(losses[-20:])), "styles": {}}
    for style in TRAINING:
        r = report["opponents"][style]
        result["styles"][style] = {"first": r["mean_return_by_episode"][0], "final": r["mean_return_by_episode"][-1],
                                   "ceiling": r["instance_optimal_value"],
                                   "share": r["mean_return_by_episode"][-1] / r["instance_optimal_value"]}
        print(f"{style:<13} hand 1 {result['styles'][style]['first']:+.3f}  final {result['styles'][style]['final']:+.3f}"
              f"  ceiling {r['instance_optimal_value']:+.3f}  share {result['styles'][style]['share']:.2f}")
    print(f"{len(rows)} oracle turns, {len(labels)} prompts ({ambiguous} with two oracle actions: the probe "
          f"leaves the style unknown), final loss {result['final_loss']:.4f}")
    path = ROOT / (args.output or f"benchmarks/results/capacity-{args.probe}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
