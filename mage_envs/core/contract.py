"""The text-environment contract shared by every MAGE environment.

An environment that follows the contract:

* observes with one ``str`` (a complete prompt) inside a :func:`text_space`;
* acts with one ``str`` (whatever the model wrote) inside :data:`ACTION_SPACE`;
* reports the structured ``info`` keys listed in :data:`INFO_KEYS`;
* accepts the reset options ``{"opponent": id, "instance": int}`` and echoes
  ``info["instance"]`` so that :class:`~mage_envs.MetaEpisodeWrapper` can replay it.

Example:
    >>> space = text_space(32)
    >>> space.contains("Your move:\\n<action>bet</action>")
    True
    >>> sanitize_text("caf\\u00e9 \\u2713")
    'cafe ?'
"""

from __future__ import annotations

import string
import unicodedata
from dataclasses import dataclass
from typing import Any, Callable, Literal

from gymnasium import spaces

#: Every character an observation may contain: printable ASCII plus newline and tab.
TEXT_CHARSET: str = "".join(sorted(set(string.printable) - {"\r", "\x0b", "\x0c"}))
_CHARSET = frozenset(TEXT_CHARSET)

#: Agent answers longer than this are clipped (head kept) before parsing.
MAX_ACTION_CHARS = 8192

#: The action space of every text env: any string up to MAX_ACTION_CHARS characters.
ACTION_SPACE = spaces.Text(max_length=MAX_ACTION_CHARS, min_length=0, charset=TEXT_CHARSET)

#: Keys every contract env puts in ``info`` after ``reset`` and ``step``.
INFO_KEYS = ("legal_actions", "opponent", "seat", "invalid_action", "instance")
#: Keys added when an episode ends.
TERMINAL_INFO_KEYS = ("outcome", "success")

Outcome = Literal["win", "draw", "loss"]
#: The agent's seat: ``0`` (moves first), ``1``, or ``"random"`` (an env draws it from the
#: instance; an oracle averages both seats).
Seat = Literal[0, 1, "random"]


def text_space(max_length: int) -> spaces.Text:
    """A ``Text`` space over :data:`TEXT_CHARSET` holding strings of 0..``max_length`` chars.

    Example:
        >>> text_space(10).max_length
        10
    """
    return spaces.Text(max_length=max_length, min_length=0, charset=TEXT_CHARSET)


def sanitize_text(text: str) -> str:
    """Map ``text`` into :data:`TEXT_CHARSET`: accents folded, other characters become ``?``.

    Example:
        >>> sanitize_text("na\\u00efve\\r\\n")
        'naive\\n'
    """
    if _CHARSET.issuperset(text):
        return text
    out = []
    for char in text:
        if char in _CHARSET:
            out.append(char)
        elif char == "\r":
            continue
        else:
            folded = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode()
            out.append(folded if folded and all(c in _CHARSET for c in folded) else "?")
    return "".join(out)


def clip_text(text: str, budget: int, marker: str = " [...]") -> str:
    """Clip ``text`` to at most ``budget`` characters, keeping the head and marking the cut.

    Deterministic and O(budget). Example:
        >>> clip_text("abcdefghij", 8, marker="~")
        'abcdefg~'
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    if len(text) <= budget:
        return text
    if budget <= len(marker):
        return text[:budget]
    return text[: budget - len(marker)] + marker


@dataclass(frozen=True)
class InvalidActionPolicy:
    """What an env does when the agent's answer is not a legal action.

    Args:
        mode: ``"retry"`` — the state is unchanged, the agent is told what was wrong and
            may answer again, up to ``max_retries`` times in an episode, after which it
            forfeits; ``"forfeit"`` — the episode ends at once as a loss worth
            ``forfeit_return`` (the game's forfeit payoff when ``None``) plus ``penalty``;
            ``"fallback"`` — a legal action is played instead (``fallback``: ``"first"``
            legal action or a seeded ``"random"`` one).
        max_retries: retries allowed per episode in ``"retry"`` mode.
        penalty: added to the reward of every step that had an invalid answer (<= 0).
        fallback: how ``"fallback"`` mode picks the substitute action.
        forfeit_return: the episode return of a forfeit; ``None`` means the game's own
            forfeit payoff times the env's reward scale: the chips committed so far in
            poker (a fold), a loss (-1) in Tic-Tac-Toe.

    Example:
        >>> InvalidActionPolicy.from_spec("forfeit").mode
        'forfeit'
        >>> InvalidActionPolicy("fallback", penalty=-0.5).penalty
        -0.5
    """

    mode: Literal["retry", "forfeit", "fallback"] = "retry"
    max_retries: int = 2
    penalty: float = 0.0
    fallback: Literal["first", "random"] = "random"
    forfeit_return: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("retry", "forfeit", "fallback"):
            raise ValueError(
                f"invalid_action mode must be 'retry', 'forfeit' or 'fallback', got {self.mode!r}"
            )
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.penalty > 0:
            raise ValueError(f"penalty must be <= 0 (it is a penalty), got {self.penalty}")
        if self.fallback not in ("first", "random"):
            raise ValueError(f"fallback must be 'first' or 'random', got {self.fallback!r}")

    def forfeit_value(self, default: Callable[[], float]) -> float:
        """The return of a forfeit: ``forfeit_return``, else ``default()`` (the env's own
        forfeit payoff, e.g. a fold in poker).

        Example:
            >>> InvalidActionPolicy("forfeit").forfeit_value(lambda: -2.0)
            -2.0
        """
        return default() if self.forfeit_return is None else self.forfeit_return

    @classmethod
    def from_spec(cls, spec: str | InvalidActionPolicy | dict[str, Any]) -> InvalidActionPolicy:
        """Build a policy from a mode name, a dict of fields, or return a policy as is."""
        if isinstance(spec, InvalidActionPolicy):
            return spec
        if isinstance(spec, str):
            return cls(mode=spec)  # type: ignore[arg-type]
        if isinstance(spec, dict):
            return cls(**spec)
        raise TypeError(
            f"invalid_action must be a mode name, a dict or an InvalidActionPolicy, got {type(spec).__name__}"
        )
