"""``OpenSpielTensorEnv``: the numeric view of an OpenSpiel game, for classic RL libraries.

The same engine as the text envs (:class:`~mage_envs.games.engine.OpenSpielGameEnv`:
opponent populations, seat, instance replay, seeding), seen as OpenSpiel's tensors:

* observation: ``information_state_tensor(seat)`` as a ``float32`` ``Box`` in [0, 1] when
  the game provides one (the poker games: it starts with the seat one-hot); otherwise the
  seat one-hot followed by ``observation_tensor(seat)`` (Tic-Tac-Toe);
* action: ``Discrete(num_distinct_actions)``, OpenSpiel's action ids;
* legal actions: ``info["legal_actions"]`` (ids), ``info["action_mask"]`` (``int8``, the
  mask ``action_space.sample(mask=...)`` takes) and :meth:`OpenSpielTensorEnv.action_masks`
  (``bool``, what sb3-contrib's ``MaskablePPO`` calls).

An action id that is not legal now goes through the invalid-action policy, reported in
``info["invalid_action"]``: ``"forfeit"`` (default: the episode ends as a loss worth the
game's forfeit payoff, a fold in poker), ``"fallback"`` (a legal action is played instead)
or ``"retry"`` (the state is unchanged, up to ``max_retries`` times). A value that is not
an integer raises ``TypeError``.

Example:
    >>> from mage_envs.numeric import KuhnPokerTensorEnv
    >>> env = KuhnPokerTensorEnv(opponent="aggressive", seat=0)
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, info["legal_actions"], env.action_masks().tolist()
    ((11,), [0, 1], [True, True])
"""

from __future__ import annotations

import operator
from typing import Any, ClassVar

import numpy as np
import pyspiel
from gymnasium import spaces

from ..core.contract import InvalidActionPolicy, Seat
from ..core.parsing import ParsedAction
from ..games.engine import OpenSpielGameEnv, View
from ..opponents.population import OpponentSpec


class TensorView(View):
    """What the numeric view shows at one history: the tensor, the legal ids (``str(id) ->
    id``) and their ``int8`` mask."""

    __slots__ = ("mask",)

    def __init__(self, observation: np.ndarray, legal: dict[str, int], mask: np.ndarray) -> None:
        super().__init__(observation, legal)
        self.mask = mask

    def copy(self) -> TensorView:
        """The same view with its own tensor and mask (the legal ids are never changed)."""
        return TensorView(self.observation.copy(), self.legal, self.mask.copy())


class OpenSpielTensorEnv(OpenSpielGameEnv[np.ndarray, int]):
    """A two-player OpenSpiel game against an opponent population, seen as tensors.

    Args: as :class:`~mage_envs.games.engine.OpenSpielGameEnv`; ``invalid_action``
    defaults to ``"forfeit"``.
    """

    #: Size of the one-hot of the opponent's private card shown at the end (0: none).
    revealed_size: ClassVar[int] = 0

    def __init__(
        self,
        opponent: OpponentSpec | None = None,
        seat: Seat = "random",
        invalid_action: str | InvalidActionPolicy | dict[str, Any] = "forfeit",
        reward_scale: float = 1.0,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(opponent, seat, invalid_action, reward_scale, render_mode)
        self._info_state = self.game.get_type().provides_information_state_tensor
        if self._info_state:
            size = self.game.information_state_tensor_size()
        else:
            size = 2 + self.game.observation_tensor_size()
        self.observation_space: spaces.Box = spaces.Box(0.0, 1.0, (size,), np.float32)
        self._num_actions: int = self.game.num_distinct_actions()
        # gymnasium types Env.action_space as Space[ActType]; a Discrete samples np.int64
        self.action_space = spaces.Discrete(self._num_actions)  # type: ignore[assignment]
        # no legal action before the first reset
        self._shown: TensorView = TensorView(np.zeros(size, np.float32), {}, np.zeros(self._num_actions, np.int8))

    # ------------------------------------------------------------------ game hooks
    def revealed_card(self, state: pyspiel.State, seat: int) -> int | None:
        """The opponent's private card if the finished ``state`` showed it, else ``None``."""
        return None

    # ------------------------------------------------------------------ gym API
    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._actions is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            raise RuntimeError("the episode is over; call reset() to start a new one")
        try:
            action_id = operator.index(action)
        except TypeError:
            raise TypeError(f"action must be an integer id in {self.action_space}, got {action!r}") from None
        if not (0 <= action_id < self._num_actions and self._shown.mask[action_id]):
            return self._invalid(ParsedAction(None, "illegal_action", str(action_id)), self._shown.legal)
        return self._after_move(action_id, 0.0, None)

    def action_masks(self) -> np.ndarray:
        """Which action ids are legal now (``bool``; all ``False`` once the episode is over)."""
        return self._shown.mask.astype(bool)

    def episode_summary(self) -> np.ndarray:
        """What the episode revealed: the agent's tensor now, then the one-hot of
        :meth:`revealed_card` (``revealed_size`` entries, zeros if not shown)."""
        revealed = np.zeros(self.revealed_size, np.float32)
        card = self.revealed_card(self._state, self._seat) if self._state.is_terminal() else None
        if card is not None:
            revealed[card] = 1.0
        return np.concatenate([self._shown.observation, revealed])

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return str(self._state) if self._actions is not None else ""
        return None

    # ------------------------------------------------------------------ internals
    def _tensor(self) -> np.ndarray:
        state, seat = self._state, self._seat
        if self._info_state:
            return np.asarray(state.information_state_tensor(seat), np.float32)
        return np.asarray([seat == 0, seat == 1, *state.observation_tensor(seat)], np.float32)

    def _advance(self, action: int | None = None) -> bool:
        """The engine's :meth:`~mage_envs.games.engine.OpenSpielGameEnv._advance`, showing a
        copy of the node's view (its tensor and mask are the agent's to keep or change)."""
        terminated = super()._advance(action)
        self._shown = self._shown.copy()
        return terminated

    def _new_view(self, terminal: bool) -> TensorView:
        """The current node's tensor, legal ids (as ``str(id) -> id``) and ``int8`` mask."""
        legal = [] if terminal else self._state.legal_actions()
        mask = np.zeros(self._num_actions, np.int8)
        mask[legal] = 1
        return TensorView(self._tensor(), {str(action): action for action in legal}, mask)

    def _retry_observation(self, notice: str | None) -> np.ndarray:
        self._shown = self._shown.copy()
        return self._shown.observation

    def _forfeit_view(self) -> TensorView:
        return TensorView(self._shown.observation.copy(), {}, np.zeros(self._num_actions, np.int8))

    def _info(self, invalid: dict[str, Any] | None) -> dict[str, Any]:
        info = super()._info(invalid)
        info["legal_actions"] = list(self._shown.legal.values())
        info["action_mask"] = self._shown.mask
        return info
