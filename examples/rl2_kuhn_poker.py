"""RL^2 on Kuhn Poker: a recurrent policy (sb3-contrib RecurrentPPO) learns across episodes.

Each meta-episode of ``mage/KuhnPoker-tensor-meta-v0`` is N hands against one archetype
drawn from a small population and kept hidden; the deal is fresh every hand
(``repeat_instance=False``). The observation carries what earlier hands revealed (the
agent's card and every action, the opponent's card if shown down, the return) and the
hand index, and an LSTM carries the rest. Evaluated per hand index (mean return of hand
1..N) before and after training, beside two exact values from ``mage_envs.oracle``:

* the best non-adaptive value: the best *fixed* policy against the hidden draw;
* the adaptive ceiling: the best response to each archetype, averaged over the population.

A policy that adapts beats the first and tends to the second in later hands.

Run: ``python examples/rl2_kuhn_poker.py [--timesteps 300000] [--num-episodes 3] [--seed 0]``
(``--eval-meta-episodes 0`` skips the evaluations, as in ``mage train``)
(needs ``pip install -e ".[rl]"``; CPU is enough).
"""

from __future__ import annotations

import argparse
import math
import statistics
from functools import partial

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.env_util import make_vec_env

import mage_envs  # noqa: F401  (registers the mage/* ids)
from mage_envs.oracle import best_nonadaptive_value, best_response_value

ENV_ID = "mage/KuhnPoker-tensor-meta-v0"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opponents", default="conservative,aggressive,intermediate",
                        help="comma-separated Kuhn archetypes, drawn uniformly per meta-episode")
    parser.add_argument("--seat", type=int, choices=(0, 1), default=0, help="0 acts first")
    parser.add_argument("--num-episodes", "--episodes", dest="episodes", type=int, default=3,
                        help="hands per meta-episode (N; --episodes: its name before)")
    parser.add_argument("--reward-mode", default="cumulative", choices=("differential", "final", "cumulative"),
                        help="cumulative: RL^2's sum over all hands; differential: MAGE's")
    parser.add_argument("--timesteps", type=int, default=300_000, help="training budget in env steps")
    parser.add_argument("--n-envs", type=int, default=8, help="parallel meta-episodes in a rollout")
    parser.add_argument("--eval-meta-episodes", type=int, default=2000,
                        help="meta-episodes of each evaluation, before and after training (0: none)")
    parser.add_argument("--seed", type=int, default=0, help="training seed; evaluation uses seed + 1")
    return parser.parse_args(argv)


def evaluate(model: RecurrentPPO, env: gym.Env, meta_episodes: int, seed: int) -> list[tuple[float, float]]:
    """Mean return and standard error of hand 1..N of the greedy policy."""
    per_index: list[list[float]] = [[] for _ in range(env.get_wrapper_attr("num_episodes"))]
    obs, info = env.reset(seed=seed)
    for _ in range(meta_episodes):
        state, start, done = None, np.ones(1, bool), False
        while not done:
            action, state = model.predict(obs, state=state, episode_start=start, deterministic=True)
            obs, _, terminated, truncated, info = env.step(int(action))
            start, done = np.zeros(1, bool), terminated or truncated
        for index, episode_return in enumerate(info["episode_returns"]):
            per_index[index].append(episode_return)
        obs, info = env.reset()
    return [(statistics.fmean(r), statistics.stdev(r) / math.sqrt(len(r))) for r in per_index]


def main(argv: list[str] | None = None) -> dict[str, object]:
    args = parse_args(argv)
    torch.set_num_threads(1)  # small networks: one thread is fastest and reproducible
    opponents = args.opponents.split(",")
    env_kwargs = {"opponent": opponents, "seat": args.seat, "num_episodes": args.episodes,
                  "reward_mode": args.reward_mode, "repeat_instance": False}

    # 1. The exact references.
    nonadaptive = best_nonadaptive_value("kuhn_poker", opponents, seat=args.seat).value
    ceiling = statistics.fmean(best_response_value("kuhn_poker", o, seat=args.seat).value for o in opponents)

    # 2. The learner: an LSTM actor-critic over the meta-episode's tensors.
    # (a callable, not the id: make_vec_env would pass render_mode="rgb_array" to gym.make)
    train_env = make_vec_env(partial(gym.make, ENV_ID, **env_kwargs), n_envs=args.n_envs, seed=args.seed)
    eval_env = gym.make(ENV_ID, **env_kwargs)
    model = RecurrentPPO(
        "MlpLstmPolicy",
        train_env,
        n_steps=128,
        batch_size=256,
        n_epochs=10,
        learning_rate=3e-3,
        gamma=1.0,
        ent_coef=0.01,
        policy_kwargs={"lstm_hidden_size": 32, "net_arch": [32]},
        seed=args.seed,
        verbose=0,
    )
    before = evaluate(model, eval_env, args.eval_meta_episodes, args.seed + 1) if args.eval_meta_episodes else []

    # 3. Train, then evaluate per hand index.
    model.learn(total_timesteps=args.timesteps)
    after = evaluate(model, eval_env, args.eval_meta_episodes, args.seed + 1) if args.eval_meta_episodes else []

    print(f"RL^2 on Kuhn Poker, seat {args.seat}, opponents {opponents}, {args.episodes} hands per "
          f"meta-episode, {args.reward_mode} reward, {args.timesteps} steps, {args.eval_meta_episodes} meta-episodes")
    print(f"  {'hand':>4}  {'untrained':>16}  {'trained':>16}  {'non-adaptive':>12}  {'adaptive ceiling':>16}")
    for index, ((b, b_se), (a, a_se)) in enumerate(zip(before, after), start=1):
        print(f"  {index:>4}  {b:+8.4f} +- {b_se:.4f}  {a:+8.4f} +- {a_se:.4f}  {nonadaptive:+12.4f}  {ceiling:+16.4f}")
    return {"before": before, "after": after, "nonadaptive": nonadaptive, "ceiling": ceiling}


if __name__ == "__main__":
    main()
