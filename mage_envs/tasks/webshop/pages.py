"""The store's pages and what can be done on each: WebShop's site as a state machine.

A :class:`Browse` is where the agent is. What is legal on each page (WebShop's
``clickables``; element names are lower case), as in WebShop's text env:

=============  ==================================================================
page           legal
=============  ==================================================================
every page     ``search[query]`` (WebShop's env accepts a search on any page)
but done
results        ``back to search``; ``< prev`` after page 1; ``next >`` always (past
               the last page it shows an empty page); the id of each product shown
               (10 per page, 50 at most)
item           ``back to search``, ``< prev``, every option value of the product,
               ``description``, ``features``, ``reviews``, ``buy now``
description,   ``back to search``, ``< prev``
features,
reviews
done           nothing (the episode is over)
=============  ==================================================================

Moves: a search shows page 1 of its results; ``next >`` / ``< prev`` turn result pages;
a product id opens its item page with no option chosen; an option value chooses that
value for its option (replacing the earlier choice); ``< prev`` goes from an item page
back to the results page it came from (its choices are dropped, as WebShop's search page
resets them) and from a sub-page back to the item page (choices kept); ``back to search``
goes to the search page; ``buy now`` buys. An option value that two options of one
product share belongs to the last (WebShop maps each value to the last radio button
that carries it). The reviews page is empty, as WebShop's (its reviews are not loaded).

Example:
    >>> browse = Browse().searched("red shoes", ("B01", "B02"))
    >>> browse.page, browse.shown, browse.page_count
    ('results', ('B01', 'B02'), 1)
    >>> clickables(browse, None)
    ['back to search', 'next >', 'b01', 'b02']
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .catalog import Product

BACK_TO_SEARCH = "back to search"
NEXT_PAGE = "next >"
PREV_PAGE = "< prev"
DESCRIPTION = "description"
FEATURES = "features"
REVIEWS = "reviews"
BUY_NOW = "buy now"
SUB_PAGES = (DESCRIPTION, FEATURES, REVIEWS)
_ITEM_BUTTONS = frozenset((BACK_TO_SEARCH, PREV_PAGE, *SUB_PAGES, BUY_NOW))
#: Products per results page (WebShop's ``PRODUCT_WINDOW``).
RESULTS_PER_PAGE = 10


@dataclass(frozen=True)
class Browse:
    """Where the agent is: the page, the last search and its results (product ids), the
    results page number, the product open and the options chosen on it."""

    page: str = "search"
    query: str = ""
    results: tuple[str, ...] = ()
    page_number: int = 1
    asin: str = ""
    chosen: tuple[tuple[str, str], ...] = ()

    @property
    def page_count(self) -> int:
        """Result pages that hold products (at least 1); ``next >`` may go past them."""
        return max(1, -(-len(self.results) // RESULTS_PER_PAGE))

    @property
    def shown(self) -> tuple[str, ...]:
        """The ids on the current results page."""
        start = (self.page_number - 1) * RESULTS_PER_PAGE
        return self.results[start : start + RESULTS_PER_PAGE]

    def searched(self, query: str, results: tuple[str, ...]) -> Browse:
        """Page 1 of the results of ``query``."""
        return Browse("results", query, results)

    def clicked(self, element: str, product: Product | None) -> Browse:
        """The page after clicking ``element`` (one of :func:`clickables`); ``product`` is
        the open product on item pages, the one clicked on a results page."""
        if element == BACK_TO_SEARCH:
            return Browse()
        if element == BUY_NOW:
            return replace(self, page="done")
        if self.page == "results":
            if element in (NEXT_PAGE, PREV_PAGE):
                return replace(self, page_number=self.page_number + (1 if element == NEXT_PAGE else -1))
            return replace(self, page="item", asin=required_product(product, self.page).asin, chosen=())
        if self.page in SUB_PAGES:  # only "< prev" is left
            return replace(self, page="item")
        if element == PREV_PAGE:
            return replace(self, page="results", asin="", chosen=())
        if element in SUB_PAGES:
            return replace(self, page=element)
        product = required_product(product, self.page)
        return replace(self, chosen=_choose(self.chosen, option_owner(product, element), element, product))


def required_product(product: Product | None, page: str) -> Product:
    """``product``, which a product's pages (and a click on a result) cannot do without."""
    if product is None:
        raise ValueError(f"the {page!r} page needs a product")
    return product


def _choose(chosen: tuple[tuple[str, str], ...], name: str, value: str, product: Product) -> tuple[tuple[str, str], ...]:
    """``chosen`` with ``name`` set to ``value``, in the product's option order."""
    values = dict(chosen)
    values[name] = value
    return tuple((option, values[option]) for option in product.option_names if option in values)


def option_owner(product: Product, value: str) -> str:
    """The option whose values hold ``value`` (the last such option, as WebShop).

    Example:
        >>> from dataclasses import replace
        >>> from mage_envs.tasks.webshop.catalog import generate_catalog
        >>> shirt = replace(generate_catalog(30).products[0], options=(("color", ("red", "blue")), ("trim", ("red",))))
        >>> option_owner(shirt, "red"), option_owner(shirt, "blue")
        ('trim', 'color')
    """
    return next(name for name, values in reversed(product.options) if value in values)


def option_values(product: Product) -> list[str]:
    """The product's clickable option values, each once, in page order (a value spelled
    like a fixed button is not clickable)."""
    values = dict.fromkeys(value for _, values in product.options for value in values)
    return [value for value in values if value not in _ITEM_BUTTONS]


def page_turns(browse: Browse) -> list[str]:
    """``< prev`` after the first results page, then ``next >`` (always, as WebShop)."""
    return [PREV_PAGE] * (browse.page_number > 1) + [NEXT_PAGE]


def clickables(browse: Browse, product: Product | None) -> list[str]:
    """The elements that can be clicked on the current page (``product``: the open one)."""
    if browse.page == "results":
        return [BACK_TO_SEARCH, *page_turns(browse), *(asin.lower() for asin in browse.shown)]
    if browse.page == "item":
        return [BACK_TO_SEARCH, PREV_PAGE, *option_values(required_product(product, browse.page)), *SUB_PAGES, BUY_NOW]
    if browse.page in SUB_PAGES:
        return [BACK_TO_SEARCH, PREV_PAGE]
    return []
