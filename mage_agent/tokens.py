"""Token ids of many texts at once, as the tokenizer gives them, without special tokens.

Rollouts tokenise about a thousand new prompts per iteration, most of them rules, memory
and board lines seen many times over. Three routes, each giving the tokenizer's own ids:

* **by whitespace-separated chunk** when the tokenizer works chunk by chunk (no normalizer,
  a pre-tokenizer that splits at whitespace first, no added token holding whitespace):
  a text's ids are its chunks' ids in order, and each distinct chunk is tokenised once;
* **through the Rust core's** ``encode_batch_fast`` (no character offsets) otherwise;
* **the tokenizer's own call** for slow tokenizers, or when truncation or padding is set.

Example:
    >>> from mage_agent.tiny import build_tokenizer
    >>> tokenizer = build_tokenizer(["Opponent bets . You call ."])
    >>> encoder = TextEncoder(tokenizer)
    >>> encoder.by_chunk, encoder(["You call.", "Opponent bets"]) == tokenizer(["You call.", "Opponent bets"],
    ...                                                                       add_special_tokens=False)["input_ids"]
    (True, True)
"""

from __future__ import annotations

import json
from itertools import chain
from typing import Any, Sequence

from transformers import PreTrainedTokenizerBase

#: Whitespace to Python's ``str.split`` but not to Rust's ``char::is_whitespace`` (what the
#: ``WhitespaceSplit`` pre-tokenizer splits at): a text holding one goes through the tokenizer.
PYTHON_ONLY_WHITESPACE = frozenset("\x1c\x1d\x1e\x1f")
#: Distinct chunks remembered before the cache starts afresh.
CHUNK_LIMIT = 50_000


def splits_by_chunk(core: Any) -> bool:
    """Whether the tokenizers ``core`` encodes a text as the concatenation of its
    whitespace-separated chunks' encodings: no normalizer, a ``WhitespaceSplit`` pre-tokenizer
    (alone or first in a sequence, so that the rest act within chunks), and no added token
    that holds whitespace (added tokens are found before pre-tokenizing). The model (word
    level, BPE, WordPiece, unigram) always works within a pre-token.

    Example:
        >>> from tokenizers import Tokenizer, models, pre_tokenizers
        >>> core = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
        >>> splits_by_chunk(core)
        False
        >>> core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        >>> splits_by_chunk(core)
        True
    """
    spec = json.loads(core.to_str())
    pre = spec.get("pre_tokenizer") or {}
    first = pre["pretokenizers"][0] if pre.get("type") == "Sequence" and pre.get("pretokenizers") else pre
    added = [token["content"] for token in spec.get("added_tokens", [])]
    return (spec.get("normalizer") is None and first.get("type") == "WhitespaceSplit"
            and not any(character.isspace() for token in added for character in token))


class TextEncoder:
    """Callable: ``encoder(texts)`` is each text's token ids (no special tokens), the same as
    ``tokenizer(texts, add_special_tokens=False)["input_ids"]``, by the fastest route that
    gives them (see the module)."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer
        self.core = getattr(tokenizer, "backend_tokenizer", None)
        self.by_chunk = self.core is not None and splits_by_chunk(self.core)
        self._chunks: dict[str, tuple[int, ...]] = {}

    def __call__(self, texts: Sequence[str]) -> list[list[int]]:
        core = self.core
        if core is None or core.truncation is not None or core.padding is not None:
            return self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        if not self.by_chunk:
            return [encoding.ids for encoding in self._encode(list(texts))]
        plain = [not any(space in text for space in PYTHON_ONLY_WHITESPACE) for text in texts]
        whole = iter(self._encode([text for text, ok in zip(texts, plain) if not ok]))
        split = [text.split() if ok else [] for text, ok in zip(texts, plain)]
        self._learn([chunk for chunks in split for chunk in chunks])
        ids_of = self._chunks.__getitem__
        return [list(chain.from_iterable(map(ids_of, parts))) if ok else next(whole).ids
                for parts, ok in zip(split, plain)]

    def _learn(self, chunks: list[str]) -> None:
        """Tokenise the chunks not yet remembered, in one batch."""
        new = [chunk for chunk in dict.fromkeys(chunks) if chunk not in self._chunks]
        if not new:
            return
        if len(self._chunks) + len(new) > CHUNK_LIMIT:
            self._chunks.clear()
            new = list(dict.fromkeys(chunks))
        self._chunks.update(zip(new, (tuple(encoding.ids) for encoding in self._encode(new))))

    def _encode(self, texts: list[str]) -> list[Any]:
        """The core's encodings of ``texts`` (without character offsets where it can)."""
        assert self.core is not None
        encode = getattr(self.core, "encode_batch_fast", self.core.encode_batch)
        return encode(texts, add_special_tokens=False) if texts else []
