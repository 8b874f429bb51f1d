"""Instructions: a goal per instance, and the split of product kinds into train and OOD.

A :class:`Goal` is what WebShop's ``get_synthetic_goals`` / ``get_human_goals`` build: the
target product, the instruction text, the attributes and option values it asks for, and
the price limit. :func:`make_goal` turns a
:class:`~mage_envs.tasks.webshop.catalog.GoalSeed` into one, drawing what the seed leaves
open from the instance's generator:

* options: one value per option of the product, named as ``"with color: navy, and
  size: medium"`` (a human seed's options are already in its text);
* the price limit, as WebShop: the multiples of $10 above the price, the first four of
  them, two drawn and the larger kept (``", and price lower than 50.00 dollars"``); a
  product above $980 gets no limit (1,000,000).

**OOD split**: :func:`held_out_kinds` holds out, in every top-level category with two
kinds or more, a fifth of its kinds (at least one), chosen by a hash of their names;
``split="train"`` instructions only name products of the other kinds, ``split="ood"``
only products of the held-out ones. The store itself (search, pages) holds every product.

Example:
    >>> import random
    >>> from mage_envs.tasks.webshop.catalog import generate_catalog
    >>> catalog = generate_catalog(60)
    >>> goal = make_goal(catalog.seeds[1], catalog.by_asin[catalog.seeds[1].asin], random.Random(0))
    >>> goal.instruction
    'i am looking for a hoodie that is ribbed cuffs, pullover style and zip up with color: beige, and size: x-large, and price lower than 50.00 dollars'
    >>> goal.attributes, goal.options, goal.price_upper
    (('ribbed cuffs', 'pullover style', 'zip up'), ('beige', 'x-large'), 50.0)
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from .catalog import GoalSeed, Product

#: WebShop's price grid: $10, $20, ... $990.
PRICE_RANGE: tuple[float, ...] = tuple(10.0 * i for i in range(1, 100))
#: The limit of a product too dear for the grid (WebShop's).
NO_PRICE_LIMIT = 1_000_000.0
#: Share of each category's kinds held out for ``split="ood"``.
OOD_FRACTION = 0.2
SPLITS = ("train", "ood")


@dataclass(frozen=True)
class Goal:
    """What to buy: the target product's id and type fields (WebShop's ``query``,
    ``product_category`` and ``name``, the product's title), the ``attributes`` and option
    values asked for, and the price limit. ``option_names`` names the option of each value
    when they were drawn per instance (WebShop's synthetic goals, whose ``goal_options`` is
    a dict); it is empty for a human instruction's values (a list in WebShop)."""

    asin: str
    instruction: str
    attributes: tuple[str, ...]
    options: tuple[str, ...]
    price_upper: float
    query: str
    product_category: tuple[str, ...]
    name: str
    kind: str
    option_names: tuple[str, ...] = ()


def price_limit(price: float, rng: random.Random) -> tuple[float, str]:
    """WebShop's price limit for a product of ``price`` and the clause naming it.

    Example:
        >>> price_limit(34.99, random.Random(1))
        (60.0, ', and price lower than 60.00 dollars')
        >>> price_limit(995.0, random.Random(1))
        (1000000.0, '')
    """
    grid = [p for p in PRICE_RANGE if p > price][:4]
    if len(grid) < 2:
        return NO_PRICE_LIMIT, ""
    _, upper = sorted(rng.sample(grid, 2))
    return upper, f", and price lower than {upper:.2f} dollars"


def make_goal(seed: GoalSeed, product: Product, rng: random.Random) -> Goal:
    """The goal of ``seed`` (about ``product``), drawing its open parts from ``rng``."""
    if seed.options is None:
        chosen = [(name, rng.choice(values)) for name, values in product.options]
        options = tuple(value for _, value in chosen)
        names = tuple(name for name, _ in chosen)
        option_text = ", and ".join(f"{name}: {value}" for name, value in chosen)
        text = f"{seed.text} with {option_text}" if option_text else seed.text
    else:
        options, text, names = seed.options, seed.text, ()
    upper, price_text = price_limit(product.price, rng)
    return Goal(
        asin=product.asin,
        instruction=f"{text}{price_text}",
        attributes=seed.attributes,
        options=options,
        price_upper=upper,
        query=product.query,
        product_category=product.product_category,
        name=product.title,
        kind=product.kind,
        option_names=names,
    )


def held_out_kinds(products: Iterable[Product], fraction: float = OOD_FRACTION) -> frozenset[str]:
    """The kinds held out of training instructions: per category with >= 2 kinds, the
    ``ceil(fraction * n)`` kinds whose SHA-256 of the name sorts first.

    Example:
        >>> from mage_envs.tasks.webshop.catalog import generate_catalog
        >>> sorted(held_out_kinds(generate_catalog(30).products))
        ['Bath Towels', 'Body Lotions', 'Coffee Beans', 'Hoodies', 'Sandals', 'Wireless Earbuds']
    """
    kinds: dict[str, set[str]] = defaultdict(set)
    for product in products:
        kinds[product.category].add(product.kind)
    held_out: set[str] = set()
    for names in kinds.values():
        if len(names) >= 2:
            ranked = sorted(names, key=lambda name: hashlib.sha256(name.encode()).hexdigest())
            held_out.update(ranked[: math.ceil(fraction * len(names))])
    return frozenset(held_out)
