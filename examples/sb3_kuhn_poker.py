"""MaskablePPO (sb3-contrib) learns to exploit a fixed Kuhn Poker opponent.

The agent plays ``mage/KuhnPoker-tensor-v0`` (OpenSpiel's information-state tensor in, an
action id out, the legal-action mask through ``env.action_masks()``) in one seat against
one exploitable archetype. Its greedy policy is evaluated before and after training, by
playing the same held-out hands and exactly (``pyspiel.expected_returns`` over the game
tree), and compared with the exact best-response value from
``mage_envs.oracle.best_response_value``.

Run: ``python examples/sb3_kuhn_poker.py [--opponent aggressive] [--seat 0]
[--timesteps 30000] [--seed 0]`` (needs ``pip install -e ".[rl]"``; CPU is enough).
"""

from __future__ import annotations

import argparse
import math
import statistics

import gymnasium as gym
import numpy as np
import pyspiel
import torch
from sb3_contrib import MaskablePPO

import mage_envs  # noqa: F401  (registers the mage/* ids)
from mage_envs.numeric.env import OpenSpielTensorEnv
from mage_envs.opponents import make_opponent
from mage_envs.oracle import best_response_value, tabular


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opponent", default="aggressive", help="a Kuhn archetype with a closed-form policy")
    parser.add_argument("--seat", type=int, choices=(0, 1), default=0, help="0 acts first")
    parser.add_argument("--timesteps", type=int, default=30_000, help="training budget in env steps")
    parser.add_argument("--eval-games", type=int, default=4000, help="held-out hands per evaluation")
    parser.add_argument("--seed", type=int, default=0, help="training seed; evaluation uses seed + 1")
    return parser.parse_args(argv)


def evaluate(model: MaskablePPO, env: gym.Env, games: int, seed: int) -> tuple[float, float]:
    """Mean return and its standard error of the greedy masked policy over ``games`` hands
    (the same hands for the same ``seed``)."""
    game = env.unwrapped
    assert isinstance(game, OpenSpielTensorEnv), "evaluate takes a mage/*-tensor-v0 env"
    returns = []
    obs, _ = env.reset(seed=seed)
    for _ in range(games):
        done, total = False, 0.0
        while not done:
            action, _ = model.predict(obs, action_masks=game.action_masks(), deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(int(action))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
        obs, _ = env.reset()
    return statistics.fmean(returns), statistics.stdev(returns) / math.sqrt(games)


def exact_value(model: MaskablePPO, opponent: str, seat: int) -> float:
    """Expected return of the greedy policy against ``opponent``, exactly: the policy's
    action at each of its information states (observed as the env does, through the
    information-state tensor) and the opponent's closed form, through ``pyspiel.expected_returns``."""
    game = pyspiel.load_game("kuhn_poker")
    table = {key: dict(probs) for key, probs in
             tabular.opponent_table(game, make_opponent("kuhn_poker", opponent), 1 - seat).items()}
    for state in tabular.decision_states(game):
        if state.current_player() == seat:
            obs = np.asarray(state.information_state_tensor(seat), np.float32)
            legal = state.legal_actions()
            mask = np.isin(np.arange(game.num_distinct_actions()), legal)
            action, _ = model.predict(obs, action_masks=mask, deterministic=True)
            table[state.information_state_string()] = {a: float(a == action) for a in legal}
    return tabular.self_play_returns(game, table)[seat]


def main(argv: list[str] | None = None) -> dict[str, float]:
    args = parse_args(argv)
    torch.set_num_threads(1)  # a tiny MLP: one thread is fastest and reproducible
    train_env, eval_env = (
        gym.make("mage/KuhnPoker-tensor-v0", opponent=args.opponent, seat=args.seat) for _ in range(2)
    )

    # 1. The exact target: the best response to this opponent in this seat.
    oracle = best_response_value("kuhn_poker", args.opponent, seat=args.seat).value

    # 2. The learner: a small MLP with invalid-action masking.
    model = MaskablePPO(
        "MlpPolicy",
        train_env,
        n_steps=512,
        batch_size=128,
        n_epochs=10,
        learning_rate=1e-3,
        gamma=1.0,
        ent_coef=0.01,
        policy_kwargs={"net_arch": [32, 32]},
        seed=args.seed,
        verbose=0,
    )
    before, before_se = evaluate(model, eval_env, args.eval_games, args.seed + 1)
    exact_before = exact_value(model, args.opponent, args.seat)

    # 3. Train, then evaluate on the same held-out hands.
    model.learn(total_timesteps=args.timesteps)
    after, after_se = evaluate(model, eval_env, args.eval_games, args.seed + 1)
    exact_after = exact_value(model, args.opponent, args.seat)

    print(f"Kuhn Poker vs {args.opponent!r}, seat {args.seat}, {args.timesteps} steps")
    print(f"  {'chips/hand':22}  {f'{args.eval_games} hands played':>20}  {'exact':>8}")
    print(f"  {'untrained MaskablePPO':22}  {before:+11.4f} +- {before_se:.4f}  {exact_before:+8.4f}")
    print(f"  {'trained MaskablePPO':22}  {after:+11.4f} +- {after_se:.4f}  {exact_after:+8.4f}")
    print(f"  {'exact best response':22}  {'':20}  {oracle:+8.4f}")
    print(f"  gap to best response (exact): {oracle - exact_after:.4f}")
    return {"before": before, "after": after, "exact_before": exact_before, "exact_after": exact_after,
            "best_response": oracle}


if __name__ == "__main__":
    main()
