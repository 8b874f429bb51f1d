"""The result type of every oracle (:class:`OracleValue`) and the seats a ``seat`` argument
stands for (:data:`~mage_envs.core.contract.Seat`; ``"random"``: the average of both).

Example:
    >>> exact = OracleValue(1 / 3, method="tabular best response")
    >>> round(float(exact), 4), exact.exact, exact.stderr
    (0.3333, True, 0.0)
    >>> OracleValue.average([OracleValue(1.0, 0.3, False, "mc"), OracleValue(0.0, 0.4, False, "mc")])
    OracleValue(value=0.5, stderr=0.25, exact=False, method='mc')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.contract import Seat

__all__ = ["OracleValue", "Seat", "seats"]


@dataclass(frozen=True)
class OracleValue:
    """An expected return in game units (chips, ±1 for a win/loss), before any ``reward_scale``.

    ``exact`` values come from a closed-form computation and have ``stderr == 0``; estimates
    (``exact=False``) are Monte Carlo means with their standard error. ``method`` says how
    the number was obtained.
    """

    value: float
    stderr: float = 0.0
    exact: bool = True
    method: str = ""

    def __float__(self) -> float:
        return self.value

    @staticmethod
    def average(values: Sequence[OracleValue]) -> OracleValue:
        """The equal-weight mean of independent values (standard errors add in quadrature)."""
        n = len(values)
        return OracleValue(
            value=sum(v.value for v in values) / n,
            stderr=math.sqrt(sum(v.stderr**2 for v in values)) / n,
            exact=all(v.exact for v in values),
            method=values[0].method,
        )


def seats(seat: Seat) -> tuple[int, ...]:
    """The concrete seats ``seat`` stands for: ``(0,)``, ``(1,)`` or ``(0, 1)``.

    Example:
        >>> seats("random"), seats(1)
        ((0, 1), (1,))
    """
    if seat == "random":
        return (0, 1)
    if seat in (0, 1):
        return (int(seat),)
    raise ValueError(f"seat must be 0, 1 or 'random', got {seat!r}")
