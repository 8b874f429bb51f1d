"""Sokoban: procedurally generated levels, an optimal solver and the text environment.

Example:
    >>> import gymnasium as gym, mage_envs
    >>> env = gym.make("mage/Sokoban-v0", width=7, height=7, num_boxes=2)
    >>> obs, info = env.reset(seed=0)
    >>> expert = env.unwrapped.expert_actions()
    >>> for action in expert:
    ...     obs, reward, terminated, truncated, info = env.step(f"<action>{action}</action>")
    >>> terminated, info["success"]
    (True, True)
"""

from .env import SokobanEnv
from .generator import GeneratedLevel, generate_level
from .level import DIRECTIONS, Board, Level, Move, parse_xsb
from .solver import SearchLimitError, Solution, dead_squares, is_deadlocked, solve

__all__ = [
    "DIRECTIONS",
    "Board",
    "GeneratedLevel",
    "Level",
    "Move",
    "SearchLimitError",
    "SokobanEnv",
    "Solution",
    "dead_squares",
    "generate_level",
    "is_deadlocked",
    "parse_xsb",
    "solve",
]
