"""The expert: from the current page, the shortest actions to the best purchase it can find.

The expert knows the goal, so it scores every product it could reach with WebShop's
reward (choosing, on each, the option values that match the goal). It considers buying
the open product (after ``< prev`` from a sub-page), going back to the current results,
and new searches (a search works from any page): first a query made of the instruction (without its price clause),
then the goal product's title. It returns the plan with the highest reward, the
shortest among those, the earliest considered among equals. On the generated catalog the
goal product is always reachable and worth 1.0, so the plan always succeeds (if enough
steps are left).

Example:
    >>> from mage_envs.tasks.webshop.pages import Browse
    >>> from mage_envs.tasks.webshop.shop import open_shop
    >>> shop = open_shop(num_products=300)
    >>> goal = shop.goal("train", 3)
    >>> plan = expert_plan(shop, goal, Browse())
    >>> plan[0].startswith("search["), plan[-1]
    (True, 'click[buy now]')
"""

from __future__ import annotations

from collections.abc import Sequence

from .actions import normalize_query
from .catalog import Product
from .goals import Goal
from .pages import (
    BUY_NOW,
    NEXT_PAGE,
    PREV_PAGE,
    RESULTS_PER_PAGE,
    SUB_PAGES,
    Browse,
    option_owner,
    option_values,
)
from .reward import option_matches, webshop_reward
from .shop import Shop

Plan = tuple[float, list[str]]


def expert_query(goal: Goal) -> str:
    """The instruction without its price clause, as a query.

    Example:
        >>> from mage_envs.tasks.webshop.shop import open_shop
        >>> expert_query(open_shop(num_products=300).goal("train", 3))
        'i need a power bank, airline approved with color: teal, and capacity: 10000mah'
    """
    return normalize_query(goal.instruction.split(", and price lower than")[0])


def best_choice(product: Product, goal: Goal) -> tuple[tuple[str, str], ...]:
    """Per option of ``product``, a clickable value that matches a goal option (the goal's
    own value first), for at most as many options as the goal asks for."""
    choice: list[tuple[str, str]] = []
    clickable = set(option_values(product))
    for name, values in product.options:
        usable = [v for v in values if v in clickable and option_owner(product, v) == name]
        matching = [v for v in usable if v in goal.options] or [
            v for v in usable if option_matches(goal, {name: v})
        ]
        if matching and len(choice) < len(goal.options):
            choice.append((name, matching[0]))
    return tuple(choice)


def _purchase(product: Product, goal: Goal, chosen: Sequence[tuple[str, str]]) -> Plan:
    """Choose what is missing on the open ``product`` and buy it."""
    current = dict(chosen)
    clicks = []
    for name, value in best_choice(product, goal):
        if name in current and option_matches(goal, {name: current[name]}):
            continue
        current[name] = value
        clicks.append(f"click[{value}]")
    return webshop_reward(product, goal, current).reward, [*clicks, f"click[{BUY_NOW}]"]


def _from_results(shop: Shop, goal: Goal, results: Sequence[str], page: int, prefix: list[str]) -> list[Plan]:
    """Every purchase reachable from results page ``page`` of ``results``."""
    plans = []
    for rank, asin in enumerate(results):
        target = rank // RESULTS_PER_PAGE + 1
        turns = [f"click[{NEXT_PAGE}]"] * (target - page) + [f"click[{PREV_PAGE}]"] * (page - target)
        reward, tail = _purchase(shop.product(asin), goal, ())
        plans.append((reward, [*prefix, *turns, f"click[{asin.lower()}]", *tail]))
    return plans


def expert_plan(shop: Shop, goal: Goal, browse: Browse) -> list[str]:
    """The expert's actions from ``browse`` (``[]`` once the episode is over)."""
    if browse.page == "done":
        return []
    plans: list[Plan] = []
    if browse.page == "item" or browse.page in SUB_PAGES:
        back = [] if browse.page == "item" else [f"click[{PREV_PAGE}]"]
        reward, tail = _purchase(shop.product(browse.asin), goal, browse.chosen)
        plans.append((reward, back + tail))
        plans += _from_results(shop, goal, browse.results, browse.page_number, [*back, f"click[{PREV_PAGE}]"])
    elif browse.page == "results":
        plans += _from_results(shop, goal, browse.results, browse.page_number, [])
    for query in dict.fromkeys([expert_query(goal), normalize_query(shop.product(goal.asin).title)]):
        if query:
            plans += _from_results(shop, goal, shop.search(query), 1, [f"search[{query}]"])
    return max(plans, key=lambda plan: (plan[0], -len(plan[1])))[1] if plans else []
