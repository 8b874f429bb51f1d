"""GRPO with TRL's ``GRPOTrainer`` on Kuhn Poker meta-episodes, rewarded by the env alone.

Each prompt of the dataset is a reset spec (a seed); TRL repeats it ``--num-generations``
times, and ``EnvRollout`` plays one meta-episode per copy (``--num-episodes`` hands against
one opponent of the training population, with reflections between hands), the model
writing every answer. The env's later prompts are masked out of the loss, and the reward
is the env's meta-return (differential by default), handed to the trainer by the
``env_reward`` reward function.

The default model is MAGE's embedded tiny Llama (``mage_agent.tiny``: built from a config,
with a tokenizer trained on the envs' text; nothing is downloaded), written to
``<output-dir>/tiny-model``. Untrained, it answers with one token drawn among Kuhn's action
words (or the end token), so that some answers are legal and the rewards differ within a
group: it runs on a CPU in seconds and shows the plumbing, not learning. Pass ``--model`` a
local checkpoint or a hub id for a real run (answers of up to 256 tokens, no restriction).

Run: ``python examples/trl_grpo_kuhn_poker.py [--steps 2] [--model PATH_OR_ID]
[--output-dir runs/trl_grpo_kuhn_poker]`` (needs ``pip install -e ".[agent,trl]"``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental: the trl extra pins TRL

import gymnasium as gym
import torch
from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

import mage_envs  # noqa: F401  (registers the mage/* ids)
from mage_envs.integrations.trl import EnvRollout, env_reward, reset_dataset


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a local path or hub id (default: the embedded tiny Llama)")
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps (one generation batch each)")
    parser.add_argument("--output-dir", default="runs/trl_grpo_kuhn_poker")
    parser.add_argument("--num-episodes", type=int, default=3, help="hands per meta-episode")
    parser.add_argument("--num-generations", type=int, default=4, help="GRPO group size")
    parser.add_argument("--groups", type=int, default=2, help="groups (distinct seeds) per step")
    parser.add_argument("--max-completion-length", type=int, default=None,
                        help="tokens per answer (default: 1, one action word, for the tiny model; else 256)")
    parser.add_argument("--learning-rate", type=float, default=None,
                        help="default: 1e-4 for the tiny model, else TRL's 1e-6")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def env_factory(num_episodes: int) -> Callable[[], gym.Env]:
    """Makes one meta-episode env per call; compact prompts keep the multi-turn transcript short."""
    return partial(gym.make, "mage/KuhnPoker-meta-v0", opponent="trainable", num_episodes=num_episodes,
                   prompt_style="compact")


def model_path(args: argparse.Namespace) -> str:
    """``--model``, or the embedded tiny Llama built into the output directory."""
    if args.model is not None:
        return args.model
    from mage_agent.tiny import TinyConfig, create_tiny

    # a meta-episode's transcript (every prompt and answer) runs past the default 1024 positions
    return str(create_tiny(Path(args.output_dir) / "tiny-model", TinyConfig(max_position_embeddings=2048)))


def action_words_only(model: str) -> dict[str, list[int]]:
    """Generation kwargs that let an untrained model write only Kuhn's action words (or stop),
    so its answers are legal often enough for the rewards to differ within a group."""
    tokenizer = AutoTokenizer.from_pretrained(model)
    allowed = {tokenizer.convert_tokens_to_ids(word) for word in ("check", "bet", "call", "fold", tokenizer.eos_token)}
    return {"suppress_tokens": [i for i in range(len(tokenizer)) if i not in allowed]}


def main(argv: list[str] | None = None) -> GRPOTrainer:
    args = parse_args(argv)
    if args.model is None:
        torch.set_num_threads(1)  # the tiny model: one thread is fastest
    model = model_path(args)
    config = GRPOConfig(
        output_dir=args.output_dir,
        max_steps=args.steps,
        per_device_train_batch_size=args.groups * args.num_generations,  # one generation batch per step
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length or (1 if args.model is None else 256),
        learning_rate=args.learning_rate or (1e-4 if args.model is None else 1e-6),
        bf16=torch.cuda.is_available(),
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=args.seed,
        generation_kwargs=action_words_only(model) if args.model is None else None,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=env_reward,
        args=config,
        train_dataset=reset_dataset(range(1024)),
        rollout_func=EnvRollout(env_factory(args.num_episodes)),
    )
    trainer.train()
    for entry in trainer.state.log_history:
        if "reward" in entry:
            print(f"step {entry['step']}: mean env reward {entry['reward']:+.3f} (std {entry['reward_std']:.3f})")
    return trainer


if __name__ == "__main__":
    main()
