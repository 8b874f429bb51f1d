"""How much learning signal Household gives a model that starts at random: the uniform
random policy over the legal commands, per env setting, on training games.

A group-relative update learns only from groups with a success in them, so what matters is
how often an untrained policy (about uniform over the numbered commands) wins. Per setting
(env options over ``examples/household.yaml``'s), ``--games`` training games are drawn by
``reset(seed=s)`` and each is played ``--episodes`` times (one group's attempts: group size
times attempts per meta-episode, 4 x 3 in the config) by a uniform choice among
``info["legal_actions"]``. Reported: the success rate per episode (Wilson 95% CI), the
successes an iteration of the config would see (``groups x group size x attempts x rate``),
the share of games with a success among their episodes, the share whose episodes' returns
differ (the groups that give an advantage: with ``progress_reward`` a group without a
success can have one), the mean expert plan length of the games drawn and the commands per
turn.

    python benchmarks/household_random.py --games 20 --episodes 12

A run keeps the settings of an earlier one in ``--out`` that it does not measure again.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path
from typing import Any

#: setting -> env options over the config's (``num_games: 100, instance_split: train``).
SETTINGS: dict[str, dict[str, Any]] = {
    "as-alfworld-20": {"max_steps": 20},
    "as-alfworld-50": {"max_steps": 50},
    "no-looking-20": {"max_steps": 20, "looking_commands": False},
    "no-looking-50": {"max_steps": 50, "looking_commands": False},
    "no-looking-expert3-20": {"max_steps": 20, "looking_commands": False, "max_expert_steps": 3},
    "no-looking-expert3-30": {"max_steps": 30, "looking_commands": False, "max_expert_steps": 3},
    "no-looking-simple-20": {"max_steps": 20, "looking_commands": False, "task_types": ["pick_and_place_simple"]},
    "no-looking-expert2-20": {"max_steps": 20, "looking_commands": False, "max_expert_steps": 2},
    "progress-20": {"max_steps": 20, "progress_reward": 0.1},
    "no-looking-progress-20": {"max_steps": 20, "looking_commands": False, "progress_reward": 0.1},
}
BASE = {"num_games": 100, "instance_split": "train"}


def wilson(successes: int, n: int) -> list[float]:
    """The Wilson score 95% interval of a rate (``[0, 1]`` for no trials).

    Example:
        >>> wilson(0, 30), wilson(0, 0)
        ([0.0, 0.114], [0.0, 1.0])
    """
    if n == 0:
        return [0.0, 1.0]
    z = 1.96
    centre = (successes + z * z / 2) / (n + z * z)
    half = z * math.sqrt(successes * (n - successes) / n + z * z / 4) / (n + z * z)
    return [round(max(0.0, centre - half), 3), round(min(1.0, centre + half), 3)]


def measure(options: dict[str, Any], games: int, episodes: int, seed: int, per_iteration: int) -> dict[str, Any]:
    """The random policy on ``games`` training games, ``episodes`` times each."""
    import gymnasium as gym

    import mage_envs  # noqa: F401  (registers the ids)

    env = gym.make("mage/Household-v0", **{**BASE, **options})
    rng = random.Random(seed)
    wins, by_game, plans, choices, started = 0, [], [], [], time.perf_counter()
    for g in range(games):
        _, info = env.reset(seed=seed + g)
        instance = info["instance"]
        task: Any = env.unwrapped  # HouseholdEnv: expert_actions() from the current state
        plans.append(len(task.expert_actions()))
        won, returns = 0, []
        for _ in range(episodes):
            _, info = env.reset(options={"instance": instance})
            done, total = False, 0.0
            while not done:
                choices.append(len(info["legal_actions"]))
                _, reward, terminated, truncated, info = env.step(rng.choice(info["legal_actions"]))
                done, total = terminated or truncated, total + float(reward)
            won += bool(info["success"])
            returns.append(round(total, 6))
        wins += won
        by_game.append({"instance": instance, "task_type": info["task_type"], "expert_steps": plans[-1], "wins": won,
                        "distinct_returns": len(set(returns))})
    env.close()
    n = games * episodes
    return {"options": options, "games_drawn": games, "episodes_per_game": episodes, "seed": seed, "episodes": n, "successes": wins, "rate": round(wins / n, 4), "ci95": wilson(wins, n),
            "successes_per_iteration": round(per_iteration * wins / n, 2),
            "games_with_a_success": round(sum(g["wins"] > 0 for g in by_game) / games, 3),
            "games_with_a_signal": round(sum(g["distinct_returns"] > 1 for g in by_game) / games, 3),
            "expert_steps_mean": round(sum(plans) / games, 2), "legal_per_turn_mean": round(sum(choices) / len(choices), 1),
            "seconds": round(time.perf_counter() - started, 1), "games": by_game}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--games", type=int, default=20)
    parser.add_argument("--episodes", type=int, default=12, help="episodes per game (one group's: 4 x 3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-iteration", type=int, default=48, help="episodes per iteration (4 groups x 4 x 3)")
    parser.add_argument("--out", default="benchmarks/results/household-random.json")
    args = parser.parse_args()
    out = Path(args.out)
    kept = json.loads(out.read_text())["settings"] if out.exists() else {}   # settings measured before stay
    results = {}
    for name in args.settings:
        results[name] = measure(SETTINGS[name], args.games, args.episodes, args.seed, args.per_iteration)
        r = results[name]
        print(f"{name:<24} {r['successes']:>3}/{r['episodes']} = {r['rate']:.1%} {r['ci95']}  per iteration "
              f"{r['successes_per_iteration']}  games with a success {r['games_with_a_success']:.0%}, a signal "
              f"{r['games_with_a_signal']:.0%}  "
              f"expert {r['expert_steps_mean']}  legal {r['legal_per_turn_mean']}  ({r['seconds']} s)", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"base_options": BASE, "settings": {**kept, **results}}, indent=1))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
