"""The policy-gradient loss: PPO-clip on token log-prob ratios, KL to the reference, entropy.

Example:
    >>> import torch
    >>> new = torch.tensor([[-0.5, -1.0]], requires_grad=True)
    >>> stats = ppo_loss(new, old=torch.tensor([[-0.5, -1.0]]), ref=torch.tensor([[-0.5, -1.0]]),
    ...                  entropy=torch.zeros(1, 2), advantages=torch.tensor([1.0]),
    ...                  mask=torch.ones(1, 2, dtype=torch.bool), clip=0.2, kl_coef=0.1, entropy_coef=0.0)
    >>> round(stats.loss.item(), 4), stats.clip_fraction, round(stats.kl, 6)
    (-1.0, 0.0, 0.0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import torch

#: How the per-token losses of a batch are averaged: over every token of the batch
#: (``"token"``, DAPO's token-level loss) or per completion first (``"sequence"``, GRPO's).
Aggregation = Literal["token", "sequence"]
AGGREGATIONS: tuple[str, ...] = get_args(Aggregation)
#: How the KL penalty's loss term is formed from the sampled tokens' log-ratio ``d = ref - new``:
#: ``k3`` is Schulman's low-variance estimate ``exp(d) - d - 1`` (TRL's GRPO); ``k2`` is
#: ``d² / 2``, whose gradient ``-d ∇new`` is the on-policy gradient of KL(policy ‖ reference)
#: and grows with ``|d|``, where k3's, ``(1 - exp(d)) ∇new``, grows with ``exp(d)``.
KlEstimator = Literal["k3", "k2"]
KL_ESTIMATORS: tuple[str, ...] = get_args(KlEstimator)


@dataclass
class LossStats:
    """The loss to backpropagate and its diagnostics (plain floats)."""

    loss: torch.Tensor
    policy_loss: float
    kl: float
    entropy: float
    clip_fraction: float
    approx_kl: float


def masked_mean(values: torch.Tensor, mask: torch.Tensor, count: float | None = None) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is true (0 when nothing is selected); ``count``
    replaces the number of selected entries (the token count over all processes)."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / (mask.sum().clamp(min=1.0) if count is None else count)


def aggregate(values: torch.Tensor, mask: torch.Tensor, aggregation: Aggregation = "token",
              count: float | None = None) -> torch.Tensor:
    """Average ``(batch, tokens)`` values: over all tokens (``"token"``) or first within
    each completion, then over completions (``"sequence"``). ``count`` replaces the
    denominator: the step's tokens, or completions, on every process.

    Example (a one-token and a three-token completion):
        >>> values = torch.tensor([[3.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
        >>> mask = torch.tensor([[True, False, False], [True, True, True]])
        >>> aggregate(values, mask, "token").item(), aggregate(values, mask, "sequence").item()
        (1.5, 2.0)
    """
    if aggregation == "token":
        return masked_mean(values, mask, count)
    if aggregation != "sequence":
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
    weights = mask.to(values.dtype)
    per_sequence = (values * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
    return per_sequence.sum() / (max(len(values), 1) if count is None else count)


def ppo_loss(
    new: torch.Tensor,
    old: torch.Tensor,
    ref: torch.Tensor | None,
    entropy: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip: float = 0.2,
    kl_coef: float = 0.0,
    entropy_coef: float = 0.0,
    token_count: float | None = None,
    clip_high: float | None = None,
    aggregation: Aggregation = "token",
    entropy_mask: torch.Tensor | None = None,
    entropy_count: float | None = None,
    kl_estimator: KlEstimator = "k3",
) -> LossStats:
    """PPO-clip over tokens: ``-min(r A, clip(r, 1 - clip, 1 + clip_high) A)`` (DAPO's
    decoupled clip; ``clip_high=None`` is ``clip``), plus ``kl_coef`` times the low-variance
    KL estimate ``exp(ref - new) - (ref - new) - 1`` (Schulman's k3; ``kl_estimator="k2"``:
    ``(ref - new)² / 2``, see :data:`KlEstimator`), minus ``entropy_coef`` times the entropy. ``new``/``old``/``ref``/``entropy``/``mask`` are ``(batch, tokens)``;
    ``advantages`` is ``(batch,)``, one per completion. The entropy bonus counts the tokens of
    ``entropy_mask`` (default ``mask``), averaged over ``entropy_count`` (default ``token_count``);
    the ``entropy`` diagnostic is the mean over ``entropy_mask``'s tokens.

    The loss terms are averaged by :func:`aggregate` with ``aggregation``, over
    ``token_count`` (tokens or completions, by ``aggregation``) when given: the step's
    count on every process, so that summed gradients are the whole batch's. The
    diagnostics are always this batch's own token means.

    Example (a ratio of 1.5 with a positive advantage: clipped at 1.2, or at 1.28 with DAPO's clip_high):
        >>> new, old = torch.log(torch.tensor([[1.5]])), torch.zeros(1, 1)
        >>> one = torch.ones(1, 1, dtype=torch.bool)
        >>> [round(ppo_loss(new, old, None, torch.zeros(1, 1), torch.tensor([1.0]), one, clip=0.2,
        ...                 clip_high=high).loss.item(), 4) for high in (None, 0.28)]
        [-1.2, -1.28]
    """
    if kl_estimator not in KL_ESTIMATORS:
        raise ValueError(f"kl_estimator must be one of {KL_ESTIMATORS}, got {kl_estimator!r}")
    high = clip if clip_high is None else clip_high
    ratio = torch.exp(new - old)
    adv = advantages[:, None].to(new.dtype)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip, 1.0 + high) * adv
    surrogate = -torch.minimum(unclipped, clipped)
    loss = aggregate(surrogate, mask, aggregation, token_count)
    kl_value = torch.zeros(())
    if ref is not None and kl_coef > 0:
        delta = ref - new
        kl_tokens = torch.exp(delta) - delta - 1.0   # the logged value: k3, unbiased for either loss
        penalty = kl_tokens if kl_estimator == "k3" else 0.5 * delta.square()
        loss = loss + kl_coef * aggregate(penalty, mask, aggregation, token_count)
        kl_value = masked_mean(kl_tokens, mask)
    bonus_mask, bonus_count = (mask, token_count) if entropy_mask is None else (entropy_mask, entropy_count)
    if entropy_coef:
        loss = loss - entropy_coef * aggregate(entropy, bonus_mask, aggregation, bonus_count)
    with torch.no_grad():
        clip_fraction = masked_mean(((ratio < 1.0 - clip) | (ratio > 1.0 + high)).float(), mask)
        approx_kl = masked_mean((ratio - 1.0) - (new - old), mask)
    return LossStats(
        loss=loss,
        policy_loss=float(masked_mean(surrogate.detach(), mask)),
        kl=float(kl_value.detach()),
        entropy=float(masked_mean(entropy.detach(), bonus_mask)),
        clip_fraction=float(clip_fraction),
        approx_kl=float(approx_kl),
    )
