"""WebShop's reward for buying a product with some options, against a goal.

As ``web_agent_site/engine/goal.py::get_reward``:

    r = r_type * (|U_att ∩ Y_att| + |U_opt ∩ Y_opt| + 1[y_price <= u_price])
               / (|U_att| + |U_opt| + 1)

* **attributes** (``U_att``, the goal's): one counts when it fuzzy-matches
  (``token_set_ratio > 85``) an attribute of the product, or is written in its title,
  features or description (lower case);
* **options**: each chosen value (colour-normalised with ``normalize_color``) counts when
  it matches a goal option — exactly for an option named ``size``, fuzzily otherwise — or
  is written in the title, features or description. WebShop counts matched *chosen*
  values; here the count is capped at ``|U_opt|`` so that r never exceeds 1;
* **price**: the price paid is at most the goal's limit;
* **r_type**: WebShop's type factor. ``title_score`` is the share of the goal product's
  title nouns found among the bought product's title nouns; then r_type = 1, or 0.5 when
  neither the search query (``query``) nor two elements of the category path
  (``product_category``) nor more than 0.2 of the nouns match, 0.1 when
  ``title_score < 0.1`` and 0 when it is 0. WebShop tags nouns with spaCy; here a
  product's nouns are its ``type_words`` (see the catalog and the loader).

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
from .fuzzy import fuzzy_match, normalize_color
from .goals import Goal

#: Options compared exactly, not fuzzily (WebShop's ``EXACT_MATCH_OPTS``).
EXACT_MATCH_OPTIONS = ("size",)


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
    desired = set(goal.type_words)
    title_score = len(set(product.type_words) & desired) / len(desired) if desired else 0.2
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


def option_matches(product: Product, goal: Goal, chosen: Mapping[str, str]) -> int:
    """How many chosen option values match a goal option, capped at the goal's count."""
    wanted = [normalize_color(value) for value in goal.options]
    matched = 0
    for name, value in chosen.items():
        value = normalize_color(value)
        if name.lower() in EXACT_MATCH_OPTIONS:
            hit = value in wanted
        else:
            hit = any(fuzzy_match(option, value) for option in wanted)
        matched += hit or _written_in(value, product)
    return min(matched, len(goal.options))


def webshop_reward(product: Product, goal: Goal, chosen: Mapping[str, str]) -> RewardBreakdown:
    """The reward of buying ``product`` with the ``chosen`` options (name -> value)."""
    r_type, query_match, category_match, title_score = type_reward(product, goal)
    attributes = attribute_matches(product, goal)
    options = option_matches(product, goal, chosen)
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
