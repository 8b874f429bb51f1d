"""TRL's ``GRPOTrainer`` on MAGE text environments (``pip install "mage-rl[trl]"``).

Two of GRPOTrainer's multi-turn hooks, both marked experimental by TRL, which is why the
``trl`` extra pins one exact version:

- ``rollout_func=EnvRollout(make_env)`` plays one episode (or meta-episode) per prompt. The
  prompts are reset specs (:func:`reset_dataset`); TRL repeats each ``num_generations``
  times, so a GRPO group shares its seed: the same deals, the same opponent. The model
  writes every answer; the env's later prompts are appended to the completion and masked
  out of the loss (``env_mask``); the env's total reward reaches the reward functions as
  the ``env_reward`` column (hand them :func:`env_reward`).
- ``environment_factory=ToolEnv.factory(make_env)``: for chat models that call tools, the
  env as a TRL environment whose ``act`` tool steps it and whose ``get_reward`` is its
  total reward.

Neither TRL nor torch is imported here, and ``import mage_envs`` does not import this
module. A run, as in ``examples/trl_grpo_kuhn_poker.py``::

    trainer = GRPOTrainer(model=model_id, reward_funcs=env_reward, args=GRPOConfig(...),
                          train_dataset=reset_dataset(range(256)), rollout_func=EnvRollout(make_env))

Example:
    >>> reset_prompt(7, {"opponent": "nash"})
    '{"seed": 7, "options": {"opponent": "nash"}}'
    >>> import gymnasium as gym, mage_envs
    >>> env = ToolEnv(gym.make("mage/KuhnPoker-v0", opponent="nash", seat=0, prompt_style="compact"))
    >>> print(env.reset(seed=0))
    Kuhn Poker. You are Player 1.
    Legal actions: check, bet
    Moves: none
    Your card: Queen.
    >>> print(env.act("<action>bet</action>").splitlines()[-1])
    Hand over: a player folded. You win 1 chip.
    >>> env.get_reward()
    1.0
    >>> _ = env.reset(seed=0); env.get_reward()  # not played: forfeited by the env's retry policy
    -1.0
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import gymnasium as gym

#: ``generate(contexts) -> (completion_ids, logprobs or None)``, one completion per context.
Generate = Callable[[list[list[int]]], tuple[list[list[int]], list[list[float]] | None]]


def reset_prompt(seed: int, options: dict[str, Any] | None = None) -> str:
    """The dataset prompt that tells :class:`EnvRollout` how to reset: JSON ``seed`` and ``options``."""
    spec: dict[str, Any] = {"seed": int(seed)}
    if options:
        spec["options"] = options
    return json.dumps(spec)


def parse_reset_prompt(prompt: Any) -> dict[str, Any]:
    """The ``seed`` and ``options`` of a :func:`reset_prompt`; a clear error for any other prompt."""
    try:
        spec = json.loads(prompt)
        int(spec["seed"])
    except (TypeError, ValueError, KeyError) as error:
        raise ValueError(f"EnvRollout's prompts are reset specs (reset_dataset, reset_prompt), not {prompt!r:.80}") from error
    return spec


def reset_dataset(seeds: Iterable[int], options: dict[str, Any] | None = None) -> Any:
    """A ``datasets.Dataset`` whose ``prompt`` column holds one :func:`reset_prompt` per seed."""
    from datasets import Dataset  # installed with TRL

    return Dataset.from_dict({"prompt": [reset_prompt(seed, options) for seed in seeds]})


def env_reward(completions: list[Any], env_reward: list[float], **kwargs: Any) -> list[float | None]:
    """A GRPOTrainer reward function: the env's total reward for each completion."""
    return [float(reward) for reward in env_reward]


class EnvRollout:
    """A ``rollout_func`` that plays ``make_env()`` envs in lockstep, one per prompt.

    Each turn, every unfinished env's transcript so far (its first prompt, then answers and
    later prompts) goes into one batched call of the trainer's own generation (its sampling
    settings, ``max_completion_length`` per answer, vLLM if configured). The answer is
    decoded and stepped; the env's next prompt is appended as masked tokens. Returned per
    prompt: ``prompt_ids`` (the first prompt), ``completion_ids`` (the rest of the
    transcript), ``env_mask``, ``logprobs`` (``None`` unless the generation gives them) and
    three columns for reward functions: ``env_reward`` (sum of the env's rewards: the
    meta-return for a ``-meta-`` id), ``env_info`` (the last ``info``) and ``env_answers``
    (what the env received, turn by turn).

    The transcript repeats every complete prompt the env emits, so prefer
    ``prompt_style="compact"`` and few episodes for small context windows. Built for one
    training process (turn counts differ between processes).
    """

    def __init__(self, make_env: Callable[[], gym.Env]) -> None:
        self.make_env = make_env
        self.envs: list[gym.Env] = []

    def __call__(self, prompts: list[str], trainer: Any) -> dict[str, Any]:
        """TRL's hook: ``GRPOTrainer._generate`` calls it with the batch's prompts."""

        def generate(contexts: list[list[int]]) -> tuple[list[list[int]], list[list[float]] | None]:
            # TRL 1.16's one-turn generation: (prompt_ids, images, multimodal_fields, num_generations)
            return trainer._generate_single_turn(contexts, None, {}, 1)

        return self.play(prompts, generate, trainer.processing_class)

    def play(self, prompts: list[str], generate: Generate, tokenizer: Any) -> dict[str, Any]:
        """Play one episode per reset-spec prompt with ``generate``; see the class docstring."""
        specs = [parse_reset_prompt(prompt) for prompt in prompts]
        while len(self.envs) < len(specs):
            self.envs.append(self.make_env())
        count = len(specs)
        prompt_ids: list[list[int]] = []
        completion_ids: list[list[int]] = [[] for _ in range(count)]
        env_mask: list[list[int]] = [[] for _ in range(count)]
        logprobs: list[list[float]] | None = [[] for _ in range(count)]
        rewards = [0.0] * count
        infos: list[dict[str, Any]] = []
        answers: list[list[str]] = [[] for _ in range(count)]
        for env, spec in zip(self.envs, specs):
            observation, info = env.reset(seed=spec["seed"], options=spec.get("options"))
            prompt_ids.append(self.encode(tokenizer, observation, first=True))
            infos.append(info)
        active = list(range(count))
        while active:
            generated, generated_logprobs = generate([prompt_ids[i] + completion_ids[i] for i in active])
            if generated_logprobs is None:
                logprobs = None
            still_active = []
            for slot, i in enumerate(active):
                completion_ids[i] += generated[slot]
                env_mask[i] += [1] * len(generated[slot])
                answer = tokenizer.decode(generated[slot], skip_special_tokens=True)
                answers[i].append(answer)
                observation, reward, terminated, truncated, infos[i] = self.envs[i].step(answer)
                rewards[i] += float(reward)
                env_ids = [] if terminated or truncated else self.encode(tokenizer, observation, first=False)
                completion_ids[i] += env_ids
                env_mask[i] += [0] * len(env_ids)
                if logprobs is not None and generated_logprobs is not None:
                    logprobs[i] += list(generated_logprobs[slot]) + [0.0] * len(env_ids)
                if env_ids:
                    still_active.append(i)
            active = still_active
        return {
            "prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": logprobs,
            "env_mask": env_mask, "env_reward": rewards, "env_info": infos, "env_answers": answers,
        }

    def encode(self, tokenizer: Any, text: str, first: bool) -> list[int]:
        """Token ids of an env prompt; later prompts start on a new paragraph. Override for chat formats."""
        if first:
            return list(tokenizer(text)["input_ids"])
        return list(tokenizer("\n\n" + text, add_special_tokens=False)["input_ids"])


class ToolEnv:
    """A text env as a TRL ``environment_factory`` environment: the model plays with ``act``.

    TRL calls ``reset(**row)`` with the dataset row (its ``seed`` and ``options`` columns,
    when present, reset the env) and appends the returned prompt to the user message; the
    model calls ``act`` as a tool; ``get_reward`` scores the rollout. An episode the model
    left unfinished is first played out with empty answers, so the env's invalid-action
    policy scores it (not answering must not pay better than losing).
    """

    def __init__(self, env: gym.Env) -> None:
        self.env = env
        self.total_reward = 0.0
        self.done = True
        self.info: dict[str, Any] = {}

    @classmethod
    def factory(cls, make_env: Callable[[], gym.Env]) -> Callable[[], ToolEnv]:
        """The ``environment_factory`` for GRPOTrainer: each call makes a fresh env."""
        return lambda: cls(make_env())

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None, **row: Any) -> str:
        """Start an episode and return its first prompt (other dataset columns are ignored)."""
        observation, self.info = self.env.reset(seed=seed, options=options)
        self.total_reward, self.done = 0.0, False
        return observation

    def act(self, text: str) -> str:
        """Send your answer for the current turn to the game.

        Args:
            text: Your answer, with the action in a tag, e.g. <action>bet</action>.

        Returns:
            The game's next prompt, or its final result once the episode is over.
        """
        if self.done:
            raise ValueError("The episode is over: do not call act again.")
        observation, reward, terminated, truncated, self.info = self.env.step(text)
        self.total_reward += float(reward)
        self.done = terminated or truncated
        return observation

    def get_reward(self) -> float:
        """The episode's total reward, after playing out an unfinished episode with empty answers."""
        while not self.done:
            self.act("")
        return self.total_reward
