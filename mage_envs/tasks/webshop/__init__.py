"""WebShop (Yao et al., 2022) offline: a generated store of thousands of products, BM25
search (``bm25s``, the ``webshop`` extra), WebShop's pages, actions and reward, an expert,
and a loader for WebShop's own data files.

Modules, one job each: ``vocabulary`` (the words of the store), ``catalog`` (products and
the generated catalog), ``loader`` (WebShop's files), ``goals`` (instructions, the OOD
split), ``fuzzy`` and ``reward`` (WebShop's reward), ``search`` (the BM25 index), ``shop``
(a cached store), ``pages`` (the site as a state machine), ``actions`` (reading answers),
``text`` (the prompt), ``expert`` (the expert's plan) and ``env`` (the Gymnasium env).

Example:
    >>> import gymnasium as gym, mage_envs
    >>> env = gym.make("mage/WebShop-v0", num_products=300)
    >>> obs, info = env.reset(seed=1)
    >>> for action in env.unwrapped.expert_actions():
    ...     obs, reward, terminated, truncated, info = env.step(f"<action>{action}</action>")
    >>> terminated, info["success"]
    (True, True)
"""

from .catalog import DEFAULT_NUM_PRODUCTS, Catalog, GoalSeed, Product, generate_catalog
from .env import SEARCH_FORM, WebShopEnv, make_ood_env
from .goals import Goal, held_out_kinds, make_goal
from .loader import load_webshop_catalog
from .reward import RewardBreakdown, webshop_reward
from .shop import Shop, open_shop

__all__ = [
    "DEFAULT_NUM_PRODUCTS",
    "SEARCH_FORM",
    "Catalog",
    "Goal",
    "GoalSeed",
    "Product",
    "RewardBreakdown",
    "Shop",
    "WebShopEnv",
    "generate_catalog",
    "held_out_kinds",
    "load_webshop_catalog",
    "make_goal",
    "make_ood_env",
    "open_shop",
    "webshop_reward",
]
