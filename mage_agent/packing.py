"""A cheaper forward pass for Llama-family models, with the same values and gradients.

Two savings, both exact (up to float rounding):

* **Shared prefixes run once.** Rows that agree on a long prefix (the turns of one
  trajectory share the rules and the memory of earlier games) are split: the shared prefix
  runs once, and each row's continuation attends to the prefix's keys and values (layer by
  layer) and to itself, causally, at positions that follow the prefix. Gradients reach the
  prefix through every continuation that reads it.
* **The last layer only where it is read.** Every position needs the last layer's keys and
  values, but its queries, attention output and MLP only matter at the positions whose
  hidden states are asked for (those that predict a completion token).

With half-precision weights (bfloat16 on a CPU with native bfloat16 instructions, or on a
GPU) the residual stream, norms, attention and LoRA adapters stay in float32: only the frozen
weights' matrix products run in half precision, and their outputs join the float32 stream
before an adapter's update is added. A LoRA update far smaller than its layer's output (as
early in training) is then kept; added in bfloat16, it would be rounded away.

Rows are run in chunks of similar widths (little padding); :func:`final_hidden` returns the
final hidden states (after the last norm) at each row's query positions. In inference, a
:class:`PrefixCache` carries a call's keys and values to the next call, whose rows that
extend a kept row run only their new tokens (a rollout's next turn).

Example (rows 0 and 1 share their first 70 tokens; row 2 shares nothing):
    >>> shared = tuple(range(3, 73))
    >>> plan = plan_rows([shared + (80, 81), shared + (90,), (5, 6, 7)], [70, 70, 1])
    >>> [(len(r.tokens), r.offset, r.parent, r.first, r.source) for r in plan.prefixes]
    [(70, 0, -1, 70, -1), (3, 0, -1, 1, 2)]
    >>> [(r.tokens, r.offset, r.parent, r.first, r.source) for r in plan.continuations]
    [((80, 81), 70, 0, 0, 0), ((90,), 70, 0, 0, 1)]
"""

from __future__ import annotations

import bisect
import sys
from dataclasses import dataclass, field, replace
from itertools import groupby
from operator import itemgetter
from typing import Any, Callable, Sequence

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.models.llama.modeling_llama import LlamaRMSNorm

#: Neighbouring rows (in sorted order) share a prefix run once when they agree on at least
#: this many tokens; shorter common prefixes are not worth a second pass.
MIN_SHARED = 32
#: The cost model of :func:`chunks`, in attention scores (one query's over one key, per
#: row): a token's own work (projections, MLP), and a pass's overhead (measured on CPU with
#: the embedded model).
TOKEN_COST = 200
PASS_COST = 120_000
#: Rows in one pass at most (bounds the search for the cuts).
MAX_CHUNK = 512
#: Bytes of keys and values one call keeps in a :class:`PrefixCache` at most (a call that
#: needs more keeps nothing); the cache holds two calls' (the one read and the one kept).
CACHE_BYTES = 1 << 30
#: Per layer, the keys and values of a pass: ``(batch, width, kv heads, head dim)`` each;
#: the keys' head dimensions are interleaved (:func:`_rotated`), not in transformers' order.
KeyValues = list[tuple[torch.Tensor, torch.Tensor]]
#: A layer's projection as a function of the residual stream (:func:`_projection`).
Projection = Callable[[torch.Tensor], torch.Tensor]
#: Weight dtypes whose norms run in float32 on a float32 stream.
HALF_OR_SINGLE = (torch.float32, torch.bfloat16, torch.float16)


def supports(model_type: str) -> bool:
    """Whether :func:`final_hidden` runs models of this ``config.model_type`` (the Llama family).

    Example:
        >>> supports("llama"), supports("qwen2")
        (True, False)
    """
    return model_type == LlamaConfig.model_type


@dataclass(frozen=True)
class PlannedRow:
    """One row of a pass: ``tokens`` at positions ``offset`` onwards, after the keys and
    values of prefix row ``parent`` (``-1``: none, ``offset`` 0); hidden states are read
    from index ``first`` of ``tokens`` to its end for input row ``source`` (``-1``: none,
    ``first == len(tokens)``)."""

    tokens: tuple[int, ...]
    offset: int
    parent: int
    first: int
    source: int


@dataclass
class Plan:
    """Prefix rows (run first: shared prefixes and rows that share nothing) and the
    continuations that attend to them."""

    prefixes: list[PlannedRow] = field(default_factory=list)
    continuations: list[PlannedRow] = field(default_factory=list)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share.

    Example:
        >>> common_prefix((1, 2, 3), (1, 2, 4, 5)), common_prefix((), (1,))
        (2, 0)
    """
    low, high = 0, min(len(a), len(b))   # a[:low] == b[:low]; they differ before high + 1
    if a[:high] == b[:high]:
        return high
    while high - low > 1:
        middle = (low + high) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle
    return low


def _runs(rows: Sequence[tuple[int, ...]], first: Sequence[int]) -> list[tuple[list[int], int]]:
    """Rows in sorted order cut into runs that share a prefix, each with the length of
    the prefix that all of its rows share (at most each row's ``first``: queries stay in
    the continuations). A row joins the run before it while that does not lower the run's
    total saving, ``(rows - 1) * shared``."""
    order = sorted(range(len(rows)), key=rows.__getitem__)
    runs: list[tuple[list[int], int]] = []
    for previous, row in zip([None, *order], order):
        shared = 0 if previous is None else min(common_prefix(rows[previous], rows[row]), first[row])
        if runs and shared >= MIN_SHARED:
            members, run_shared = runs[-1]
            joined = min(run_shared, shared)
            if len(members) * joined >= (len(members) - 1) * run_shared:
                runs[-1] = (members + [row], joined)
                continue
        runs.append(([row], first[row]))
    return runs


def plan_rows(rows: Sequence[tuple[int, ...]], first: Sequence[int]) -> Plan:
    """Split distinct ``rows`` into shared prefixes and continuations; ``first[r]`` is the
    first position of row ``r`` whose hidden state is read (all after it are read too)."""
    plan = Plan()
    for members, shared in _runs(rows, first):
        if len(members) == 1 or shared < MIN_SHARED:
            plan.prefixes += [PlannedRow(rows[r], 0, -1, first[r], r) for r in members]
            continue
        parent = len(plan.prefixes)
        plan.prefixes.append(PlannedRow(rows[members[0]][:shared], 0, -1, shared, -1))
        plan.continuations += [PlannedRow(rows[r][shared:], shared, parent, first[r] - shared, r) for r in members]
    return plan


def chunks(rows: Sequence[PlannedRow]) -> list[list[int]]:
    """Indices of ``rows`` in batches that cost least to run padded: rows sorted by width
    (then offset), cut where :func:`pass_cost` summed over the batches is least (dynamic
    programming over the cuts, batches of at most :data:`MAX_CHUNK` rows).

    Example (two narrow rows, one that continues a long prefix, two wide ones):
        >>> row = lambda n, offset=0: PlannedRow((1,) * n, offset, -1, n, -1)
        >>> chunks([row(100), row(400), row(110), row(120, 3000), row(410)])
        [[0, 2], [3], [1, 4]]
    """
    order = sorted(range(len(rows)), key=lambda i: (len(rows[i].tokens), rows[i].offset))
    widths = np.array([len(rows[i].tokens) for i in order], dtype=float)   # ascending: a batch's last is its widest
    offsets = np.array([rows[i].offset for i in order], dtype=float)
    best = np.zeros(len(order) + 1)   # best[j]: the cheapest batches of the first j rows
    cut = [0] * (len(order) + 1)
    for end in range(1, len(order) + 1):
        low = max(end - MAX_CHUNK, 0)
        offset = np.maximum.accumulate(offsets[low:end][::-1])   # of the batches [end - 1 - k, end)
        sizes = np.arange(1, end - low + 1)
        costs = best[low:end][::-1] + pass_cost(sizes, widths[end - 1], offset)
        k = int(np.argmin(costs))
        best[end], cut[end] = costs[k], end - 1 - k
    batches = []
    end = len(order)
    while end:
        batches.append(order[cut[end]:end])
        end = cut[end]
    return batches[::-1]


def pass_cost(rows: Any, width: Any, offset: Any) -> Any:
    """A model of a padded pass's time: attention scores (``width`` queries over ``offset
    + width`` keys), per-token work worth :data:`TOKEN_COST` scores, and a fixed
    :data:`PASS_COST` per pass (numbers or arrays).

    Example:
        >>> pass_cost(2, 10, 0) == 2 * 10 * (10 + TOKEN_COST) + PASS_COST
        True
    """
    return rows * width * (width + offset + TOKEN_COST) + PASS_COST


def read_starts(rows: Sequence[tuple[int, ...]], first: Sequence[int]) -> list[int]:
    """Where each row's read states begin in :func:`final_hidden`'s output (and, last, its
    length): row ``r`` contributes ``len(rows[r]) - first[r]`` of them.

    Example:
        >>> read_starts([(1, 2, 3), (4, 5)], [1, 1])
        [0, 2, 3]
    """
    starts = [0]
    for row, start in zip(rows, first):
        starts.append(starts[-1] + len(row) - start)
    return starts


def final_hidden(lm: LlamaForCausalLM, rows: Sequence[tuple[int, ...]], first: Sequence[int],
                 cache: PrefixCache | None = None, trunk: TrunkCache | None = None) -> torch.Tensor:
    """Final hidden states of distinct ``rows`` at positions ``first[r]`` to the row's end,
    concatenated in row order: ``(sum of len(rows[r]) - first[r], hidden size)``.

    With a ``cache`` (inference only, the weights unchanged since its last :meth:`~PrefixCache.advance`),
    a row that extends a row of the previous step by at least :data:`MIN_SHARED` tokens runs
    only the rest, after that row's keys and values; this call's rows are kept for the next step.
    With a ``trunk`` (:class:`TrunkCache`; not with a ``cache``), rows whose frozen bottom
    layers' output it holds start above them; otherwise it keeps that output."""
    if trunk is not None and cache is not None:
        raise ValueError("a TrunkCache serves scoring, a PrefixCache inference: not both")
    kept = None if cache is None else _Kept(cache.max_bytes)
    hidden = _forward(lm, rows, first, cache, kept, trunk)
    if cache is not None and kept is not None:
        cache.keep(kept.table(rows))
    return hidden


def _forward(lm: LlamaForCausalLM, rows: Sequence[tuple[int, ...]], first: Sequence[int],
             cache: PrefixCache | None, kept: _Kept | None, trunk: TrunkCache | None = None) -> torch.Tensor:
    """:func:`final_hidden`'s passes, reading ``cache``'s previous step and keeping this
    call's keys and values in ``kept`` (when given); starting above ``trunk``'s layers when
    it holds every row, else keeping their output in it."""
    if (cache is not None or kept is not None) and torch.is_grad_enabled():
        raise ValueError("a PrefixCache serves inference only: run under torch.inference_mode() or torch.no_grad()")
    device = lm.device
    hits = [] if cache is None else _hits(cache, rows, first)
    rest = [r for r in range(len(rows)) if not hits or hits[r] is None]
    plan = plan_rows([rows[r] for r in rest], [first[r] for r in rest])
    plan.prefixes = [row if row.source < 0 else replace(row, source=rest[row.source]) for row in plan.prefixes]
    plan.continuations = [replace(row, source=rest[row.source]) for row in plan.continuations]
    starts = read_starts(rows, first)
    read: list[torch.Tensor] = []   # the hidden states of each pass's queries
    slots: list[int] = []           # the output rows they fill, in the same order
    store = _Store()
    projections = [_LayerProjections.of(layer, residual_dtype(lm)) for layer in lm.model.layers]
    above = trunk is not None and trunk.holds(rows)
    stream = _TrunkStream(trunk, rows, plan, above) if trunk is not None and trunk.layers else None
    for batch in chunks(plan.prefixes):
        part = [plan.prefixes[i] for i in batch]
        inputs = _Inputs.of(part, device)
        hidden, present = _decoder_pass(lm, inputs, projections,
                                        trunk=None if stream is None else stream.pass_of(batch, part, inputs))
        store.add(batch, present)
        _collect(part, hidden, starts, read, slots)
        if kept is not None:
            kept.add(part, present, 0)

    def run_after(planned: list[PlannedRow], keys_values: _Store | _Table, pass_of: Callable[[int], Any],
                  numbers: Callable[[int], int] = lambda i: -1) -> None:
        """Run ``planned`` rows after their parents' keys and values in ``keys_values``,
        in batches whose rows are grouped by the parent's pass (``pass_of(parent)``);
        ``numbers(i)``: the trunk stream's number of row ``i``."""
        for batch in chunks(planned):
            order = sorted(batch, key=lambda i: pass_of(planned[i].parent))
            part = [planned[i] for i in order]
            past = keys_values.gather([r.parent for r in part], [r.offset for r in part], device)
            inputs = _Inputs.of(part, device)
            hidden, present = _decoder_pass(
                lm, inputs, projections, past, kept is not None,
                None if stream is None else stream.pass_of([numbers(i) for i in order], part, inputs))
            _collect(part, hidden, starts, read, slots)
            if kept is not None:
                kept.add(part, present, past.valid.shape[1])

    run_after(plan.continuations, store, store.where.__getitem__, lambda i: len(plan.prefixes) + i)
    if stream is not None:
        stream.keep()
    if cache is not None:
        for number, table in enumerate(cache.previous):
            run_after([PlannedRow(rows[r][hit[2]:], hit[2], hit[1], first[r] - hit[2], r)
                       for r, hit in enumerate(hits) if hit is not None and hit[0] == number],
                      table, table.part.__getitem__)
    order = torch.empty(len(slots), dtype=torch.long)
    order[torch.tensor(slots, dtype=torch.long)] = torch.arange(len(slots))
    return torch.cat(read).index_select(0, order.to(device))


#: Bytes of frozen-layer outputs a :class:`TrunkCache` holds at most (rows beyond are not kept).
TRUNK_BYTES = 1 << 30


class TrunkCache:
    """The output of a model's frozen bottom ``layers`` (the residual stream entering layer
    ``layers``) at every position of each distinct input row scored, so that scoring the same
    rows again (an update's later epochs) starts above them: the values are those of the
    first scoring, and no gradient reaches frozen layers anyway. :func:`frozen_layers` says
    how many layers a model has below its first trainable one. It holds at most
    ``max_bytes``; a call whose rows would not fit keeps none of them.

    Example (the second scoring starts at layer 1 of 2, with the same result):
        >>> from mage_agent.tiny import TinyConfig, build_model, build_tokenizer
        >>> lm = build_model(build_tokenizer(["a b c"]), TinyConfig(seed=0)).eval()
        >>> _ = lm.model.embed_tokens.requires_grad_(False), lm.model.layers[0].requires_grad_(False)
        >>> trunk, rows = TrunkCache(frozen_layers(lm)), [tuple(range(4, 7)) * 20, tuple(range(4, 7)) * 19]
        >>> first = final_hidden(lm, rows, [59, 56], trunk=trunk)
        >>> trunk.layers, trunk.holds(rows), torch.allclose(final_hidden(lm, rows, [59, 56], trunk=trunk), first)
        (1, True, True)
    """

    def __init__(self, layers: int, max_bytes: int = TRUNK_BYTES) -> None:
        self.layers = layers
        self.max_bytes = max_bytes
        self.states: dict[tuple[int, ...], torch.Tensor] = {}
        self.bytes = 0

    def holds(self, rows: Sequence[tuple[int, ...]]) -> bool:
        """Whether every row's frozen-layer output is kept."""
        return bool(self.layers) and all(row in self.states for row in rows)

    def add(self, states: dict[tuple[int, ...], torch.Tensor]) -> None:
        """Keep ``states`` (row -> ``(positions, hidden size)``) if they all fit."""
        new = {row: value for row, value in states.items() if row not in self.states}
        size = sum(value.numel() * value.element_size() for value in new.values())
        if self.bytes + size <= self.max_bytes:
            self.states.update(new)
            self.bytes += size


def frozen_layers(lm: LlamaForCausalLM) -> int:
    """How many decoder layers of ``lm`` lie below its first layer with a trainable weight or
    an adapter (0 when the embedding trains; at most all but the last layer).

    Example:
        >>> from mage_agent.tiny import build_model, build_tokenizer
        >>> lm = build_model(build_tokenizer(["a b c"]))
        >>> frozen_layers(lm), frozen_layers(lm.requires_grad_(False))
        (0, 1)
    """
    if any(p.requires_grad for p in lm.model.embed_tokens.parameters()):
        return 0
    layers = lm.model.layers
    for number, layer in enumerate(layers):
        if any(p.requires_grad for p in layer.parameters()) or any("lora_" in name for name, _ in layer.named_modules()):
            return number
    return len(layers) - 1


@dataclass
class _TrunkPass:
    """What one pass does with a :class:`TrunkCache`: start above its ``layers`` from
    ``start`` ``(batch, width, hidden size)``, or (``start`` is ``None``) keep the stream
    entering them in ``captured``."""

    layers: int
    start: torch.Tensor | None
    captured: torch.Tensor | None = None


class _TrunkStream:
    """One :func:`final_hidden` call's traffic with a :class:`TrunkCache`: planned rows are
    numbered prefixes first, then continuations; each is a slice of an input row, whose
    frozen-layer output is read from the cache (``above``) or kept after the call."""

    def __init__(self, trunk: TrunkCache, rows: Sequence[tuple[int, ...]], plan: Plan, above: bool) -> None:
        self.trunk, self.rows, self.plan, self.above = trunk, rows, plan, above
        planned = plan.prefixes + plan.continuations
        row_of_prefix = {r.parent: r.source for r in plan.continuations}
        self.row_of = [r.source if r.source >= 0 else row_of_prefix[number] for number, r in enumerate(planned)]
        self.passes: list[tuple[list[int], list[PlannedRow], _TrunkPass]] = []

    def pass_of(self, numbers: list[int], part: list[PlannedRow], inputs: _Inputs) -> _TrunkPass:
        """The trunk traffic of a pass over planned rows ``numbers`` (``part``)."""
        if not self.above:
            traffic = _TrunkPass(self.trunk.layers, None)
            self.passes.append((numbers, part, traffic))
            return traffic
        width = inputs.ids.shape[1]
        states = [self.trunk.states[self.rows[self.row_of[n]]][r.offset:r.offset + len(r.tokens)]
                  for n, r in zip(numbers, part)]
        start = torch.stack([torch.nn.functional.pad(state, (0, 0, 0, width - len(state))) for state in states])
        return _TrunkPass(self.trunk.layers, start.to(inputs.ids.device))

    def keep(self) -> None:
        """After the call: keep each input row's frozen-layer output (its shared prefix's
        and its own positions', joined), copied out of the padded passes so that the cache
        holds the bytes it counts."""
        if self.above:
            return
        segments: dict[int, torch.Tensor] = {}
        for numbers, part, traffic in self.passes:
            assert traffic.captured is not None
            for b, (number, row) in enumerate(zip(numbers, part)):
                segments[number] = traffic.captured[b, :len(row.tokens)]
        states: dict[tuple[int, ...], torch.Tensor] = {}
        offset = len(self.plan.prefixes)
        for number, row in enumerate(self.plan.prefixes):
            if row.source >= 0:
                states[self.rows[row.source]] = segments[number].clone()
        for number, row in enumerate(self.plan.continuations):
            states[self.rows[row.source]] = torch.cat([segments[row.parent], segments[offset + number]])
        self.trunk.add(states)


#: Rows times positions (prompt and new tokens) of keys and values that one :class:`Decoder`
#: holds at most: :func:`decode_chunks` cuts a batch to fit (about 1.5 GB for SmolLM2-135M
#: in float32).
DECODE_POSITIONS = 1 << 15


class Prefill:
    """Prompts run once through the packed forward for decoding: equal prompts once, shared
    prefixes once, and with a ``cache`` a prompt that extends one of its previous step's rows
    only its new tokens (the cache keeps these prompts for its next step when they fit).
    ``hidden`` holds each prompt's final hidden state at its last token; :meth:`decoder`
    continues any of them token by token.

    Example (the packed decoding gives transformers' own next-token logits):
        >>> from mage_agent.tiny import TinyConfig, build_model, build_tokenizer
        >>> lm = build_model(build_tokenizer(["a b c"]), TinyConfig(seed=0)).eval()
        >>> prompts = [tuple(range(4, 7)) * 12, tuple(range(4, 7)) * 11 + (4,), tuple(range(4, 7)) * 12]
        >>> with torch.inference_mode():
        ...     prefill = Prefill(lm, prompts)
        ...     decoder = prefill.decoder([0, 1, 2], room=1)
        ...     after = lm.lm_head(decoder.step(torch.tensor([5, 6, 5])))
        ...     plain = lm(torch.tensor([prompts[0] + (5,), prompts[2] + (5,)])).logits[:, -1]
        >>> torch.allclose(after[[0, 2]], plain, atol=1e-4), torch.equal(after[0], after[2])
        (True, True)
    """

    def __init__(self, lm: LlamaForCausalLM, prompts: Sequence[tuple[int, ...]], cache: PrefixCache | None = None) -> None:
        self.lm = lm
        self.lengths = [len(prompt) for prompt in prompts]
        index: dict[tuple[int, ...], int] = {}
        self._source = [index.setdefault(prompt, len(index)) for prompt in prompts]
        unique = list(index)
        kept = _Kept(sys.maxsize)
        hidden = _forward(lm, unique, [len(row) - 1 for row in unique], cache, kept)
        table = kept.table(unique)
        if table is None:   # an unbounded _Kept keeps every row
            raise RuntimeError("the prefill kept no keys and values")
        if cache is not None and table.bytes() <= cache.max_bytes:
            cache.keep(table)
        self.table = table
        position = {row: i for i, row in enumerate(table.rows)}
        self._row_in_table = [position[row] for row in unique]
        self.hidden = hidden.index_select(0, torch.tensor(self._source, dtype=torch.long, device=hidden.device))

    def decoder(self, prompts: Sequence[int], room: int) -> Decoder:
        """A :class:`Decoder` that continues ``prompts`` (indices) by up to ``room`` tokens."""
        return Decoder(self.lm, self.table, [self._row_in_table[self._source[p]] for p in prompts],
                       [self.lengths[p] for p in prompts], room)


class Decoder:
    """KV-cached decoding through the packed forward (bfloat16 products and float32 adapters
    as in scoring): ``step`` feeds one token per row and returns the final hidden states
    after it; the rows' keys and values (rows ``parents`` of ``table``, ``lengths`` tokens
    each) sit in buffers with ``room`` positions to spare."""

    def __init__(self, lm: LlamaForCausalLM, table: _Table, parents: list[int], lengths: list[int],
                 room: int) -> None:
        self.lm, self.steps = lm, 0
        self.lengths = torch.tensor(lengths, device=lm.device)[:, None]
        past = table.gather(parents, lengths, lm.device)
        self.width = past.valid.shape[1]
        # (rows, kv heads, positions, head dim): each step writes its own in place and reads them all
        self.keys_values = [(_fit(key, self.width + room).transpose(1, 2).contiguous(),
                             _fit(value, self.width + room).transpose(1, 2).contiguous())
                            for key, value in past.keys_values]
        # added to the attention scores: 0 where a row has a key, -inf where it has none yet
        valid = torch.cat([past.valid, past.valid.new_zeros(len(parents), room)], dim=1)
        self.blocked = torch.zeros(valid.shape, dtype=residual_dtype(lm), device=lm.device).masked_fill(
            ~valid, float("-inf"))[:, None, None, :]
        self.projections = [_LayerProjections.of(layer, residual_dtype(lm)) for layer in lm.model.layers]

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """The final hidden states ``(rows, hidden size)`` once each row has taken its token."""
        column = self.width + self.steps
        if column >= self.blocked.shape[-1]:
            raise ValueError(f"the decoder has room for {self.blocked.shape[-1] - self.width} tokens")
        self.blocked[..., column] = 0.0
        base = self.lm.model
        hidden = base.embed_tokens(tokens[:, None]).to(residual_dtype(self.lm))
        turn = _turns(base, hidden, self.lengths + self.steps)
        # grouped-query attention without repeating the keys: (rows, kv heads, queries per kv head, ...)
        for layer, project, (keys, values) in zip(base.layers, self.projections, self.keys_values):
            attention = layer.self_attn
            x = _norm(layer.input_layernorm, hidden)
            keys[:, :, column] = _rotated(project.key, x, attention.head_dim, turn)[:, 0]
            values[:, :, column] = _heads(project.value(x), attention.head_dim)[:, 0]
            query = _rotated(project.query, x, attention.head_dim, turn).view(len(keys), keys.shape[1], -1,
                                                                              attention.head_dim)
            scores = torch.matmul(query, keys.transpose(-1, -2)) * attention.scaling + self.blocked
            attended = torch.matmul(torch.softmax(scores, -1), values)
            hidden = hidden + project.output(attended.reshape(len(keys), 1, -1))
            hidden = hidden + project.mlp(_norm(layer.post_attention_layernorm, hidden))
        self.steps += 1
        return _norm(base.norm, hidden)[:, 0]


def decode_chunks(lengths: Sequence[int], room: int, positions: int | None = None) -> list[list[int]]:
    """Row indices in batches of similar length (shortest first) whose keys and values,
    ``rows * (longest + room)`` positions, stay within ``positions`` (default
    :data:`DECODE_POSITIONS`; at least one row each); each batch in row order, so a batch
    that fits whole is the rows as they came.

    Example:
        >>> decode_chunks([300, 20, 310, 30], room=10, positions=700), decode_chunks([300, 20], room=10)
        ([[1, 3], [0, 2]], [[0, 1]])
    """
    positions = DECODE_POSITIONS if positions is None else positions
    if len(lengths) * (max(lengths, default=0) + room) <= positions:
        return [list(range(len(lengths)))]
    batches: list[list[int]] = []
    for row in sorted(range(len(lengths)), key=lengths.__getitem__):
        if batches and (len(batches[-1]) + 1) * (lengths[row] + room) <= positions:
            batches[-1].append(row)
        else:
            batches.append([row])
    return [sorted(batch) for batch in batches]


class PrefixCache:
    """Keys and values of the rows that :func:`final_hidden` ran in the previous step of an
    inference loop, so that the next step's rows that extend them (the next turn of the same
    meta-episode: the same memory, the same game so far) run only their new tokens.

    The owner calls :meth:`advance` before each step (the rows of the step before are read,
    this step's are kept) and must drop the cache whenever the weights change. A call keeps
    at most ``max_bytes`` of keys and values (beyond, nothing): the cache holds twice that.

    Example (the second call runs only the two new tokens of its row, with the same result):
        >>> from mage_agent.tiny import TinyConfig, build_model, build_tokenizer
        >>> lm = build_model(build_tokenizer(["a b c"]), TinyConfig(seed=0)).eval()
        >>> cache, first, second = PrefixCache(), tuple(range(4, 7)) * 20, tuple(range(4, 7)) * 20 + (4, 5)
        >>> with torch.inference_mode():
        ...     _ = final_hidden(lm, [first], [59], cache)
        ...     cache.advance()
        ...     reused = final_hidden(lm, [second], [61], cache)
        ...     plain = final_hidden(lm, [second], [61])
        >>> cache.lookup(second, 61), torch.allclose(reused, plain, atol=1e-5)
        ((0, 0, 60), True)
    """

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.previous: list[_Table] = []   # the tables read in this step
        self.current: list[_Table] = []    # the tables this step keeps for the next

    def advance(self) -> None:
        """Start a step: the tables kept so far are read, and new ones kept."""
        self.previous, self.current = self.current, []

    def lookup(self, row: tuple[int, ...], limit: int) -> tuple[int, int, int] | None:
        """``(table, row in it, shared tokens)`` of the previous step's row that shares the
        longest prefix with ``row`` (at most ``limit`` tokens), if at least :data:`MIN_SHARED`."""
        best: tuple[int, int, int] | None = None
        for number, table in enumerate(self.previous):
            index, shared = table.longest_prefix(row, limit)
            if shared >= MIN_SHARED and (best is None or shared > best[2]):
                best = (number, index, shared)
        return best

    def keep(self, table: _Table | None) -> None:
        """Keep ``table`` for the next step (``None``: a call that kept nothing)."""
        if table is not None:
            self.current.append(table)


@dataclass
class _Table:
    """One call's ``rows`` (sorted) and where their keys and values lie: in pass
    ``parts[part[i]]`` (per layer, flat over the pass's positions: ``(positions, kv heads,
    head dim)``), the first ``head[i]`` tokens from ``start[i]``, the rest from ``rest[i]``."""

    rows: list[tuple[int, ...]]
    part: list[int]
    start: list[int]
    head: list[int]
    rest: list[int]
    parts: list[KeyValues]

    def bytes(self) -> int:
        """The size of the passes' keys and values that the table holds."""
        return sum(_size(part) for part in self.parts)

    def longest_prefix(self, row: tuple[int, ...], limit: int) -> tuple[int, int]:
        """The index of the row that shares the longest prefix with ``row`` (a neighbour of
        it in sorted order; -1 when the table is empty) and how many tokens, at most ``limit``."""
        at = bisect.bisect_left(self.rows, row)
        best, shared = -1, -1
        for index in (at - 1, at):
            if 0 <= index < len(self.rows):
                length = min(common_prefix(self.rows[index], row), limit)
                if length > shared:
                    best, shared = index, length
        return best, max(shared, 0)

    def gather(self, parents: list[int], lengths: list[int], device: torch.device) -> _Past:
        """The first ``lengths`` keys and values of rows ``parents`` (grouped by pass),
        right-padded."""
        width = max(lengths)
        steps = torch.arange(width, device=device)[None, :]
        start, head, rest, length = (torch.tensor(values, device=device)[:, None] for values in (
            [self.start[p] for p in parents], [self.head[p] for p in parents], [self.rest[p] for p in parents],
            lengths))
        valid = steps < length
        where = torch.where(valid, torch.where(steps < head, start + steps, rest + steps - head), start)
        # (pass, rows of it), in the order of `parents`
        runs = [(number, len(list(rows))) for number, rows in groupby(self.part[p] for p in parents)]
        pieces = torch.split(where, [count for _, count in runs])

        def select(layer: int, which: int) -> torch.Tensor:
            states = [self.parts[number][layer][which].index_select(0, piece.flatten())
                      for (number, _), piece in zip(runs, pieces)]
            flat = states[0] if len(states) == 1 else torch.cat(states)
            return flat.view(len(parents), width, *flat.shape[1:])

        return _Past([(select(layer, 0), select(layer, 1)) for layer in range(len(self.parts[0]))], valid)


class _Kept:
    """The passes of a :func:`final_hidden` call that hold its rows, and where each row lies
    in them, up to ``max_bytes`` (past that, nothing is kept)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self.parts: list[KeyValues] | None = []
        self.where: dict[int, tuple[int, int, int, int]] = {}   # row -> (pass, start, head, rest)

    def add(self, part: list[PlannedRow], present: KeyValues, past_width: int) -> None:
        """Keep a pass over ``part`` (its ``present`` keys and values: ``past_width`` past
        positions, then its own) if any of its rows is a call's row and it fits."""
        if self.parts is None or all(row.source < 0 for row in part):
            return
        self.size += _size(present)
        if self.size > self.max_bytes:
            self.parts, self.where = None, {}
            return
        number, width = len(self.parts), present[0][0].shape[1]
        self.parts.append([(key.flatten(0, 1), value.flatten(0, 1)) for key, value in present])
        for b, row in enumerate(part):
            if row.source >= 0:
                base = b * width
                head = row.offset if row.offset else len(row.tokens)
                self.where[row.source] = (number, base, head, base + past_width + (0 if row.offset else head))

    def table(self, rows: Sequence[tuple[int, ...]]) -> _Table | None:
        """The call's ``rows`` as a table (``None``: they did not fit)."""
        if self.parts is None:
            return None
        order = sorted(range(len(rows)), key=rows.__getitem__)
        number, start, head, rest = (list(values) for values in zip(*(self.where[r] for r in order)))
        return _Table([rows[r] for r in order], number, start, head, rest, self.parts)


def _size(key_values: KeyValues) -> int:
    """The bytes that a pass's keys and values take."""
    return sum(t.numel() * t.element_size() for pair in key_values for t in pair)


def _hits(cache: PrefixCache, rows: Sequence[tuple[int, ...]], first: Sequence[int]) -> list[tuple[int, int, int] | None]:
    """Each row's :meth:`PrefixCache.lookup`, kept only where it shares at least as many
    tokens as the row shares with a neighbour in this call (then the call's own plan does
    better)."""
    order = sorted(range(len(rows)), key=rows.__getitem__)
    within = [0] * len(rows)
    for before, after in zip(order, order[1:]):
        shared = common_prefix(rows[before], rows[after])
        within[before] = max(within[before], min(shared, first[before]))
        within[after] = max(within[after], min(shared, first[after]))
    hits = [cache.lookup(row, start) for row, start in zip(rows, first)]
    return [hit if hit is not None and hit[2] >= within[r] else None for r, hit in enumerate(hits)]


def _collect(part: list[PlannedRow], hidden: torch.Tensor | None, starts: list[int], read: list[torch.Tensor],
             slots: list[int]) -> None:
    """Append a pass's query states to ``read`` and the output rows they fill to ``slots``."""
    if hidden is not None:
        read.append(hidden)
        slots += [starts[r.source] + q for r in part if r.source >= 0 for q in range(len(r.tokens) - r.first)]


def take(values: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``values[i, j]`` for each flat index ``i * values.shape[1] + j`` of ``index``, shaped
    as ``index`` (an ``index_select``, whose gradient is cheaper than advanced indexing's).

    Example:
        >>> take(torch.arange(6).view(2, 3), torch.tensor([[5, 0]])).tolist()
        [[5, 0]]
    """
    flat = values.flatten(0, 1).index_select(0, index.flatten())
    return flat.view(*index.shape, *values.shape[2:])


@dataclass
class _Past:
    """Prefix keys and values that a pass's rows continue, per layer ``(batch, width, kv
    heads, head dim)``, and which of their positions are real ``(batch, width)``."""

    keys_values: KeyValues
    valid: torch.Tensor


@dataclass
class _Store:
    """The prefix passes' keys and values; ``where[i]``: prefix row ``i``'s pass and row in it."""

    passes: list[KeyValues] = field(default_factory=list)
    where: dict[int, tuple[int, int]] = field(default_factory=dict)

    def add(self, batch: list[int], present: KeyValues) -> None:
        """Keep the keys and values of the pass that ran prefix rows ``batch``."""
        self.where.update((i, (len(self.passes), k)) for k, i in enumerate(batch))
        self.passes.append(present)

    def gather(self, parents: list[int], lengths: list[int], device: torch.device) -> _Past:
        """The keys and values of prefix rows ``parents`` (``lengths`` tokens each; grouped
        by pass), right-padded. Whole rows are selected, so that the gradient's scatter is
        cheap."""
        width = max(lengths)
        # (pass, its rows), in the order of `parents`
        runs = [(number, [row for _, row in rows])
                for number, rows in groupby((self.where[p] for p in parents), key=itemgetter(0))]
        indices = [(number, torch.tensor(rows, dtype=torch.long, device=device)) for number, rows in runs]

        def select(layer: int, which: int) -> torch.Tensor:
            return torch.cat([_fit(self.passes[number][layer][which].index_select(0, index), width)
                              for number, index in indices])

        layers = len(self.passes[0])
        valid = torch.arange(width, device=device)[None, :] < torch.tensor(lengths, device=device)[:, None]
        return _Past([(select(layer, 0), select(layer, 1)) for layer in range(layers)], valid)


def _fit(states: torch.Tensor, width: int) -> torch.Tensor:
    """``(batch, positions, heads, head dim)`` states cut or right-padded to ``width`` positions."""
    if states.shape[1] >= width:
        return states[:, :width]
    return torch.nn.functional.pad(states, (0, 0, 0, 0, 0, width - states.shape[1]))


@dataclass
class _Inputs:
    """A pass's rows, right-padded: token ids and positions ``(batch, width)``; the rows
    that are read (``reads``), their query positions ``(reads, queries)`` (padded with
    the row's last) and, as flat indices for :func:`take`, where those lie in the batch
    (``queries``) and which of them are real (``real``)."""

    ids: torch.Tensor
    positions: torch.Tensor
    reads: torch.Tensor
    query_positions: torch.Tensor
    queries: torch.Tensor
    real: torch.Tensor

    @classmethod
    def of(cls, part: list[PlannedRow], device: torch.device) -> _Inputs:
        """The inputs of a pass over ``part``, on ``device``."""
        width = max(len(r.tokens) for r in part)
        ids = torch.tensor([list(r.tokens) + [0] * (width - len(r.tokens)) for r in part], dtype=torch.long)
        positions = torch.tensor([r.offset for r in part])[:, None] + torch.arange(width)
        reads = [b for b, r in enumerate(part) if r.source >= 0]
        steps = torch.arange(max((len(part[b].tokens) - part[b].first for b in reads), default=0))
        first = torch.tensor([part[b].first for b in reads], dtype=torch.long)[:, None]
        last = torch.tensor([len(part[b].tokens) - 1 for b in reads], dtype=torch.long)[:, None]
        query_positions = torch.minimum(first + steps, last)
        queries = torch.tensor(reads, dtype=torch.long)[:, None] * width + query_positions
        real = torch.nonzero((first + steps <= last).flatten())[:, 0]
        return cls(*(t.to(device) for t in (ids, positions, torch.tensor(reads, dtype=torch.long), query_positions,
                                             queries, real)))


def _interleaved(heads: int, head_dim: int, device: torch.device | None = None) -> torch.Tensor:
    """The order of a projection's outputs that puts each head's halves side by side,
    ``(x[0], x[half], x[1], x[half + 1], ...)``: the pairs that the rotary embedding turns
    together, adjacent, so that they read as complex numbers.

    Example:
        >>> _interleaved(2, 4).tolist()
        [0, 2, 1, 3, 4, 6, 5, 7]
    """
    one = torch.arange(head_dim, device=device).view(2, head_dim // 2).t().flatten()
    return (one + head_dim * torch.arange(heads, device=device)[:, None]).flatten()


def _projection(module: Any, dtype: torch.dtype | None = None, head_dim: int = 0) -> Projection:
    """``module`` as a function of the residual stream ``x`` (of ``dtype``; ``None``: the
    module's own), returning ``dtype``, its outputs in :func:`_interleaved` order when
    ``head_dim`` is given. A plain ``Linear`` without hooks gets its rows reordered here, once
    per :func:`final_hidden` call (a copy of the weight, no pass over the states); a peft LoRA
    layer on half-precision weights runs its frozen product in their precision and its
    adapters in theirs (float32), their sum in ``dtype``; anything else runs as it is (on
    ``x`` cast to its weights' dtype) and its outputs are cast and reordered.

    Example (outputs interleaved by heads of 2 and 4; bfloat16 weights on a float32 stream):
        >>> projection, x = torch.nn.Linear(3, 4), torch.randn(2, 3)
        >>> torch.allclose(_projection(projection, head_dim=2)(x), projection(x)[:, [0, 1, 2, 3]])
        True
        >>> torch.allclose(_projection(projection, head_dim=4)(x), projection(x)[:, [0, 2, 1, 3]])
        True
        >>> _projection(projection.to(torch.bfloat16), torch.float32)(x).dtype
        torch.float32
    """
    weight = getattr(module, "weight", None)   # a peft layer's is its base layer's
    own = weight.dtype if isinstance(weight, torch.Tensor) else next(module.parameters()).dtype
    dtype = dtype or own
    order = None
    if head_dim:
        out_features = getattr(module, "base_layer", module).out_features
        order = _interleaved(out_features // head_dim, head_dim, next(module.parameters()).device)
    if _plain_linear(module):
        return _linear(module.weight, module.bias, order, dtype)
    lora = _lora_parts(module) if own != dtype else None
    if lora is not None:
        base = _linear(module.base_layer.weight, module.base_layer.bias, order, dtype)
        updates = [(dropout, a.weight.dtype, _linear(a.weight, a.bias, None, a.weight.dtype),
                    _linear(b.weight, b.bias, order, b.weight.dtype), scaling) for dropout, a, b, scaling in lora]

        def adapted(x: torch.Tensor) -> torch.Tensor:
            out = base(x)
            for dropout, adapter_dtype, down, up, scaling in updates:
                out = out + (up(down(dropout(x.to(adapter_dtype)))) * scaling).to(dtype)
            return out

        return adapted

    def as_it_is(x: torch.Tensor) -> torch.Tensor:
        states = module(x.to(own)).to(dtype)
        return states if order is None else states.index_select(-1, order)

    return as_it_is


def _plain_linear(module: Any) -> bool:
    return type(module) is torch.nn.Linear and not (module._forward_hooks or module._forward_pre_hooks)


def _linear(weight: torch.Tensor, bias: torch.Tensor | None, order: torch.Tensor | None,
            dtype: torch.dtype) -> Projection:
    """``x -> linear(x, weight, bias)`` with the weight's rows in ``order`` (when given), computed
    in the weight's dtype and returned in ``dtype``."""
    if order is not None:
        weight = weight.index_select(0, order)
        bias = None if bias is None else bias.index_select(0, order)
    if weight.dtype == dtype:
        return lambda x: torch.nn.functional.linear(x, weight, bias)
    return lambda x: torch.nn.functional.linear(x.to(weight.dtype), weight, bias).to(dtype)


def _lora_parts(module: Any) -> list[tuple[Any, Any, Any, float]] | None:
    """A peft LoRA ``Linear``'s active plain adapters ``(dropout, A, B, scaling)`` ([] while
    adapters are disabled), or ``None`` when ``module`` is not one that :func:`_projection`
    can run in parts (merged, a variant such as DoRA, hooks, a base that is not a plain ``Linear``)."""
    try:
        from peft.tuners.lora import Linear as LoraLinear
    except ImportError:   # peft is optional
        return None
    if type(module) is not LoraLinear or module.merged or module._forward_hooks or module._forward_pre_hooks:
        return None
    if not _plain_linear(module.base_layer):
        return None
    if module.disable_adapters:
        return []
    active = [name for name in module.active_adapters if name in module.lora_A.keys()]
    if any(name in module.lora_variant for name in active):
        return None
    parts = [(module.lora_dropout[name], module.lora_A[name], module.lora_B[name], module.scaling[name])
             for name in active]
    if not all(_plain_linear(a) and _plain_linear(b) for _, a, b, _ in parts):
        return None
    return parts


def residual_dtype(lm: LlamaForCausalLM) -> torch.dtype:
    """The dtype of the residual stream in :func:`final_hidden`: the weights' own, at least
    float32 (half-precision weights run their products in their precision, the rest in float32).

    Example:
        >>> from mage_agent.tiny import build_model, build_tokenizer
        >>> residual_dtype(build_model(build_tokenizer(["a"])).to(torch.bfloat16))
        torch.float32
    """
    return torch.promote_types(lm.model.embed_tokens.weight.dtype, torch.float32)


@dataclass(frozen=True)
class _LayerProjections:
    """A decoder layer's projections as :func:`_decoder_pass` runs them, on the residual dtype."""

    query: Projection
    key: Projection
    value: Projection
    output: Projection
    mlp: Projection

    @classmethod
    def of(cls, layer: Any, dtype: torch.dtype) -> _LayerProjections:
        head_dim = layer.self_attn.head_dim
        attention = layer.self_attn
        return cls(_projection(attention.q_proj, dtype, head_dim), _projection(attention.k_proj, dtype, head_dim),
                   _projection(attention.v_proj, dtype), _projection(attention.o_proj, dtype), _mlp(layer.mlp, dtype))


def _mlp(mlp: Any, dtype: torch.dtype) -> Projection:
    """A Llama MLP on the residual stream: as it is when its weights are of ``dtype``; with
    plain half-precision weights wholly in their precision (no adapter reads its inside),
    its output cast to ``dtype``; else each projection through :func:`_projection`."""
    parts = (mlp.gate_proj, mlp.up_proj, mlp.down_proj)
    dtypes = {part.weight.dtype for part in parts}   # a peft layer's weight is its base layer's
    if dtypes == {dtype}:
        return mlp
    if all(_plain_linear(part) for part in parts) and len(dtypes) == 1:
        (low,) = dtypes
        return lambda x: mlp(x.to(low)).to(dtype)
    gate, up, down = (_projection(part, dtype) for part in parts)
    return lambda x: down(mlp.act_fn(gate(x)) * up(x))


def _rotated(project: Projection, x: torch.Tensor, head_dim: int, turn: torch.Tensor) -> torch.Tensor:
    """``project(x)`` (outputs interleaved: :func:`_projection`) split into heads and turned
    by the rotary embedding: one complex product by ``turn = cos + i sin`` ``(batch, width,
    head dim / 2)`` instead of transformers' ``x * cos + rotate_half(x) * sin`` (four passes
    over the states, and as many back). Queries and keys are interleaved alike, so their dot
    products (attention) are the same sums in another order; the keys a pass returns stay
    interleaved (values are not).

    Example:
        >>> from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
        >>> projection, x, angle = torch.nn.Linear(8, 8, bias=False), torch.randn(2, 5, 8), torch.randn(2, 5, 2)
        >>> cos, sin = angle.cos().repeat(1, 1, 2), angle.sin().repeat(1, 1, 2)
        >>> ours = _rotated(_projection(projection, head_dim=4), x, 4, torch.polar(torch.ones_like(angle), angle))
        >>> states = _heads(projection(x), 4)
        >>> theirs, _ = apply_rotary_pos_emb(states, states, cos, sin, unsqueeze_dim=2)
        >>> torch.allclose(ours, theirs[..., _interleaved(1, 4)], atol=1e-6)
        True
    """
    states = project(x)
    pairs = torch.view_as_complex(states.to(turn.real.dtype).view(*states.shape[:2], -1, head_dim // 2, 2))
    return torch.view_as_real(pairs * turn[:, :, None]).view(*states.shape[:2], -1, head_dim).to(states.dtype)


def _norm(norm: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``norm(x)``; a :class:`LlamaRMSNorm` on a float32 ``x`` through torch's fused ``rms_norm``
    (the same values, half the time with its gradient), its weight in float32.

    Example:
        >>> norm, x = LlamaRMSNorm(8), torch.randn(3, 8)
        >>> torch.equal(_norm(norm, x), norm(x))
        True
    """
    if type(norm) is LlamaRMSNorm and x.dtype == torch.float32 and norm.weight.dtype in HALF_OR_SINGLE:
        return torch.nn.functional.rms_norm(x, norm.weight.shape, norm.weight.to(x.dtype), norm.variance_epsilon)
    return norm(x)


def _heads(x: torch.Tensor, head_dim: int) -> torch.Tensor:
    """``(batch, width, heads * head dim)`` as ``(batch, width, heads, head dim)``."""
    return x.view(*x.shape[:2], -1, head_dim)


def _turns(base: Any, hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """The rotary embedding's turns ``cos + i sin`` at ``positions`` ``(batch, width, head
    dim / 2)``, for :func:`_rotated` (Llama's angles repeat over the two halves of a head, in
    every rope type; half precision turns in float32)."""
    cos, sin = base.rotary_emb(hidden, positions)
    half = cos.shape[-1] // 2
    real = torch.promote_types(cos.dtype, torch.float32)
    return torch.complex(cos[..., :half].to(real), sin[..., :half].to(real))


def _decoder_pass(lm: LlamaForCausalLM, inputs: _Inputs, projections: list[_LayerProjections],
                  past: _Past | None = None, with_past: bool = False,
                  trunk: _TrunkPass | None = None) -> tuple[torch.Tensor | None, KeyValues]:
    """Run ``inputs`` through the decoder after ``past``; return the final hidden states
    of the real query positions, row by row (``None``: no row is read), and the pass's keys
    and values (``with_past``: all that its rows read, ``past``'s right-padded, then their own),
    of the layers it ran: above ``trunk``'s when that gives their output, else all (keeping
    the stream entering ``trunk``'s in it)."""
    base = lm.model
    start = None if trunk is None else trunk.start
    bottom = 0 if trunk is None or start is None else trunk.layers
    hidden = base.embed_tokens(inputs.ids).to(residual_dtype(lm)) if start is None else start
    turn = _turns(base, hidden, inputs.positions)
    width = inputs.ids.shape[1]
    # without a past, the causal mask alone (pads come last, after every real position)
    mask = None if past is None else _mask(torch.arange(width, device=hidden.device)[None, :], width, past.valid)
    present: KeyValues = []
    for number in range(bottom, len(base.layers)):
        if trunk is not None and start is None and number == trunk.layers:
            trunk.captured = hidden.detach()
        layer = base.layers[number]
        attention = layer.self_attn
        x = _norm(layer.input_layernorm, hidden)
        project = projections[number]
        key = _rotated(project.key, x, attention.head_dim, turn)
        value = _heads(project.value(x), attention.head_dim)
        if not with_past:
            present.append((key, value))
        if past is not None:
            key = torch.cat([past.keys_values[number - bottom][0], key], dim=1)
            value = torch.cat([past.keys_values[number - bottom][1], value], dim=1)
        if with_past:
            present.append((key, value))
        if number == len(base.layers) - 1:   # only the query positions are read from here on
            if not len(inputs.reads):
                return None, present
            hidden, x, turn = (take(t, inputs.queries) for t in (hidden, x, turn))
            valid = None if past is None else past.valid
            if len(inputs.reads) < len(inputs.ids):   # a copy (and a zero-filled gradient) only when rows drop out
                key, value = key.index_select(0, inputs.reads), value.index_select(0, inputs.reads)
                valid = None if valid is None else valid.index_select(0, inputs.reads)
            mask = _mask(inputs.query_positions, width, valid)
        query = _rotated(project.query, x, attention.head_dim, turn)
        attended, _ = sdpa_attention_forward(attention, query.transpose(1, 2), key.transpose(1, 2),
                                             value.transpose(1, 2), mask, dropout=0.0, scaling=attention.scaling)
        hidden = hidden + project.output(attended.reshape(*attended.shape[:2], -1))
        hidden = hidden + project.mlp(_norm(layer.post_attention_layernorm, hidden))
    return take(_norm(base.norm, hidden), inputs.real[:, None])[:, 0], present


def _mask(query_positions: torch.Tensor, width: int, past_valid: torch.Tensor | None) -> torch.Tensor:
    """Which keys each query reads, ``(batch, 1, queries, past + width)``: the real past
    positions, and its own row's positions up to its own (``query_positions``: ``(batch or
    1, queries)``)."""
    own = torch.arange(width, device=query_positions.device) <= query_positions[:, :, None]
    if past_valid is None:
        return own[:, None]
    own = own.expand(len(past_valid), -1, -1)
    seen = past_valid[:, None, :].expand(-1, own.shape[1], -1)
    return torch.cat([seen, own], dim=-1)[:, None]
