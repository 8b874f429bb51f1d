"""The string matching of WebShop's reward, without its dependencies.

WebShop (``web_agent_site/engine/goal.py``) compares attributes and options with
``thefuzz.fuzz.token_set_ratio(a, b) > 85`` and maps option values to a base colour with
``normalize_color``. :func:`token_set_ratio` reimplements the former as thefuzz computes
it (``full_process`` then rapidfuzz's token-set ratio over the Indel distance, rounded to
an int); :func:`normalize_color` and :data:`COLOR_SET` are WebShop's own.

Example:
    >>> token_set_ratio("Relaxed Fit", "relaxed fit")
    100
    >>> token_set_ratio("100% cotton", "cotton")      # one token set holds the other
    100
    >>> token_set_ratio("xl", "xxl"), token_set_ratio("long sleeve", "short sleeve")
    (80, 71)
    >>> normalize_color("navy blue"), normalize_color("hazelnut")
    ('blue', 'hazelnut')
"""

from __future__ import annotations

import re
from functools import lru_cache

#: WebShop's threshold: two strings match when their token-set ratio is above it.
MATCH_THRESHOLD = 85

#: WebShop's base colours (``web_agent_site/engine/normalize.py``), in its order.
COLOR_SET: tuple[str, ...] = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue", "blush",
    "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "cheetah",
    "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper", "coral", "cranberry", "cream", "crystal",
    "dark", "denim", "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite",
    "grass", "gray", "green", "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon",
    "leopard", "light", "lilac", "lime", "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha",
    "multicolor", "mushroom", "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink",
    "plum", "purple", "rainbow", "red", "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver",
    "skull", "slate", "steel", "stone", "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise",
    "violet", "walnut", "wheat", "white", "wine", "yellow",
)

_NON_ALPHANUMERIC = re.compile(r"[^a-z0-9]")


def normalize_color(value: str) -> str:
    """The first colour of :data:`COLOR_SET` found inside ``value``, else ``value`` itself.

    Example:
        >>> normalize_color("steelivy fuchsia")
        'fuchsia'
    """
    for color in COLOR_SET:
        if color in value:
            return color
    return value


def full_process(text: str) -> str:
    """thefuzz's ``full_process``: ASCII only, lower case, non-alphanumerics to spaces.

    Example:
        >>> full_process("  Pack-of-12 (XL) ")
        'pack of 12  xl'
    """
    ascii_text = text.encode("ascii", "ignore").decode().lower()
    return _NON_ALPHANUMERIC.sub(" ", ascii_text).strip()


def indel_distance(a: str, b: str) -> int:
    """Insertions plus deletions that turn ``a`` into ``b``: ``len(a) + len(b) - 2 * LCS``.

    Example:
        >>> indel_distance("kitten", "sitting")
        5
    """
    if len(a) < len(b):
        a, b = b, a
    previous = [0] * (len(b) + 1)
    for char in a:
        current = [0]
        for j, other in enumerate(b):
            current.append(previous[j] + 1 if char == other else max(previous[j + 1], current[j]))
        previous = current
    return len(a) + len(b) - 2 * previous[-1]


def _ratio(distance: int, total: int) -> float:
    return 100.0 if total == 0 else 100.0 * (1.0 - distance / total)


@lru_cache(maxsize=65536)
def token_set_ratio(a: str, b: str) -> int:
    """``thefuzz.fuzz.token_set_ratio(a, b)``: 0..100, 100 when one token set holds the other."""
    tokens_a, tokens_b = set(full_process(a).split()), set(full_process(b).split())
    if not tokens_a or not tokens_b:
        return 0
    intersection = tokens_a & tokens_b
    only_a, only_b = tokens_a - tokens_b, tokens_b - tokens_a
    if intersection and (not only_a or not only_b):
        return 100
    joined_a, joined_b = " ".join(sorted(only_a)), " ".join(sorted(only_b))
    common = len(" ".join(sorted(intersection)))
    gap = 1 if common else 0
    length_a, length_b = common + gap + len(joined_a), common + gap + len(joined_b)
    best = _ratio(indel_distance(joined_a, joined_b), length_a + length_b)
    if common:
        best = max(best, _ratio(gap + len(joined_a), common + length_a), _ratio(gap + len(joined_b), common + length_b))
    return round(best)


def fuzzy_match(a: str, b: str) -> bool:
    """WebShop's fuzzy match: ``token_set_ratio(a, b) > 85``.

    Example:
        >>> fuzzy_match("machine washable", "Machine-Washable"), fuzzy_match("3 ft", "6 ft")
        (True, False)
    """
    return token_set_ratio(a, b) > MATCH_THRESHOLD
