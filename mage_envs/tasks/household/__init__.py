"""Household tasks in the style of ALFWorld, as TextWorld games generated and compiled
offline (the ``household`` extra installs ``textworld``; ``import mage_envs`` does not
import it), with an adapter for ALFWorld's own games.

Modules, one job each: ``scenes`` (rooms, receptacles, objects), ``tasks`` (a task per
instance, as plain data), ``logic`` (TextWorld's knowledge base with clean, heat and cool),
``builder`` (a task into a compiled game, cached), ``session`` (a running game),
``alfworld`` (ALFWorld's data), ``text`` (the prompt) and ``env`` (the Gymnasium env).

Example (needs ``textworld``):
    >>> import gymnasium as gym, mage_envs
    >>> env = gym.make("mage/Household-v0")
    >>> obs, info = env.reset(options={"instance": 3})
    >>> for action in env.unwrapped.expert_actions():
    ...     obs, reward, terminated, truncated, info = env.step(f"<action>{action}</action>")
    >>> terminated, info["success"]
    (True, True)
"""

from .alfworld import AlfworldGame, alfred_names, alfworld_games
from .builder import default_cache_dir, game_file, generate_games
from .env import HouseholdEnv
from .tasks import TASK_TYPES, HouseholdTask, Item, make_task

__all__ = [
    "TASK_TYPES",
    "AlfworldGame",
    "HouseholdEnv",
    "HouseholdTask",
    "Item",
    "alfred_names",
    "alfworld_games",
    "default_cache_dir",
    "game_file",
    "generate_games",
    "make_task",
]
