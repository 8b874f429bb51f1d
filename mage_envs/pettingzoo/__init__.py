"""The games for two agents on PettingZoo (``pip install "mage-rl[multiagent]"``).

One module per game in PettingZoo's classic layout (``env``, ``raw_env``,
``parallel_env``): :mod:`~mage_envs.pettingzoo.kuhn_poker_v0`,
:mod:`~mage_envs.pettingzoo.leduc_poker_v0`, :mod:`~mage_envs.pettingzoo.tic_tac_toe_v0`;
:class:`MetaEpisodeAEC` plays N games between the same two learners with reflection.
``import mage_envs`` does not import this package (nor PettingZoo).
"""

try:
    import pettingzoo  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the install
    raise ImportError('mage_envs.pettingzoo needs PettingZoo: pip install "mage-rl[multiagent]"') from error

from . import kuhn_poker_v0, leduc_poker_v0, tic_tac_toe_v0
from .meta import MetaEpisodeAEC
from .text_game import DEFAULT_INVALID_ACTION, TextGameAEC

__all__ = [
    "DEFAULT_INVALID_ACTION",
    "MetaEpisodeAEC",
    "TextGameAEC",
    "kuhn_poker_v0",
    "leduc_poker_v0",
    "tic_tac_toe_v0",
]
