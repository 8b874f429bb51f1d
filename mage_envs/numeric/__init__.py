"""Numeric views of the games for classic RL libraries (Stable-Baselines3, sb3-contrib).

``mage/<Game>-tensor-v0`` observes OpenSpiel's information-state tensor and acts with a
``Discrete`` action id, against the same opponent populations, seats and seeds as the text
ids; ``mage/<Game>-tensor-meta-v0`` plays N episodes against one opponent with a memory of
what earlier episodes revealed (:class:`TensorMetaWrapper`). No torch import here.

Example:
    >>> import gymnasium as gym, mage_envs
    >>> env = gym.make("mage/TicTacToe-tensor-v0", opponent="random", seat=0)
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, env.action_space, info["legal_actions"][:3]
    ((29,), Discrete(9), [0, 1, 2])
"""

from .env import OpenSpielTensorEnv
from .games import KuhnPokerTensorEnv, LeducPokerTensorEnv, TicTacToeTensorEnv
from .meta import TensorMetaWrapper, make_tensor_meta_env

__all__ = [
    "KuhnPokerTensorEnv",
    "LeducPokerTensorEnv",
    "OpenSpielTensorEnv",
    "TensorMetaWrapper",
    "TicTacToeTensorEnv",
    "make_tensor_meta_env",
]
