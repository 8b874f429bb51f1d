"""Read an answer into a WebShop action: ``search[query]`` or ``click[element]``.

The rules of :mod:`mage_envs.core.parsing`, with free-text search queries:

1. the answer is clipped to 8,192 characters; the first ``<action>X</action>`` tag wins;
   without a tag, a bare answer that is exactly one action (apart from whitespace,
   quotes and a trailing full stop) counts when ``accept_bare``;
2. ``X`` must be ``search[...]`` or ``click[...]`` (case-insensitive). A search is legal
   on every page but the last (as in WebShop's text env) with a query that has a letter
   or digit; the query is folded to ASCII, lower-cased (as WebShop), its whitespace
   collapsed, square brackets turned into parentheses, and clipped to
   :data:`MAX_QUERY_CHARS`. A click is legal when
   its element, stripped and lower-cased, is a clickable of the page; on a results page
   a product's title is read as its id.

The result is a :class:`~mage_envs.core.parsing.ParsedAction` whose ``action`` is the
canonical action (``"search[red shoes]"``, ``"click[buy now]"``), or which says why not.

Example:
    >>> read_answer("I'll search. <action>Search[ Red  Shoes ]</action>", True, []).action
    'search[red shoes]'
    >>> read_answer("click[Buy Now].", False, ["< prev", "buy now"]).action
    'click[buy now]'
    >>> read_answer("<action>search[]</action>", True, []).reason
    'illegal_action'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ...core.contract import MAX_ACTION_CHARS, sanitize_text
from ...core.parsing import ParsedAction

#: Longest query kept; longer ones are clipped (head kept).
MAX_QUERY_CHARS = 200
#: Longest piece of an invalid answer quoted back.
_QUOTE_CHARS = 64
_TAG = re.compile(r"<\s*action\s*>(.*?)<\s*/\s*action\s*>", re.IGNORECASE | re.DOTALL)
_OPEN_TAG = re.compile(r"<\s*action\s*>", re.IGNORECASE)
_ACTION = re.compile(r"(search|click)\s*\[(.*)\]", re.IGNORECASE | re.DOTALL)
_BARE_STRIP = " \t\n\"'`.*"
_SPACES = re.compile(r"\s+")
_HAS_WORD = re.compile(r"[a-z0-9]")


def normalize_query(text: str) -> str:
    """A query as the store reads it.

    Example:
        >>> normalize_query("  Caf\\u00e9 [Latte]\\n mugs ")
        'cafe (latte) mugs'
    """
    text = sanitize_text(text[: MAX_QUERY_CHARS * 4]).replace("[", "(").replace("]", ")")
    return _SPACES.sub(" ", text).strip().lower()[:MAX_QUERY_CHARS].rstrip()


def normalize_element(text: str) -> str:
    """An element name as clickables spell it: whitespace collapsed, lower case."""
    return _SPACES.sub(" ", text).strip().lower()


def read_answer(
    text: object,
    has_search_bar: bool,
    clickables: Sequence[str],
    aliases: Mapping[str, str] | None = None,
    accept_bare: bool = True,
) -> ParsedAction:
    """The legal action ``text`` names on a page with these ``clickables`` (and a search box
    when ``has_search_bar``); ``aliases`` maps other names (titles) to clickables."""
    if not isinstance(text, str):
        return ParsedAction(None, "not_a_string", type(text).__name__)
    clipped = text[:MAX_ACTION_CHARS]
    match = _TAG.search(clipped)
    if match is not None:
        content = match.group(1).strip()
    elif _OPEN_TAG.search(clipped):
        return ParsedAction(None, "unclosed_action_tag", _quote(clipped))
    else:
        content = clipped.strip(_BARE_STRIP)
        if not content:
            return ParsedAction(None, "empty", "")
        if not accept_bare or _ACTION.fullmatch(content) is None:
            return ParsedAction(None, "no_action_tag", _quote(content))
    action = _resolve(content, has_search_bar, clickables, aliases or {})
    return ParsedAction(action) if action else ParsedAction(None, "illegal_action", _quote(content))


def _quote(text: str) -> str:
    """A piece of an invalid answer to quote back, in the prompt's character set."""
    return sanitize_text(text[:_QUOTE_CHARS])


def _resolve(content: str, has_search_bar: bool, clickables: Sequence[str], aliases: Mapping[str, str]) -> str | None:
    match = _ACTION.fullmatch(content)
    if match is None:
        return None
    verb, argument = match.group(1).lower(), match.group(2)
    if verb == "search":
        query = normalize_query(argument)
        return f"search[{query}]" if has_search_bar and _HAS_WORD.search(query) else None
    element = normalize_element(argument)
    element = element if element in clickables else aliases.get(element, "")
    return f"click[{element}]" if element else None
