"""Half-precision frozen weights (``dtype: auto`` on a CPU with native bfloat16 products):
the packed forward keeps the residual stream, LoRA adapters and logits in float32, so a LoRA
update smaller than bfloat16's resolution still moves the log-probs as it does in float32,
where adding it in bfloat16 (the model's own forward) rounds it away. Also: the allowed
tokens' logits alone when the vocabulary is large, and how ``auto`` decides."""

import copy
import logging

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from mage_agent import build, packing
from mage_agent import policy as policy_module
from mage_agent.policy import LoraSettings, Policy
from mage_agent.tiny import build_tokenizer

WORDS = ["You hold the King . Legal actions : check , bet , fold , call", "Opponent bets . You call ."]


def llama(vocab: int, seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128,
                                        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                                        tie_word_embeddings=True))


def batch(vocab: int, rows: int = 12):
    g = torch.Generator().manual_seed(1)
    shared = torch.randint(4, vocab, (40,), generator=g).tolist()
    prompts = [shared + torch.randint(4, vocab, (3 + r % 5,), generator=g).tolist() for r in range(rows)]
    allowed = [[4, 5, 6, 7] if r % 2 else [5, 6] for r in range(rows)]
    completions = [[a[r % len(a)]] for r, a in enumerate(allowed)]
    return prompts, completions, allowed


def nudge(policy: Policy, scale: float, seed: int = 2) -> None:
    """Set every LoRA B to small random values (A keeps its initialisation)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in policy.model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=g) * scale)


def trained_change(policies: list[Policy], prompts, completions, allowed, lr: float, steps: int = 3):
    """Train ``policies[0]`` (float32) ``steps`` Adam steps on random advantages, give its
    adapters to the others, and return how far the update moved each one's log-probs."""
    single = policies[0]
    advantages = torch.randn(len(prompts), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        before = [p.completion_logprobs(prompts, completions, allowed_ids=allowed)[0][:, 0] for p in policies]
    optimizer = torch.optim.Adam(single.trainable_parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        logprobs = single.completion_logprobs(prompts, completions, allowed_ids=allowed)[0][:, 0]
        (-(logprobs * advantages).mean()).backward()
        optimizer.step()
    adapters = {name: p.detach() for name, p in single.model.named_parameters() if "lora_" in name}
    changes = []
    with torch.no_grad():
        for policy, start in zip(policies, before):
            for name, parameter in policy.model.named_parameters():
                if name in adapters:
                    parameter.copy_(adapters[name])
            changes.append(policy.completion_logprobs(prompts, completions, allowed_ids=allowed)[0][:, 0] - start)
    return changes


def share_of(change: torch.Tensor, reference: torch.Tensor) -> float:
    """The least-squares factor of ``change`` on ``reference`` (1: the same update)."""
    return float((change * reference).sum() / (reference * reference).sum())


def half_copy(policy: Policy) -> torch.nn.Module:
    """``policy``'s model with bfloat16 frozen weights and its float32 adapters unchanged (as
    ``from_pretrained(dtype=bfloat16)`` and peft build it)."""
    model = copy.deepcopy(policy.model).to(torch.bfloat16)
    for (name, half), (_, single) in zip(model.named_parameters(), policy.model.named_parameters()):
        if "lora_" in name:
            half.data = single.data.clone()
    return model


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(WORDS)


def test_a_lora_update_below_bfloat16_resolution_is_kept_in_float32():
    """The mechanism, on one layer: the frozen product's output lies on bfloat16's grid, so an
    adapter's update smaller than half its spacing, added and rounded to bfloat16 (peft's own
    forward on a bfloat16 model), is lost; the packed forward's projection keeps it."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(0)
    layer = get_peft_model(torch.nn.Sequential(torch.nn.Linear(64, 64, bias=False)).to(torch.bfloat16),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["0"])).base_model.model[0]
    assert layer.lora_A["default"].weight.dtype == torch.float32   # peft keeps adapters in float32
    with torch.no_grad():
        layer.base_layer.weight.mul_(8)   # outputs near 8: bfloat16 spacing 1/16 there
        layer.lora_B["default"].weight.normal_(0, 1e-4)
    x = torch.randn(32, 64)
    with torch.no_grad():
        base = torch.nn.functional.linear(x.bfloat16(), layer.base_layer.weight).float()
        update = layer.lora_B["default"](layer.lora_A["default"](x)) * layer.scaling["default"]
        kept = packing._projection(layer, torch.float32)(x) - base
        rounded = layer(x.bfloat16()).float() - base
    assert update.abs().max() < 0.01 < base.abs().mean()
    torch.testing.assert_close(kept, update, atol=1e-6, rtol=1e-4)
    assert (rounded == 0).float().mean() > 0.9


def test_bfloat16_log_probs_and_gradients_are_close_to_float32(tokenizer):
    vocab = len(tokenizer)
    prompts, completions, allowed = batch(vocab)
    lora = LoraSettings(rank=4, alpha=8, dropout=0.0)
    single = Policy(llama(vocab), tokenizer, lora=lora, packed_forward=True)
    nudge(single, 0.02)
    half = Policy(half_copy(single), tokenizer, packed_forward=True)
    grads = []
    for policy in (single, half):
        policy.model.zero_grad()
        logprobs, entropy, _ = policy.completion_logprobs(prompts, completions, allowed_ids=allowed)
        assert logprobs.dtype == torch.float32 and entropy.dtype == torch.float32
        logprobs.sum().backward()
        grads.append((logprobs.detach(), torch.cat([p.grad.flatten() for p in policy.trainable_parameters()])))
    (want, want_grad), (got, got_grad) = grads
    assert (got - want).abs().max() < 0.05
    assert torch.nn.functional.cosine_similarity(got_grad, want_grad, dim=0) > 0.99


def test_a_large_vocabulary_computes_the_allowed_tokens_logits_only(tokenizer, monkeypatch):
    vocab = policy_module.WHOLE_HEAD_VOCABULARY + 100
    prompts, completions, allowed = batch(vocab)
    restricted = Policy(llama(vocab), tokenizer, packed_forward=True, keep_reference=False)
    assert restricted.logit_columns(allowed).tolist() == [4, 5, 6, 7]
    logprobs, entropy, mask = restricted.completion_logprobs(prompts, completions, allowed_ids=allowed)
    monkeypatch.setattr(policy_module, "WHOLE_HEAD_VOCABULARY", 10**9)   # the whole head, as before
    whole, whole_entropy, _ = restricted.completion_logprobs(prompts, completions, allowed_ids=allowed)
    torch.testing.assert_close(logprobs, whole, atol=1e-5, rtol=0)
    torch.testing.assert_close(entropy, whole_entropy, atol=1e-5, rtol=0)


def test_sampling_over_the_allowed_columns_gives_allowed_tokens_and_their_log_probs(tokenizer):
    from mage_agent.sampling import Sampling, TorchSampler

    vocab = policy_module.WHOLE_HEAD_VOCABULARY + 100
    prompts, _, allowed = batch(vocab)
    policy = Policy(llama(vocab), tokenizer, packed_forward=True, keep_reference=False)
    out = TorchSampler(policy).generate([" ".join(map(str, p)) for p in prompts], Sampling(max_new_tokens=1),
                                        allowed_ids=allowed, seed=0)
    encoded = [o.prompt_ids for o in out]
    scored, _, _ = policy.completion_logprobs(encoded, [o.completion_ids for o in out], allowed_ids=allowed)
    for row, generation in enumerate(out):
        assert generation.completion_ids[0] in allowed[row]
        assert abs(generation.logprobs[0] - float(scored[row, 0].detach())) < 1e-5


def test_auto_dtype_takes_bfloat16_only_for_frozen_packed_weights_on_a_bfloat16_cpu(caplog):
    caplog.set_level(logging.INFO, logger="mage_agent")
    amx, avx2 = "flags : fpu amx_bf16 amx_tile", "flags : fpu avx2"
    assert build.resolve_dtype("auto", "cpu", frozen_packed=True, cpuinfo=amx) == torch.bfloat16
    assert "amx_bf16" in caplog.text and "stay in float32" in caplog.text
    assert build.resolve_dtype("auto", "cpu", frozen_packed=True, cpuinfo=avx2) == torch.float32
    assert "no native bfloat16" in caplog.text
    assert build.resolve_dtype("auto", "cpu", frozen_packed=False, cpuinfo=amx) == torch.float32
    assert build.resolve_dtype("float32", "cpu", frozen_packed=True, cpuinfo=amx) == torch.float32
    assert build.resolve_dtype("auto", "cuda", frozen_packed=False) == torch.bfloat16
