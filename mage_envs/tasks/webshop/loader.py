"""Read the original WebShop data files into a :class:`~mage_envs.tasks.webshop.catalog.Catalog`.

WebShop (``web_agent_site/engine/engine.py::load_products``) reads three JSON files:

* products, ``items_shuffle_1000.json``: a list of objects with ``asin``, ``name``,
  ``category``, ``query``, ``product_category`` (``"A › B › C"``), ``full_description``,
  ``small_description`` (the bullet points, a list or a string), ``pricing``
  (``"$12.99"`` or ``"$10.99 - $15.99"``) and ``customization_options`` (``{name:
  [{"value": ..., "image": ...}], ...}`` or null). The processed keys of WebShop's
  ``all_products.json`` are read too: ``Title``, ``Description``, ``BulletPoints``,
  ``pricing`` as a list of numbers, ``options`` (``{name: [values]}``), ``Attributes``;
* attributes and synthetic instructions, ``items_ins_v2_1000.json``: ``{asin:
  {"attributes": [...], "instruction": "...", "instruction_attributes": [...]}}``;
* human instructions, ``items_human_ins.json``: ``{asin: [{"instruction": "...",
  "instruction_attributes": [...], "instruction_options": [...]}, ...]}``.

As WebShop: ids that are ``"nan"``, longer than ten characters or repeated are skipped;
option names are lower-cased and values lower-cased with ``/`` shown as `` | ``; a
product without pricing costs $100; a price range is paid at a price drawn uniformly in
it (from a generator seeded by the id, so always the same); human instructions without
attributes are skipped and lose their trailing full stops. Differences: text is folded to
ASCII (:func:`~mage_envs.core.contract.sanitize_text`); a product without attributes has
none (WebShop gives it ``"DUMMY_ATTR"``, which never matches).

Example:
    >>> import json, pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> item = {"asin": "B000000001", "name": "Acme Trail Shoes", "category": "fashion",
    ...         "query": "trail shoes", "product_category": "Shoes", "full_description": "Light.",
    ...         "small_description": ["Breathable mesh"], "pricing": "$39.99",
    ...         "customization_options": {"Size": [{"value": "9", "image": None}]}}
    >>> human = {"B000000001": [{"instruction": "i need trail shoes in size 9.",
    ...                          "instruction_attributes": ["breathable"], "instruction_options": ["9"]}]}
    >>> _ = (folder / "items_shuffle_1000.json").write_text(json.dumps([item]))
    >>> _ = (folder / "items_human_ins.json").write_text(json.dumps(human))
    >>> catalog = load_webshop_catalog(folder)
    >>> product = catalog.products[0]
    >>> product.options, product.price
    ((('size', ('9',)),), 39.99)
    >>> catalog.seeds[0]
    GoalSeed(asin='B000000001', text='i need trail shoes in size 9', attributes=('breathable',), options=('9',))
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any, Literal, overload

from ...core.contract import sanitize_text
from .catalog import Catalog, GoalSeed, Product

PRODUCT_FILES = ("items_shuffle_1000.json", "items_shuffle.json")
ATTRIBUTE_FILES = ("items_ins_v2_1000.json", "items_ins_v2.json")
HUMAN_FILE = "items_human_ins.json"
#: The price of a product without pricing (WebShop's).
DEFAULT_PRICE = 100.0
_SPACES = re.compile(r"\s+")


def load_webshop_catalog(
    path: str | Path,
    *,
    human_goals: bool = True,
    attributes_path: str | Path | None = None,
    instructions_path: str | Path | None = None,
) -> Catalog:
    """The catalog in WebShop's files; ``path`` is the products file or a folder holding it.

    The attributes file and the human instructions are looked for beside the products
    file unless given. Goals come from the human instructions (``human_goals=True``, as
    WebShop's default) or from the synthetic instructions of the attributes file.
    Raises ``FileNotFoundError`` for a missing file, ``ValueError`` when no instruction
    names a loaded product.
    """
    products_path = _find(Path(path), PRODUCT_FILES, "items_shuffle*.json", required=True)
    folder = products_path.parent
    attributes_file = Path(attributes_path) if attributes_path else _find(folder, ATTRIBUTE_FILES, "items_ins_v2*.json")
    human_file = Path(instructions_path) if instructions_path else _find(folder, (HUMAN_FILE,), HUMAN_FILE)
    attributes = _read(attributes_file) if attributes_file else {}
    products = _products(_read(products_path), attributes)
    known = {product.asin for product in products}
    if human_goals:
        seeds = _human_seeds(_read(human_file) if human_file else {}, known)
    else:
        seeds = _synthetic_seeds(attributes, known)
    if not seeds:
        source = "human instructions (items_human_ins.json)" if human_goals else "synthetic instructions (items_ins_v2)"
        raise ValueError(f"no {source} name a product of {products_path}")
    name = f"webshop:{products_path.name}:{'human' if human_goals else 'synthetic'}"
    return Catalog(name, tuple(products), tuple(seeds))


@overload
def _find(path: Path, names: tuple[str, ...], pattern: str, required: Literal[True]) -> Path: ...
@overload
def _find(path: Path, names: tuple[str, ...], pattern: str, required: bool = False) -> Path | None: ...
def _find(path: Path, names: tuple[str, ...], pattern: str, required: bool = False) -> Path | None:
    """``path`` if it is a file, else the first of ``names`` (then of ``pattern``) in it."""
    if path.is_file():
        return path
    candidates = [path / name for name in names] + sorted(path.glob(pattern)) if path.is_dir() else []
    found = next((candidate for candidate in candidates if candidate.is_file()), None)
    if found is None and required:
        raise FileNotFoundError(f"no WebShop products file ({', '.join(names)}) at {path}")
    return found


def _read(path: Path) -> Any:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _clean(text: Any) -> str:
    return _SPACES.sub(" ", sanitize_text(str(text or ""))).strip()


def _products(raw: list[dict[str, Any]], attributes: dict[str, Any]) -> list[Product]:
    products: list[Product] = []
    seen: set[str] = set()
    for item in raw:
        asin = str(item.get("asin", ""))
        if not asin or asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        products.append(_product(asin, item, attributes.get(asin) or {}))
    return products


def _product(asin: str, item: dict[str, Any], extra: dict[str, Any]) -> Product:
    title = _clean(item.get("Title", item.get("name")))
    bullets = item.get("BulletPoints", item.get("small_description")) or []
    pricing = _pricing(item.get("pricing"))
    price_tag = " to ".join(f"${value}" for value in pricing)
    price = pricing[0] if len(pricing) == 1 else round(random.Random(f"webshop-price/{asin}").uniform(*pricing), 2)
    attribute_list = extra.get("attributes", item.get("Attributes", item.get("attributes"))) or []
    return Product(
        asin=asin,
        title=title,
        category=_clean(item.get("category")),
        query=_clean(item.get("query")).lower(),
        product_category=tuple(_clean(part) for part in str(item.get("product_category") or "").split("\u203a") if part.strip()),
        attributes=tuple(_clean(attribute) for attribute in attribute_list),
        options=_options(item),
        price=price,
        price_tag=price_tag,
        description=_clean(item.get("Description", item.get("full_description"))),
        features=tuple(_clean(bullet) for bullet in ([bullets] if isinstance(bullets, str) else bullets)),
    )


def _pricing(pricing: Any) -> list[float]:
    """WebShop's parse: every ``$``-separated number of a string (or the numbers of a list),
    at most two; ``[100.0]`` when there are none."""
    if isinstance(pricing, str):
        parts = [re.sub(r"[^\d.]", "", part) for part in pricing.split("$")[1:]]
        values = [float(part) for part in parts if re.fullmatch(r"\d+(\.\d+)?|\.\d+", part)]
    elif isinstance(pricing, (list, tuple)):
        values = [float(value) for value in pricing]
    else:
        values = []
    return values[:2] or [DEFAULT_PRICE]


def _options(item: dict[str, Any]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if item.get("options"):
        raw = {name: list(values) for name, values in item["options"].items()}
    else:
        raw = {
            name: [content["value"] for content in contents if isinstance(content, dict) and "value" in content]
            for name, contents in (item.get("customization_options") or {}).items()
            if contents is not None
        }
    options = []
    for name, values in raw.items():
        cleaned = [_clean(str(value).strip().replace("/", " | ")).lower() for value in values]
        if cleaned:
            options.append((_clean(name).lower(), tuple(dict.fromkeys(cleaned))))
    return tuple(options)


def _human_seeds(raw: dict[str, list[dict[str, Any]]], known: set[str]) -> list[GoalSeed]:
    seeds = []
    for asin, entries in raw.items():
        if asin not in known:
            continue
        for entry in entries:
            attributes = tuple(_clean(a) for a in entry.get("instruction_attributes") or [])
            if not attributes:
                continue
            options = tuple(_clean(o) for o in entry.get("instruction_options") or [])
            seeds.append(GoalSeed(asin, _clean(entry.get("instruction")).strip("."), attributes, options))
    return seeds


def _synthetic_seeds(raw: dict[str, dict[str, Any]], known: set[str]) -> list[GoalSeed]:
    seeds = []
    for asin, entry in raw.items():
        attributes = tuple(_clean(a) for a in entry.get("instruction_attributes") or [])
        if asin in known and entry.get("instruction") and attributes:
            seeds.append(GoalSeed(asin, _clean(entry["instruction"]), attributes))
    return seeds
