"""The MAGE training loop: collect -> credit -> advantage -> update -> log -> checkpoint.

Each iteration draws ``groups_per_iteration`` (seed, opponent) groups from the opponent
population, plays ``group_size`` copies of each meta-episode in lockstep with batched
generation, assigns per-turn returns with the step and cross-episode discounts, turns them
into group-relative advantages normalised within each opponent archetype, and takes
``epochs`` passes of PPO-clip minibatch updates.

Example (a two-iteration run of the embedded model):
    >>> import tempfile
    >>> from mage_agent.config import TrainConfig, apply_overrides
    >>> config = apply_overrides(TrainConfig(), {"iterations": 2, "groups_per_iteration": 4,
    ...     "eval_meta_episodes": 0, "output_dir": tempfile.mkdtemp(), "tensorboard": False})
    >>> history = Trainer(config, progress=False).train()
    >>> len(history), "return_ep3" in history[-1]
    (2, True)
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from .advantage import TurnTable, discounted_returns, group_advantages
from .checkpoint import latest_checkpoint, load_training_state, save_checkpoint
from .config import TrainConfig
from .loss import ppo_loss
from .policy import Policy, Sampling
from .rollout import GroupSpec, RolloutBatch, RolloutRunner, Turn
from .setup import build_policy, env_kwargs, population_of


class Trainer:
    """Runs :class:`~mage_agent.config.TrainConfig`; ``resume=True`` continues from the
    newest checkpoint in the output directory."""

    def __init__(self, config: TrainConfig, resume: bool = False, progress: bool = True) -> None:
        self.config = config
        self.output = Path(config.run.output_dir)
        self.output.mkdir(parents=True, exist_ok=True)
        self.progress = progress
        torch.set_num_threads(max(1, config.run.threads))
        torch.manual_seed(config.run.seed)
        self.start_iteration = 0
        self.history: list[dict[str, Any]] = []
        self.population = population_of(config)  # first: a bad population fails before any work
        checkpoint = latest_checkpoint(self.output / "checkpoints") if resume else None
        self.policy: Policy = build_policy(config, self.output, checkpoint)
        self.sampling = Sampling(
            temperature=config.rollout.temperature, top_p=config.rollout.top_p,
            top_k=config.rollout.top_k, max_new_tokens=config.rollout.max_new_tokens,
        )
        algo = config.algo
        self.optimizer = torch.optim.AdamW(
            self.policy.trainable_parameters(), lr=algo.learning_rate, weight_decay=algo.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.runner = RolloutRunner(
            config.env.env_id, env_kwargs(config),
            num_envs=config.rollout.groups_per_iteration * config.rollout.group_size,
        )
        if checkpoint is not None:
            state = load_training_state(checkpoint, self.optimizer, self.scheduler)
            self.start_iteration = state.iteration
            self.history = state.extras["history"]
            # a killed run may have logged iterations after its last checkpoint: drop them
            lines = "".join(json.dumps(m) + "\n" for m in self.history)
            (self.output / "metrics.jsonl").write_text(lines)
        self._writer = self._tensorboard() if config.run.tensorboard else None

    # ------------------------------------------------------------------ the loop
    def train(self) -> list[dict[str, Any]]:
        """Run the remaining iterations; return the per-iteration metrics."""
        run = self.config.run
        bar = tqdm(range(self.start_iteration, run.iterations), initial=self.start_iteration,
                   total=run.iterations, desc="mage train", disable=not self.progress)
        for iteration in bar:
            started = time.perf_counter()
            batch = self.collect(iteration)
            rollout_seconds = time.perf_counter() - started
            turns, advantages = self.credit(batch)
            stats = self.update(turns, advantages, iteration)
            metrics = self.summarise(iteration, batch, stats, rollout_seconds, time.perf_counter() - started)
            self.log(metrics, bar)
            if run.checkpoint_every and (iteration + 1) % run.checkpoint_every == 0:
                self.save(iteration + 1)
        if run.iterations > self.start_iteration and (not run.checkpoint_every or run.iterations % run.checkpoint_every):
            self.save(run.iterations)
        if self._writer is not None:
            self._writer.close()
        return self.history

    def collect(self, iteration: int) -> RolloutBatch:
        """Stage 1: draw the groups of this iteration and play them."""
        rollout = self.config.rollout
        rng = np.random.default_rng([self.config.run.seed, iteration])
        base = (self.config.run.seed * 100_003 + iteration) * rollout.groups_per_iteration
        if self.population:
            ids, weights = zip(*self.population.items())
            probabilities = np.array(weights, dtype=float) / sum(weights)
            drawn = [ids[o] for o in rng.choice(len(ids), size=rollout.groups_per_iteration, p=probabilities)]
        else:  # a single-agent task: the group shares its instance only
            drawn = [None] * rollout.groups_per_iteration
        groups = [GroupSpec(seed=base + b, opponent=o) for b, o in enumerate(drawn)]
        return self.runner.collect(self.policy, groups, rollout.group_size, self.sampling,
                                   action_tokens=rollout.action_tokens, seed=base)

    def credit(self, batch: RolloutBatch) -> tuple[list[Turn], np.ndarray]:
        """Stages 2-3: discounted per-turn returns, then group-relative advantages."""
        algo = self.config.algo
        turns = batch.ordered_turns()
        table = TurnTable(
            traj=np.array([t.traj for t in turns]),
            episode=np.array([t.episode for t in turns]),
            reward=np.array([t.reward for t in turns]),
            group=np.array([t.group for t in turns]),
            archetype=np.array([t.opponent for t in turns], dtype=object),
            phase=np.array([int(t.phase != "act") for t in turns]),
            anchor=np.array([t.anchor for t in turns], dtype=object),
        )
        returns = discounted_returns(table, algo.gamma_step, algo.gamma_traj)
        advantages = group_advantages(table, returns, scope=algo.scope, estimator=algo.estimator,
                                      std=algo.std_normalize)
        return turns, advantages

    def update(self, turns: list[Turn], advantages: np.ndarray, iteration: int) -> dict[str, float]:
        """Stage 4: ``epochs`` passes of PPO-clip over shuffled minibatches."""
        algo = self.config.algo
        keep = [i for i, t in enumerate(turns) if not t.truncated and t.completion_ids]
        if not keep:
            return {}
        rng = np.random.default_rng([self.config.run.seed, iteration, 1])
        reference = self._reference_logprobs([turns[i] for i in keep]) if algo.kl_coef > 0 else None
        sums: dict[str, float] = defaultdict(float)
        steps = 0
        lengths = np.array([len(turns[i].prompt_ids) + len(turns[i].completion_ids) for i in keep])
        for _ in range(algo.epochs):
            for chosen in _length_buckets(lengths, algo.minibatch_size, rng):
                batch = [turns[keep[i]] for i in chosen]
                new, entropy, mask = self.policy.completion_logprobs(
                    [t.prompt_ids for t in batch], [t.completion_ids for t in batch],
                    temperature=self.sampling.temperature, allowed_ids=[t.allowed_ids for t in batch],
                )
                old = _pad([t.logprobs for t in batch], new.shape[1]).to(new.device)
                ref = None if reference is None else reference[chosen][:, : new.shape[1]].to(new.device)
                stats = ppo_loss(
                    new, old, ref, entropy, torch.tensor(advantages[[keep[i] for i in chosen]], dtype=torch.float32,
                                                         device=new.device),
                    mask, clip=algo.clip, kl_coef=algo.kl_coef, entropy_coef=algo.entropy_coef,
                )
                self.optimizer.zero_grad(set_to_none=True)
                stats.loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.trainable_parameters(), algo.max_grad_norm)
                self.optimizer.step()
                for key in ("policy_loss", "kl", "entropy", "clip_fraction", "approx_kl"):
                    sums[key] += getattr(stats, key)
                sums["grad_norm"] += float(grad_norm)
                steps += 1
        self.scheduler.step()
        return {key: value / steps for key, value in sums.items()}

    # ------------------------------------------------------------------ bookkeeping
    def summarise(self, iteration: int, batch: RolloutBatch, stats: dict[str, float],
                  rollout_seconds: float, seconds: float) -> dict[str, Any]:
        """Per-iteration metrics: returns and success by episode index and archetype, etc."""
        returns = np.array(batch.episode_returns, dtype=float)
        successes = np.array(batch.episode_successes, dtype=float)
        act_turns = [t for t in batch.turns if t.phase == "act"]
        metrics: dict[str, Any] = {"iteration": iteration + 1, "lr": self.scheduler.get_last_lr()[0]}
        for i in range(returns.shape[1]):
            metrics[f"return_ep{i + 1}"] = float(returns[:, i].mean())
            metrics[f"success_ep{i + 1}"] = float(successes[:, i].mean())
        for opponent in sorted(set(batch.opponents)):
            rows = [k for k, o in enumerate(batch.opponents) if o == opponent]
            metrics[f"final_return/{opponent}"] = float(returns[rows, -1].mean())
        metrics["invalid_rate"] = sum(t.invalid for t in act_turns) / max(len(act_turns), 1)
        metrics["tokens_per_second"] = batch.generated_tokens / max(rollout_seconds, 1e-9)
        metrics["seconds"] = seconds
        metrics.update(stats)
        return metrics

    def log(self, metrics: dict[str, Any], bar: tqdm) -> None:
        self.history.append(metrics)
        with open(self.output / "metrics.jsonl", "a") as handle:
            handle.write(json.dumps(metrics) + "\n")
        if self._writer is not None:
            for key, value in metrics.items():
                if key != "iteration" and isinstance(value, (int, float)) and math.isfinite(value):
                    self._writer.add_scalar(key, value, metrics["iteration"])
        n = self.config.env.num_episodes
        bar.set_postfix_str(
            f"R1 {metrics['return_ep1']:+.3f} R{n} {metrics[f'return_ep{n}']:+.3f} "
            f"H {metrics.get('entropy', float('nan')):.3f} kl {metrics.get('approx_kl', float('nan')):.4f}"
        )

    def save(self, iteration: int) -> Path:
        return save_checkpoint(
            self.output / "checkpoints", iteration, self.policy.model, self.policy.tokenizer,
            self.optimizer, self.scheduler, self.config.to_dict(), {"history": self.history},
        )

    def _reference_logprobs(self, turns: list[Turn]) -> torch.Tensor:
        width = max(len(t.completion_ids) for t in turns)
        chunks = []
        size = self.config.algo.minibatch_size
        for start in range(0, len(turns), size):
            part = turns[start:start + size]
            ref, _, _ = self.policy.completion_logprobs(
                [t.prompt_ids for t in part], [t.completion_ids for t in part],
                temperature=self.sampling.temperature, allowed_ids=[t.allowed_ids for t in part], reference=True,
            )
            chunks.append(torch.nn.functional.pad(ref.cpu(), (0, width - ref.shape[1])))
        return torch.cat(chunks)

    def _lr_factor(self, step: int) -> float:
        algo, total = self.config.algo, max(self.config.run.iterations, 1)
        if step < algo.warmup_iterations:
            return (step + 1) / algo.warmup_iterations
        if algo.schedule == "cosine":
            progress = (step - algo.warmup_iterations) / max(total - algo.warmup_iterations, 1)
            return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
        return 1.0

    def _tensorboard(self):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # tensorboard is optional
            return None
        return SummaryWriter(log_dir=str(self.output / "tensorboard"))


def _length_buckets(lengths: np.ndarray, size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Minibatches of similar lengths (little padding), in random order, ties broken at random.

    Example:
        >>> sorted(sorted(b.tolist()) for b in _length_buckets(np.array([5, 1, 5, 1]), 2, np.random.default_rng(0)))
        [[0, 2], [1, 3]]
    """
    order = np.lexsort((rng.random(len(lengths)), lengths))
    buckets = [order[start:start + size] for start in range(0, len(order), size)]
    return [buckets[i] for i in rng.permutation(len(buckets))]


def _pad(rows: list[list[float]], width: int) -> torch.Tensor:
    out = torch.zeros((len(rows), width))
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row[:width])
    return out
