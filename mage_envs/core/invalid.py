"""Decide what an invalid answer costs, the same way in every env.

:func:`judge_invalid` applies an :class:`~mage_envs.core.contract.InvalidActionPolicy`
to a failed :class:`~mage_envs.core.parsing.ParsedAction` and returns the decision with
the report that goes into ``info["invalid_action"]``; the env then carries it out
(keep the state and re-prompt, play the substitute, or end the episode as a forfeit).

Example:
    >>> import random
    >>> from mage_envs.core.contract import InvalidActionPolicy
    >>> from mage_envs.core.parsing import parse_action
    >>> parsed = parse_action("<action>raise</action>", ["check", "bet"])
    >>> decision = judge_invalid(InvalidActionPolicy("fallback", fallback="first"), parsed,
    ...                          ["check", "bet"], retries_left=0, rng=random.Random(0))
    >>> decision.applied, decision.substitute, decision.report["reason"]
    ('fallback', 'check', 'illegal_action')
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from .contract import InvalidActionPolicy, clip_text
from .parsing import ParsedAction, describe_invalid


@dataclass(frozen=True)
class InvalidDecision:
    """What to do with an invalid answer, and the report for ``info["invalid_action"]``.

    ``notice`` (retry only; empty otherwise) is the sentence to show in the re-prompt; ``substitute``
    (fallback only; empty otherwise) is the legal action to play instead.
    """

    applied: Literal["retry", "fallback", "forfeit"]
    report: dict[str, Any]
    retries_left: int
    notice: str = ""
    substitute: str = ""


def judge_invalid(
    policy: InvalidActionPolicy,
    parsed: ParsedAction,
    legal: Sequence[str],
    retries_left: int,
    rng: random.Random,
) -> InvalidDecision:
    """Apply ``policy`` to an answer that did not parse into a legal action."""
    message = describe_invalid(parsed, legal)
    report: dict[str, Any] = {
        "reason": parsed.reason,
        "text": clip_text(str(parsed.text), 80),
        "policy": policy.mode,
        "message": message,
    }
    if policy.mode == "retry" and retries_left > 0:
        retries_left -= 1
        report.update(applied="retry", retries_left=retries_left)
        return InvalidDecision("retry", report, retries_left, notice=f"{message} Retries left: {retries_left}.")
    if policy.mode == "fallback" and legal:
        substitute = legal[0] if policy.fallback == "first" else legal[rng.randrange(len(legal))]
        report.update(applied="fallback", played=substitute)
        return InvalidDecision("fallback", report, retries_left, substitute=substitute)
    report.update(applied="forfeit")
    return InvalidDecision("forfeit", report, retries_left)
