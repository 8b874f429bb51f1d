"""A model shaped like a hub checkpoint — Qwen2 architecture, byte-level BPE tokenizer,
ChatML chat template, eos at the end of each answer — trained with LoRA in bfloat16.

The fixture first teaches the random model the answer format (a few seconds of supervised
steps), as a real instruction-tuned checkpoint would already know it; without that nearly
every completion would run into the length limit and be masked out of the loss.

``MAGE_TEST_DEVICE=cuda python -m pytest tests/agent/test_hub_model.py`` runs the training
test on a GPU.
"""

import json
import os
import random

import gymnasium as gym
import pytest
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from mage_agent.config import TrainConfig, apply_overrides
from mage_agent.policy import Policy
from mage_agent.tiny import CORPUS_OPPONENTS, env_corpus
from mage_agent.trainer import Trainer
from mage_envs.cli import main

DEVICE = os.environ.get("MAGE_TEST_DEVICE", "cpu")
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def chatml_tokenizer() -> PreTrainedTokenizerFast:
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(env_corpus(games_per_env=3, styles=("compact",)), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = CHATML
    return tokenizer


def teach_answer_format(policy: Policy, steps: int = 120) -> None:
    """Supervised steps on ``<action>legal</action><|im_end|>`` answers to compact Kuhn prompts."""
    rng = random.Random(0)
    env = gym.make("mage/KuhnPoker-meta-v0", prompt_style="compact", reflection=False,   # fixed opponents: the
                   opponent=list(CORPUS_OPPONENTS["mage/KuhnPoker-meta-v0"]))          # model stays as the splits grow
    examples = []
    for seed in range(40):
        obs, info = env.reset(seed=seed)
        while True:
            answer = f"<action>{rng.choice(info['legal_actions'])}</action>"
            completion = policy.tokenizer(answer, add_special_tokens=False)["input_ids"] + [policy.tokenizer.eos_token_id]
            examples.append((policy.encode_prompt(obs), completion))
            obs, _, terminated, truncated, info = env.step(answer)
            if terminated or truncated:
                break
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=3e-3)
    for _ in range(steps):
        batch = rng.sample(examples, 16)
        logprobs, _, mask = policy.completion_logprobs([p for p, _ in batch], [c for _, c in batch])
        loss = -(logprobs * mask).sum() / mask.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("qwen2-chat")
    tokenizer = chatml_tokenizer()
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=2048, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True,
    ))
    policy = Policy(model, tokenizer, keep_reference=False)
    teach_answer_format(policy)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_prompts_go_through_the_chat_template(chat_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(chat_model)
    policy = Policy(AutoModelForCausalLM.from_pretrained(chat_model), tokenizer, keep_reference=False)
    text = tokenizer.decode(policy.encode_prompt("You hold the King."))
    assert text == "<|im_start|>user\nYou hold the King.<|im_end|>\n<|im_start|>assistant\n"


def test_lora_bfloat16_run_trains_the_adapter_only_and_evaluates(chat_model, tmp_path):
    out = tmp_path / "run"
    config = apply_overrides(TrainConfig(), {
        "name_or_path": str(chat_model), "lora": True, "lora_rank": 4, "lora_alpha": 8, "dtype": "bfloat16",
        "kl_coef": 0.05, "action_tokens": False, "max_new_tokens": 12, "iterations": 2, "groups_per_iteration": 2,
        "group_size": 4, "minibatch_size": 16, "checkpoint_every": 1, "eval_meta_episodes": 0, "tensorboard": False,
        "warmup_iterations": 0, "output_dir": str(out), "device": DEVICE,
        # the memory settings a large model needs
        "micro_batch_size": 4, "generation_batch_size": 4, "activation_checkpointing": True,
    })
    trainer = Trainer(config, progress=False)
    assert trainer.policy.activation_checkpointing
    base = {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters() if not p.requires_grad}
    history = trainer.train()
    trainable = {n: p for n, p in trainer.policy.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert {p.dtype for n, p in trainer.policy.model.named_parameters() if n in base} == {torch.bfloat16}
    assert all(torch.equal(p, base[n]) for n, p in trainer.policy.model.named_parameters() if n in base)
    assert history[-1]["invalid_rate"] < 0.5  # the format was learned: most answers are legal actions
    assert "approx_kl" in history[-1] and history[-1]["kl"] >= 0  # completions ended, so there was an update

    first = load_file(out / "checkpoints" / "iter-000001" / "model" / "adapter_model.safetensors")
    second = load_file(out / "checkpoints" / "iter-000002" / "model" / "adapter_model.safetensors")
    assert not (out / "checkpoints" / "iter-000002" / "model" / "model.safetensors").exists()
    assert any(not torch.equal(first[k], second[k]) for k in first)

    assert main(["eval", "--checkpoint", str(out / "checkpoints" / "iter-000002"), "--meta-episodes", "2",
                 "--quiet", "--output-dir", str(tmp_path / "eval")]) == 0
    report = tmp_path / "eval" / "eval_policy.json"
    assert set(json.loads(report.read_text())["opponents"]) >= {"conservative", "maniac"}


def test_react_baseline_runs_on_the_hub_shaped_model(chat_model, tmp_path):
    assert main(["eval", "--model", str(chat_model), "--agent", "react", "--meta-episodes", "1",
                 "--max-tokens", "16", "--quiet", "--output-dir", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "eval_react.json").read_text())["agent"] == "react"
