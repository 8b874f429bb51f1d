"""The packed forward (``packed_forward``, mage_agent.packing): the log-probs, entropies,
gradients, samples and training metrics of the plain forward, to float rounding."""

import copy
import logging

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from mage_agent import packing
from mage_agent.policy import LoraSettings, Policy
from mage_agent.sampling import Sampling, TorchSampler
from mage_agent.tiny import TinyConfig, build_model, build_tokenizer
from mage_agent.trainer import Trainer

from .test_trainer import run_config

WORDS = ["You hold the King . Legal actions : check , bet , fold , call", "Opponent bets . You call ."]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(WORDS)


def grouped_query_model(tokenizer):
    """A tiny Llama whose 4 query heads share 2 key/value heads."""
    torch.manual_seed(5)
    return LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                                        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True))


def pair(tokenizer, model, lora=None):
    """A plain policy and a packed one with the same weights (adapter included)."""
    plain = Policy(model, tokenizer, lora=lora, keep_reference=lora is None)
    return plain, Policy(copy.deepcopy(plain.model), tokenizer, keep_reference=lora is None, packed_forward=True)


def rows(vocab):
    """Prompts that share a long prefix (or part of it, or nothing), with completions of
    several lengths; rows 0 and 4 have the same input, row 5's prompt is row 0's prompt and
    completion, and the last two share another, shorter prefix (continuations of prefixes
    of two lengths)."""
    g = torch.Generator().manual_seed(0)
    draw = lambda n: torch.randint(4, vocab, (n,), generator=g).tolist()  # noqa: E731
    shared, other = draw(40), draw(34)
    own = draw(5)
    prompts = [shared + own, shared + draw(9), shared[:36] + draw(6), draw(12), shared + own, shared + own + [11],
               shared[:20] + draw(30), other + draw(3), other + draw(7)]
    completions = [[11], [12, 13, 14], [15, 16], [17], [18], [19, 20, 21], [22, 23], [5], [6, 7]]
    allowed = [[11, 12, 18], None, None, None, [11, 12, 18], None, None, None, None]
    return prompts, completions, allowed


def scored(policy, prompts, completions, allowed, temperature=1.0, reference=False):
    """Log-probs, entropies, mask, and the gradients of their sum."""
    policy.model.zero_grad()
    logprobs, entropy, mask = policy.completion_logprobs(prompts, completions, temperature=temperature,
                                                         allowed_ids=allowed, reference=reference)
    if not reference:
        (logprobs.sum() + entropy.sum()).backward()
    grads = [p.grad.clone() for p in policy.model.parameters() if p.grad is not None]
    return logprobs.detach(), entropy.detach(), mask, grads


@pytest.mark.parametrize("build, lora, temperature, min_shared", [
    (lambda tok: build_model(tok, TinyConfig(seed=1)), None, 1.0, packing.MIN_SHARED),
    (lambda tok: build_model(tok, TinyConfig(seed=1)), None, 0.7, 4),   # more, shorter shared prefixes
    (grouped_query_model, None, 1.0, packing.MIN_SHARED),
    (lambda tok: build_model(tok, TinyConfig(seed=2)), LoraSettings(rank=4, alpha=8, dropout=0.5), 1.0, 4),
], ids=["tiny", "tiny-short-prefixes", "grouped-query", "lora"])
def test_packed_scoring_matches_the_plain_forward(tokenizer, monkeypatch, build, lora, temperature, min_shared):
    monkeypatch.setattr(packing, "MIN_SHARED", min_shared)
    plain, packed = pair(tokenizer, build(tokenizer), lora)
    if lora is not None:
        with torch.no_grad():  # a non-zero adapter, so that the reference (adapter off) differs
            for policy in (plain, packed):
                for name, param in policy.model.named_parameters():
                    if "lora_B" in name:
                        param.fill_(0.05)
    prompts, completions, allowed = rows(len(tokenizer))
    want = scored(plain, prompts, completions, allowed, temperature)
    got = scored(packed, prompts, completions, allowed, temperature)
    assert torch.equal(got[2], want[2])
    assert torch.allclose(got[0], want[0], atol=1e-5) and torch.allclose(got[1], want[1], atol=1e-5)
    assert float(got[0][~got[2]].abs().sum()) == 0.0 and float(got[1][~got[2]].abs().sum()) == 0.0
    assert len(got[3]) == len(want[3]) > 0
    for a, b in zip(got[3], want[3]):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)
    if lora is not None:
        ref_want = scored(plain, prompts, completions, allowed, temperature, reference=True)
        ref_got = scored(packed, prompts, completions, allowed, temperature, reference=True)
        assert torch.allclose(ref_got[0], ref_want[0], atol=1e-5)
        assert not torch.allclose(ref_got[0], got[0], atol=1e-4)   # the adapter was off


def test_scoring_again_above_the_kept_frozen_layers_gives_the_same_values_and_gradients(tokenizer, monkeypatch):
    """With the adapters on the top layer of the grouped-query model (3 layers), a trunk cache
    keeps the bottom two layers' output per input; scoring the rows again, all of them or a
    few in another plan (other prefixes shared), starts above them and gives the plain
    forward's log-probs, entropies and gradients, with the adapter on and off."""
    monkeypatch.setattr(packing, "MIN_SHARED", 4)
    plain, packed = pair(tokenizer, grouped_query_model(tokenizer), LoraSettings(rank=4, alpha=8, dropout=0.0,
                                                                                top_layers=1))
    with torch.no_grad():
        for policy in (plain, packed):
            for name, param in policy.model.named_parameters():
                if "lora_B" in name:
                    param.fill_(0.05)
    prompts, completions, allowed = rows(len(tokenizer))
    few = [0, 2, 5, 8]
    pick = lambda values: [values[i] for i in few]  # noqa: E731
    with packed.caching_trunk():
        trunk = packed._trunk
        assert trunk is not None and trunk.layers == 2 and not trunk.states
        first = scored(packed, prompts, completions, allowed)
        held = len(trunk.states)
        reference = scored(packed, prompts, completions, allowed, reference=True)
        again = scored(packed, prompts, completions, allowed)
        some = scored(packed, pick(prompts), pick(completions), pick(allowed))
    assert packed._trunk is None and held == len({tuple(p) + tuple(c[:-1]) for p, c in zip(prompts, completions)})
    for got, want in [(first, scored(plain, prompts, completions, allowed)), (again, first),
                      (reference, scored(plain, prompts, completions, allowed, reference=True)),
                      (some, scored(plain, pick(prompts), pick(completions), pick(allowed)))]:
        assert torch.equal(got[2], want[2])
        assert torch.allclose(got[0], want[0], atol=1e-5) and torch.allclose(got[1], want[1], atol=1e-5)
        assert len(got[3]) == len(want[3])
        for a, b in zip(got[3], want[3]):
            assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


def test_a_plan_covers_each_row_once_and_shares_only_long_prefixes():
    g = torch.Generator().manual_seed(1)
    shared = torch.randint(4, 50, (60,), generator=g).tolist()
    inputs = [tuple(shared[:n] + torch.randint(4, 50, (k,), generator=g).tolist())
              for n, k in [(60, 3), (60, 8), (50, 4), (10, 40), (0, 20), (60, 1), (45, 9)]]
    first = [len(row) - 2 for row in inputs]
    plan = packing.plan_rows(inputs, first)
    rebuilt = {}
    for row in plan.prefixes + plan.continuations:
        prefix = plan.prefixes[row.parent].tokens if row.parent >= 0 else ()
        assert len(prefix) == row.offset and (row.parent < 0 or plan.prefixes[row.parent].source < 0)
        assert row.parent < 0 or row.offset >= packing.MIN_SHARED
        if row.source >= 0:
            rebuilt[row.source] = (prefix + row.tokens, row.offset + row.first)
    assert rebuilt == {r: (inputs[r], first[r]) for r in range(len(inputs))}
    assert len(plan.continuations) >= 4   # the rows that share 45 tokens or more continue one prefix
    batches = packing.chunks(plan.continuations)
    assert sorted(i for batch in batches for i in batch) == list(range(len(plan.continuations)))


@pytest.mark.parametrize("build", [lambda tok: build_model(tok, TinyConfig(seed=4)), grouped_query_model],
                         ids=["tiny", "grouped-query"])
def test_packed_sampling_matches_the_plain_forward(tokenizer, build):
    plain, packed = pair(tokenizer, build(tokenizer))
    prompts = ["You hold the King . Legal actions : check , bet"] * 3 + ["Opponent bets . You", "You hold the King ."]
    allowed = [plain.single_token_ids(["check", "bet"])] * 3 + [None, plain.single_token_ids(["fold", "call"])]
    for sampling, ids in [(Sampling(max_new_tokens=1), allowed), (Sampling(max_new_tokens=1, temperature=0.5), None),
                          (Sampling(max_new_tokens=3), None)]:   # several tokens: the KV-cached decoder
        want = TorchSampler(plain).generate(prompts, sampling, allowed_ids=ids, seed=7)
        got = TorchSampler(packed).generate(prompts, sampling, allowed_ids=ids, seed=7)
        assert [g.completion_ids for g in got] == [g.completion_ids for g in want]
        for a, b in zip(got, want):
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
            assert (a.text, a.truncated, a.allowed_ids, a.prompt_ids) == (b.text, b.truncated, b.allowed_ids, b.prompt_ids)


def test_packed_free_text_decoding_matches_the_plain_forward(tokenizer, monkeypatch):
    """Free-text answers (several tokens, stop strings, beside one-token rows) through the
    packed prefill and decoder: transformers' own tokens and log-probs, with a LoRA adapter,
    whether the rows decode in one batch or are cut into several (greedy: the draws cannot
    differ), and within ``reusing_prefixes`` when a turn extends the one before."""
    lora = LoraSettings(rank=4, alpha=8, dropout=0.0)
    plain, packed = pair(tokenizer, build_model(tokenizer, TinyConfig(seed=6)), lora)
    with torch.no_grad():   # a non-zero adapter, so that the packed forward must add it
        for name, param in packed.model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.5)
    plain.model.load_state_dict(packed.model.state_dict())
    base = "You hold the King . Legal actions : check , bet , fold , call . " * 3
    prompts = [base + "Opponent bets .", base + "You call . You", "You hold", base + "Opponent bets ."]
    allowed = [None, None, None, plain.single_token_ids(["fold", "call"])]
    stop = Sampling(max_new_tokens=6, stop=("call",))
    greedy = Sampling(max_new_tokens=5, top_k=1)

    def same(sampling, prompts, seed, cut=packing.DECODE_POSITIONS):
        monkeypatch.setattr(packing, "DECODE_POSITIONS", cut)
        want = TorchSampler(plain).generate(prompts, sampling, allowed_ids=allowed[:len(prompts)], seed=seed)
        got = sampler.generate(prompts, sampling, allowed_ids=allowed[:len(prompts)], seed=seed)
        assert [g.completion_ids for g in got] == [g.completion_ids for g in want]
        assert len({len(g.completion_ids) for g in got}) > 1   # rows stop at different lengths
        for a, b in zip(got, want):
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)
            assert (a.text, a.truncated, a.prompt_ids) == (b.text, b.truncated, b.prompt_ids)

    sampler, decoder_class = TorchSampler(packed), packing.Decoder
    same(stop, prompts, seed=3)
    cuts = []
    monkeypatch.setattr(packing, "Decoder", lambda *args: cuts.append(args[2]) or decoder_class(*args))
    same(greedy, prompts, seed=0, cut=60)   # one row per decoding batch
    assert len(cuts) == 4 and sorted(map(len, cuts)) == [1, 1, 1, 1]
    monkeypatch.setattr(packing, "Decoder", decoder_class)
    with sampler.reusing_prefixes():
        same(stop, prompts, seed=4)
        assert sampler._prefix_cache is not None and sampler._prefix_cache.current   # kept for the next turn
        same(stop, [prompt + " You call ." for prompt in prompts], seed=5)


def test_final_hidden_equals_the_models_own_in_double_precision_with_biases():
    """Shared prefixes, grouped-query heads and attention biases, in float64: the packed
    forward's final hidden states are transformers' to double-precision rounding."""
    torch.manual_seed(3)
    lm = LlamaForCausalLM(LlamaConfig(vocab_size=40, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, attention_bias=True)).double()
    with torch.no_grad():   # weights (biases included) large enough that attention tells positions apart
        for name, param in lm.named_parameters():
            if "norm" not in name:
                param.normal_(std=0.3)
    shared = list(range(3, 38))
    rows = [tuple(shared + [5, 6]), tuple(shared + [7]), (9, 10, 11, 12)]
    first = [30, 33, 1]
    packed = packing.final_hidden(lm, rows, first)
    own = torch.cat([lm.model(torch.tensor([row])).last_hidden_state[0, start:] for row, start in zip(rows, first)])
    assert packed.dtype == torch.float64
    torch.testing.assert_close(packed, own, rtol=0, atol=1e-12)


def test_a_pass_under_inference_mode_leaves_later_training_passes_working():
    torch.manual_seed(0)
    lm = LlamaForCausalLM(LlamaConfig(vocab_size=40, hidden_size=36, intermediate_size=32, num_hidden_layers=2,
                                      num_attention_heads=3))   # a head shape no other test uses
    rows, first = [tuple(range(3, 40)) + (4,), tuple(range(3, 40)) + (5,)], [37, 37]
    with torch.inference_mode():
        packing.final_hidden(lm, rows, first)
    packing.final_hidden(lm, rows, first).sum().backward()
    assert all(param.grad is not None for param in lm.model.layers[0].self_attn.parameters())


def test_packed_forward_needs_a_llama_and_no_activation_checkpointing(tokenizer, tmp_path, caplog):
    from mage_agent.build import build_policy, packs
    from mage_agent.config import TrainConfig, apply_overrides

    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=16, n_layer=1, n_head=2))
    with pytest.raises(ValueError, match="Llama-family"):
        Policy(gpt2, tokenizer, packed_forward=True)
    with pytest.raises(ValueError, match="recompute"):
        Policy(build_model(tokenizer), tokenizer, packed_forward=True).enable_activation_checkpointing()
    # a run's config asks for it where it applies: the default tiny Llama takes it, ...
    config = apply_overrides(TrainConfig(), {"output_dir": str(tmp_path / "run")})
    assert build_policy(config, tmp_path / "run").packed_forward
    # ... activation checkpointing and other families take the plain forward
    checkpointed = apply_overrides(config, {"activation_checkpointing": True})
    with caplog.at_level(logging.INFO, logger="mage_agent.build"):
        assert not build_policy(checkpointed, tmp_path / "run").packed_forward
    assert "off (activation checkpointing is on)" in caplog.text
    gpt2.save_pretrained(tmp_path / "gpt2")
    with caplog.at_level(logging.INFO, logger="mage_agent.build"):
        assert not packs(config, str(tmp_path / "gpt2"))
    assert "model type 'gpt2' is not Llama-family" in caplog.text
    assert not packs(apply_overrides(config, {"packed_forward": False}), str(tmp_path / "run" / "base_model"))


def test_training_with_the_packed_forward_gives_the_same_metrics(tmp_path):
    histories = [Trainer(run_config(tmp_path, f"packed-{packed}", packed_forward=packed, iterations=2),
                         progress=False).train() for packed in (False, True)]
    for plain, packed in zip(*histories):
        assert plain.keys() == packed.keys()
        for key, value in plain.items():
            if key.startswith(("return_", "final_return/", "success_")):
                assert packed[key] == value, key
            elif key not in ("seconds", "tokens_per_second"):
                assert packed[key] == pytest.approx(value, abs=1e-5), key


def test_an_update_over_kept_frozen_layers_trains_as_one_that_runs_them_every_epoch(tmp_path, monkeypatch):
    """LoRA on the tiny model's top layer, packed, two epochs: the update keeps the bottom
    layer's output from the first epoch (it holds every input) and ends with the weights and
    metrics of an update that runs every layer in every epoch."""
    from contextlib import nullcontext

    options = {"lora": True, "lora_top_layers": 1, "lora_rank": 4, "lora_alpha": 8, "packed_forward": True,
               "epochs": 2, "iterations": 1}
    kept = Trainer(run_config(tmp_path, "kept", **options), progress=False)
    turns, advantages, _ = kept.credit(kept.collect(0))
    inputs = {tuple(t.prompt_ids) + tuple(t.completion_ids[:-1]) for t in turns}
    held = []
    original = Policy.score_completions

    def recorded(policy, *args, **kwargs):
        held.append(None if policy._trunk is None else len(policy._trunk.states))
        return original(policy, *args, **kwargs)

    monkeypatch.setattr(Policy, "score_completions", recorded)
    metrics = kept.update(turns, advantages, 0)
    assert held[0] == 0 and held[-1] == len(inputs)   # kept by the first epoch, read by the second
    plain = Trainer(run_config(tmp_path, "plain", **options), progress=False)
    monkeypatch.setattr(plain.policy, "caching_trunk", nullcontext)
    assert plain.update(turns, advantages, 0) == pytest.approx(metrics, abs=1e-6)
    for (name, a), b in zip(kept.policy.model.named_parameters(), plain.policy.model.parameters()):
        assert torch.allclose(a, b, atol=1e-6), name


def _double_llama():
    """A float64 Llama with grouped-query heads and attention biases, weights large enough
    that attention tells positions apart."""
    torch.manual_seed(3)
    lm = LlamaForCausalLM(LlamaConfig(vocab_size=40, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, attention_bias=True)).double()
    with torch.no_grad():
        for name, param in lm.named_parameters():
            if "norm" not in name:
                param.normal_(std=0.3)
    return lm.eval()


def test_a_prefix_cache_gives_the_same_states_and_runs_only_the_new_tokens(monkeypatch):
    """Three steps of an inference loop: rows that extend a row of the step before run only
    their new tokens, after its keys and values (read from a pass that continued another
    cached row, or from an in-call shared prefix); the states are the uncached ones."""
    ran = _counting_passes(monkeypatch)
    lm, cache = _double_llama(), packing.PrefixCache()
    g = torch.Generator().manual_seed(1)
    draw = lambda n: tuple(torch.randint(3, 40, (n,), generator=g).tolist())  # noqa: E731
    a, b, c = draw(50), draw(45), draw(10)
    # step 0: nothing cached; two rows share an in-call prefix of 45 tokens
    # step 1: a row extends a (by 3), one shares 40 tokens with a, one extends b's in-call
    #   continuation, one is new, and one is too close to a short row (c) to reuse it
    # step 2: rows extend step 1's rows, among them one read from a cached continuation
    steps = [[a, b + draw(5), b + draw(6), c],
             [a + draw(3), a[:40] + draw(4), None, draw(20), c + draw(2)],
             [None, None, None, draw(8)]]
    steps[1][2] = steps[0][1] + draw(2)
    steps[2][:3] = [steps[1][0] + draw(2), steps[1][2] + draw(4), steps[1][1]]
    shared = [[None] * 4, [50, 40, 50, None, None], [53, 52, 43, None]]   # with the step before's rows
    tokens = [50 + 45 + 5 + 6 + 10, 3 + 4 + 2 + 20 + 12, 2 + 4 + 1 + 8]   # run by the cached forward
    for rows, reused, count in zip(steps, shared, tokens):
        first = [len(row) - 1 for row in rows]
        cache.advance()
        assert [None if hit is None else hit[2] for hit in map(cache.lookup, rows, first)] == reused
        ran.clear()
        with torch.inference_mode():
            got = packing.final_hidden(lm, rows, first, cache)
            assert sum(ran) == count
            want = packing.final_hidden(lm, rows, first)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    assert cache.current and cache.previous


def test_a_prefix_cache_serves_inference_only():
    lm = _double_llama()
    with pytest.raises(ValueError, match="inference only"):
        packing.final_hidden(lm, [tuple(range(3, 40))], [36], packing.PrefixCache())


def _counting_passes(monkeypatch):
    """A list that each packed pass appends its real tokens to."""
    ran = []
    inputs_of = packing._Inputs.of
    monkeypatch.setattr(packing._Inputs, "of", classmethod(
        lambda cls, part, device: ran.append(sum(len(r.tokens) for r in part)) or inputs_of(part, device)))
    return ran


def test_a_prefix_cache_keeps_a_call_within_its_budget_and_prefers_longer_sharing_within_a_call(monkeypatch):
    ran = _counting_passes(monkeypatch)
    lm = _double_llama()
    g = torch.Generator().manual_seed(2)
    draw = lambda n: tuple(torch.randint(3, 40, (n,), generator=g).tolist())  # noqa: E731
    a, b = draw(60), draw(50)
    steps = [[a, b], [a + draw(2), b + draw(3)], [a + draw(4), b + draw(1)]]

    def run(cache):
        hits, counts, sizes = [], [], []
        for rows in steps:
            first = [len(row) - 1 for row in rows]
            cache.advance()
            hits.append([cache.lookup(row, start) is not None for row, start in zip(rows, first)])
            ran.clear()
            with torch.inference_mode():
                got = packing.final_hidden(lm, rows, first, cache)
            counts.append(sum(ran))
            sizes += [table.bytes() for table in cache.current]
            torch.testing.assert_close(got, packing.final_hidden(lm, rows, first), rtol=0, atol=1e-12)
        return hits, counts, sizes

    _, _, sizes = run(packing.PrefixCache())
    # every call's keys and values fit: each step reads the one before (the budget counts a call, not two)
    assert run(packing.PrefixCache(max_bytes=max(sizes)))[:2] == ([[False, False], [True, True], [True, True]],
                                                                   [110, 5, 5])
    # none fits: nothing is kept, every step runs whole
    assert run(packing.PrefixCache(max_bytes=min(sizes) - 1)) == ([[False, False]] * 3, [110, 115, 115], [])
    # two rows that share 70 tokens with each other but 40 with the step before run as without a cache
    shared = a[:40] + draw(30)
    rows, first = [shared + draw(5), shared + draw(6)], [74, 75]
    cache = packing.PrefixCache()
    with torch.inference_mode():
        packing.final_hidden(lm, [a], [59], cache)
        cache.advance()
        assert [hit[2] for hit in map(cache.lookup, rows, first)] == [40, 40]
        ran.clear()
        got = packing.final_hidden(lm, rows, first, cache)
        assert sum(ran) == 70 + 5 + 6
    torch.testing.assert_close(got, packing.final_hidden(lm, rows, first), rtol=0, atol=1e-12)


@pytest.mark.parametrize("batch_size", [0, 1], ids=["one-batch", "a-batch-per-prompt"])
def test_a_sampler_reusing_prefixes_samples_as_without_and_forgets_them_when_the_weights_change(tokenizer, batch_size):
    plain, packed = pair(tokenizer, build_model(tokenizer, TinyConfig(seed=4)))
    plain_sampler, sampler = TorchSampler(plain), TorchSampler(packed)
    base = "You hold the King . Legal actions : check , bet , fold , call . " * 3
    allowed = plain.single_token_ids(["check", "bet"])
    lookups = []
    packed_lookup = packing.PrefixCache.lookup

    def compare(turn):
        prompts = [base + "Opponent bets . " * turn, base + "You call . " * turn]
        sampling = Sampling(max_new_tokens=1, batch_size=batch_size)
        want = plain_sampler.generate(prompts, sampling, allowed_ids=[allowed] * 2, seed=turn)
        got = sampler.generate(prompts, sampling, allowed_ids=[allowed] * 2, seed=turn)
        assert [g.completion_ids for g in got] == [g.completion_ids for g in want]
        for a, b in zip(got, want):
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-5)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(packing.PrefixCache, "lookup", lambda self, *args: lookups.append(
            packed_lookup(self, *args)) or lookups[-1])
        with sampler.reusing_prefixes():
            for turn in range(3):
                compare(turn)
            assert sum(hit is not None for hit in lookups) == 4   # turns 1 and 2 extend the turn before
            for policy in (plain, packed):   # an update in place: what was kept no longer holds
                with torch.no_grad():
                    for param in policy.model.parameters():
                        param.mul_(1.5)
            lookups.clear()
            compare(3)
            assert lookups == [None, None]
            outer = sampler._prefix_cache
            with sampler.reusing_prefixes():   # a block inside starts afresh, and the outer one's cache returns
                compare(4)
                assert sampler._prefix_cache is not outer
            assert sampler._prefix_cache is outer
        lookups.clear()
        compare(5)   # outside the block nothing is kept
        assert lookups == [] and sampler._prefix_cache is None


def test_the_transformers_internals_that_packing_reads_are_as_it_expects():
    """packing.py calls transformers internals directly; an upgrade that changes one fails
    here, naming it (the pinned range in pyproject.toml is what these tests ran on)."""
    import importlib.metadata
    import inspect
    import re
    from pathlib import Path

    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.models.llama import modeling_llama

    version = tuple(int(part) for part in importlib.metadata.version("transformers").split(".")[:2])
    pinned = re.search(r'"transformers>=(\d+)\.(\d+),<(\d+)\.(\d+)"',
                       (Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert pinned, "pyproject.toml no longer bounds transformers as >=X.Y,<X.Z"
    bounds = [pinned.groups()[:2], pinned.groups()[2:]]
    assert tuple(map(int, bounds[0])) <= version < tuple(map(int, bounds[1])), \
        f"transformers {version} is outside the tested range {bounds} of pyproject.toml"
    parameters = list(inspect.signature(sdpa_attention_forward).parameters)
    assert parameters[:5] == ["module", "query", "key", "value", "attention_mask"], \
        f"transformers.integrations.sdpa_attention.sdpa_attention_forward's signature changed: {parameters}"
    assert {"dropout", "scaling"} <= set(parameters), "sdpa_attention_forward no longer takes dropout= and scaling="
    config = LlamaConfig(vocab_size=16, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1)
    model = LlamaForCausalLM(config)
    layer = model.model.layers[0]
    for owner, names in ((model.model, ("embed_tokens", "layers", "norm", "rotary_emb")),
                         (layer, ("self_attn", "mlp", "input_layernorm", "post_attention_layernorm")),
                         (layer.self_attn, ("q_proj", "k_proj", "v_proj", "o_proj", "head_dim", "scaling")),
                         (layer.mlp, ("gate_proj", "up_proj", "down_proj", "act_fn"))):
        missing = [name for name in names if not hasattr(owner, name)]
        assert not missing, f"transformers' {type(owner).__name__} no longer has {missing}"
    assert type(layer.input_layernorm) is modeling_llama.LlamaRMSNorm, "LlamaRMSNorm is no longer the layers' norm"
    cos, sin = model.model.rotary_emb(torch.zeros(1, 3, 16), torch.arange(3)[None])
    half = cos.shape[-1] // 2
    assert cos.shape == (1, 3, layer.self_attn.head_dim) and torch.equal(cos[..., :half], cos[..., half:]), \
        "LlamaRotaryEmbedding no longer returns (cos, sin) of shape (batch, positions, head_dim) with repeated halves"
