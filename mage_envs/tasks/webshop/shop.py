"""A store: a catalog, its search index and its instructions, built once per process.

:func:`open_shop` is cached: the first call for a catalog generates (or loads) it and
builds the BM25 index; every later call, every env and every unpickled env shares it.
Searches are cached too (4,096 queries).

Example:
    >>> shop = open_shop(num_products=300)
    >>> open_shop(num_products=300) is shop
    True
    >>> asins = shop.search("hoodie with kangaroo pocket")
    >>> len(asins), shop.product(asins[0]).kind
    (23, 'Hoodies')
    >>> shop.goal("ood", 0).kind in shop.held_out
    True
"""

from __future__ import annotations

import hashlib
import random
from functools import cache, lru_cache

from .catalog import DEFAULT_NUM_PRODUCTS, Catalog, GoalSeed, Product, generate_catalog
from .goals import SPLITS, Goal, held_out_kinds, make_goal
from .loader import load_webshop_catalog
from .nouns import pipeline
from .search import SearchIndex

#: Queries whose results each store keeps.
SEARCH_CACHE_SIZE = 4096


class Shop:
    """The products of ``catalog``, searchable, and its instructions split train / OOD."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        pipeline()  # the type reward's tagger: fail here, not at the first purchase, without it
        self.index = SearchIndex([product.document() for product in catalog.products])
        self.held_out = held_out_kinds(catalog.products)
        self.pools: dict[str, tuple[GoalSeed, ...]] = {
            split: tuple(
                seed for seed in catalog.seeds
                if (catalog.by_asin[seed.asin].kind in self.held_out) == (split == "ood")
            )
            for split in SPLITS
        }
        self.search = lru_cache(maxsize=SEARCH_CACHE_SIZE)(self._search)

    def product(self, asin: str) -> Product:
        return self.catalog.by_asin[asin]

    def _search(self, query: str) -> tuple[str, ...]:
        """The ids of the products ``query`` finds, best first (at most 50)."""
        products = self.catalog.products
        return tuple(products[i].asin for i in self.index.search(query))

    def pool(self, split: str, part: str = "all") -> tuple[GoalSeed, ...]:
        """The instruction seeds of ``split``; ``part`` ``"train"`` / ``"eval"``: only those
        whose product's id has an even / odd SHA-256 (disjoint halves, no product in both).

        Example:
            >>> shop = open_shop(num_products=300)
            >>> train, held = shop.pool("train", "train"), shop.pool("train", "eval")
            >>> len(train) + len(held) == len(shop.pool("train")), {s.asin for s in train} & {s.asin for s in held}
            (True, set())
        """
        seeds = self.pools[split]
        if part == "all":
            return seeds
        return tuple(seed for seed in seeds if product_half(seed.asin) == part)

    def goal(self, split: str, instance: int, part: str = "all") -> Goal:
        """The goal of ``instance`` in ``split`` (and ``part``, see :meth:`pool`): a seed of
        that pool and its draws, all from ``random.Random("mage-webshop/<catalog>/<split>/<instance>")``."""
        pool = self.pool(split, part)
        if not pool:
            raise ValueError(f"catalog {self.catalog.name!r} has no instructions for split {split!r} ({part})")
        rng = random.Random(f"mage-webshop/{self.catalog.name}/{split}/{instance}")
        seed = pool[rng.randrange(len(pool))]
        return make_goal(seed, self.product(seed.asin), rng)


def product_half(asin: str) -> str:
    """``"train"`` or ``"eval"``: the half of the instructions a product's id falls in
    (the parity of its SHA-256).

    Example:
        >>> product_half("B000000001") in ("train", "eval")
        True
    """
    return "eval" if int(hashlib.sha256(asin.encode()).hexdigest(), 16) % 2 else "train"


@cache
def open_shop(catalog_path: str | None = None, num_products: int = DEFAULT_NUM_PRODUCTS, human_goals: bool = True) -> Shop:
    """The store of WebShop's files at ``catalog_path`` (with human or synthetic goals), or
    of the generated catalog of ``num_products`` products when it is ``None``."""
    if catalog_path is None:
        return Shop(generate_catalog(num_products))
    return Shop(load_webshop_catalog(catalog_path, human_goals=human_goals))
