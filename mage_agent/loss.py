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

import torch


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
) -> LossStats:
    """PPO-clip over tokens: ``-min(r A, clip(r, 1±clip) A)``, plus ``kl_coef`` times the
    low-variance KL estimate ``exp(ref - new) - (ref - new) - 1`` (Schulman's k3), minus
    ``entropy_coef`` times the entropy. ``new``/``old``/``ref``/``entropy``/``mask`` are
    ``(batch, tokens)``; ``advantages`` is ``(batch,)``, one per completion.

    The loss averages over ``token_count`` tokens when given (the step's tokens on every
    process, so that summed gradients are the whole batch's), else over ``mask``'s. The
    diagnostics are always this batch's own means.
    """
    ratio = torch.exp(new - old)
    adv = advantages[:, None].to(new.dtype)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * adv
    surrogate = -torch.minimum(unclipped, clipped)
    loss = masked_mean(surrogate, mask, token_count)
    kl_value = torch.zeros(())
    if ref is not None and kl_coef > 0:
        delta = ref - new
        kl_tokens = torch.exp(delta) - delta - 1.0
        loss = loss + kl_coef * masked_mean(kl_tokens, mask, token_count)
        kl_value = masked_mean(kl_tokens, mask)
    if entropy_coef:
        loss = loss - entropy_coef * masked_mean(entropy, mask, token_count)
    with torch.no_grad():
        clip_fraction = masked_mean(((ratio - 1.0).abs() > clip).float(), mask)
        approx_kl = masked_mean((ratio - 1.0) - (new - old), mask)
    return LossStats(
        loss=loss,
        policy_loss=float(masked_mean(surrogate.detach(), mask)),
        kl=float(kl_value.detach()),
        entropy=float(masked_mean(entropy.detach(), mask)),
        clip_fraction=float(clip_fraction),
        approx_kl=float(approx_kl),
    )
