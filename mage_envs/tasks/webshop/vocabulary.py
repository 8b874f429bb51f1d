"""The vocabulary of the generated store: six categories, thirty product types, their
attributes, options, brands, price ranges and the filler text of descriptions.

The words are chosen so that WebShop's reward reads them exactly (``tests/test_webshop.py``
checks every product of the default catalog):

* within a product type, no two attributes match under WebShop's fuzzy rule
  (``token_set_ratio > 85``), and no attribute is written in the text of a product that
  lacks it, so an attribute counts if and only if the product has it;
* within an option, no two values match, except sizes ("large" satisfies "x-large" in
  WebShop's fuzzy rule, as in WebShop's own stores), and no option value appears in a
  product's title, features or description;
* texts hold no digits (shoe sizes are numbers) and no colour or size words.

Example:
    >>> [category.name for category in CATEGORIES]
    ['clothing', 'shoes', 'electronics', 'home', 'beauty', 'grocery']
    >>> sum(len(category.types) for category in CATEGORIES)
    30
    >>> CATEGORIES[0].types[1].name, CATEGORIES[0].types[1].options[1]
    ('hoodie', ('size', ('x-small', 'small', 'medium', 'large', 'x-large', 'xx-large')))
"""

from __future__ import annotations

from dataclasses import dataclass

Options = tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class ProductType:
    """A kind of product: ``name`` in titles, ``plural`` as its search query and leaf
    category, ``phrase`` as an instruction names it, and what its products may have."""

    name: str
    plural: str
    phrase: str
    attributes: tuple[str, ...]
    options: Options
    price: tuple[float, float]


@dataclass(frozen=True)
class Category:
    """A top-level category: its department path, brands, product types and filler text."""

    name: str
    path: tuple[str, ...]
    brands: tuple[str, ...]
    types: tuple[ProductType, ...]
    sentences: tuple[str, ...]
    bullets: tuple[str, ...]


_CLOTHES_COLORS = ("black", "white", "navy", "grey", "olive", "burgundy", "khaki", "beige", "charcoal", "teal")
_CLOTHES_SIZES = ("x-small", "small", "medium", "large", "x-large", "xx-large")
_SHOE_COLORS = ("black", "white", "grey", "navy", "brown", "beige", "olive", "pink")
_SHOE_SIZES = tuple(str(size) for size in range(6, 14))
_TECH_COLORS = ("black", "white", "silver", "grey", "navy", "pink", "purple", "teal")
_HOME_COLORS = ("white", "grey", "navy", "beige", "teal", "charcoal", "ivory", "olive")
_HOME_SIZES = ("small", "medium", "large")
_SHADES = ("coral", "nude", "plum", "mauve", "burgundy", "pink", "navy", "teal")
_SCENTS = ("lavender", "coconut", "citrus", "eucalyptus", "vanilla", "unscented")
_BOTTLES = ("8 oz", "16 oz", "32 oz")


def _clothes(name: str, plural: str, phrase: str, attributes: tuple[str, ...], price: tuple[float, float]) -> ProductType:
    return ProductType(name, plural, phrase, attributes, (("color", _CLOTHES_COLORS), ("size", _CLOTHES_SIZES)), price)


def _shoes(name: str, plural: str, attributes: tuple[str, ...], price: tuple[float, float]) -> ProductType:
    return ProductType(name, plural, f"a pair of {plural}", attributes, (("color", _SHOE_COLORS), ("size", _SHOE_SIZES)), price)


def _home(name: str, plural: str, attributes: tuple[str, ...], price: tuple[float, float]) -> ProductType:
    return ProductType(name, plural, f"a {name}", attributes, (("color", _HOME_COLORS), ("size", _HOME_SIZES)), price)


CATEGORIES: tuple[Category, ...] = (
    Category(
        "clothing",
        ("Clothing, Shoes & Jewelry", "Clothing"),
        ("Northwind", "Alder & Pine", "Coastline", "Urbanfox", "Kestrel", "Mapleton"),
        (
            _clothes("t-shirt", "t-shirts", "a t-shirt",
                     ("short sleeve", "long sleeve", "crew neck", "v neck", "organic cotton", "moisture wicking",
                      "relaxed fit", "slim fit", "machine washable", "tagless collar"), (12, 35)),
            _clothes("hoodie", "hoodies", "a hoodie",
                     ("pullover style", "zip up", "fleece lined", "kangaroo pocket", "relaxed fit", "machine washable",
                      "drawstring hood", "organic cotton", "ribbed cuffs"), (25, 70)),
            _clothes("jeans", "jeans", "a pair of jeans",
                     ("slim fit", "straight leg", "high waist", "stretch denim", "button fly", "relaxed fit",
                      "machine washable", "distressed look"), (30, 90)),
            _clothes("dress", "dresses", "a dress",
                     ("knee length", "midi length", "short sleeve", "sleeveless", "v neck", "side pockets",
                      "floral print", "wrap style", "machine washable"), (25, 95)),
            _clothes("jacket", "jackets", "a jacket",
                     ("water resistant", "windproof shell", "insulated lining", "zip pockets", "packable design",
                      "lightweight", "quilted pattern", "fleece lined"), (45, 160)),
        ),
        ("A versatile piece for everyday wear.", "Stitched with care for a comfortable feel.",
         "Pairs well with the rest of your wardrobe.", "Holds its shape through many washes."),
        ("comfortable all day", "easy to care for", "made to last"),
    ),
    Category(
        "shoes",
        ("Clothing, Shoes & Jewelry", "Shoes"),
        ("Stridewell", "Trailmark", "Peakstep", "Cobbleton", "Lumen", "Fieldhouse"),
        (
            _shoes("running shoes", "running shoes",
                   ("arch support", "breathable mesh", "cushioned sole", "non slip", "lightweight", "memory foam",
                    "reflective details", "wide toe box", "lace up"), (45, 140)),
            _shoes("sneakers", "sneakers",
                   ("canvas upper", "rubber sole", "lace up", "padded collar", "breathable lining", "lightweight",
                    "memory foam", "classic style"), (35, 110)),
            _shoes("boots", "boots",
                   ("waterproof", "ankle height", "lug sole", "insulated lining", "pull tabs", "leather upper",
                    "side zipper", "slip resistant"), (55, 180)),
            _shoes("sandals", "sandals",
                   ("adjustable straps", "open toe", "arch support", "cushioned footbed", "quick drying",
                    "water friendly", "lightweight"), (18, 60)),
            _shoes("slippers", "slippers",
                   ("memory foam", "plush lining", "non slip", "indoor outdoor", "machine washable",
                    "faux fur trim", "open back"), (15, 45)),
        ),
        ("Built for comfort from morning to night.", "A dependable pair for busy days.",
         "Crafted with attention to every detail.", "Easy to slip on and go."),
        ("comfortable all day", "built to last", "true to fit"),
    ),
    Category(
        "electronics",
        ("Electronics", "Accessories"),
        ("Voltway", "Ampere Labs", "Nexcell", "Corelink", "Brightwire", "Zentek"),
        (
            ProductType("phone case", "phone cases", "a phone case",
                        ("shockproof", "slim profile", "raised edges", "wireless charging compatible", "clear back",
                         "grip texture", "scratch resistant"),
                        (("color", _TECH_COLORS), ("model", ("iphone", "galaxy", "pixel"))), (9, 35)),
            ProductType("charging cable", "charging cables", "a charging cable",
                        ("fast charging", "braided nylon", "data transfer", "tangle free", "reinforced connectors",
                         "right angle plug"),
                        (("color", _TECH_COLORS), ("length", ("3 ft", "6 ft", "10 ft"))), (7, 25)),
            ProductType("wireless earbuds", "wireless earbuds", "a pair of wireless earbuds",
                        ("noise cancelling", "water resistant", "long battery life", "touch controls",
                         "charging case", "built in microphone", "secure fit"),
                        (("color", _TECH_COLORS),), (20, 120)),
            ProductType("power bank", "power banks", "a power bank",
                        ("fast charging", "dual ports", "led display", "compact design", "pass through charging",
                         "airline approved"),
                        (("color", _TECH_COLORS), ("capacity", ("5000mah", "10000mah", "26800mah"))), (15, 60)),
            ProductType("laptop sleeve", "laptop sleeves", "a laptop sleeve",
                        ("water resistant", "padded interior", "front pocket", "slim profile", "zipper closure",
                         "shock absorbing"),
                        (("color", _TECH_COLORS), ("size", ("13 inch", "14 inch", "15 inch", "16 inch"))), (12, 40)),
        ),
        ("Works with most popular devices.", "Built to last through daily use.",
         "Backed by a friendly support team.", "Packed in recyclable packaging."),
        ("tested for daily use", "easy to set up", "travel friendly"),
    ),
    Category(
        "home",
        ("Home & Kitchen", "Home Decor"),
        ("Hearthstone", "Willowmere", "Nestwell", "Oakhaven", "Brightnook", "Casabel"),
        (
            _home("coffee mug", "coffee mugs",
                  ("dishwasher safe", "microwave safe", "ceramic body", "comfortable handle", "lead free",
                   "stackable design", "double walled"), (8, 28)),
            _home("bath towel", "bath towels",
                  ("highly absorbent", "quick drying", "turkish cotton", "machine washable", "fade resistant",
                   "lint free", "plush texture"), (10, 40)),
            _home("throw pillow", "throw pillows",
                  ("removable cover", "hidden zipper", "hypoallergenic fill", "machine washable", "soft velvet",
                   "decorative stitching"), (12, 45)),
            _home("storage basket", "storage baskets",
                  ("woven design", "sturdy handles", "collapsible frame", "stackable design", "lined interior"),
                  (15, 50)),
            _home("table lamp", "table lamps",
                  ("dimmable light", "touch control", "energy efficient", "linen shade", "usb port", "warm glow"),
                  (20, 90)),
        ),
        ("Adds a cozy touch to any room.", "A practical choice for busy households.",
         "Easy to clean and care for.", "Makes a thoughtful gift."),
        ("easy to care for", "made to last", "fits any decor"),
    ),
    Category(
        "beauty",
        ("Beauty & Personal Care", "Skin & Hair Care"),
        ("Verdana", "Glowhaus", "Petalwise", "Purely Kind", "Dewberry", "Solenne"),
        (
            ProductType("shampoo", "shampoos", "a shampoo",
                        ("sulfate free", "paraben free", "color safe", "cruelty free", "volumizing formula",
                         "natural ingredients"),
                        (("scent", _SCENTS), ("size", _BOTTLES)), (6, 25)),
            ProductType("face moisturizer", "face moisturizers", "a face moisturizer",
                        ("fragrance free", "hyaluronic acid", "spf protection", "non greasy", "dermatologist tested",
                         "vegan formula", "oil free"),
                        (("skin type", ("normal", "dry", "oily", "sensitive")), ("size", ("1 oz", "2 oz", "4 oz"))),
                        (10, 45)),
            ProductType("lipstick", "lipsticks", "a lipstick",
                        ("long lasting", "matte finish", "cruelty free", "moisturizing formula", "vegan formula",
                         "smudge proof"),
                        (("color", _SHADES),), (6, 30)),
            ProductType("body lotion", "body lotions", "a body lotion",
                        ("fast absorbing", "shea butter", "non greasy", "paraben free", "natural ingredients",
                         "dermatologist tested"),
                        (("scent", _SCENTS), ("size", _BOTTLES)), (6, 25)),
            ProductType("nail polish", "nail polishes", "a nail polish",
                        ("quick drying", "chip resistant", "long lasting", "high shine", "cruelty free",
                         "vegan formula"),
                        (("color", _SHADES),), (4, 15)),
        ),
        ("Gentle enough for everyday use.", "Part of a simple self care routine.",
         "Formulated with care.", "Loved by customers for its feel."),
        ("gentle on skin", "easy to apply", "travel friendly"),
    ),
    Category(
        "grocery",
        ("Grocery & Gourmet Food", "Pantry"),
        ("Harvest Lane", "Meadowfield", "Sunhaven", "Kindred Farm", "Bramble & Co", "Tidewater"),
        (
            ProductType("coffee beans", "coffee beans", "some coffee beans",
                        ("whole bean", "medium roast", "dark roast", "single origin", "fair trade", "low acid",
                         "organic certified"),
                        (("flavor", ("original", "hazelnut", "vanilla", "mocha", "caramel")),
                         ("size", ("12 oz", "2 lb", "5 lb"))), (8, 30)),
            ProductType("green tea", "green teas", "some green tea",
                        ("organic certified", "loose leaf", "individually wrapped", "non gmo", "decaffeinated",
                         "kosher certified"),
                        (("flavor", ("original", "jasmine", "lemon", "honey", "ginger")),
                         ("size", ("20 count", "50 count", "100 count"))), (4, 18)),
            ProductType("protein bar", "protein bars", "a box of protein bars",
                        ("high protein", "gluten free", "low sugar", "non gmo", "plant based", "keto friendly"),
                        (("flavor", ("chocolate", "peanut butter", "cookie dough", "vanilla")),
                         ("size", ("12 count", "24 count"))), (12, 40)),
            ProductType("olive oil", "olive oils", "a bottle of olive oil",
                        ("extra virgin", "cold pressed", "non gmo", "glass bottle", "single origin", "kosher certified"),
                        (("flavor", ("classic", "garlic infused", "lemon infused", "basil infused")),
                         ("size", ("16 oz", "32 oz", "1 gallon"))), (9, 35)),
            ProductType("dark chocolate", "dark chocolates", "some dark chocolate",
                        ("fair trade", "dairy free", "organic certified", "low sugar", "gluten free",
                         "ethically sourced"),
                        (("flavor", ("sea salt", "almond", "orange", "raspberry", "espresso")),
                         ("size", ("3 bars", "6 bars", "12 bars"))), (4, 20)),
        ),
        ("A pantry staple for busy kitchens.", "Carefully packed to keep it fresh.",
         "Enjoy it any time of day.", "Sourced from trusted growers."),
        ("carefully packed", "great for gifting", "a pantry staple"),
    ),
)

#: Every product type with its category, in catalog order (product ``i`` has type ``i % 30``).
TYPES: tuple[tuple[Category, ProductType], ...] = tuple(
    (category, kind) for category in CATEGORIES for kind in category.types
)
