"""The text layer of WebShop: the rules, the instruction, the current page and the answer
format as one prompt.

Clickable elements are written in square brackets, ``[buy now]``, as WebShop's
``[button] buy now [button_]``; a chosen option value is followed by ``(chosen)``.
Product text never holds square brackets (they become parentheses). Every block has a
budget and is clipped deterministically by :func:`clip` (head kept, `` ...`` marks the cut),
so :func:`observation_budget` bounds every prompt; the generated catalog fits without any cut.

Example:
    >>> from mage_envs.tasks.webshop.pages import Browse
    >>> print(page_block(Browse(), None))
    Page: search. Type your query with search[...].
    >>> print(legal_block(["search[<your query>]"], None))
    Legal actions: search[<your query>]
    Answer with exactly one action inside tags, e.g. <action>search[red running shoes]</action> or <action>click[buy now]</action>.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...core.contract import clip_text
from ...core.parsing import answer_instruction
from .actions import MAX_QUERY_CHARS
from .catalog import Product
from .pages import (
    BACK_TO_SEARCH,
    BUY_NOW,
    DESCRIPTION,
    FEATURES,
    PREV_PAGE,
    REVIEWS,
    Browse,
    page_turns,
    required_product,
)
from .reward import RewardBreakdown

RULES = """You are shopping in WebShop, an online store. Find the product that the instruction describes and buy it with the options it asks for.
- search[query] searches the store, from any page.
- click[element] clicks an element shown in square brackets: a product id in the results, [next >] or [< prev] to turn result pages, an option value on a product page (choose one value per option, e.g. a size and a color), [description], [features] or [reviews] to read more, [< prev] to go back, [back to search], and [buy now] to buy the open product.
- Buying ends the episode. The reward (0 to 1) is the share of the instruction's attributes, options and price limit that the product you buy meets, times how well its product type matches; only a reward of 1 is a success.
- You have at most {max_steps} actions; if you buy nothing, the reward is 0."""

ANSWER_FORMAT = answer_instruction("search[red running shoes]", "click[buy now]")
INSTRUCTION_CHARS = 400
RESULT_TITLE_CHARS = 100
TITLE_CHARS = 200
DESCRIPTION_CHARS = 1000
FEATURE_CHARS = 150
MAX_FEATURES = 8
OPTION_LINE_CHARS = 300
PAGE_CHARS = 2400
HISTORY_ITEM_CHARS = 100
NOTICE_CHARS = 400
LEGAL_CHARS = 1200
#: The step line, the end-of-episode sentence, headings and line breaks.
FIXED_CHARS = 700


def rules(max_steps: int) -> str:
    return RULES.format(max_steps=max_steps)


def clip(text: str, budget: int) -> str:
    """``text`` clipped to ``budget`` characters, `` ...`` marking the cut (a bracketed
    marker would look like a clickable)."""
    return clip_text(text, budget, marker=" ...")


def plain(text: str, budget: int) -> str:
    """Text for a page: square brackets become parentheses, then clipped (``...`` marks
    the cut, so that no bracket but a clickable's is ever shown).

    Example:
        >>> plain("Mug [Set of Two], Blue", 18)
        'Mug (Set of Tw ...'
    """
    return clip(text.replace("[", "(").replace("]", ")"), budget)


def _buttons(names: Sequence[str]) -> str:
    return " ".join(f"[{name}]" for name in names)


def page_block(browse: Browse, product: Product | None, results: Sequence[Product] = ()) -> str:
    """The current page; ``product`` is the open product, ``results`` those shown."""
    if browse.page == "search":
        return "Page: search. Type your query with search[...]."
    if browse.page == "results":
        query = f'"{plain(browse.query, MAX_QUERY_CHARS)}"'
        buttons = _buttons([BACK_TO_SEARCH, *page_turns(browse)])
        if not browse.results:
            return f"Page: search results for {query}: no product matches.\n{buttons}"
        if not results:
            return f"Page: search results for {query}, page {browse.page_number}: no more products.\n{buttons}"
        header = f"Page: search results for {query}, page {browse.page_number} of {browse.page_count}"
        lines = [f"{header} ({len(browse.results)} results).", buttons]
        lines += [f"[{p.asin.lower()}] {plain(p.title, RESULT_TITLE_CHARS)} | {p.price_tag}" for p in results]
        return clip("\n".join(lines), PAGE_CHARS)
    product = required_product(product, browse.page)
    heading = f"product {product.asin.lower()}: {plain(product.title, TITLE_CHARS)}"
    if browse.page == DESCRIPTION:
        body = f"Page: description of {heading}\n{plain(product.description or '(none)', DESCRIPTION_CHARS)}"
    elif browse.page == FEATURES:
        features = [f"- {plain(f, FEATURE_CHARS)}" for f in product.features[:MAX_FEATURES]] or ["(none)"]
        body = "\n".join([f"Page: features of {heading}", *features])
    elif browse.page == REVIEWS:
        body = f"Page: reviews of {heading}\n(no reviews)"
    else:
        return clip(_item_page(browse, product, heading), PAGE_CHARS)
    return clip(f"{body}\n{_buttons([BACK_TO_SEARCH, PREV_PAGE])}", PAGE_CHARS)


def _item_page(browse: Browse, product: Product, heading: str) -> str:
    chosen = dict(browse.chosen)
    lines = [f"Page: {heading}", f"Price: {product.price_tag}"]
    for name, values in product.options:
        shown = [f"[{v}] (chosen)" if chosen.get(name) == v else f"[{v}]" for v in values]
        lines.append(clip(f"{plain(name, 40)}: {' '.join(shown)}", OPTION_LINE_CHARS))
    lines.append(_buttons([DESCRIPTION, FEATURES, REVIEWS, BUY_NOW, PREV_PAGE, BACK_TO_SEARCH]))
    return "\n".join(lines)


def history_block(history: Sequence[str], limit: int) -> str:
    """The last ``limit`` actions of this episode.

    Example:
        >>> history_block(["search[mug]", "click[b0aa]", "click[white]"], limit=2)
        'Your actions this episode (the last 2 of 3): click[b0aa] -> click[white]'
    """
    if not history:
        return "Your actions this episode: none yet."
    shown = [clip_text(action, HISTORY_ITEM_CHARS, marker="...]") for action in history[-limit:]]
    title = "Your actions this episode" + ("" if len(shown) == len(history) else f" (the last {len(shown)} of {len(history)})")
    return f"{title}: {' -> '.join(shown)}"


def legal_block(legal: Sequence[str], notice: str | None, note: str = "") -> str:
    """An optional retry notice, the legal actions (labelled or not) and the answer format,
    with an optional ``note`` after it."""
    parts = [f"Note: {clip(notice, NOTICE_CHARS)}"] if notice else []
    parts += [clip(f"Legal actions: {', '.join(legal)}", LEGAL_CHARS), f"{ANSWER_FORMAT} {note}".rstrip()]
    return "\n".join(parts)


def purchase_line(product: Product, chosen: dict[str, str], score: RewardBreakdown) -> str:
    """What the agent bought and what it scored, shown when the episode ends."""
    options = ", ".join(f"{name}: {value}" for name, value in chosen.items()) or "no option chosen"
    price = "within" if score.price_ok else "over"
    return clip(
        f"You bought {plain(product.title, 100)} ({plain(options, 100)}) for {product.price_tag}. "
        f"Reward {score.reward:.2f}: {score.attributes_matched} of {score.attributes_total} attributes, "
        f"{score.options_matched} of {score.options_total} options, price {price} the limit, "
        f"product type factor {score.r_type:g}. The episode is over.",
        FIXED_CHARS // 2,
    )


def observation_budget(max_steps: int, history_length: int) -> int:
    """An upper bound on the length of every prompt."""
    history = history_length * (HISTORY_ITEM_CHARS + 4)
    return (len(rules(max_steps)) + INSTRUCTION_CHARS + PAGE_CHARS + history + NOTICE_CHARS + LEGAL_CHARS
            + len(ANSWER_FORMAT) + FIXED_CHARS)
