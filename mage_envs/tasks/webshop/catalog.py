"""Products, instruction seeds and the generated catalog of the store.

:func:`generate_catalog` builds ``num_products`` products deterministically: product ``i``
has type ``i % 30`` of :data:`~mage_envs.tasks.webshop.vocabulary.TYPES` and draws its
brand, three to five attributes, a subset of each option's values and its price from
``random.Random("mage-webshop/product/<i>")`` (a string seed: the same on every platform
and hash seed), so a smaller catalog is a prefix of a larger one. Titles, descriptions and
features are written from the product's own attributes; the search document (what the
index reads) is WebShop's: title, description, first feature and options, in lower case.

Each product also gets one :class:`GoalSeed`, as WebShop's synthetic goals have one
instruction per product: one to three of its attributes, named in one of four templates.
The options and the price limit are drawn per instance (see
:mod:`~mage_envs.tasks.webshop.goals`).

Example:
    >>> catalog = generate_catalog(60)
    >>> product = catalog.products[1]
    >>> product.category, product.kind, product.query
    ('clothing', 'Hoodies', 'hoodies')
    >>> product.title
    'Urbanfox Zip Up Hoodie with Ribbed Cuffs'
    >>> catalog.seeds[1].text
    'i am looking for a hoodie that is ribbed cuffs, pullover style and zip up'
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from functools import cache, cached_property

from .vocabulary import TYPES, Category, Options, ProductType

#: Products in the default catalog (100 per product type).
DEFAULT_NUM_PRODUCTS = 3000

_TEMPLATES = (
    "i am looking for {phrase} that is {attributes}",
    "i need {phrase}, {attributes}",
    "find me {phrase} with these features: {attributes}",
    "i want to buy {phrase} which is {attributes}",
)


@dataclass(frozen=True)
class Product:
    """One product, with WebShop's fields.

    ``category`` is the top-level category, ``query`` the search that found it (WebShop's
    ``query``), ``product_category`` its department path (WebShop's ``product_category``
    split on ``›``); ``options`` maps each option
    name to its values, in order; ``price`` is the price paid, ``price_tag`` what the
    page shows; ``features`` are WebShop's bullet points.
    """

    asin: str
    title: str
    category: str
    query: str
    product_category: tuple[str, ...]
    attributes: tuple[str, ...]
    options: Options
    price: float
    price_tag: str
    description: str
    features: tuple[str, ...]

    @property
    def kind(self) -> str:
        """The finest category (the last element of ``product_category``), the OOD key."""
        return self.product_category[-1] if self.product_category else self.category

    @property
    def option_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.options)

    @cached_property
    def texts(self) -> tuple[str, str, str]:
        """Title, features and description in lower case, where WebShop's reward looks for
        attributes and options that are not in the product's own lists."""
        return self.title.lower(), " ".join(self.features).lower(), self.description.lower()

    def document(self) -> str:
        """The text the search index reads (WebShop's ``convert_product_file_format.py``).

        Example:
            >>> generate_catalog(30).products[29].document()[:48]
            'kindred farm gluten free dark chocolate with dai'
        """
        option_text = ", and ".join(f"{name}: {', '.join(values)}" for name, values in self.options)
        first_feature = self.features[0] if self.features else ""
        return f"{self.title} {self.description} {first_feature} {option_text}".lower()


@dataclass(frozen=True)
class GoalSeed:
    """An instruction about product ``asin`` before its options and price limit are drawn.

    ``options`` is ``None`` when one value per option is drawn per instance and named in
    the text (``"... with color: navy, and size: medium"``, WebShop's synthetic goals), or
    the values a human instruction asks for (already in ``text``).
    """

    asin: str
    text: str
    attributes: tuple[str, ...]
    options: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Catalog:
    """The products of a store and the seeds of its instructions; ``name`` keys the
    per-instance random streams, so two catalogs with one name must be the same."""

    name: str
    products: tuple[Product, ...]
    seeds: tuple[GoalSeed, ...]
    by_asin: dict[str, Product] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_asin = {product.asin: product for product in self.products}
        if len(by_asin) != len(self.products):
            raise ValueError(f"catalog {self.name!r} has duplicate product ids")
        missing = sorted({seed.asin for seed in self.seeds} - set(by_asin))
        if missing:
            raise ValueError(f"catalog {self.name!r} has instructions about unknown products: {missing[:5]}")
        object.__setattr__(self, "by_asin", by_asin)


@cache
def generate_catalog(num_products: int = DEFAULT_NUM_PRODUCTS) -> Catalog:
    """The generated catalog of ``num_products`` products (at least one per type, 30),
    built once per process."""
    if not isinstance(num_products, int) or isinstance(num_products, bool) or num_products < len(TYPES):
        raise ValueError(f"num_products must be an integer >= {len(TYPES)} (one product per type), got {num_products!r}")
    products, seeds = [], []
    for index in range(num_products):
        product, seed = _generate_product(index)
        products.append(product)
        seeds.append(seed)
    return Catalog(f"generated-{num_products}", tuple(products), tuple(seeds))


def _generate_product(index: int) -> tuple[Product, GoalSeed]:
    """Product ``index`` of every generated catalog, and its instruction seed."""
    category, kind = TYPES[index % len(TYPES)]
    rng = random.Random(f"mage-webshop/product/{index}")
    brand = rng.choice(category.brands)
    attributes = tuple(rng.sample(kind.attributes, rng.randint(3, min(5, len(kind.attributes)))))
    options = tuple((name, _subset(rng, values)) for name, values in kind.options)
    price = max(kind.price[0], round(rng.uniform(*kind.price))) - 0.01
    asin = "B0" + hashlib.sha256(f"mage-webshop/asin/{index}".encode()).hexdigest()[:8].upper()
    product = Product(
        asin=asin,
        title=_title(brand, kind, attributes),
        category=category.name,
        query=kind.plural,
        product_category=(*category.path, kind.plural.title()),
        attributes=attributes,
        options=options,
        price=price,
        price_tag=f"${price:.2f}",
        description=_description(rng, category, kind, brand, attributes),
        features=_features(rng, category, brand, attributes),
    )
    named = rng.sample(attributes, rng.randint(1, min(3, len(attributes))))
    listed = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    text = rng.choice(_TEMPLATES).format(phrase=kind.phrase, attributes=listed)
    return product, GoalSeed(asin, text, tuple(named))


def _subset(rng: random.Random, values: tuple[str, ...]) -> tuple[str, ...]:
    """Two or more of ``values``, in their vocabulary order."""
    chosen = set(rng.sample(values, rng.randint(2, len(values))))
    return tuple(value for value in values if value in chosen)


def _title(brand: str, kind: ProductType, attributes: tuple[str, ...]) -> str:
    return f"{brand} {attributes[0].title()} {kind.name.title()} with {attributes[1].title()}"


def _description(rng: random.Random, category: Category, kind: ProductType, brand: str, attributes: tuple[str, ...]) -> str:
    listed = ", ".join(attributes[:-1]) + " and " + attributes[-1]
    extra = rng.sample(category.sentences, 2)
    return f"This {kind.name} from {brand} is {listed}. {extra[0]} {extra[1]}"


def _features(rng: random.Random, category: Category, brand: str, attributes: tuple[str, ...]) -> tuple[str, ...]:
    bullets = [f"{attribute.upper()}: {rng.choice(category.bullets)}" for attribute in attributes]
    return (*bullets, f"BY {brand.upper()}: {rng.choice(category.bullets)}")
