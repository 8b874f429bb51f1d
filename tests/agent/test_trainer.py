"""The trainer end to end: a tiny run, resume equivalence, the CLI."""

import json

import pytest
import torch

from mage_agent.config import TrainConfig, apply_overrides, load_config
from mage_agent.trainer import Trainer

TINY_RUN = {"iterations": 4, "groups_per_iteration": 4, "group_size": 2, "checkpoint_every": 2,
            "eval_meta_episodes": 0, "tensorboard": False, "minibatch_size": 8, "warmup_iterations": 1}


def run_config(tmp_path, name, **extra):
    return apply_overrides(TrainConfig(), {**TINY_RUN, "output_dir": str(tmp_path / name), **extra})


def parameters(trainer):
    return {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters()}


def test_training_changes_weights_and_logs_every_iteration(tmp_path):
    config = run_config(tmp_path, "run")
    trainer = Trainer(config, progress=False)
    before = parameters(trainer)
    history = trainer.train()
    after = parameters(trainer)
    assert any(not torch.equal(before[n], after[n]) for n in before)
    assert [m["iteration"] for m in history] == [1, 2, 3, 4]
    for key in ("return_ep1", "return_ep3", "success_ep3", "entropy", "clip_fraction", "approx_kl",
                "invalid_rate", "tokens_per_second"):
        assert key in history[-1]
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["iteration"] for line in lines] == [1, 2, 3, 4]
    assert (tmp_path / "run" / "checkpoints" / "latest").read_text() == "iter-000004"


def test_killed_and_resumed_run_is_bit_identical(tmp_path, monkeypatch):
    straight = Trainer(run_config(tmp_path, "straight"), progress=False)
    straight.train()

    killed = Trainer(run_config(tmp_path, "killed"), progress=False)
    original_collect = killed.collect

    def die_at_third(iteration):
        if iteration == 2:
            raise KeyboardInterrupt("killed")
        return original_collect(iteration)

    monkeypatch.setattr(killed, "collect", die_at_third)
    with pytest.raises(KeyboardInterrupt):
        killed.train()
    resumed = Trainer(run_config(tmp_path, "killed"), resume=True, progress=False)
    assert resumed.start_iteration == 2
    resumed.train()
    a, b = parameters(straight), parameters(resumed)
    assert all(torch.equal(a[n], b[n]) for n in a)
    assert [m["iteration"] for m in resumed.history] == [1, 2, 3, 4]
    assert resumed.history == straight.history or all(
        {k: v for k, v in x.items() if k not in ("seconds", "tokens_per_second")}
        == {k: v for k, v in y.items() if k not in ("seconds", "tokens_per_second")}
        for x, y in zip(resumed.history, straight.history)
    )


def test_lora_run_trains_only_the_adapter_and_resumes(tmp_path):
    config = run_config(tmp_path, "lora", lora=True, lora_rank=4, lora_alpha=8, kl_coef=0.05, iterations=2,
                        checkpoint_every=1)
    trainer = Trainer(config, progress=False)
    trainer.train()
    saved = tmp_path / "lora" / "checkpoints" / "iter-000002" / "model"
    assert (saved / "adapter_model.safetensors").exists() and not (saved / "model.safetensors").exists()
    assert all("lora" in n for n, p in trainer.policy.model.named_parameters() if p.requires_grad)
    resumed = Trainer(apply_overrides(config, {"iterations": 2}), resume=True, progress=False)
    a, b = parameters(trainer), parameters(resumed)
    assert all(torch.equal(a[n], b[n]) for n in a)


def test_config_files_and_validation(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("algo:\n  scope: global\n  gamma_traj: 0.5\nenv:\n  single_opponent: aggressive\n")
    config = load_config(path)
    assert config.algo.scope == "global" and config.algo.gamma_traj == 0.5 and config.env.single_opponent == "aggressive"
    path.write_text("algo:\n  scopes: global\n")
    with pytest.raises(ValueError, match="unknown field"):
        load_config(path)
    with pytest.raises(ValueError, match="scope"):
        apply_overrides(TrainConfig(), {"scope": "batch"})
    with pytest.raises(ValueError, match="group_size"):
        apply_overrides(TrainConfig(), {"group_size": 1})
    with pytest.raises(ValueError, match="unknown setting"):
        apply_overrides(TrainConfig(), {"learning_rte": 1.0})


def test_single_agent_tasks_train_without_a_population(tmp_path):
    config = run_config(tmp_path, "sokoban", env_id="mage/Sokoban-meta-v0", iterations=1, checkpoint_every=0,
                        num_episodes=2, env_options={"max_steps": 4})
    trainer = Trainer(config, progress=False)
    history = trainer.train()
    assert history[-1]["iteration"] == 1 and "return_ep2" in history[-1]
    assert "final_return/task" in history[-1]


def test_held_out_archetypes_are_refused_for_training(tmp_path):
    with pytest.raises(ValueError, match="held-out"):
        Trainer(run_config(tmp_path, "bad", single_opponent="bluffer"), progress=False)
