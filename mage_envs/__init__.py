"""MAGE environments: text games on OpenSpiel, opponent populations and meta-episodes.

Importing the package registers every id with Gymnasium:

    >>> import gymnasium as gym
    >>> import mage_envs
    >>> env = gym.make("mage/KuhnPoker-meta-v0", opponent="aggressive", seat=0)
    >>> obs, info = env.reset(seed=0)
    >>> info["legal_actions"]
    ['check', 'bet']
"""

from .core.checker import check_text_env
from .core.contract import TEXT_CHARSET, InvalidActionPolicy, sanitize_text, text_space
from .core.memory import ReflectionMemory
from .core.meta import MetaEpisodeWrapper
from .core.parsing import parse_action
from .opponents import Opponent, Population, list_opponents, make_opponent, register_opponent, unregister_opponent
from .registration import register_envs

register_envs()

__version__ = "0.1.0.dev0"

__all__ = [
    "InvalidActionPolicy",
    "MetaEpisodeWrapper",
    "Opponent",
    "Population",
    "ReflectionMemory",
    "TEXT_CHARSET",
    "check_text_env",
    "list_opponents",
    "make_opponent",
    "parse_action",
    "register_envs",
    "register_opponent",
    "sanitize_text",
    "text_space",
    "unregister_opponent",
]
