"""WebShop's reward for buying a product with some options, against a goal.

As ``web_agent_site/engine/goal.py::get_reward`` (the same numbers; ``tests/test_webshop.py``
pins cases computed with the original):

    r = r_type * (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[y_price <= u_price])
               / (|U_att| + |U_opt| + 1)

* **attributes** (``U_att``, the goal's): one counts when it fuzzy-matches
  (``token_set_ratio > 85``) an attribute of the product, or is written in its title,
  features or description (lower case);
* **options**: each goal option counts once, when some chosen value fuzzy-matches it
  (both colour-normalised with ``normalize_color``). Sizes are fuzzy too ("large"
  satisfies "x-large"), and an option is never credited for being written in the
  product's text. A goal whose options were drawn per instance (WebShop's synthetic
  goals, the generated store's) compares each chosen value with the ``(name, value)``
  pair, as WebShop does with ``goal_options.items()``; a human goal with its values;
* **price**: the price paid is at most the goal's limit;
* **r_type**: WebShop's type factor. ``title_score`` is the share of the goal product's
  title nouns (spaCy's tags, :mod:`~mage_envs.tasks.webshop.nouns`; repeats count in
  the denominator) found among the bought product's title nouns; then r_type = 1, or 0.5
  when neither the search query (``query``) nor two elements of the category path
  (``product_category``) nor more than 0.2 of the nouns match, 0.1 when
  ``title_score < 0.1`` and 0 when it is 0. A product whose title shares a brand or a
  word tagged as a noun with the goal's earns partial credit.

``success`` is ``reward == 1.0``.

Example:
    >>> from mage_envs.tasks.webshop.catalog import generate_catalog
    >>> from mage_envs.tasks.webshop.goals import make_goal
    >>> import random
    >>> catalog = generate_catalog(60)
    >>> seed = catalog.seeds[1]
    >>> goal = make_goal(seed, catalog.by_asin[seed.asin], random.Random(0))
    >>> product = catalog.by_asin[goal.asin]
    >>> webshop_reward(product, goal, dict(zip(product.option_names, goal.options))).reward
    1.0
    >>> score = webshop_reward(product, goal, {})      # no option chosen: 4 of 6
    >>> round(score.reward, 4), score.options_matched, score.attributes_matched
    (0.6667, 0, 3)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .catalog import Product
from .fuzzy import COLOR_SET, fuzzy_match, normalize_color
from .goals import Goal
from .nouns import title_nouns


@dataclass(frozen=True)
class RewardBreakdown:
    """The reward of a purchase and its parts (what ``info["purchase"]`` reports)."""

    reward: float
    r_type: float
    query_match: bool
    category_match: bool
    title_score: float
    attributes_matched: int
    attributes_total: int
    options_matched: int
    options_total: int
    price_ok: bool

    def as_dict(self) -> dict[str, float | int | bool]:
        return dict(self.__dict__)


def type_reward(product: Product, goal: Goal) -> tuple[float, bool, bool, float]:
    """``(r_type, query_match, category_match, title_score)`` of buying ``product``.

    Example (a same-category product whose title shares no noun with the goal's):
        >>> from mage_envs.tasks.webshop.catalog import generate_catalog
        >>> from mage_envs.tasks.webshop.goals import make_goal
        >>> import random
        >>> catalog = generate_catalog(60)
        >>> hoodie_goal = make_goal(catalog.seeds[1], catalog.products[1], random.Random(0))
        >>> type_reward(catalog.products[2], hoodie_goal)     # jeans
        (0.0, False, True, 0.0)
    """
    query_match = product.query == goal.query
    category_match = len(set(product.product_category) & set(goal.product_category)) >= 2
    desired = title_nouns(goal.name)
    bought = set(title_nouns(product.title))
    title_score = len(bought & set(desired)) / len(desired) if desired else 0.2
    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def _written_in(text: str, product: Product) -> bool:
    return any(text in field for field in product.texts)


def attribute_matches(product: Product, goal: Goal) -> int:
    """How many of the goal's attributes ``product`` has (fuzzily, or written in its text)."""
    return sum(
        any(fuzzy_match(have, wanted) for have in product.attributes) or _written_in(wanted, product)
        for wanted in goal.attributes
    )


def goal_option_keys(goal: Goal) -> tuple[object, ...]:
    """What each goal option is compared with: its colour-normalised value, or for a goal
    whose options were drawn per instance the ``(name, value)`` pair, which WebShop's
    ``normalize_color`` turns into a colour only when name or value *is* one.

    Example:
        >>> from mage_envs.tasks.webshop.goals import Goal
        >>> goal = Goal("B0", "", (), ("navy blue", "navy"), 40.0, "", (), "", "", ("color", "color"))
        >>> goal_option_keys(goal), goal_option_keys(Goal(**{**goal.__dict__, "option_names": ()}))
        ((('color', 'navy blue'), 'navy'), ('blue', 'navy'))
    """
    if not goal.option_names:
        return tuple(normalize_color(value) for value in goal.options)
    pairs = zip(goal.option_names, goal.options)
    return tuple(next((color for color in COLOR_SET if color in pair), pair) for pair in pairs)


def option_matches(goal: Goal, chosen: Mapping[str, str]) -> int:
    """How many goal options some chosen value (name -> value) fuzzy-matches, each once."""
    values = [normalize_color(value) for value in chosen.values()]
    return sum(any(fuzzy_match(value, key) for value in values) for key in goal_option_keys(goal))


def webshop_reward(product: Product, goal: Goal, chosen: Mapping[str, str]) -> RewardBreakdown:
    """The reward of buying ``product`` with the ``chosen`` options (name -> value)."""
    r_type, query_match, category_match, title_score = type_reward(product, goal)
    attributes = attribute_matches(product, goal)
    options = option_matches(goal, chosen)
    price_ok = product.price <= goal.price_upper
    total = len(goal.attributes) + len(goal.options) + 1
    reward = r_type * (attributes + options + int(price_ok)) / total
    return RewardBreakdown(
        reward=reward,
        r_type=r_type,
        query_match=query_match,
        category_match=category_match,
        title_score=title_score,
        attributes_matched=attributes,
        attributes_total=len(goal.attributes),
        options_matched=options,
        options_total=len(goal.options),
        price_ok=price_ok,
    )
