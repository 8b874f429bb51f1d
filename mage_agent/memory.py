"""Micro-batches sized to memory: how many tokens one forward/backward pass may hold.

The update's memory is the activations its forward pass keeps for the backward pass, about
proportional to the tokens the packed forward runs (shared prefixes once, see
:mod:`mage_agent.packing`). A minibatch is cut, in sorted order (so that rows that share a
prefix stay together), into micro-batches whose estimated tokens fit a budget; the gradients
accumulate over them, so the update is the same (to float rounding).

Example (three rows that share 40 tokens, and a fourth that shares nothing):
    >>> shared = tuple(range(40))
    >>> rows = [shared + (1, 2), shared + (3,), (9,) * 50, shared + (4, 5, 6)]
    >>> packed_tokens(rows)
    96
    >>> micro_batches(rows, budget=60)
    [[0, 1, 3], [2]]
    >>> micro_batches(rows, budget=45)
    [[0, 1], [3], [2]]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from .packing import MIN_SHARED, chunks, common_prefix, plan_rows

#: Bytes of activations the update keeps per token and layer, in units of the hidden and
#: MLP widths, by weight dtype size: fitted above what SmolLM2-135M keeps with LoRA (925 KiB
#: a token in bfloat16, 1,261 KiB in float32, over 30 layers; benchmarks/smollm2_speed.py).
HIDDEN_FACTOR = 40
MLP_FACTOR = 4
#: How many times :func:`packed_tokens` a plan may run at most (one-level prefixes and
#: padding; measured 1.1-1.4x on SmolLM2's batches): rows this far within a budget are not planned.
PLAN_SLACK = 4
#: The default activation budget of one forward/backward pass (``micro_batch_tokens: 0``).
DEFAULT_BUDGET_BYTES = 2 << 30


def activation_bytes_per_token(config: Any, weight_bytes: int, trained_layers: int = 0) -> int:
    """Estimated bytes of activations per token of a forward pass kept for backward, for a
    transformers config with ``num_hidden_layers``, ``hidden_size`` and ``intermediate_size``.
    ``trained_layers``: only the last so many layers have trainable weights (LoRA's
    ``top_layers``); the layers below run without autograd and keep nothing (0: every layer).

    Example:
        >>> from types import SimpleNamespace
        >>> smollm2 = SimpleNamespace(num_hidden_layers=30, hidden_size=576, intermediate_size=1536)
        >>> activation_bytes_per_token(smollm2, weight_bytes=2) // 1024
        1035
        >>> activation_bytes_per_token(smollm2, weight_bytes=2, trained_layers=6) // 1024
        207
    """
    hidden = config.hidden_size
    intermediate = getattr(config, "intermediate_size", 4 * hidden)
    layers = min(trained_layers, config.num_hidden_layers) if trained_layers else config.num_hidden_layers
    return layers * (HIDDEN_FACTOR * hidden + MLP_FACTOR * weight_bytes * intermediate)


def default_token_budget(config: Any, weight_bytes: int, trained_layers: int = 0) -> int:
    """Tokens per forward/backward pass that :data:`DEFAULT_BUDGET_BYTES` of activations hold
    (at least one), by :func:`activation_bytes_per_token`.

    Example:
        >>> from types import SimpleNamespace
        >>> default_token_budget(SimpleNamespace(num_hidden_layers=30, hidden_size=576,
        ...                                      intermediate_size=1536), weight_bytes=2)
        2026
    """
    return max(1, DEFAULT_BUDGET_BYTES // activation_bytes_per_token(config, weight_bytes, trained_layers))


def packed_tokens(rows: Sequence[Sequence[int]]) -> int:
    """Tokens a pass over ``rows`` runs when, in sorted order, each row shares with the one
    before it the prefix they have in common (when it is :data:`~mage_agent.packing.MIN_SHARED`
    tokens or more).

    Example:
        >>> packed_tokens([(1, 2), (1, 2), (3,)])
        5
    """
    return sum(_marginal_tokens(sorted(map(tuple, rows))))


def _marginal_tokens(ordered: list[tuple[int, ...]]) -> list[int]:
    costs = []
    for before, row in zip([None, *ordered], ordered):
        shared = 0 if before is None else common_prefix(before, row)
        costs.append(len(row) - (shared if shared >= MIN_SHARED else 0))
    return costs


def padded_tokens(rows: Sequence[Sequence[int]]) -> int:
    """Positions the packed forward computes for ``rows`` (read from their last token): its
    plan's prefix and continuation passes (:func:`~mage_agent.packing.plan_rows`), padding
    included (:func:`~mage_agent.packing.chunks`).

    Example (two rows that share 40 tokens: the prefix once, then a pass of two 2-token rows):
        >>> padded_tokens([tuple(range(40)) + (1, 2), tuple(range(40)) + (3,)])
        44
    """
    unique = list(dict.fromkeys(map(tuple, rows)))
    plan = plan_rows(unique, [len(row) - 1 for row in unique])
    return sum(len(batch) * max(len(part[i].tokens) for i in batch)
               for part in (plan.prefixes, plan.continuations) if part for batch in chunks(part))


def micro_batches(rows: Sequence[Sequence[int]], budget: int) -> list[list[int]]:
    """Indices of ``rows`` cut into micro-batches of at most ``budget`` tokens each, in sorted
    order so that rows sharing a prefix fall together: cut by :func:`packed_tokens`, then
    halved while the plan's own count (:func:`padded_tokens`) is over (a row alone over the
    budget makes a micro-batch of its own).

    Example:
        >>> micro_batches([(1,) * 10, (2,) * 10, (3,) * 10], budget=20)
        [[0, 1], [2]]
    """
    if packed_tokens(rows) * PLAN_SLACK <= budget:   # far within: no plan needed
        return [sorted(range(len(rows)), key=lambda i: tuple(rows[i]))]
    fitted: list[list[int]] = []
    pending = _greedy(rows, budget)[::-1]
    while pending:
        part = pending.pop()
        if len(part) > 1 and padded_tokens([rows[i] for i in part]) > budget:
            pending += [part[len(part) // 2:], part[:len(part) // 2]]
        else:
            fitted.append(part)
    return fitted


def _greedy(rows: Sequence[Sequence[int]], budget: int) -> list[list[int]]:
    order = sorted(range(len(rows)), key=lambda i: tuple(rows[i]))
    costs = _marginal_tokens([tuple(rows[i]) for i in order])
    batches: list[list[int]] = []
    used = 0
    for index, cost, row in zip(order, costs, (rows[i] for i in order)):
        if batches and used + cost <= budget:
            batches[-1].append(index)
            used += cost
        else:   # a new micro-batch runs the row whole
            batches.append([index])
            used = len(row)
    return batches


def available_bytes() -> int | None:
    """The memory the kernel says is available (``MemAvailable`` of ``/proc/meminfo``), or
    ``None`` where it cannot be read.

    Example:
        >>> available = available_bytes()
        >>> available is None or available > 0
        True
    """
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
