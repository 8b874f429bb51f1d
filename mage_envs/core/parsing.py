"""Turn whatever a language model wrote into one legal action, or a reason why not.

Rules (documented in docs/text_contract.md):

1. The answer is clipped to :data:`~mage_envs.core.contract.MAX_ACTION_CHARS` characters
   (head kept) before anything else, so a megabyte answer costs microseconds.
2. The first ``<action>X</action>`` tag wins (tags are case-insensitive, surrounding
   reasoning is allowed). ``X`` is stripped and compared case-insensitively with the
   legal action names.
3. Without any tag, a *bare* answer is accepted when the whole answer, stripped of
   whitespace, quotes and a trailing full stop, is exactly one legal action name
   (``"bet"``, ``"Bet."``). Anything longer is rejected: a sentence such as
   ``"I will not bet, I pass"`` names two actions and guessing would be wrong.

Example:
    >>> parse_action("I hold the King. <action>Bet</action>", ["pass", "bet"]).action
    'bet'
    >>> parse_action("raise!", ["pass", "bet"]).reason
    'no_action_tag'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from .contract import MAX_ACTION_CHARS, sanitize_text

_TAG = re.compile(r"<\s*action\s*>(.*?)<\s*/\s*action\s*>", re.IGNORECASE | re.DOTALL)
_OPEN_TAG = re.compile(r"<\s*action\s*>", re.IGNORECASE)
_BARE_STRIP = " \t\n\"'`.*"
#: Longest tag content we look at; legal names are short.
_MAX_TAG_CONTENT = 64


def action_tag(name: str) -> str:
    """The canonical answer naming ``name``: ``<action>name</action>``.

    Example:
        >>> action_tag("bet")
        '<action>bet</action>'
    """
    return f"<action>{name}</action>"


def answer_instruction(*examples: str, think: bool = False, legal: bool = False) -> str:
    """The sentence under the legal actions of every prompt that tells the answer format,
    with each of ``examples`` in tags; ``think`` invites reasoning first, ``legal`` says
    "legal action".

    Example:
        >>> answer_instruction("check", think=True, legal=True)
        'Think briefly if you like, then answer with exactly one legal action inside tags, e.g. <action>check</action>.'
        >>> answer_instruction("search[shoes]", "click[buy now]")
        'Answer with exactly one action inside tags, e.g. <action>search[shoes]</action> or <action>click[buy now]</action>.'
    """
    lead = "Think briefly if you like, then answer" if think else "Answer"
    kind = "legal action" if legal else "action"
    return f"{lead} with exactly one {kind} inside tags, e.g. " + " or ".join(map(action_tag, examples)) + "."


def canonical_answers(legal: Iterable[str], accept_bare: bool = True) -> dict[str, str]:
    """The answers read without parsing -> the legal name they give: each name in tags
    (:func:`action_tag`), and each bare name too with ``accept_bare``; what
    :func:`parse_action` would read from them.

    Example:
        >>> canonical_answers(["check", "bet"], accept_bare=False)
        {'<action>check</action>': 'check', '<action>bet</action>': 'bet'}
    """
    names = list(legal)
    accepted = {action_tag(name): name for name in names}
    if accept_bare:
        accepted.update({name: name for name in names})
    return accepted


@dataclass(frozen=True)
class ParsedAction:
    """The result of :func:`parse_action`: an ``action`` name, or ``reason`` it failed.

    ``reason`` is one of ``"empty"``, ``"no_action_tag"``, ``"unclosed_action_tag"``,
    ``"illegal_action"`` (a tag naming something not legal now).
    """

    action: str | None
    reason: str | None = None
    text: str = ""

    @property
    def ok(self) -> bool:
        return self.action is not None


def parse_action(
    text: str, legal_actions: Sequence[str], *, accept_bare: bool = True
) -> ParsedAction:
    """Extract one legal action (returned in its canonical spelling) from ``text``.

    Example:
        >>> parse_action("<ACTION> 5 </ACTION><action>1</action>", ["1", "5"]).action
        '5'
    """
    if not isinstance(text, str):
        return ParsedAction(None, "not_a_string", repr(type(text).__name__))
    clipped = text[:MAX_ACTION_CHARS]
    lookup = {name.lower(): name for name in legal_actions}
    match = _TAG.search(clipped)
    if match is not None:
        candidate = match.group(1).strip()[:_MAX_TAG_CONTENT]
        found = lookup.get(candidate.lower())
        if found is None:
            return ParsedAction(None, "illegal_action", candidate)
        return ParsedAction(found)
    if _OPEN_TAG.search(clipped):
        return ParsedAction(None, "unclosed_action_tag", clipped[:_MAX_TAG_CONTENT])
    bare = clipped.strip(_BARE_STRIP)
    if not bare:
        return ParsedAction(None, "empty", "")
    if accept_bare and len(bare) <= _MAX_TAG_CONTENT:
        found = lookup.get(bare.lower())
        if found is not None:
            return ParsedAction(found)
    return ParsedAction(None, "no_action_tag", bare[:_MAX_TAG_CONTENT])


def tag_suffix(text: str) -> str | None:
    """``text`` from its first ``<`` when it has exactly two ``<`` and is short enough not
    to be clipped; ``None`` otherwise.

    For such a text, :func:`parse_action` reads ``X`` exactly when the suffix is
    ``<action>X</action>``: an answer that reasons, then gives one canonical tag, can be
    looked up instead of parsed.

    Example:
        >>> tag_suffix("I hold the King, so I bet. <action>bet</action>")
        '<action>bet</action>'
        >>> tag_suffix("<action>check</action> or <action>bet</action>") is None
        True
    """
    if len(text) > MAX_ACTION_CHARS or text.count("<") != 2:
        return None
    return text[text.index("<") :]


def describe_invalid(parsed: ParsedAction, legal_actions: Sequence[str]) -> str:
    """One sentence telling the agent what was wrong with its answer.

    Example:
        >>> describe_invalid(ParsedAction(None, "illegal_action", "raise"), ["pass", "bet"])
        "'raise' is not a legal action now. Legal actions: pass, bet."
    """
    legal = ", ".join(legal_actions)
    messages = {
        "empty": "Your answer was empty.",
        "not_a_string": "Your answer was not text.",
        "no_action_tag": "No <action>...</action> tag was found in your answer.",
        "unclosed_action_tag": "Your <action> tag was not closed with </action>.",
        "illegal_action": f"'{sanitize_text(parsed.text)}' is not a legal action now.",
    }
    return f"{messages.get(parsed.reason or '', 'Your answer was invalid.')} Legal actions: {legal}."
