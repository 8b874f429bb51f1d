"""TextEncoder: every route gives the tokenizer's own ids."""

import random

import pytest
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from mage_agent import tokens
from mage_agent.tiny import build_tokenizer
from mage_agent.tokens import TextEncoder

WORDS = ["Opponent", "(", "X", ")", "takes", "cell", "1", "2", "9", ".", ",", ":", "You", "win", "Board", "|", "-", "+"]
#: Spaces both sides agree on, Python-only ones (\x1c-\x1f), words the vocabulary lacks,
#: special tokens written into the text.
PIECES = WORDS + ["unseen", "Cafè", "<eos>", "<pad>", "x<eos>y", "1.", "(X)", "--", ""]
SPACES = [" ", "  ", "\t", "\n", "\u00a0", "\u3000", "\u2028", "\x1c", "\x1f", ""]


def texts(seed: int, count: int = 300) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) + rng.choice(SPACES) for _ in range(rng.randint(0, 30))) for _ in range(count)]


def own_ids(tokenizer, batch):
    return tokenizer(batch, add_special_tokens=False)["input_ids"]


def test_the_embedded_tokenizer_goes_by_chunk_with_its_own_ids():
    tokenizer = build_tokenizer([" ".join(WORDS)])
    encoder = TextEncoder(tokenizer)
    assert encoder.by_chunk
    for seed in range(3):
        batch = texts(seed)
        assert encoder(batch) == own_ids(tokenizer, batch)
    assert encoder(["", "  \n "]) == [[], []]


def test_the_chunk_cache_starting_afresh_changes_no_ids(monkeypatch):
    monkeypatch.setattr(tokens, "CHUNK_LIMIT", 5)
    tokenizer = build_tokenizer([" ".join(WORDS)])
    encoder = TextEncoder(tokenizer)
    for seed in range(3):
        batch = texts(seed, 50)
        assert encoder(batch) == own_ids(tokenizer, batch)


def _fast(core: Tokenizer) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", pad_token="[PAD]")


def _word_level() -> Tokenizer:
    vocab = {word: i for i, word in enumerate(["[UNK]", "[PAD]", *dict.fromkeys(WORDS)])}
    return Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))


@pytest.mark.parametrize("setup", ["normalizer", "no-whitespace-split", "added-token-with-space", "truncation"])
def test_tokenizers_that_do_not_work_by_chunk_take_another_route_with_the_same_ids(setup):
    core = _word_level()
    core.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    if setup == "normalizer":
        core.normalizer = normalizers.Lowercase()
    elif setup == "no-whitespace-split":
        core.pre_tokenizer = pre_tokenizers.Punctuation()
    elif setup == "added-token-with-space":
        core.add_tokens(["takes cell"])
    tokenizer = _fast(core)
    if setup == "truncation":
        tokenizer.backend_tokenizer.enable_truncation(8)
    encoder = TextEncoder(tokenizer)
    assert encoder.by_chunk is (setup == "truncation")
    batch = texts(7, 100)
    if setup == "truncation":  # the tokenizer's own call, which lifts the truncation it did not ask for
        assert encoder(batch) == own_ids(tokenizer, batch)
        assert max(map(len, encoder(batch))) > 8
    else:
        assert encoder(batch) == own_ids(tokenizer, batch)
