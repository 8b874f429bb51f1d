"""The trainer end to end: a tiny run, resume equivalence, the CLI."""

import json
import warnings

import numpy as np
import pytest
import torch

from mage_agent.config import TrainConfig, apply_overrides, load_config
from mage_agent.memory import activation_bytes_per_token
from mage_agent.trainer import Trainer

#: A short run of the update's own terms (the first-hand anchor, Kuhn's default, has its tests in test_anchor.py).
TINY_RUN = {"iterations": 4, "groups_per_iteration": 4, "group_size": 2, "checkpoint_every": 2,
            "eval_meta_episodes": 0, "tensorboard": False, "minibatch_size": 8, "warmup_iterations": 1,
            "equilibrium_coef": 0.0}


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


def test_the_sampling_gap_is_rounding_when_the_sampler_plays_the_policy_and_large_when_not(tmp_path):
    gaps = []
    for shift in (0.0, 0.5):   # the same first iteration; then as if another policy had sampled it
        trainer = Trainer(run_config(tmp_path, f"gap-{shift}", iterations=1), progress=False)
        turns, advantages, _ = trainer.credit(trainer.collect(0))
        for turn in turns:
            turn.logprobs = [value - shift for value in turn.logprobs]
        gaps.append(trainer.update(turns, advantages, 0)["sampling_gap"])
    assert gaps[0] < 1e-5 and gaps[1] == pytest.approx(0.5, abs=1e-5)   # float32: the same numbers


def test_killed_and_resumed_run_is_bit_identical(tmp_path, train_until_killed):
    straight = Trainer(run_config(tmp_path, "straight"), progress=False)
    straight.train()

    train_until_killed(Trainer(run_config(tmp_path, "killed"), progress=False), "collect", 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # the same settings: resumed without a word
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


def test_resuming_with_other_settings_says_which(tmp_path):
    Trainer(run_config(tmp_path, "run", iterations=2), progress=False).train()
    with pytest.warns(UserWarning, match=r"entropy_coef 0\.1 -> 0\.05, iterations 2 -> 6; it continues with the new"):
        Trainer(run_config(tmp_path, "run", iterations=6, entropy_coef=0.05, threads=2), resume=True, progress=False)


def test_setting_changes_keep_one_entry_per_setting_whatever_its_value():
    from mage_agent.build import resolved
    from mage_agent.trainer import setting_changes

    stored = resolved(TrainConfig()).to_dict()   # what a run saves: its population and held-out written out
    stored["env"]["population"] = {"conservative": 1.0, "aggressive": 1.0}   # a value with ", " in it
    del stored["algo"]["std_of"]   # a setting the stored run's code predated
    changes = setting_changes(stored, TrainConfig())
    assert changes == ["population {'conservative': 1.0, 'aggressive': 1.0} -> {'conservative': 1.0, "
                       "'aggressive': 1.0, 'intermediate': 1.0, 'random-style': 1.0}", "std_of unset -> 'advantages'"]
    assert setting_changes(stored, TrainConfig(), unset=False) == changes[:1]


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
    for name in ("micro_batch_size", "generation_batch_size"):
        with pytest.raises(ValueError, match=name):
            apply_overrides(TrainConfig(), {name: -1})
    with pytest.raises(ValueError, match="minibatch_size"):
        apply_overrides(TrainConfig(), {"minibatch_size": 0})


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


def test_micro_batches_accumulate_to_the_minibatch_update(tmp_path):
    """``micro_batch_size`` splits each minibatch's forward/backward passes; the update and
    the logged diagnostics are those of the whole minibatch."""
    extra = {"iterations": 1, "kl_coef": 0.05, "epochs": 2}
    whole = Trainer(run_config(tmp_path, "whole", **extra), progress=False)
    split = Trainer(run_config(tmp_path, "split", micro_batch_size=3, **extra), progress=False)
    initial = parameters(split)
    scored = []
    score = split.policy.score_completions
    split.policy.score_completions = lambda prompts, *args, **kwargs: (scored.append(len(prompts)),
                                                                         score(prompts, *args, **kwargs))[1]
    a, b = whole.train()[-1], split.train()[-1]
    assert scored and max(scored) == 3 and sum(scored) > 3  # scored in micro-batches, the reference too
    before, after = parameters(whole), parameters(split)
    assert any(not torch.equal(initial[n], after[n]) for n in initial)
    for name in before:
        assert torch.allclose(before[name], after[name], atol=2e-6, rtol=0), name
    for key in ("policy_loss", "kl", "entropy", "clip_fraction", "approx_kl", "grad_norm"):
        assert a[key] == pytest.approx(b[key], rel=1e-4, abs=1e-6), key
    assert a["return_ep1"] == b["return_ep1"] and a["meta_episodes"] == b["meta_episodes"]


def test_reference_log_probs_are_scored_in_the_token_budgeted_micro_batches(tmp_path):
    """The KL penalty's reference pass holds to the update's token budget (it once ran whole
    minibatches), and gives the log-probs of one pass over every turn."""
    trainer = Trainer(run_config(tmp_path, "reference", kl_coef=0.05, minibatch_size=1000), progress=False)
    turns = trainer.collect(0).ordered_turns()
    whole = trainer._reference_logprobs(turns)
    trainer.token_budget = 2 * max(len(t.prompt_ids) + len(t.completion_ids) for t in turns)
    scored = []
    score = trainer.policy.score_completions
    trainer.policy.score_completions = lambda prompts, *args, **kwargs: (scored.append(len(prompts)),
                                                                           score(prompts, *args, **kwargs))[1]
    split = trainer._reference_logprobs(turns)
    assert len(scored) > 1 and sum(scored) == len(turns)
    assert split.shape == whole.shape and torch.allclose(split, whole, atol=1e-5)


def test_adapters_on_the_top_layers_only_let_a_micro_batch_hold_more_tokens(tmp_path):
    """The layers below ``lora_top_layers`` keep no activations for the backward pass, so
    the default budget counts the adapted layers only (here 1 of the tiny model's 2); the
    setting means nothing without LoRA."""
    every = Trainer(run_config(tmp_path, "every", lora=True), progress=False)
    top = Trainer(run_config(tmp_path, "top", lora=True, lora_top_layers=1), progress=False)
    assert every.policy.model.config.num_hidden_layers == 2
    assert top.bytes_per_token * 2 == every.bytes_per_token
    assert top.token_budget in (2 * every.token_budget, 2 * every.token_budget + 1)
    whole = Trainer(run_config(tmp_path, "whole", lora=False, lora_top_layers=1), progress=False)
    weight_bytes = next(whole.policy.model.parameters()).element_size()
    assert whole.bytes_per_token == activation_bytes_per_token(whole.policy.model.config, weight_bytes)  # every layer


def test_micro_batch_gradients_weight_completions_by_their_tokens(tmp_path):
    """Completions of different lengths: the accumulated gradient and the token-mean
    diagnostics equal one pass over the whole minibatch."""
    from mage_agent.rollout import Turn

    trainer = Trainer(run_config(tmp_path, "grads", kl_coef=0.05), progress=False)
    g = torch.Generator().manual_seed(0)
    vocab = trainer.policy.model.get_output_embeddings().weight.shape[0]
    turns = []
    for row in range(7):
        prompt = torch.randint(4, vocab, (5 + row % 3,), generator=g).tolist()
        completion = torch.randint(4, vocab, (1 + row % 4,), generator=g).tolist()
        turns.append(Turn(traj=row, group=0, opponent="x", episode=0, phase="act", prompt_ids=prompt,
                          completion_ids=completion, logprobs=[-5.0 + 0.3 * k for k in range(len(completion))],
                          reward=0.0, truncated=False, anchor="", allowed_ids=None))
    advantages = torch.linspace(-1.0, 1.5, len(turns)).numpy()
    reference = trainer._reference_logprobs(turns)
    with torch.no_grad():  # move the policy away from the reference: a non-zero KL term
        for param in trainer.policy.trainable_parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=g))
    tokens = float(sum(len(t.completion_ids) for t in turns))

    def gradients(micro):
        trainer.config.algo.micro_batch_size = micro
        trainer.optimizer.zero_grad(set_to_none=True)
        stats = trainer._minibatch_gradients(turns, advantages, reference, tokens, trainer.config.algo.entropy_coef)
        return stats, [p.grad.clone() for p in trainer.policy.trainable_parameters()]

    (whole_stats, whole_grads), (split_stats, split_grads) = gradients(0), gradients(2)
    for a, b in zip(whole_grads, split_grads):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-5)
    assert max(float(a.abs().max()) for a in whole_grads) > 1e-3
    for key, value in whole_stats.items():
        assert split_stats[key] == pytest.approx(value, rel=1e-5, abs=1e-7), key
    assert whole_stats["clip_fraction"] > 0 and whole_stats["kl"] > 0


@pytest.mark.parametrize("train_truncated", [False, True])
def test_completions_cut_off_by_the_budget_are_trained_on_only_when_asked(tmp_path, monkeypatch, train_truncated):
    from mage_agent.rollout import Turn

    trainer = Trainer(run_config(tmp_path, "cut", train_truncated=train_truncated, epochs=1), progress=False)
    turns = [Turn(traj=row, group=0, opponent="x", episode=0, phase="act", prompt_ids=[5, 6, 7 + row],
                  completion_ids=[8, 9], logprobs=[-1.0, -1.0], reward=0.0, truncated=row % 2 == 1, anchor="",
                  allowed_ids=None) for row in range(6)]
    seen: list[int] = []
    original = trainer._minibatch_gradients

    def spy(batch, *args, **kwargs):
        seen.extend(t.traj for t in batch)
        return original(batch, *args, **kwargs)

    monkeypatch.setattr(trainer, "_minibatch_gradients", spy)
    stats = trainer.update(turns, np.linspace(-1.0, 1.0, 6), iteration=0)
    assert sorted(seen) == ([0, 1, 2, 3, 4, 5] if train_truncated else [0, 2, 4]) and "policy_loss" in stats
    seen.clear()   # nothing but cut-off completions: no step at all unless they are trained on
    stats = trainer.update([t for t in turns if t.truncated], np.array([-1.0, 0.0, 1.0]), iteration=1)
    assert sorted(seen) == ([1, 3, 5] if train_truncated else []) and bool(stats) == train_truncated
    assert trainer.scheduler.last_epoch == 2   # an empty update still moves the learning-rate schedule on


def test_the_progress_bar_says_what_an_iteration_is_doing(tmp_path, capsys):
    trainer = Trainer(run_config(tmp_path, "run", iterations=1, kl_coef=0.1, epochs=2), progress=True)
    trainer.train()
    shown = capsys.readouterr().err
    turns = [int(line.split("collect: turn ")[1].split(",")[0]) for line in shown.split("\r") if "collect: turn " in line]
    assert turns[0] == 1 and turns == sorted(turns) and turns[-1] >= 3   # three hands: three turns at least
    assert "mage train [update: the reference model's log-probs]" in shown
    assert "update: epoch 2/2, step 1/" in shown


def test_invalid_answers_are_counted_by_reason_and_kept_verbatim(tmp_path, train_until_killed):
    """Free-text answers of the untrained tiny model: ``invalid/<reason>`` rates add up to
    ``invalid_rate``, each iteration keeps its first invalid answers in ``invalid_answers.jsonl``,
    and a resumed run drops the lines of iterations after its checkpoint."""
    from mage_envs.core.checker import INVALID_REASONS

    config = run_config(tmp_path, "free", action_tokens=False, max_new_tokens=4)
    train_until_killed(Trainer(config, progress=False), "update", 3)   # iteration 4's collection, killed
    kept = [json.loads(line) for line in (tmp_path / "free" / "invalid_answers.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in kept] == [1, 2, 3]
    with open(tmp_path / "free" / "invalid_answers.jsonl", "a") as torn:   # a line cut by the kill
        torn.write('{"iteration": 4, "answ')
    history = Trainer(config, resume=True, progress=False).train()
    kept = [json.loads(line) for line in (tmp_path / "free" / "invalid_answers.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in kept] == [1, 2, 3, 4]
    for metrics, row in zip(history, kept):
        reasons = {key.split("/", 1)[1]: value for key, value in metrics.items() if key.startswith("invalid/")}
        assert metrics["invalid_rate"] > 0 and sum(reasons.values()) == pytest.approx(metrics["invalid_rate"])
        assert 0 < len(row["answers"]) <= 8 and set(reasons) == set(INVALID_REASONS)
        assert {a["reason"] for a in row["answers"]} <= set(reasons) and all(a["text"] for a in row["answers"])
