"""Single-agent tasks, one sub-package each, following the same text contract as the games.

Example:
    >>> from mage_envs.tasks import SokobanEnv
    >>> SokobanEnv().reset(seed=0)[1]["opponent"] is None
    True
"""

from .sokoban import SokobanEnv

__all__ = ["SokobanEnv"]
