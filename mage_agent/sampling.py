"""Sampling completions from a :class:`~mage_agent.policy.Policy`, behind one seam.

* :class:`Sampling` — how completions are sampled (temperature, top-p, top-k, max new
  tokens, batch size, stop strings);
* :class:`Sampler` — the seam: what the rollout, the evaluation agents and the trainer call
  (``generate`` inside ``reusing_prefixes``). Another backend (a vLLM engine on a GPU, see
  ``docs/training.md``) plugs in here;
* :class:`TorchSampler` — the default: batched, KV-cached sampling through the policy's
  own model: through :mod:`mage_agent.packing` when the policy has the packed forward
  (equal prompts and shared prefixes run once), else left-padded through transformers.

Log-probs are those of the temperature-scaled distribution (restricted to the allowed
tokens when given), as :meth:`~mage_agent.policy.Policy.completion_logprobs` scores them;
top-p / top-k truncation shapes sampling only.

Example:
    >>> from mage_agent.policy import Policy
    >>> from mage_agent.tiny import build_model, build_tokenizer
    >>> tok = build_tokenizer(["check bet fold call"])
    >>> sampler = TorchSampler(Policy(build_model(tok), tok))
    >>> out = sampler.generate(["check"], Sampling(max_new_tokens=2), seed=0)
    >>> len(out[0].completion_ids) <= 2 and len(out[0].logprobs) == len(out[0].completion_ids)
    True
"""

from __future__ import annotations

from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol, Sequence, cast

import torch
from transformers import LlamaForCausalLM

from .packing import Decoder, Prefill, PrefixCache, decode_chunks, final_hidden
from .policy import CausalLM, Policy, base_model, distinct, head_logits, lm_head


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


@dataclass
class Generation:
    """One sampled completion."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    text: str
    truncated: bool
    allowed_ids: list[int] | None = field(default=None)


class Sampler(Protocol):
    """What draws the completions of rollouts and evaluations: the one seam between them and
    the sampling backend. A backend must return, per prompt, a :class:`Generation` whose

    * ``prompt_ids`` are ``policy.encode_prompts([prompt])[0] + policy.encode_prefix(prefix)``;
    * ``logprobs`` are each completion token's under the temperature-scaled distribution
      restricted to ``allowed_ids`` (never truncated by top-p / top-k), so that they match
      :meth:`~mage_agent.policy.Policy.completion_logprobs` and PPO's ratios start at 1;
    * ``text`` is the prefix, then the decoded completion cut right after its first stop
      string; ``truncated`` says the token budget cut a free-text answer;
    * ``allowed_ids`` are the row's own (the loss scores the completion over them).
    """

    def generate(
        self,
        prompts: Sequence[str],
        sampling: Sampling,
        allowed_ids: Sequence[list[int] | None] | None = None,
        seed: int | None = None,
        prefixes: Sequence[str] | None = None,
    ) -> list[Generation]:
        """One completion per prompt; ``allowed_ids[i]``: the tokens row ``i`` may take (a
        single token is sampled among them); ``prefixes`` start the answers."""
        ...

    def reusing_prefixes(self) -> AbstractContextManager[None]:
        """A block within which the policy's weights stay fixed: the sampler may keep what it
        computed for earlier prompts (or, for a separate engine, take the weights once)."""
        ...


class TorchSampler:
    """Samples through ``policy``'s own model: ``sampling.batch_size`` prompts per batch,
    KV-cached; through the packed forward when the policy has one (:mod:`mage_agent.packing`:
    a prompt's prefix shared with others runs once, a free-text answer decodes in row
    batches sized to :data:`~mage_agent.packing.DECODE_POSITIONS`), else left-padded."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._prefix_cache: PrefixCache | None = None
        self._cached_weights: tuple[tuple[int, int, int], ...] = ()

    @contextmanager
    def reusing_prefixes(self) -> Iterator[None]:
        """Within the block, a ``generate`` call through the packed forward reuses the keys and values of the previous call's prompts that its
        prompts extend (in a rollout, the next turn of each meta-episode: its memory and
        its game so far), instead of running them again. The weights must not change within:
        a change that bumps their version counters or replaces them (an optimizer step,
        ``load_state_dict``) drops what is kept, but writes through ``.data`` and fused
        optimizers go unseen.

        Example (the second prompt extends the first):
            >>> from mage_agent.policy import Policy
            >>> from mage_agent.tiny import build_model, build_tokenizer
            >>> tok = build_tokenizer(["check bet fold call"])
            >>> sampler = TorchSampler(Policy(build_model(tok), tok, packed_forward=True))
            >>> prompt = "check bet fold call " * 10
            >>> with sampler.reusing_prefixes():
            ...     first = sampler.generate([prompt], Sampling(max_new_tokens=1), seed=0)
            ...     second = sampler.generate([prompt + "bet"], Sampling(max_new_tokens=1), seed=0)
            >>> second[0].text == sampler.generate([prompt + "bet"], Sampling(max_new_tokens=1), seed=0)[0].text
            True
        """
        outer = self._prefix_cache, self._cached_weights
        self._prefix_cache = PrefixCache() if self.policy.packed_forward else None
        self._cached_weights = self._weights_version()
        try:
            yield
        finally:
            self._prefix_cache, self._cached_weights = outer

    def _weights_version(self) -> tuple[tuple[int, int, int], ...]:
        """Each parameter's identity, storage and version counter (an in-place update bumps it)."""
        return tuple((id(p), p.data_ptr(), p._version) for p in self.policy.model.parameters())

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
        in one), KV-cached.

        ``prefixes`` start the answers (``"<action>"`` puts a small model on the answer
        format): each is appended to its prompt's tokens after the chat template, so it is
        part of ``prompt_ids`` (conditioned on, never scored), and begins ``text``."""
        if not prompts:
            return []
        policy = self.policy
        generator = torch.Generator(device=policy.device)
        generator.manual_seed(seed if seed is not None else int(torch.randint(0, 2**31 - 1, (1,)).item()))
        encoded = policy.encode_prompts(prompts)
        if prefixes is not None:
            encoded = [ids + policy.encode_prefix(prefix) for ids, prefix in zip(encoded, prefixes, strict=True)]
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

    def _generate_batch(self, encoded: list[list[int]], sampling: Sampling,
                        allowed_ids: Sequence[list[int] | None] | None, generator: torch.Generator) -> list[Generation]:
        policy = self.policy
        policy.model.eval()
        if not policy.packed_forward:
            decoder = _Decoder(policy.model, *self._left_pad(encoded))
            return self._sample(encoded, sampling, allowed_ids, generator, decoder.logits, decoder.step)
        if sampling.max_new_tokens == 1:   # a single token: no keys and values to keep
            columns = policy.logit_columns(allowed_ids)
            return self._sample(encoded, sampling, allowed_ids, generator, self._next_token_logits(encoded, columns),
                                None, columns)
        lm = cast(LlamaForCausalLM, base_model(policy.model))   # checked when the policy was built
        prefill = Prefill(lm, [tuple(row) for row in encoded], self._prefix_cache)
        head = lm_head(lm, prefill.hidden.dtype)
        results: dict[int, Generation] = {}
        for rows in decode_chunks([len(row) for row in encoded], sampling.max_new_tokens):
            chunk = prefill.decoder(rows, sampling.max_new_tokens)
            index = torch.tensor(rows, dtype=torch.long, device=prefill.hidden.device)
            generations = self._sample(
                [encoded[row] for row in rows], sampling, None if allowed_ids is None else [allowed_ids[row] for row in rows],
                generator, head(prefill.hidden.index_select(0, index)), _stepper(head, chunk))
            results.update(zip(rows, generations))
        return [results[row] for row in range(len(encoded))]

    def _sample(self, encoded: list[list[int]], sampling: Sampling, allowed_ids: Sequence[list[int] | None] | None,
                generator: torch.Generator, logits: torch.Tensor, step: Callable[[torch.Tensor], torch.Tensor] | None,
                columns: torch.Tensor | None = None) -> list[Generation]:
        """Sample each row's completion from ``logits`` (the next token's after its prompt;
        ``columns``: the vocabulary columns they hold, else all) and ``step`` (the logits once
        each row has taken a token; ``None``: one token only) until it stops."""
        policy = self.policy
        allowed_mask = policy.allowed_mask(allowed_ids, len(encoded), columns)
        eos = policy.tokenizer.eos_token_id
        #: rows that answer with one action token (beside free-text rows, e.g. reflections)
        one_token = [allowed_ids is not None and allowed_ids[row] is not None for row in range(len(encoded))]
        finished = [False] * len(encoded)
        #: where a row's text ends, once it holds a stop string
        cut: list[int | None] = [None] * len(encoded)
        tokens: list[list[int]] = [[] for _ in encoded]
        logprobs: list[list[float]] = [[] for _ in encoded]
        for position in range(sampling.max_new_tokens):
            scores = sampling_scores(logits, sampling.temperature, allowed_mask)
            column = sample(scores, sampling, generator)
            token_logprob = torch.log_softmax(scores, -1).gather(-1, column[:, None])[:, 0]
            token = column if columns is None else columns[column]
            for row, (sampled, logprob) in enumerate(zip(token.tolist(), token_logprob.tolist())):
                if not finished[row]:
                    tokens[row].append(sampled)
                    logprobs[row].append(logprob)
                    if sampling.stop:
                        cut[row] = self._stop_at(tokens[row], sampling.stop)
                    finished[row] = sampled == eos or cut[row] is not None or one_token[row]
            if step is None or all(finished) or position == sampling.max_new_tokens - 1:
                break
            logits = step(token)
        results = []
        for row in range(len(encoded)):
            ended = cut[row] is not None or (bool(tokens[row]) and tokens[row][-1] == eos)
            text = policy.decode(tokens[row])[:cut[row]]
            truncated = not ended and not one_token[row] and sampling.max_new_tokens > 1
            results.append(Generation(encoded[row], tokens[row], logprobs[row], text, truncated,
                                      None if allowed_ids is None else allowed_ids[row]))
        return results

    def _stop_at(self, tokens: list[int], stop: tuple[str, ...]) -> int | None:
        """Where the text of ``tokens`` ends if it contains a stop string (the end of the
        first one), else ``None``. Only the tail that the last token can have completed is
        searched each step, so the check stays cheap."""
        tail = self.policy.tokenizer.decode(tokens[-(max(map(len, stop)) + 1):], skip_special_tokens=True)
        if not any(s in tail for s in stop):
            return None
        text = self.policy.decode(tokens)
        ends = [text.find(s) + len(s) for s in stop if s in text]
        return min(ends) if ends else None

    def _left_pad(self, sequences: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(s) for s in sequences)
        pad = self.policy.tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (width - len(s)) + s for s in sequences], dtype=torch.long)
        mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in sequences], dtype=torch.long)
        return ids.to(self.policy.device), mask.to(self.policy.device)

    def _next_token_logits(self, encoded: list[list[int]], columns: torch.Tensor | None = None) -> torch.Tensor:
        """The logits of the token after each prompt (``(rows, vocabulary)``, or ``columns``
        only), through :func:`~mage_agent.packing.final_hidden` (equal prompts share it)."""
        unique, source = distinct([tuple(row) for row in encoded])
        lm = cast(LlamaForCausalLM, base_model(self.policy.model))   # checked when the policy was built
        hidden = final_hidden(lm, unique, [len(row) - 1 for row in unique], self._prefix_cache)
        index = torch.tensor(source, dtype=torch.long, device=self.policy.device)
        return head_logits(lm, hidden.index_select(0, index), columns)


def sampling_scores(logits: torch.Tensor, temperature: float, allowed: torch.Tensor | None) -> torch.Tensor:
    """The temperature-scaled float32 logits, ``-inf`` where ``allowed`` is false: their
    log-softmax is what a completion's log-probs are.

    Example:
        >>> sampling_scores(torch.tensor([[1.0, 2.0, 4.0]]), 2.0, torch.tensor([[True, False, True]]))
        tensor([[0.5000,   -inf, 2.0000]])
    """
    scores = logits.float() / temperature
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    return scores


def sample(scores: torch.Tensor, sampling: Sampling, generator: torch.Generator) -> torch.Tensor:
    """One column per row of ``scores``, drawn from their softmax after ``sampling``'s top-k
    and top-p truncation.

    Example (top-k 1: the best column of each row):
        >>> sample(torch.tensor([[0.0, 3.0, 1.0], [2.0, 0.0, 1.0]]), Sampling(top_k=1), torch.Generator())
        tensor([1, 0])
    """
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


def _stepper(head: Callable[[torch.Tensor], torch.Tensor], decoder: Decoder) -> Callable[[torch.Tensor], torch.Tensor]:
    """The next token's logits once each of ``decoder``'s rows has taken ``token``."""
    return lambda token: head(decoder.step(token))


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
