"""How often does a small instruct model answer a game prompt with a legal action?

SmolLM2-135M-Instruct (the embedded ``smollm2-135m``) answers the acting prompts of
``mage/KuhnPoker-meta-v0`` in free text; an answer is valid when
:func:`~mage_envs.core.parsing.parse_action` reads a legal action from it. The prompts are
those of meta-episodes played by a random agent against the three training styles, on
stratified (deal, seat) instances, so every hand of a meta-episode appears, with its memory.
The grid crosses the prompt style, the answer instruction and the temperature; each row
also reports the tokens generated per answer and whether the answer was cut by the token
budget. Stopping at ``</action>`` is measured on the best rows.

    python benchmarks/free_text.py --prompts 24 --output benchmarks/results/free-text.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from pathlib import Path

import gymnasium as gym
import torch

import mage_envs  # noqa: F401  (registers the ids)
from mage_envs.core.parsing import parse_action
from mage_envs.oracle.winnable import stratified_instances

sys.path.insert(0, str(Path(__file__).resolve().parent))
from household_random import wilson  # noqa: E402  (the sibling benchmark's interval)

TRAINING = ["conservative", "aggressive", "intermediate"]
#: The answer instructions compared, on top of the env's prompt: a system message, a closing
#: question naming the legal actions, and an answer prefix (the answer starts with ``<action>``).
SYSTEM = ("You are playing a card game. Reply with your move only, written as <action>NAME</action>, "
          "where NAME is one of the legal actions.")
QUESTION = "\nWhich action do you choose: {options}?"
INSTRUCTIONS = {
    "prompt only": {"system": "", "suffix": "", "prefix": ""},
    "system prompt": {"system": SYSTEM, "suffix": "", "prefix": ""},
    "question": {"system": "", "suffix": QUESTION, "prefix": ""},
    "answer prefix": {"system": "", "suffix": "", "prefix": "<action>"},
    "question + prefix": {"system": "", "suffix": QUESTION, "prefix": "<action>"},
    "system + question + prefix": {"system": SYSTEM, "suffix": QUESTION, "prefix": "<action>"},
}


def acting_prompts(style: str, count: int, seed: int) -> list[tuple[str, list[str]]]:
    """``count`` (prompt, legal actions) pairs of acting turns, from random play."""
    rng = random.Random(seed)
    instances = stratified_instances("kuhn_poker", count, seed)
    prompts: list[tuple[str, list[str]]] = []
    for j, instance in enumerate(itertools.cycle(instances)):
        env = gym.make("mage/KuhnPoker-meta-v0", opponent=TRAINING[j % 3], prompt_style=style)
        obs, info = env.reset(seed=seed + j, options={"instance": instance})
        done = False
        while not done:
            legal = list(info.get("legal_actions") or [])
            if info.get("phase", "act") == "act" and legal:
                prompts.append((obs, legal))
            answer = f"<action>{rng.choice(legal)}</action>" if legal else "<reflection>none</reflection>"
            obs, _, terminated, truncated, info = env.step(answer)
            done = terminated or truncated
        env.close()
        if len(prompts) >= count:
            return rng.sample(prompts, count)
    raise AssertionError("unreachable")


def measure(policy, prompts: list[tuple[str, list[str]]], instruction: dict[str, str], temperature: float,
            max_new_tokens: int, stop: tuple[str, ...], seed: int) -> dict:
    from mage_agent.sampling import Sampling, TorchSampler

    policy.system_prompt = instruction["system"]  # forgets the prompts encoded with the previous one
    texts = [p + instruction["suffix"].format(options=" or ".join(legal)) for p, legal in prompts]
    start = time.perf_counter()
    generations = TorchSampler(policy).generate(
        texts, Sampling(temperature=temperature, max_new_tokens=max_new_tokens, stop=stop, batch_size=16), seed=seed,
        prefixes=[instruction["prefix"]] * len(texts))
    seconds = time.perf_counter() - start
    reasons: dict[str, int] = {}
    valid = 0
    for generation, (_, legal) in zip(generations, prompts):
        parsed = parse_action(generation.text, legal)
        valid += parsed.action is not None
        if parsed.action is None:
            reasons[str(parsed.reason)] = reasons.get(str(parsed.reason), 0) + 1
    n = len(prompts)
    return {
        "invalid_rate": (n - valid) / n, "invalid_ci95": wilson(n - valid, n), "n": n, "reasons": reasons,
        "tokens_per_answer": sum(len(g.completion_ids) for g in generations) / n,
        "cut_by_budget": sum(g.truncated for g in generations) / n, "seconds": seconds,
        "examples": [g.text for g in generations[:3]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=24, help="acting prompts per prompt style")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 0.3])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/free-text.json"))
    args = parser.parse_args()
    from mage_agent.policy import Policy

    torch.set_num_threads(1)
    policy = Policy.from_pretrained("smollm2-135m", keep_reference=False)
    rows = []
    for style in ("full", "compact"):
        prompts = acting_prompts(style, args.prompts, args.seed)
        for (name, instruction), temperature in itertools.product(INSTRUCTIONS.items(), args.temperatures):
            row = {"prompt_style": style, "instruction": name, "temperature": temperature, "stop": []}
            row.update(measure(policy, prompts, instruction, temperature, args.max_new_tokens, (), args.seed))
            rows.append(row)
            print(f"{style:<8} {name:<18} T={temperature:<4} invalid {row['invalid_rate']:.2f} "
                  f"[{row['invalid_ci95'][0]:.2f}, {row['invalid_ci95'][1]:.2f}] "
                  f"tokens {row['tokens_per_answer']:.1f} cut {row['cut_by_budget']:.2f} {row['seconds']:.0f}s "
                  f"{row['reasons']}", flush=True)
        best = sorted((r for r in rows if r["prompt_style"] == style), key=lambda r: r["invalid_rate"])[:2]
        for base in best:
            row = {**{k: base[k] for k in ("prompt_style", "instruction", "temperature")}, "stop": ["</action>"]}
            row.update(measure(policy, prompts, INSTRUCTIONS[base["instruction"]], base["temperature"],
                               args.max_new_tokens, ("</action>",), args.seed))
            rows.append(row)
            print(f"{style:<8} {row['instruction']:<18} T={row['temperature']:<4} stop </action>: invalid "
                  f"{row['invalid_rate']:.2f} tokens {row['tokens_per_answer']:.1f} {row['seconds']:.0f}s", flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"model": "smollm2-135m", "env_id": "mage/KuhnPoker-meta-v0",
                                       "max_new_tokens": args.max_new_tokens, "seed": args.seed, "rows": rows},
                                      indent=2))
    print(f"saved {args.output}")


if __name__ == "__main__":
    main()
