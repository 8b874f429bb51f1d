"""Policy: sampled (TorchSampler) log-probs agree with scoring; LoRA and reference; save/load round trips."""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from mage_agent.loss import ppo_loss
from mage_agent.policy import LoraSettings, Policy
from mage_agent.sampling import Sampling, TorchSampler
from mage_agent.tiny import TinyConfig, build_model, build_tokenizer, create_tiny

WORDS = ["You hold the King . Legal actions : check , bet , fold , call", "Opponent bets . You call ."]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(WORDS)


def test_generated_logprobs_match_scoring(tokenizer):
    policy = Policy(build_model(tokenizer), tokenizer)
    sampler = TorchSampler(policy)
    sampling = Sampling(temperature=0.7, max_new_tokens=4)
    out = sampler.generate(["You hold the King", "Opponent bets . You"], sampling, seed=3)
    new, entropy, mask = policy.completion_logprobs([g.prompt_ids for g in out], [g.completion_ids for g in out],
                                                    temperature=0.7)
    for row, g in enumerate(out):
        assert new[row, : len(g.logprobs)].tolist() == pytest.approx(g.logprobs, abs=1e-5)
        assert mask[row].sum() == len(g.completion_ids)
    assert (entropy[mask] > 0).all()


def test_a_free_text_choice_gets_the_entropy_of_its_first_token_among_the_legal_first_tokens(tokenizer):
    """With ``choice_ids`` a free-text row's first entropy is, by hand from the model's logits,
    that of the first token renormalised over its legal first tokens; its other entropies,
    every log-prob and the other rows are those scored without."""
    policy = Policy(build_model(tokenizer, TinyConfig(seed=4)), tokenizer)
    prompts = [policy.encode_words(["You hold the King"])[0], policy.encode_words(["Opponent bets . You"])[0]]
    completions = [list(policy.encode_words(["bet , call"])[0]), list(policy.encode_words(["fold ."])[0])]
    legal = policy.first_token_ids(["check", "bet", "bet ,"])
    wider = policy.first_token_ids(["fold", "call", "check"])
    assert len(legal) == 2 and len(wider) == 3
    prompts.append(prompts[1])
    completions.append(completions[1])
    plain = policy.completion_logprobs(prompts, completions, temperature=0.7)
    logprobs, entropy, mask = policy.completion_logprobs(prompts, completions, temperature=0.7,
                                                         choice_ids=[legal, None, wider])
    for row, ids in ((0, legal), (2, wider)):
        with torch.no_grad():
            logits = policy.model(torch.tensor([list(prompts[row])])).logits[0, -1].float() / 0.7
        p = torch.softmax(logits[ids], -1)
        assert entropy[row, 0].item() == pytest.approx(float(-(p * p.log()).sum()), abs=1e-5)
        assert entropy[row, 0] < plain[1][row, 0]
        assert torch.equal(entropy[row, 1:], plain[1][row, 1:])
    assert torch.equal(entropy[1], plain[1][1])
    assert torch.equal(logprobs, plain[0]) and torch.equal(mask, plain[2])


def test_the_choice_mass_is_the_first_tokens_probability_of_a_legal_answer(tokenizer):
    """By hand from the model's logits at the sampling temperature: a free-text row's choice
    mass is the softmax's sum over its legal first tokens; a row without choices gets log 1;
    the log-probs, entropies and mask are :meth:`completion_logprobs`' (with choice entropy off:
    the plain ones)."""
    policy = Policy(build_model(tokenizer, TinyConfig(seed=4)), tokenizer)
    prompts = [policy.encode_words(["You hold the King"])[0], policy.encode_words(["Opponent bets . You"])[0]]
    completions = [list(policy.encode_words(["bet , call"])[0]), list(policy.encode_words(["fold ."])[0])]
    legal = policy.first_token_ids(["check", "bet"])
    scored = policy.score_completions(prompts, completions, temperature=0.7, choice_ids=[legal, None],
                                      choice_entropy=False)
    with torch.no_grad():
        logits = policy.model(torch.tensor([list(prompts[0])])).logits[0, -1].float() / 0.7
    assert scored.choice_log_mass.exp().tolist() == pytest.approx(
        [float(torch.softmax(logits, -1)[legal].sum()), 1.0], abs=1e-6)
    plain = policy.completion_logprobs(prompts, completions, temperature=0.7)
    assert all(torch.equal(a, b) for a, b in zip((scored.logprobs, scored.entropy, scored.mask), plain))


def test_a_choice_entropy_gradient_reshapes_the_choice_and_keeps_the_legal_mass():
    """By hand on logits: the choice entropy's value is the renormalised entropy; its gradient
    is the plain one shifted by one constant over the legal tokens (so the renormalised
    distribution moves the same), zero elsewhere, and leaves the legal tokens' log-sum-exp
    unchanged to first order (no mass pushed to answers that are not legal)."""
    from mage_agent.policy import _with_choice_entropy

    scores = torch.tensor([[[2.0, 0.5, -1.0, 0.3, 1.2], [0.0] * 5], [[0.1, 0.2, 3.0, -2.0, 0.0], [0.0] * 5]],
                          requires_grad=True)
    choices = [[0, 1, 4], [2, 3]]
    entropy = _with_choice_entropy(torch.zeros(2, 2), scores, choices, None)
    entropy[:, 0].sum().backward()
    assert scores.grad is not None
    for row, ids in enumerate(choices):
        legal = scores[row, 0, ids].detach().requires_grad_(True)
        q = torch.softmax(legal, -1)
        plain_entropy = -(q * q.log()).sum()
        (plain,) = torch.autograd.grad(plain_entropy, legal)
        assert entropy[row, 0].item() == pytest.approx(plain_entropy.item(), abs=1e-6)
        shift = scores.grad[row, 0, ids] - plain
        assert torch.allclose(shift, shift[0].expand_as(shift), atol=1e-6) and abs(float(shift[0])) > 1e-3
        assert float((q.detach() * scores.grad[row, 0, ids]).sum()) == pytest.approx(0.0, abs=1e-6)
        others = [j for j in range(5) if j not in ids]
        assert torch.equal(scores.grad[row, 0, others], torch.zeros(len(others)))
    assert torch.equal(scores.grad[:, 1], torch.zeros(2, 5))


def test_sampling_is_seeded_and_respects_allowed_tokens(tokenizer):
    policy = Policy(build_model(tokenizer), tokenizer)
    sampler = TorchSampler(policy)
    allowed = policy.single_token_ids(["check", "bet"])
    assert allowed is not None and policy.single_token_ids(["check bet"]) is None
    a = sampler.generate(["You hold the King"] * 20, Sampling(max_new_tokens=1), allowed_ids=[allowed] * 20, seed=7)
    b = sampler.generate(["You hold the King"] * 20, Sampling(max_new_tokens=1), allowed_ids=[allowed] * 20, seed=7)
    assert [g.text for g in a] == [g.text for g in b]
    assert {g.text for g in a} <= {"check", "bet"}
    scored, _, _ = policy.completion_logprobs([g.prompt_ids for g in a], [g.completion_ids for g in a],
                                              allowed_ids=[allowed] * 20)
    # under the restriction the two probabilities sum to one
    p = scored[:, 0].exp()
    other = [policy.completion_logprobs([a[0].prompt_ids], [[t]], allowed_ids=[allowed])[0][0, 0].exp() for t in allowed]
    assert float(sum(other)) == pytest.approx(1.0, abs=1e-5)
    assert (p > 0).all()


def test_a_batch_of_action_tokens_and_free_text_gives_each_row_its_own_kind(tokenizer):
    """Acting turns (one action token) and reflections (free text) in one batch, as a run with
    action tokens and reflections samples them: an acting row stops after its token, a
    free-text row runs to its budget (and says it was cut)."""
    policy = Policy(build_model(tokenizer), tokenizer)
    allowed = policy.single_token_ids(["check", "bet"])
    out = TorchSampler(policy).generate(["You hold the King", "Opponent bets . You"] * 4, Sampling(max_new_tokens=6),
                                        allowed_ids=[allowed, None] * 4, seed=5)
    acting, free = out[0::2], out[1::2]
    assert all(len(g.completion_ids) == 1 and g.text in ("check", "bet") and not g.truncated for g in acting)
    assert any(len(g.completion_ids) > 1 for g in free)
    assert all(g.truncated == (len(g.completion_ids) == 6 and tokenizer.eos_token_id not in g.completion_ids)
               for g in free)


def test_generation_batch_size_caps_each_forward_pass(tokenizer):
    policy = Policy(build_model(tokenizer), tokenizer)
    sampler = TorchSampler(policy)
    prompts = ["You hold the King", "Opponent bets . You", "Legal actions :", "You call", "check"]
    rows = []
    hook = policy.model.get_output_embeddings().register_forward_hook(lambda m, i, o: rows.append(i[0].shape[0]))
    capped = sampler.generate(prompts, Sampling(max_new_tokens=3, batch_size=2), seed=4)
    hook.remove()
    assert rows and max(rows) == 2 and rows.count(1) >= 1  # batches of 2, 2 and 1
    assert [g.prompt_ids for g in capped] == policy.encode_prompts(prompts)
    again = sampler.generate(prompts, Sampling(max_new_tokens=3, batch_size=2), seed=4)
    assert [g.completion_ids for g in again] == [g.completion_ids for g in capped]
    with pytest.raises(ValueError, match="batch_size"):
        Sampling(batch_size=-1)
    whole = sampler.generate(prompts, Sampling(max_new_tokens=3), seed=4)
    one_batch = sampler.generate(prompts, Sampling(max_new_tokens=3, batch_size=len(prompts)), seed=4)
    assert [g.completion_ids for g in one_batch] == [g.completion_ids for g in whole]
    assert [g.logprobs for g in one_batch] == [g.logprobs for g in whole]


def test_tokenizer_caches_answer_as_the_tokenizer(tokenizer):
    policy = Policy(build_model(tokenizer), tokenizer)
    prompts = ["You hold the King", "Opponent bets . You", "You hold the King"]
    expected = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    for _ in range(2):  # tokenised, then remembered
        encoded = policy.encode_prompts(prompts)
        assert encoded == expected and encoded[0] is not encoded[2]
        encoded[0].append(0)  # the caller's copy: the cache is untouched
    assert policy.encode_prompt("Opponent bets . You") == expected[1]
    for _ in range(2):
        assert policy.single_token_ids(["check", "bet"]) == [tokenizer.convert_tokens_to_ids(w) for w in ("check", "bet")]
        assert policy.single_token_ids(["check", "check bet"]) is None
    ids = tokenizer("Opponent bets", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    assert policy.decode(ids) == policy.decode(ids) == tokenizer.decode(ids, skip_special_tokens=True)


def _row_by_row(policy, prompts, completions, allowed):
    """Log-probs and entropies computed one unpadded row at a time, all positions through the head."""
    logprobs, entropies = [], []
    for prompt, completion, ids in zip(prompts, completions, allowed):
        logits = policy.model(input_ids=torch.tensor([prompt + completion])).logits[0]
        scores = logits[len(prompt) - 1: len(prompt) + len(completion) - 1].float()
        if ids is not None:
            scores = scores.masked_fill(~torch.isin(torch.arange(scores.shape[-1]), torch.tensor(ids)), float("-inf"))
        log_probs = torch.log_softmax(scores, -1)
        logprobs.append(log_probs.gather(-1, torch.tensor(completion)[:, None])[:, 0])
        probs = log_probs.exp()
        entropies.append(-(probs * log_probs.masked_fill(probs == 0, 0.0)).sum(-1))
    return logprobs, entropies


def test_scoring_shares_forward_passes_and_keeps_only_completion_logits(tokenizer):
    """Rows with equal inputs share one forward pass and only the positions that predict a
    completion token reach the LM head; values and gradients are those of row-by-row scoring."""
    policy = Policy(build_model(tokenizer, TinyConfig(seed=2)), tokenizer)
    vocab = policy.model.get_output_embeddings().weight.shape[0]
    g = torch.Generator().manual_seed(0)
    shared = torch.randint(4, vocab, (9,), generator=g).tolist()
    prompts = [shared, shared, shared, torch.randint(4, vocab, (5,), generator=g).tolist(), shared[:7], shared]
    completions = [[11], [12], [11, 13, 14], [15, 16], [17], [11, 13, 9]]
    allowed = [[11, 12], [11, 12], None, None, None, None]
    seen = []
    hook = policy.model.get_output_embeddings().register_forward_hook(lambda m, i, o: seen.append(tuple(i[0].shape)))
    logprobs, entropy, mask = policy.completion_logprobs(prompts, completions, allowed_ids=allowed)
    hook.remove()
    # 4 distinct inputs: rows 0 and 1 share one, and so do rows 2 and 5, whose completions differ
    # only in the last token, which no scored position reads; the 11-token rows keep positions
    # 4..10 (the shortest prompt, 5 tokens, predicts its first completion token at position 4)
    assert seen == [(4, 7, policy.model.config.hidden_size)]
    expected_logprobs, expected_entropy = _row_by_row(policy, prompts, completions, allowed)
    for row, completion in enumerate(completions):
        assert mask[row].tolist() == [True] * len(completion) + [False] * (3 - len(completion))
        assert logprobs[row, : len(completion)].tolist() == pytest.approx(expected_logprobs[row].tolist(), abs=1e-5)
        assert entropy[row, : len(completion)].tolist() == pytest.approx(expected_entropy[row].tolist(), abs=1e-5)
    assert float(logprobs[~mask].abs().sum()) == 0.0 and float(entropy[~mask].abs().sum()) == 0.0
    policy.model.zero_grad()
    (logprobs.sum() + entropy.sum()).backward()
    batched = [p.grad.clone() for p in policy.model.parameters()]
    policy.model.zero_grad()
    sum(lp.sum() + h.sum() for lp, h in zip(*_row_by_row(policy, prompts, completions, allowed))).backward()
    for got, want in zip(batched, (p.grad for p in policy.model.parameters())):
        assert torch.allclose(got, want, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("lora", [None, LoraSettings(rank=4, alpha=8, dropout=0.5)])
def test_activation_checkpointing_recomputes_layers_and_keeps_gradients(tokenizer, lora):
    """Each decoder layer runs again during backward; values and gradients stay the same and
    dropout stays off (a LoRA dropout of 0.5 would change the log-probs)."""
    policy = Policy(build_model(tokenizer, TinyConfig(seed=3)), tokenizer, lora=lora)
    with torch.no_grad():  # a non-zero adapter, so that its dropout would show
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.add_(0.1)
    prompts, completions = [[3, 4, 5, 6], [3, 4, 7]], [[8, 9], [10]]

    def score():
        layer = next(m for m in policy.model.modules() if type(m).__name__ == "LlamaDecoderLayer")
        calls = []
        hook = layer.self_attn.q_proj.register_forward_hook(lambda module, args, out: calls.append(1))
        policy.model.zero_grad()
        logprobs, entropy, _ = policy.completion_logprobs(prompts, completions)
        (logprobs.sum() + entropy.sum()).backward()
        hook.remove()
        return logprobs.detach(), [p.grad.clone() for p in policy.trainable_parameters()], len(calls)

    plain_logprobs, plain_grads, plain_calls = score()
    policy.enable_activation_checkpointing()
    logprobs, grads, calls = score()
    assert (plain_calls, calls) == (1, 2)  # a layer's query projection: forward, then again in backward
    assert torch.equal(logprobs, plain_logprobs)
    for a, b in zip(plain_grads, grads):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-5)
    again, _, _ = score()
    assert torch.equal(again, plain_logprobs)  # still no dropout on a second pass


def test_allowed_mask_rows(tokenizer):
    policy = Policy(build_model(tokenizer), tokenizer)
    mask = policy.allowed_mask([[3, 5], None, []], 3)
    assert mask[0].nonzero().flatten().tolist() == [3, 5]
    assert bool(mask[1].all()) and not bool(mask[2].any())
    assert policy.allowed_mask([None, None], 2) is None and policy.allowed_mask(None, 2) is None


def test_lora_reference_is_the_base_model(tokenizer):
    policy = Policy(build_model(tokenizer, TinyConfig(seed=1)), tokenizer, lora=LoraSettings(rank=4, alpha=8))
    prompts, completions = [[3, 4, 5]], [[6, 7]]
    before, _, _ = policy.completion_logprobs(prompts, completions)
    ref, _, _ = policy.completion_logprobs(prompts, completions, reference=True)
    assert torch.allclose(before, ref)  # LoRA starts as the identity
    optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=1.0)
    stats = ppo_loss(before, before.detach(), None, torch.zeros_like(before), torch.tensor([1.0]),
                     torch.ones_like(before, dtype=torch.bool))
    stats.loss.backward()
    optimizer.step()
    after, _, _ = policy.completion_logprobs(prompts, completions)
    ref_after, _, _ = policy.completion_logprobs(prompts, completions, reference=True)
    assert not torch.allclose(after, before)
    assert torch.allclose(ref_after, ref)  # the adapter-disabled model did not move
    assert all("lora" in n for n, p in policy.model.named_parameters() if p.requires_grad)


@pytest.mark.parametrize("packed", [False, True])
def test_lora_on_the_top_layers_only_adapts_them_and_backward_stops_below(tokenizer, packed):
    """``top_layers=1`` puts adapters in the last decoder layer only; the layer below gets no
    adapter, so autograd never records it (transformers' forward: its output needs no
    gradient); the log-probs still move with the adapter."""
    policy = Policy(build_model(tokenizer, TinyConfig(seed=1)), tokenizer,
                    lora=LoraSettings(rank=4, alpha=8, dropout=0.0, top_layers=1), packed_forward=packed)
    adapted = {n.split(".layers.")[1].split(".")[0] for n, p in policy.model.named_parameters() if p.requires_grad}
    assert adapted == {"1"}   # the tiny model's two layers: 0 and 1
    prompts, completions = [[3, 4, 5, 6], [3, 4, 7]], [[8], [9]]
    layers = [m for m in policy.model.modules() if type(m).__name__ == "LlamaDecoderLayer"]
    needs_grad: list[bool] = []
    hooks = [layer.register_forward_hook(lambda m, args, out: needs_grad.append(
        (out[0] if isinstance(out, tuple) else out).requires_grad)) for layer in layers]
    before, _, _ = policy.completion_logprobs(prompts, completions)
    for hook in hooks:
        hook.remove()
    assert before.requires_grad and needs_grad == ([] if packed else [False, True])
    optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=1.0)
    (-before.sum()).backward()
    optimizer.step()
    after, _, _ = policy.completion_logprobs(prompts, completions)
    assert not torch.allclose(after, before)
    with pytest.raises(ValueError, match="between 0 and the model's 2 layers"):
        Policy(build_model(tokenizer), tokenizer, lora=LoraSettings(top_layers=3))


def test_lora_adapter_save_load_round_trip(tokenizer, tmp_path):
    from peft import PeftModel

    base_dir = create_tiny(tmp_path / "base", TinyConfig(corpus_games=2))
    tok = AutoTokenizer.from_pretrained(base_dir)
    policy = Policy(AutoModelForCausalLM.from_pretrained(base_dir), tok, lora=LoraSettings(rank=4, alpha=8))
    with torch.no_grad():
        for name, p in policy.model.named_parameters():
            if "lora_B" in name:
                p.add_(0.05)
    policy.model.save_pretrained(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_model.safetensors").exists()
    reloaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir), tmp_path / "adapter")
    prompt = tok("Legal actions : check , bet")["input_ids"]
    a, _, _ = policy.completion_logprobs([prompt], [prompt[:2]])
    b, _, _ = Policy(reloaded, tok).completion_logprobs([prompt], [prompt[:2]])
    assert torch.equal(a, b)


def test_tiny_model_round_trips_through_save_pretrained(tmp_path):
    path = create_tiny(tmp_path / "tiny", TinyConfig(corpus_games=2))
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    assert 30_000 < sum(p.numel() for p in model.parameters()) < 500_000
    for name in ("check", "bet", "fold", "call", "raise", "1", "9"):
        assert len(tok(name, add_special_tokens=False)["input_ids"]) == 1, name


def test_ppo_loss_clips_and_penalises_kl():
    old = torch.log(torch.tensor([[0.5]]))
    new = torch.log(torch.tensor([[0.9]])).requires_grad_(True)  # ratio 1.8
    positive = ppo_loss(new, old, None, torch.zeros(1, 1), torch.tensor([1.0]), torch.ones(1, 1, dtype=torch.bool), clip=0.2)
    assert positive.loss.item() == pytest.approx(-1.2)  # clipped at 1 + 0.2
    assert positive.clip_fraction == 1.0
    negative = ppo_loss(new, old, None, torch.zeros(1, 1), torch.tensor([-1.0]), torch.ones(1, 1, dtype=torch.bool), clip=0.2)
    assert negative.loss.item() == pytest.approx(1.8)  # pessimistic: the unclipped ratio
    ref = torch.log(torch.tensor([[0.5]]))
    with_kl = ppo_loss(new, old, ref, torch.zeros(1, 1), torch.tensor([1.0]), torch.ones(1, 1, dtype=torch.bool),
                       clip=0.2, kl_coef=0.5)
    delta = float(ref - new.detach())
    assert with_kl.kl == pytest.approx(torch.exp(torch.tensor(delta)).item() - delta - 1)
    assert with_kl.loss.item() == pytest.approx(-1.2 + 0.5 * with_kl.kl)
