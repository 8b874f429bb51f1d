"""A language-model policy: any Hugging Face causal LM, optionally with a LoRA adapter.

The policy holds the model, its adapter and its tokenizer (prompts through the chat
template, cached), and scores: :meth:`Policy.completion_logprobs` gives the log-probs (and
entropies) of given completions, with gradients, for the loss; ``reference=True`` gives the
reference policy's: the same model with the LoRA adapter disabled (no second copy), or a
frozen copy when all weights train. Sampling lives in :mod:`mage_agent.sampling`.

``packed_forward=True`` (Llama-family models) scores, and samples single tokens, through
:mod:`mage_agent.packing`: shared prompt prefixes run once and the last layer only where
logits are read; the values and gradients are the plain forward's up to float rounding.

Log-probs are those of the temperature-scaled distribution (restricted to the allowed
tokens when given). Dropout is always off, so sampling and scoring see the same
distribution.

Example:
    >>> from mage_agent.tiny import build_model, build_tokenizer
    >>> tok = build_tokenizer(["check bet fold call"])
    >>> policy = Policy(build_model(tok), tok)
    >>> prompt, completion = policy.encode_prompt("check"), policy.encode_words(["bet"])[0]
    >>> logprobs, entropies, mask = policy.completion_logprobs([prompt], [list(completion)])
    >>> logprobs.shape, bool(logprobs[0, 0] < 0), mask.tolist()
    (torch.Size([1, 1]), True, [[True]])
"""

from __future__ import annotations

import copy
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Sequence, TypeVar, Union, cast

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from .packing import TrunkCache, final_hidden, frozen_layers, read_starts, supports
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
class LoraSettings:
    """LoRA adapter settings (peft)."""

    rank: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    #: adapt the last ``top_layers`` decoder layers only (0: every layer); the layers below
    #: then run without autograd, so an update's backward pass stops where the adapters start
    top_layers: int = 0

    def layers_to_transform(self, num_layers: int) -> list[int] | None:
        """The decoder layers that get adapters (None: all).

        >>> LoraSettings(top_layers=2).layers_to_transform(30)
        [28, 29]
        """
        if not 0 <= self.top_layers <= num_layers:
            raise ValueError(f"lora top_layers must be between 0 and the model's {num_layers} layers, "
                             f"not {self.top_layers}")
        return list(range(num_layers - self.top_layers, num_layers)) if self.top_layers else None


@dataclass(frozen=True)
class Scored:
    """Completions scored by :meth:`Policy.score_completions`: per-token log-probs,
    entropies and the token mask, ``(rows, longest completion)``, and per row the log of the
    probability that the first token is one of the row's ``choice_ids`` (0 for rows without)."""

    logprobs: torch.Tensor
    entropy: torch.Tensor
    mask: torch.Tensor
    choice_log_mass: torch.Tensor
    #: per row, the log of the first token's probability on the row's ``target_ids`` (0 for
    #: rows without), e.g. an action-token turn's moves that keep the game value
    target_log_mass: torch.Tensor | None = None


class Policy:
    """A causal LM (with LoRA when ``lora`` is given) and its tokenizer, that scores
    completions (a :class:`~mage_agent.sampling.Sampler` samples them)."""

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
                    layers_to_transform=lora.layers_to_transform(model.config.num_hidden_layers),
                ),
            )
        self.model: CausalLM = moved(model, self.device)
        self.has_adapter = hasattr(self.model, "disable_adapter")
        self.activation_checkpointing = False
        self.packed_forward = packed_forward
        if packed_forward and not supports(base_model(self.model).config.model_type):
            raise ValueError(f"packed_forward needs a Llama-family model, not {type(base_model(self.model)).__name__}")
        self._reference = None
        self._trunk: TrunkCache | None = None
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

    def first_token_ids(self, words: Sequence[str]) -> list[int]:
        """The distinct first tokens of ``words``, sorted: where a free-text answer that spells
        one of them starts."""
        return sorted({tokens[0] for tokens in self.encode_words(words) if tokens})

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` without special tokens (remembered, up to :data:`CACHE_LIMIT`)."""
        key = tuple(ids)
        text = self._texts.get(key)
        if text is None:
            if len(self._texts) >= CACHE_LIMIT:
                self._texts.clear()
            text = self._texts[key] = cast(str, self.tokenizer.decode(list(key), skip_special_tokens=True))
        return text

    def encode_prefix(self, prefix: str) -> list[int]:
        """Token ids of an answer prefix (no special tokens; remembered like a word)."""
        if not prefix:
            return []
        return list(self.encode_words([prefix])[0])

    # ------------------------------------------------------------------ allowed tokens (sampling and scoring)
    def _vocabulary_size(self) -> int:
        return self.model.get_output_embeddings().weight.shape[0]

    def logit_columns(self, allowed_ids: Sequence[list[int] | None] | None) -> torch.Tensor | None:
        """The token ids whose logits are computed, sorted: every row's allowed tokens when
        every row has some and the vocabulary is larger than :data:`WHOLE_HEAD_VOCABULARY`;
        ``None`` (the whole vocabulary) otherwise."""
        if (allowed_ids is None or any(ids is None for ids in allowed_ids)
                or self._vocabulary_size() <= WHOLE_HEAD_VOCABULARY):
            return None
        return torch.tensor(sorted({token for ids in allowed_ids if ids is not None for token in ids}),
                            dtype=torch.long, device=self.device)

    def allowed_mask(self, allowed_ids: Sequence[list[int] | None] | None, rows: int,
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

    # ------------------------------------------------------------------ scoring
    def completion_logprobs(
        self,
        prompt_ids: Sequence[list[int]],
        completion_ids: Sequence[list[int]],
        temperature: float = 1.0,
        allowed_ids: Sequence[list[int] | None] | None = None,
        reference: bool = False,
        choice_ids: Sequence[list[int] | None] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-token log-probs and entropies of the completions, and the token mask.

        Shapes ``(batch, max_completion_len)``. With ``reference=True`` the reference
        policy scores them, without gradients. A free-text row with ``choice_ids`` (the first
        tokens of its legal answers, :meth:`first_token_ids`; a row with ``allowed_ids`` has
        none) gets, as its first token's entropy, that of the first token's distribution
        renormalised over them: how undecided the choice is, not the whole vocabulary.
        """
        scored = self.score_completions(prompt_ids, completion_ids, temperature, allowed_ids, reference, choice_ids)
        return scored.logprobs, scored.entropy, scored.mask

    def score_completions(
        self,
        prompt_ids: Sequence[list[int]],
        completion_ids: Sequence[list[int]],
        temperature: float = 1.0,
        allowed_ids: Sequence[list[int] | None] | None = None,
        reference: bool = False,
        choice_ids: Sequence[list[int] | None] | None = None,
        choice_entropy: bool = True,
        target_ids: Sequence[list[int] | None] | None = None,
    ) -> Scored:
        """:meth:`completion_logprobs`, with each row's log-probability that its first token
        is one of its ``choice_ids`` (how much of a free-text answer's first step names a legal
        action at all); ``choice_entropy=False`` keeps the first token's entropy over the whole
        vocabulary. With ``target_ids`` also each row's log-probability that its first token
        is one of those (over the allowed tokens, at ``temperature``)."""
        rows = len(prompt_ids)
        model, context = self._scorer(reference)
        columns = self.logit_columns(allowed_ids) if self.packed_forward else None
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
        allowed = self.allowed_mask(allowed_ids, rows, columns)
        if allowed is not None:
            allowed = allowed[:, None, :].expand_as(picked)
        scores = picked.float() / temperature
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        log_probs = torch.log_softmax(scores, -1)
        token_logprobs = log_probs.gather(-1, targets[:, :, None])[:, :, 0]
        entropy = _entropy(log_probs)
        choice_log_mass = torch.zeros(rows, device=log_probs.device)
        if choice_ids is not None and any(choice_ids):
            if choice_entropy:
                entropy = _with_choice_entropy(entropy, scores, choice_ids, columns)
            choice_log_mass = _choice_log_mass(log_probs, choice_ids)
        target_log_mass = None
        if target_ids is not None and any(target_ids):
            if columns is not None:   # the targets' places among the computed columns
                target_ids = [None if ids is None else torch.searchsorted(columns, torch.tensor(ids, device=columns.device))
                              .tolist() for ids in target_ids]
            target_log_mass = _choice_log_mass(log_probs, target_ids)
        return Scored(token_logprobs.masked_fill(~mask, 0.0), entropy.masked_fill(~mask, 0.0), mask, choice_log_mass,
                      target_log_mass)

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
        trunk = self._trunk if model is self.model else None
        hidden = final_hidden(lm, unique, first, trunk=trunk).index_select(0, index)
        return head_logits(lm, hidden.view(len(inputs), comp_width, -1), columns)

    @contextmanager
    def caching_trunk(self) -> Iterator[None]:
        """Within, packed scoring keeps the output of the model's frozen bottom layers (below
        its first adapted or trainable layer: :func:`~mage_agent.packing.frozen_layers`) per
        distinct input, and starts above them when it scores that input again, as an update's
        later epochs do (a :class:`~mage_agent.packing.TrunkCache`). Without a packed forward,
        or with nothing frozen, nothing changes."""
        layers = frozen_layers(self._llama(self.model)) if self.packed_forward else 0
        self._trunk = TrunkCache(layers) if layers else None
        try:
            yield
        finally:
            self._trunk = None

    @staticmethod
    def _llama(model: CausalLM) -> LlamaForCausalLM:
        """The Llama model of ``model`` (checked when the policy is built with ``packed_forward``)."""
        return cast(LlamaForCausalLM, base_model(model))

    def enable_activation_checkpointing(self) -> None:
        """Keep no decoder-layer activations for backward; recompute them instead (less
        memory on long prompts, for about one more forward pass of time). Values and
        gradients are unchanged."""
        if self.packed_forward:
            raise ValueError("packed_forward runs its own layer loop: it cannot recompute activations")
        base = base_model(self.model)
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


def _entropy(log_probs: torch.Tensor) -> torch.Tensor:
    """The entropy over the last dimension of a log-softmax (masked entries, -inf, count 0)."""
    probs = log_probs.exp()
    return -(probs * log_probs.masked_fill(probs == 0, 0.0)).sum(-1)


def _choice_index(choice_ids: Sequence[list[int] | None],
                  device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The rows that have ``choice_ids``, their ids padded to one width (with the row's first
    id) and where the padding is.

    Example:
        >>> _choice_index([[4, 5], None, [6]], torch.device("cpu"))
        (tensor([0, 2]), tensor([[4, 5],
                [6, 6]]), tensor([[False, False],
                [False,  True]]))
    """
    chosen = [(row, ids) for row, ids in enumerate(choice_ids) if ids]
    rows = torch.tensor([row for row, _ in chosen], dtype=torch.long, device=device)
    width = max(len(ids) for _, ids in chosen)
    index = torch.tensor([ids + [ids[0]] * (width - len(ids)) for _, ids in chosen], device=device)
    padding = torch.tensor([[j >= len(ids) for j in range(width)] for _, ids in chosen], device=device)
    return rows, index, padding


def _choice_log_mass(log_probs: torch.Tensor, choice_ids: Sequence[list[int] | None]) -> torch.Tensor:
    """Per row, the log of the first token's probability mass on ``choice_ids`` (0 where a
    row has none).

    Example:
        >>> log_probs = torch.log(torch.tensor([[[0.5, 0.3, 0.2]], [[0.1, 0.1, 0.8]]]))
        >>> _choice_log_mass(log_probs, [[0, 1], None]).exp()
        tensor([0.8000, 1.0000])
    """
    rows, index, padding = _choice_index(choice_ids, log_probs.device)
    legal = log_probs[rows, 0].gather(-1, index).masked_fill(padding, float("-inf"))
    return torch.zeros(log_probs.shape[0], device=log_probs.device).index_put((rows,), torch.logsumexp(legal, -1))


def _with_choice_entropy(entropy: torch.Tensor, scores: torch.Tensor, choice_ids: Sequence[list[int] | None],
                         columns: torch.Tensor | None) -> torch.Tensor:
    """``entropy`` with each choice row's first entry replaced by the entropy of its first
    token's ``scores`` renormalised over its ``choice_ids``.

    Its gradient reshapes the choice only: the plain gradient would also lower the legal
    tokens' log-sum-exp wherever the choice is uneven (the likelier answer is pushed down by
    more mass than the rarer one gains), leaking probability to answers that are no legal
    action at all (a free-text run's invalid answers rose from 11% to 25% in three
    iterations). So the gradient is shifted by a constant over the legal tokens (which leaves
    their renormalised distribution's change as it is) until the log-sum-exp's first-order
    change is zero; the value is unchanged."""
    assert columns is None, "choice_ids are for free-text rows: a batch scored over allowed columns has none"
    rows, index, padding = _choice_index(choice_ids, scores.device)
    legal = scores[rows, 0].gather(-1, index)
    log_probs = torch.log_softmax(legal.masked_fill(padding, float("-inf")), -1)
    probs = log_probs.exp()
    plain = log_probs.masked_fill(probs == 0, 0.0)
    first = _entropy(log_probs)
    with torch.no_grad():   # the p-weighted mean of the entropy's gradient, -sum p_i^2 (log p_i + H)
        shift = -(probs.square() * (plain + first[:, None])).sum(-1)
    total = legal.masked_fill(padding, 0.0).sum(-1)
    first = first - shift * (total - total.detach())
    return entropy.index_put((rows, torch.zeros_like(rows)), first)


def base_model(model: CausalLM) -> PreTrainedModel:
    """The transformers model of ``model`` (inside its peft wrapper, if any).

    Example:
        >>> from mage_agent.tiny import build_model, build_tokenizer
        >>> lm = build_model(build_tokenizer(["check bet"]))
        >>> base_model(lm) is lm
        True
    """
    if hasattr(model, "get_base_model"):   # a peft model
        return cast(PreTrainedModel, cast("PeftModel", model).get_base_model())
    return cast(PreTrainedModel, model)


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
    return lm_head(lm, hidden.dtype, columns)(hidden)


def lm_head(lm: LlamaForCausalLM, dtype: torch.dtype,
            columns: torch.Tensor | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """The LM head as a function of final hidden states of ``dtype``, giving logits in that
    dtype (of the vocabulary's ``columns`` only, when given), its weight converted and its
    columns selected once: a decoding loop calls it every step, and converting SmolLM2's
    49k-row head each time cost about as much as the product.

    Example:
        >>> from mage_agent.tiny import build_model, build_tokenizer
        >>> lm = build_model(build_tokenizer(["check bet"]))
        >>> hidden = torch.randn(2, lm.config.hidden_size)
        >>> torch.equal(lm_head(lm, torch.float32)(hidden), lm.lm_head(hidden))
        True
    """
    head = lm.lm_head
    if columns is None and head.weight.dtype == dtype:
        return cast(Callable[[torch.Tensor], torch.Tensor], head)
    weight = (head.weight if columns is None else head.weight.index_select(0, columns)).to(dtype)
    bias = None if head.bias is None else (head.bias if columns is None else head.bias.index_select(0, columns)).to(dtype)
    return lambda hidden: torch.nn.functional.linear(hidden, weight, bias)


def distinct(rows: Sequence[tuple[int, ...]]) -> tuple[list[tuple[int, ...]], list[int]]:
    """The distinct rows in order of first appearance, and each row's index among them.

    Example:
        >>> distinct([(1, 2), (3,), (1, 2)])
        ([(1, 2), (3,)], [0, 1, 0])
    """
    index: dict[tuple[int, ...], int] = {}
    source = [index.setdefault(row, len(index)) for row in rows]
    return list(index), source


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
