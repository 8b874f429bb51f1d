"""Run by ``test_distributed.py`` under ``torchrun`` (2 processes, gloo): one sharded
iteration checked against a single process that sees the whole batch, then a short run.

Writes ``report-<rank>.json`` into the folder given as the first argument.
"""

import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from mage_agent.config import TrainConfig, apply_overrides
from mage_agent.distributed import World
from mage_agent.rollout import RolloutBatch
from mage_agent.tiny import TinyConfig, create_tiny
from mage_agent.trainer import Trainer


def record_gradients(trainer: Trainer) -> list[list[torch.Tensor]]:
    """Capture the (summed, clipped) gradients at every optimizer step."""
    seen: list[list[torch.Tensor]] = []
    trainer.optimizer.register_step_pre_hook(
        lambda *_: seen.append([p.grad.detach().clone() for p in trainer.policy.trainable_parameters()]))
    return seen


def merged(batches: list[RolloutBatch], groups_per_rank: int, group_size: int) -> RolloutBatch:
    """The ranks' batches as one batch with global trajectory and group numbers."""
    out = RolloutBatch()
    for rank, batch in enumerate(batches):
        out.turns += [replace(t, traj=t.traj + rank * groups_per_rank * group_size,
                              group=t.group + rank * groups_per_rank) for t in batch.turns]
        out.episode_returns += batch.episode_returns
        out.episode_successes += batch.episode_successes
        out.opponents += batch.opponents
        out.generated_tokens += batch.generated_tokens
    return out


def main(folder: Path) -> None:
    world = World.from_environment("cpu")
    base = folder / "base_model"
    if world.is_main:
        create_tiny(base, TinyConfig(seed=0))
    world.barrier()
    settings = {"name_or_path": str(base), "groups_per_iteration": 4, "group_size": 4, "minibatch_size": 10_000,
                "epochs": 2, "kl_coef": 0.05, "eval_meta_episodes": 0, "tensorboard": False, "checkpoint_every": 0,
                "warmup_iterations": 0}
    config = apply_overrides(TrainConfig(), {**settings, "output_dir": str(folder / "sharded")})
    sharded = Trainer(config, progress=False, world=world)
    single = Trainer(apply_overrides(config, {"output_dir": str(folder / f"single-{world.rank}")}),
                     progress=False, world=World.single())
    report: dict = {"rank": world.rank, "same_start": all(
        torch.equal(a, b) for a, b in zip(sharded.policy.model.parameters(), single.policy.model.parameters()))}

    batch = sharded.collect(0)
    everything = merged(world.gather(batch), groups_per_rank=2, group_size=4)
    report["local_meta_episodes"] = len(batch.episode_returns)
    report["opponents"] = everything.opponents
    turns, advantages, diagnostics = sharded.credit(batch)
    all_turns, all_advantages, all_diagnostics = single.credit(everything)
    offset = sum(len(b.turns) for b in world.gather(batch)[: world.rank])
    report["advantages_equal"] = bool(np.array_equal(advantages, all_advantages[offset:offset + len(turns)]))
    report["diagnostics_equal"] = diagnostics == all_diagnostics and bool(diagnostics)
    report["advantages_nonzero"] = bool(np.abs(advantages).max() > 0)

    sharded_grads, single_grads = record_gradients(sharded), record_gradients(single)
    sharded_stats = sharded.update(turns, advantages, 0)
    single.update(all_turns, all_advantages, 0)
    report["steps"] = [len(sharded_grads), len(single_grads)]
    report["gradient_max_error"] = max(
        float((a - b).abs().max()) for step_a, step_b in zip(sharded_grads, single_grads) for a, b in zip(step_a, step_b))
    report["gradient_scale"] = max(float(g.abs().max()) for step in single_grads for g in step)
    report["parameter_max_error"] = max(
        float((a - b).abs().max().detach()) for a, b in zip(sharded.policy.model.parameters(), single.policy.model.parameters()))
    report["stats_keys"] = sorted(sharded_stats)

    trained = Trainer(apply_overrides(config, {"output_dir": str(folder / "run"), "iterations": 2,
                                               "minibatch_size": 16}), progress=False, world=world)
    history = trained.train()
    digest = float(sum(p.double().sum() * (i + 1) for i, p in enumerate(trained.policy.model.parameters())))
    report["digests"] = world.gather(digest)
    report["meta_episodes"] = [m["meta_episodes"] for m in history]
    (folder / f"report-{world.rank}.json").write_text(json.dumps(report))
    world.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
