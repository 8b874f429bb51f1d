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


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is true (0 when nothing is selected)."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp(min=1.0)


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
) -> LossStats:
    """PPO-clip over tokens: ``-min(r A, clip(r, 1±clip) A)``, plus ``kl_coef`` times the
    low-variance KL estimate ``exp(ref - new) - (ref - new) - 1`` (Schulman's k3), minus
    ``entropy_coef`` times the entropy. ``new``/``old``/``ref``/``entropy``/``mask`` are
    ``(batch, tokens)``; ``advantages`` is ``(batch,)``, one per completion.
    """
    ratio = torch.exp(new - old)
    adv = advantages[:, None].to(new.dtype)
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * adv
    policy_loss = masked_mean(-torch.minimum(unclipped, clipped), mask)
    loss = policy_loss
    kl_value = torch.zeros(())
    if ref is not None and kl_coef > 0:
        delta = ref - new
        kl_value = masked_mean(torch.exp(delta) - delta - 1.0, mask)
        loss = loss + kl_coef * kl_value
    mean_entropy = masked_mean(entropy, mask)
    if entropy_coef:
        loss = loss - entropy_coef * mean_entropy
    with torch.no_grad():
        clip_fraction = masked_mean(((ratio - 1.0).abs() > clip).float(), mask)
        approx_kl = masked_mean((ratio - 1.0) - (new - old), mask)
    return LossStats(
        loss=loss,
        policy_loss=float(policy_loss.detach()),
        kl=float(kl_value.detach()),
        entropy=float(mean_entropy.detach()),
        clip_fraction=float(clip_fraction),
        approx_kl=float(approx_kl),
    )
