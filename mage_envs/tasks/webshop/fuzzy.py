"""The string matching of WebShop's reward: thefuzz's rule, computed by rapidfuzz.

WebShop (``web_agent_site/engine/goal.py``) compares attributes and options with
``thefuzz.fuzz.token_set_ratio(a, b) > 85`` and maps option values to a base colour with
``normalize_color``. thefuzz's ``token_set_ratio`` is rapidfuzz's (a C++ library, the
``webshop`` extra) on both strings after ``full_process`` (``str()``, characters 128-255
dropped, rapidfuzz's ``default_process``), rounded to an int; :func:`token_set_ratio` is
that call. :func:`normalize_color` and :data:`COLOR_SET` are WebShop's own.

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

from functools import lru_cache

from rapidfuzz import fuzz as _rapidfuzz
from rapidfuzz.utils import default_process as _default_process

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

_HIGH_LATIN1 = {code: None for code in range(128, 256)}


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


def full_process(text: object) -> str:
    """thefuzz's ``full_process(text, force_ascii=True)``: ``str(text)`` without the
    characters 128-255, then lower case, non-alphanumerics to spaces, stripped.

    Example:
        >>> full_process("  Pack-of-12 (XL) ")
        'pack of 12  xl'
    """
    return _default_process(str(text).translate(_HIGH_LATIN1))


@lru_cache(maxsize=65536)
def token_set_ratio(a: object, b: object) -> int:
    """``thefuzz.fuzz.token_set_ratio(a, b)``: 0..100, 100 when one token set holds the other."""
    return int(round(_rapidfuzz.token_set_ratio(full_process(a), full_process(b))))


def fuzzy_match(a: object, b: object) -> bool:
    """WebShop's fuzzy match: ``token_set_ratio(a, b) > 85`` (``str()`` of each, as thefuzz:
    a goal option may be compared as a ``(name, value)`` pair).

    Example:
        >>> fuzzy_match("machine washable", "Machine-Washable"), fuzzy_match("3 ft", "6 ft")
        (True, False)
    """
    return token_set_ratio(a, b) > MATCH_THRESHOLD
