"""A language-model policy: any Hugging Face causal LM, optionally with a LoRA adapter.

* :meth:`Policy.generate` — batched sampling (temperature, top-p, top-k, max new tokens,
  optionally restricted to given token ids), returning token ids and their log-probs;
* :meth:`Policy.completion_logprobs` — log-probs (and entropies) of given completions, with
  gradients, for the loss; ``reference=True`` gives the reference policy's: the same model
  with the LoRA adapter disabled (no second copy), or a frozen copy when all weights train.

``packed_forward=True`` (Llama-family models) scores, and samples single tokens, through
:mod:`mage_agent.packing`: shared prompt prefixes run once and the last layer only where
logits are read; the values and gradients are the plain forward's up to float rounding.

Log-probs are those of the temperature-scaled distribution (restricted to the allowed
tokens when given); top-p / top-k truncation shapes sampling only. Dropout is always off,
so sampling and scoring see the same distribution.

Example:
    >>> from mage_agent.tiny import build_model, build_tokenizer
    >>> tok = build_tokenizer(["check bet fold call"])
    >>> policy = Policy(build_model(tok), tok)
    >>> out = policy.generate(["check"], Sampling(max_new_tokens=2), seed=0)
    >>> len(out[0].completion_ids) <= 2 and len(out[0].logprobs) == len(out[0].completion_ids)
    True
"""

from __future__ import annotations

import copy
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, Sequence, TypeVar, Union, cast

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from .packing import PrefixCache, final_hidden, read_starts, supports
from .tokens import TextEncoder

if TYPE_CHECKING:
    from peft import PeftModel

#: A causal LM, with or without a peft adapter.
CausalLM = Union[PreTrainedModel, "PeftModel"]
_Module = TypeVar("_Module", bound=torch.nn.Module)


def moved(model: _Module, device: torch.device) -> _Module:
    """``model.to(device)``, typed: transformers' ``@wraps(Module.to)`` hides the method's
    signature from type checkers (the call is the model's own ``to`` all the same)."""
    module: torch.nn.Module = model
    return cast(_Module, module.to(device))

#: Vocabularies up to this size keep their whole LM head when every row's allowed tokens are
#: given (it costs little, and the embedded model's results stay as they were); larger ones
#: compute the logits of the allowed tokens only.
WHOLE_HEAD_VOCABULARY = 4096
#: Entries a tokenizer cache of :class:`Policy` holds before it starts afresh. Rollouts
#: repeat prompts (a group's copies, the same states across iterations) and action names.
CACHE_LIMIT = 20_000


def default_dtype(device: str | torch.device) -> torch.dtype:
    """bf16 on a GPU, fp32 on CPU.

    Example:
        >>> default_dtype("cpu"), default_dtype("cuda:1")
        (torch.float32, torch.bfloat16)
    """
    return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32


@dataclass(frozen=True)
class Sampling:
    """How completions are sampled."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 64
    batch_size: int = 0  #: prompts per forward batch (0: all of a call's prompts at once)
    #: a completion ends once its text contains one of these (kept in the text, which is cut
    #: right after it), as at the end-of-sequence token
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.batch_size < 0:
            raise ValueError(f"batch_size must be >= 0 (0: all prompts at once), got {self.batch_size}")
        if any(not text for text in self.stop):
            raise ValueError("stop strings must be non-empty")


@dataclass(frozen=True)
class LoraSettings:
    """LoRA adapter settings (peft)."""

    rank: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass
class Generation:
    """One sampled completion."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    text: str
    truncated: bool
    allowed_ids: list[int] | None = field(default=None)


class Policy:
    """A causal LM (with LoRA when ``lora`` is given) that samples and scores completions."""

    def __init__(
        self,
        model: CausalLM,
        tokenizer: PreTrainedTokenizerBase,
        lora: LoraSettings | None = None,
        device: str | torch.device = "cpu",
        keep_reference: bool = True,
        reference_model: PreTrainedModel | None = None,
        system_prompt: str = "",
        packed_forward: bool = False,
    ) -> None:
        """``lora`` wraps ``model`` in a new adapter; a model that already carries a peft
        adapter (a resumed run) is used as is. Without an adapter the reference policy is
        ``reference_model``, or a frozen copy of ``model`` when ``keep_reference``.
        ``system_prompt`` (chat models) is every prompt's system message; empty: the chat
        template's own default. ``packed_forward``: score (and sample single tokens)
        through :mod:`mage_agent.packing` (Llama-family models only)."""
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer = tokenizer
        self._system_prompt = system_prompt
        self.device = torch.device(device)
        # caches of the (fixed) tokenizer: prompt -> ids, word -> its ids, ids -> text
        self._prompt_ids: dict[str, tuple[int, ...]] = {}
        self._word_ids: dict[str, tuple[int, ...]] = {}
        self._texts: dict[tuple[int, ...], str] = {}
        self._encode_texts = TextEncoder(tokenizer)
        if lora is not None:
            from peft import LoraConfig, get_peft_model

            model = get_peft_model(
                model,
                LoraConfig(
                    r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                    target_modules=list(lora.target_modules), task_type="CAUSAL_LM",
                ),
            )
        self.model: CausalLM = moved(model, self.device)
        self.has_adapter = hasattr(self.model, "disable_adapter")
        self.activation_checkpointing = False
        self.packed_forward = packed_forward
        if packed_forward and not supports(self._base(self.model).config.model_type):
            raise ValueError(f"packed_forward needs a Llama-family model, not {type(self._base(self.model)).__name__}")
        self._prefix_cache: PrefixCache | None = None
        self._cached_weights: tuple[tuple[int, int, int], ...] = ()
        self._reference = None
        if not self.has_adapter:
            if reference_model is not None:
                self._reference = moved(reference_model, self.device).eval().requires_grad_(False)
            elif keep_reference:
                self._reference = copy.deepcopy(self.model).eval().requires_grad_(False)

    @classmethod
    def from_pretrained(
        cls, name_or_path: str, lora: LoraSettings | None = None, device: str = "cpu", keep_reference: bool = True,
        dtype: torch.dtype | None = None, system_prompt: str = "", packed_forward: bool = False,
    ) -> Policy:
        """Load a local path, a hub id or an embedded model's name (``smollm2-135m``, see
        :mod:`mage_agent.pretrained`); ``dtype`` defaults to :func:`default_dtype`."""
        from .pretrained import resolve_model_path

        name_or_path = resolve_model_path(name_or_path)
        dtype = default_dtype(device) if dtype is None else dtype
        tokenizer = AutoTokenizer.from_pretrained(name_or_path)
        model = AutoModelForCausalLM.from_pretrained(name_or_path, dtype=dtype)
        return cls(model, tokenizer, lora=lora, device=device, keep_reference=keep_reference,
                   system_prompt=system_prompt, packed_forward=packed_forward)

    # ------------------------------------------------------------------ prompts
    @property
    def system_prompt(self) -> str:
        """The system message of every prompt (chat models; empty: the template's own).
        Setting it forgets the encoded prompts, which hold the old one."""
        return self._system_prompt

    @system_prompt.setter
    def system_prompt(self, text: str) -> None:
        if text != self._system_prompt:
            self._prompt_ids.clear()
        self._system_prompt = text

    def encode_prompt(self, prompt: str) -> list[int]:
        """Token ids of ``prompt``, through the chat template when the tokenizer has one."""
        return self.encode_prompts([prompt])[0]

    def encode_prompts(self, prompts: Sequence[str]) -> list[list[int]]:
        """:meth:`encode_prompt` of each prompt: new prompts are tokenised in one batch,
        and remembered (up to :data:`CACHE_LIMIT`)."""
        cache = self._prompt_ids
        new = [p for p in dict.fromkeys(prompts) if p not in cache]
        if new:
            if len(cache) + len(new) > CACHE_LIMIT:
                cache.clear()
                new = list(dict.fromkeys(prompts))
            texts = new
            if getattr(self.tokenizer, "chat_template", None):  # rendered, then tokenised like any text
                system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
                texts = [cast(str, self.tokenizer.apply_chat_template(
                    [*system, {"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False))
                         for prompt in new]
            cache.update(zip(new, map(tuple, self._encode_texts(texts))))
        return [list(cache[p]) for p in prompts]

    def encode_words(self, words: Sequence[str]) -> list[tuple[int, ...]]:
        """Token ids of each word, without special tokens (remembered, up to :data:`CACHE_LIMIT`)."""
        cache = self._word_ids
        encoded = []
        for word in words:
            if word not in cache:
                if len(cache) >= CACHE_LIMIT:
                    cache.clear()
                cache[word] = tuple(self.tokenizer(word, add_special_tokens=False)["input_ids"])
            encoded.append(cache[word])
        return encoded

    def single_token_ids(self, words: Sequence[str]) -> list[int] | None:
        """The token id of each word if every word is exactly one token, else ``None``."""
        encoded = self.encode_words(words)
        if any(len(tokens) != 1 for tokens in encoded):
            return None
        return [tokens[0] for tokens in encoded]

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` without special tokens (remembered, up to :data:`CACHE_LIMIT`)."""
        key = tuple(ids)
        text = self._texts.get(key)
        if text is None:
            if len(self._texts) >= CACHE_LIMIT:
                self._texts.clear()
            text = self._texts[key] = cast(str, self.tokenizer.decode(list(key), skip_special_tokens=True))
        return text

    # ------------------------------------------------------------------ sampling
    @contextmanager
    def reusing_prefixes(self) -> Iterator[None]:
        """Within the block, a ``generate`` call that samples single tokens through the
        packed forward reuses the keys and values of the previous call's prompts that its
        prompts extend (in a rollout, the next turn of each meta-episode: its memory and
        its game so far), instead of running them again. The weights must not change within:
        a change that bumps their version counters or replaces them (an optimizer step,
        ``load_state_dict``) drops what is kept, but writes through ``.data`` and fused
        optimizers go unseen.

        Example (the second prompt extends the first):
            >>> from mage_agent.tiny import build_model, build_tokenizer
            >>> tok = build_tokenizer(["check bet fold call"])
            >>> policy = Policy(build_model(tok), tok, packed_forward=True)
            >>> prompt = "check bet fold call " * 10
            >>> with policy.reusing_prefixes():
            ...     first = policy.generate([prompt], Sampling(max_new_tokens=1), seed=0)
            ...     second = policy.generate([prompt + "bet"], Sampling(max_new_tokens=1), seed=0)
            >>> second[0].text == policy.generate([prompt + "bet"], Sampling(max_new_tokens=1), seed=0)[0].text
            True
        """
        outer = self._prefix_cache, self._cached_weights
        self._prefix_cache = PrefixCache() if self.packed_forward else None
        self._cached_weights = self._weights_version()
        try:
            yield
        finally:
            self._prefix_cache, self._cached_weights = outer

    def _weights_version(self) -> tuple[tuple[int, int, int], ...]:
        """Each parameter's identity, storage and version counter (an in-place update bumps it)."""
        return tuple((id(p), p.data_ptr(), p._version) for p in self.model.parameters())

    @torch.inference_mode()   # no_grad and no version counters or view tracking: ~8% faster sampling
    def generate(
        self,
        prompts: Sequence[str],
        sampling: Sampling,
        allowed_ids: Sequence[list[int] | None] | None = None,
        seed: int | None = None,
        prefixes: Sequence[str] | None = None,
    ) -> list[Generation]:
        """Sample one completion per prompt, ``sampling.batch_size`` prompts per batch (0: all
        in one), left-padded and KV-cached.

        ``prefixes`` start the answers (``"<action>"`` puts a small model on the answer
        format): each is appended to its prompt's tokens after the chat template, so it is
        part of ``prompt_ids`` (conditioned on, never scored), and begins ``text``."""
        if not prompts:
            return []
        generator = torch.Generator(device=self.device)
        generator.manual_seed(seed if seed is not None else int(torch.randint(0, 2**31 - 1, (1,)).item()))
        encoded = self.encode_prompts(prompts)
        if prefixes is not None:
            encoded = [ids + self.encode_prefix(prefix) for ids, prefix in zip(encoded, prefixes, strict=True)]
        if self._prefix_cache is not None:
            version = self._weights_version()
            if version != self._cached_weights:
                self._prefix_cache, self._cached_weights = PrefixCache(), version
            self._prefix_cache.advance()
        size = sampling.batch_size or len(prompts)
        generations = [generation for start in range(0, len(prompts), size) for generation in self._generate_batch(
            encoded[start:start + size], sampling, None if allowed_ids is None else allowed_ids[start:start + size],
            generator)]
        if prefixes is not None:
            for generation, prefix in zip(generations, prefixes):
                generation.text = prefix + generation.text
        return generations

    def encode_prefix(self, prefix: str) -> list[int]:
        """Token ids of an answer prefix (no special tokens; remembered like a word)."""
        if not prefix:
            return []
        return list(self.encode_words([prefix])[0])

    def _generate_batch(self, encoded: list[list[int]], sampling: Sampling,
                        allowed_ids: Sequence[list[int] | None] | None, generator: torch.Generator) -> list[Generation]:
        self.model.eval()
        decoder: _Decoder | None = None
        columns = None
        if self.packed_forward and sampling.max_new_tokens == 1:  # a single token: no KV cache to keep
            columns = self._columns(allowed_ids)
            logits = self._next_token_logits(encoded, columns)
        else:
            decoder = _Decoder(self.model, *self._left_pad(encoded))
            logits = decoder.logits
        allowed_mask = self._allowed_mask(allowed_ids, len(encoded), columns)
        eos = self.tokenizer.eos_token_id
        finished = [False] * len(encoded)
        #: where a row's text ends, once it holds a stop string
        cut: list[int | None] = [None] * len(encoded)
        tokens: list[list[int]] = [[] for _ in encoded]
        logprobs: list[list[float]] = [[] for _ in encoded]
        for step in range(sampling.max_new_tokens):
            scores = self._scores(logits, sampling.temperature, allowed_mask)
            column = self._sample(scores, sampling, generator)
            token_logprob = torch.log_softmax(scores, -1).gather(-1, column[:, None])[:, 0]
            token = column if columns is None else columns[column]
            for row, (sampled, logprob) in enumerate(zip(token.tolist(), token_logprob.tolist())):
                if not finished[row]:
                    tokens[row].append(sampled)
                    logprobs[row].append(logprob)
                    if sampling.stop:
                        cut[row] = self._stop_at(tokens[row], sampling.stop)
                    finished[row] = sampled == eos or cut[row] is not None
            if decoder is None or all(finished) or step == sampling.max_new_tokens - 1:
                break
            logits = decoder.step(token)
        results = []
        for row in range(len(encoded)):
            ended = cut[row] is not None or (bool(tokens[row]) and tokens[row][-1] == eos)
            text = self.decode(tokens[row])[:cut[row]]
            truncated = not ended and allowed_mask is None and sampling.max_new_tokens > 1
            results.append(Generation(encoded[row], tokens[row], logprobs[row], text, truncated,
                                      None if allowed_ids is None else allowed_ids[row]))
        return results

    def _stop_at(self, tokens: list[int], stop: tuple[str, ...]) -> int | None:
        """Where the text of ``tokens`` ends if it contains a stop string (the end of the
        first one), else ``None``. Only the tail that the last token can have completed is
        searched each step, so the check stays cheap."""
        tail = self.tokenizer.decode(tokens[-(max(map(len, stop)) + 1):], skip_special_tokens=True)
        if not any(s in tail for s in stop):
            return None
        text = self.decode(tokens)
        ends = [text.find(s) + len(s) for s in stop if s in text]
        return min(ends) if ends else None

    def _left_pad(self, sequences: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(s) for s in sequences)
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (width - len(s)) + s for s in sequences], dtype=torch.long)
        mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in sequences], dtype=torch.long)
        return ids.to(self.device), mask.to(self.device)

    def _vocabulary_size(self) -> int:
        return self.model.get_output_embeddings().weight.shape[0]

    def _columns(self, allowed_ids: Sequence[list[int] | None] | None) -> torch.Tensor | None:
        """The token ids whose logits are computed, sorted: every row's allowed tokens when
        every row has some and the vocabulary is larger than :data:`WHOLE_HEAD_VOCABULARY`;
        ``None`` (the whole vocabulary) otherwise."""
        if (allowed_ids is None or any(ids is None for ids in allowed_ids)
                or self._vocabulary_size() <= WHOLE_HEAD_VOCABULARY):
            return None
        return torch.tensor(sorted({token for ids in allowed_ids if ids is not None for token in ids}),
                            dtype=torch.long, device=self.device)

    def _allowed_mask(self, allowed_ids: Sequence[list[int] | None] | None, rows: int,
                      columns: torch.Tensor | None = None) -> torch.Tensor | None:
        """Which tokens each row may take, ``(rows, vocabulary)``, or over ``columns`` only."""
        if allowed_ids is None or all(a is None for a in allowed_ids):
            return None
        width = self._vocabulary_size() if columns is None else len(columns)
        mask = torch.zeros((rows, width), dtype=torch.bool)
        free = [row for row, ids in enumerate(allowed_ids) if ids is None]
        if free:
            mask[free] = True
        rows_of = [row for row, ids in enumerate(allowed_ids) if ids is not None for _ in ids]
        if rows_of:
            tokens = [token for ids in allowed_ids if ids is not None for token in ids]
            if columns is not None:
                tokens = torch.searchsorted(columns.cpu(), torch.tensor(tokens)).tolist()
            mask[rows_of, tokens] = True
        return mask.to(self.device)

    @staticmethod
    def _scores(logits: torch.Tensor, temperature: float, allowed: torch.Tensor | None) -> torch.Tensor:
        scores = logits.float() / temperature
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        return scores

    @staticmethod
    def _sample(scores: torch.Tensor, sampling: Sampling, generator: torch.Generator) -> torch.Tensor:
        scores = scores.clone()
        if sampling.top_k > 0:
            kth = torch.topk(scores, min(sampling.top_k, scores.shape[-1]), dim=-1).values[:, -1:]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if sampling.top_p < 1.0:
            sorted_scores, order = torch.sort(scores, descending=True, dim=-1)
            cumulative = torch.softmax(sorted_scores, -1).cumsum(-1)
            drop = cumulative - torch.softmax(sorted_scores, -1) > sampling.top_p
            sorted_scores = sorted_scores.masked_fill(drop, float("-inf"))
            scores = torch.full_like(scores, float("-inf")).scatter(-1, order, sorted_scores)
        probs = torch.softmax(scores, -1)
        return torch.multinomial(probs, 1, generator=generator)[:, 0]

    # ------------------------------------------------------------------ scoring
    def completion_logprobs(
        self,
        prompt_ids: Sequence[list[int]],
        completion_ids: Sequence[list[int]],
        temperature: float = 1.0,
        allowed_ids: Sequence[list[int] | None] | None = None,
        reference: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-token log-probs and entropies of the completions, and the token mask.

        Shapes ``(batch, max_completion_len)``. With ``reference=True`` the reference
        policy scores them, without gradients.
        """
        rows = len(prompt_ids)
        model, context = self._scorer(reference)
        columns = self._columns(allowed_ids) if self.packed_forward else None
        with context:
            if self.packed_forward:
                picked = self._packed_completion_logits(model, prompt_ids, completion_ids, columns)
            else:
                picked = self._padded_completion_logits(model, prompt_ids, completion_ids)
        comp_width = max(len(c) for c in completion_ids)
        pad = self.tokenizer.pad_token_id
        targets = torch.tensor([list(c) + [pad] * (comp_width - len(c)) for c in completion_ids], dtype=torch.long)
        mask = torch.tensor([[True] * len(c) + [False] * (comp_width - len(c)) for c in completion_ids],
                            dtype=torch.bool)
        targets, mask = targets.to(self.device), mask.to(self.device)
        if columns is not None:   # the targets' places among the columns (padding's: any)
            targets = torch.searchsorted(columns, targets).clamp(max=len(columns) - 1)
        allowed = self._allowed_mask(allowed_ids, rows, columns)
        if allowed is not None:
            allowed = allowed[:, None, :].expand_as(picked)
        scores = picked.float() / temperature
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        log_probs = torch.log_softmax(scores, -1)
        token_logprobs = log_probs.gather(-1, targets[:, :, None])[:, :, 0]
        probs = log_probs.exp()
        entropy = -(probs * log_probs.masked_fill(probs == 0, 0.0)).sum(-1)
        return token_logprobs.masked_fill(~mask, 0.0), entropy.masked_fill(~mask, 0.0), mask

    def _padded_completion_logits(self, model: CausalLM, prompt_ids: Sequence[list[int]],
                                  completion_ids: Sequence[list[int]]) -> torch.Tensor:
        """The logits that predict each completion token, ``(rows, max completion length,
        vocabulary)`` (padding rows: position 0's), from one right-padded forward pass."""
        # The positions that predict a completion read the prompt and all of the completion
        # except its last token, so that is all the model is fed; rows with the same input (a
        # group's copies often share a prompt) share one forward pass.
        inputs = [tuple(p) + tuple(c[:-1]) for p, c in zip(prompt_ids, completion_ids)]
        unique, indices = distinct(inputs)
        source = torch.tensor(indices, dtype=torch.long)
        width = max(len(row) for row in unique)
        comp_width = max(len(c) for c in completion_ids)
        pad = self.tokenizer.pad_token_id
        # right-padded rows, built as lists and converted once
        ids = torch.tensor([list(row) + [pad] * (width - len(row)) for row in unique], dtype=torch.long)
        attention = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in unique], dtype=torch.long)
        # Only the span of positions that predict a completion token goes through the LM head:
        # a long prompt's logits (positions x vocabulary) are never materialised.
        first = min(len(p) for p in prompt_ids) - 1
        kept = torch.arange(first, width, device=self.device)
        gather_pos = torch.tensor([list(range(len(p) - 1 - first, len(p) + len(c) - 1 - first))
                                   + [0] * (comp_width - len(c)) for p, c in zip(prompt_ids, completion_ids)],
                                  dtype=torch.long)
        ids, attention, source = ids.to(self.device), attention.to(self.device), source.to(self.device)
        gather_pos = gather_pos.to(self.device)
        # one pass, no KV cache
        logits = model(input_ids=ids, attention_mask=attention, use_cache=False, logits_to_keep=kept).logits
        return logits[source[:, None], gather_pos]

    def _packed_completion_logits(self, model: CausalLM, prompt_ids: Sequence[list[int]],
                                  completion_ids: Sequence[list[int]], columns: torch.Tensor | None = None) -> torch.Tensor:
        """:meth:`_padded_completion_logits` through :func:`~mage_agent.packing.final_hidden`:
        rows with the same input share it, and only the hidden states that predict a
        completion token reach the LM head (its ``columns`` only, when given)."""
        inputs = [tuple(p) + tuple(c[:-1]) for p, c in zip(prompt_ids, completion_ids)]
        unique, source = distinct(inputs)
        first = [len(row) for row in unique]   # each input's first read position: its shortest prompt's last
        for u, prompt in zip(source, prompt_ids):
            first[u] = min(first[u], len(prompt) - 1)
        starts = read_starts(unique, first)
        comp_width = max(len(c) for c in completion_ids)
        index = torch.tensor([starts[u] + len(p) - 1 - first[u] + j if j < len(c) else starts[u]
                              for u, p, c in zip(source, prompt_ids, completion_ids) for j in range(comp_width)],
                             dtype=torch.long, device=self.device)
        lm = self._llama(model)
        hidden = final_hidden(lm, unique, first).index_select(0, index)
        return head_logits(lm, hidden.view(len(inputs), comp_width, -1), columns)

    def _next_token_logits(self, encoded: list[list[int]], columns: torch.Tensor | None = None) -> torch.Tensor:
        """The logits of the token after each prompt (``(rows, vocabulary)``, or ``columns``
        only), through :func:`~mage_agent.packing.final_hidden` (equal prompts share it)."""
        unique, source = distinct([tuple(row) for row in encoded])
        lm = self._llama(self.model)
        hidden = final_hidden(lm, unique, [len(row) - 1 for row in unique], self._prefix_cache)
        return head_logits(lm, hidden.index_select(0, torch.tensor(source, dtype=torch.long, device=self.device)),
                           columns)

    def _base(self, model: CausalLM) -> PreTrainedModel:
        """The transformers model of ``model`` (inside its peft wrapper, if any)."""
        if hasattr(model, "get_base_model"):   # a peft model
            return cast(PreTrainedModel, cast("PeftModel", model).get_base_model())
        return cast(PreTrainedModel, model)

    def _llama(self, model: CausalLM) -> LlamaForCausalLM:
        """The Llama model of ``model`` (checked when the policy is built with ``packed_forward``)."""
        return cast(LlamaForCausalLM, self._base(model))

    def enable_activation_checkpointing(self) -> None:
        """Keep no decoder-layer activations for backward; recompute them instead (less
        memory on long prompts, for about one more forward pass of time). Values and
        gradients are unchanged."""
        if self.packed_forward:
            raise ValueError("packed_forward runs its own layer loop: it cannot recompute activations")
        base = self._base(self.model)
        enable = getattr(base, "activation_checkpointing_enable", None)
        if enable is not None:  # transformers >= 5.x names it so
            enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.activation_checkpointing = True

    def _scorer(self, reference: bool):
        if not reference:
            self.model.eval()  # dropout off, as in TRL's RL trainers: ratios start at exactly 1
            if self.activation_checkpointing:
                # transformers checkpoints a layer only while that layer is in training mode:
                # switch on the flag of the layers alone, so their dropouts stay off
                for module in self.model.modules():
                    if getattr(module, "gradient_checkpointing", False):
                        module.training = True
            return self.model, nullcontext()
        if self.has_adapter:
            return self.model, _NoGradAdapterOff(self.model)
        if self._reference is None:
            raise RuntimeError("no reference policy: build the Policy with keep_reference=True")
        return self._reference, torch.no_grad()

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]


def head_logits(lm: LlamaForCausalLM, hidden: torch.Tensor, columns: torch.Tensor | None = None) -> torch.Tensor:
    """The LM head's logits of final hidden states, in their dtype (float32 for a model in
    half precision: logits near 20 would be rounded to 1/8 in bfloat16), of the vocabulary's
    ``columns`` only when given.

    Example:
        >>> from mage_agent.tiny import build_model, build_tokenizer
        >>> lm = build_model(build_tokenizer(["check bet"]))
        >>> hidden = torch.randn(2, lm.config.hidden_size)
        >>> torch.allclose(head_logits(lm, hidden, torch.tensor([3, 5])), lm.lm_head(hidden)[:, [3, 5]])
        True
    """
    head = lm.lm_head
    if columns is None and head.weight.dtype == hidden.dtype:
        return head(hidden)
    weight = head.weight if columns is None else head.weight.index_select(0, columns)
    bias = head.bias if columns is None or head.bias is None else head.bias.index_select(0, columns)
    return torch.nn.functional.linear(hidden, weight.to(hidden.dtype), None if bias is None else bias.to(hidden.dtype))


def distinct(rows: Sequence[tuple[int, ...]]) -> tuple[list[tuple[int, ...]], list[int]]:
    """The distinct rows in order of first appearance, and each row's index among them.

    Example:
        >>> distinct([(1, 2), (3,), (1, 2)])
        ([(1, 2), (3,)], [0, 1, 0])
    """
    index: dict[tuple[int, ...], int] = {}
    source = [index.setdefault(row, len(index)) for row in rows]
    return list(index), source


class _Decoder:
    """KV-cached decoding of a left-padded batch: ``logits`` are the next token's after the
    prompts, then after each token that :meth:`step` feeds."""

    def __init__(self, model: CausalLM, input_ids: torch.Tensor, attention: torch.Tensor) -> None:
        self.model = model
        self.attention = attention
        self.positions = (attention.cumsum(-1) - 1).clamp(min=0)
        out = model(input_ids=input_ids, attention_mask=attention, position_ids=self.positions,
                    use_cache=True, logits_to_keep=1)
        self.cache_key = "cache" if "cache" in out.keys() else "past_key_values"  # transformers 5 / 4
        self.past, self.logits = out[self.cache_key], out.logits[:, -1, :]

    def step(self, token: torch.Tensor) -> torch.Tensor:
        """The next token's logits once every row has taken ``token`` (one per row)."""
        self.attention = torch.cat([self.attention, torch.ones_like(self.attention[:, :1])], dim=1)
        self.positions = self.positions[:, -1:] + 1
        out = self.model(input_ids=token[:, None], attention_mask=self.attention, position_ids=self.positions,
                         use_cache=True, **{self.cache_key: self.past})
        self.past, self.logits = out[self.cache_key], out.logits[:, -1, :]
        return self.logits


class _NoGradAdapterOff:
    """Context: no gradients and the LoRA adapter disabled (the reference policy)."""

    def __init__(self, model) -> None:
        self._model = model
        self._stack: list = []

    def __enter__(self):
        for ctx in (torch.no_grad(), self._model.disable_adapter()):
            ctx.__enter__()
            self._stack.append(ctx)

    def __exit__(self, *exc):
        while self._stack:
            self._stack.pop().__exit__(*exc)
