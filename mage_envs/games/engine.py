"""The engine loop shared by every view of a two-player OpenSpiel game.

:class:`OpenSpielGameEnv` owns what does not depend on how the agent sees the game: the
opponent population, the seat, seeding, the instance's chance stream, the loop that plays
chance and the opponent until it is the agent's turn, payoffs, the invalid-action policy
and pickling. A view subclasses it and supplies the observation (:meth:`_view`) and how an
action arrives: the text view (:class:`~mage_envs.games.base.OpenSpielTextEnv`) parses an
answer, the numeric view (:class:`~mage_envs.numeric.OpenSpielTensorEnv`) takes an id.

Randomness: ``reset(seed=...)`` seeds ``np_random``; from it the env derives one
``random.Random`` handed to the opponent and to the seat draw. Chance events (the deal)
come from the episode's *instance* number, so ``reset(options={"instance": k})`` replays
the same deal and seat against whatever the opponent does. Both views draw the same
opponent, instance and seat from the same seed:

Example:
    >>> from mage_envs.games.kuhn_poker import KuhnPokerEnv
    >>> from mage_envs.numeric import KuhnPokerTensorEnv
    >>> _, text = KuhnPokerEnv(opponent="train").reset(seed=4)
    >>> _, tensor = KuhnPokerTensorEnv(opponent="train").reset(seed=4)
    >>> [text[key] == tensor[key] for key in ("opponent", "seat", "instance")]
    [True, True, True]
"""

from __future__ import annotations

import random
from typing import Any, ClassVar, Literal, TypeVar

import gymnasium as gym
import numpy as np
import pyspiel

from ..core.contract import InvalidActionPolicy
from ..core.invalid import judge_invalid
from ..core.parsing import ParsedAction
from ..opponents.base import Opponent
from ..opponents.population import OpponentSpec, as_population
from ..opponents.registry import load_game

ObsType = TypeVar("ObsType")
ActType = TypeVar("ActType")
Seat = Literal[0, 1, "random"]
_MASK64 = (1 << 64) - 1
_CHANCE = int(pyspiel.PlayerId.CHANCE)


def splitmix64(value: int) -> int:
    """The SplitMix64 finaliser: a well-mixed 64-bit hash of ``value`` (platform independent).

    Example:
        >>> splitmix64(7) == splitmix64(7) != splitmix64(8)
        True
    """
    z = (value + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)



class ChanceStream:
    """The chance outcomes of one instance: a 64-bit LCG seeded by SplitMix64 of its number.

    The same instance draws the same outcomes, on every platform and in every view.

    Example:
        >>> state = pyspiel.load_game("kuhn_poker").new_initial_state()
        >>> a, b = ChanceStream(5), ChanceStream(5)
        >>> a.sample(state) == b.sample(state)
        True
    """

    def __init__(self, instance: int) -> None:
        self._state = splitmix64(instance)

    def sample(self, state: pyspiel.State) -> int:
        """The next chance outcome for the chance node ``state``."""
        self._state = (self._state * 6364136223846793005 + 1442695040888963407) & _MASK64
        threshold = (self._state >> 11) / 9007199254740992.0
        cumulative = 0.0
        outcomes = state.chance_outcomes()
        for action, prob in outcomes:
            cumulative += prob
            if threshold < cumulative:
                return action
        return outcomes[-1][0]


class OpenSpielGameEnv(gym.Env[ObsType, ActType]):
    """A two-player OpenSpiel game against an opponent population; the view is a subclass's.

    Args:
        opponent: an archetype id, ``"train"``/``"heldout"``/``"all"``, a list or dict of
            ids, a :class:`~mage_envs.opponents.Population` or an
            :class:`~mage_envs.opponents.Opponent`; drawn at every ``reset``.
        seat: the agent's seat, ``0`` (moves first), ``1`` or ``"random"`` (the parity of
            the episode's instance number, so a replayed instance keeps its seat).
        invalid_action: ``"retry"``, ``"forfeit"``, ``"fallback"`` or an
            :class:`~mage_envs.core.contract.InvalidActionPolicy`.
        reward_scale: multiplies every game payoff (MAGE used 5 for Kuhn chips, 10 for
            Tic-Tac-Toe).
        render_mode: ``None`` or ``"ansi"``.

    A view sets ``self._observation`` and ``self._legal`` (legal action name -> id) in
    :meth:`_view`, and the observation a retry shows in :meth:`_retry_observation`.
    """

    #: OpenSpiel game string, e.g. ``"kuhn_poker"``.
    game_string: ClassVar[str]
    #: Default ``opponent`` argument.
    default_opponent: ClassVar[str] = "train"
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        opponent: OpponentSpec | None = None,
        seat: Seat = "random",
        invalid_action: str | InvalidActionPolicy | dict[str, Any] = "retry",
        reward_scale: float = 1.0,
        render_mode: str | None = None,
    ) -> None:
        if seat not in (0, 1, "random"):
            raise ValueError(f"seat must be 0, 1 or 'random', got {seat!r}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        if not np.isfinite(reward_scale) or reward_scale <= 0:
            raise ValueError(f"reward_scale must be a positive number, got {reward_scale!r}")
        self.game: pyspiel.Game = load_game(self.game_string)
        self.population = as_population(
            self.game_string, self.default_opponent if opponent is None else opponent
        )
        self.seat_option: Seat = seat
        self.invalid_policy = InvalidActionPolicy.from_spec(invalid_action)
        self.reward_scale = float(reward_scale)
        self.render_mode = render_mode
        self._opponents: dict[str, Opponent] = {}
        self._rng = random.Random(0)
        self._state: pyspiel.State | None = None

    # ------------------------------------------------------------------ view hooks
    def _view(self, terminal: bool) -> None:
        """Set ``self._observation`` and ``self._legal`` for the current state."""
        raise NotImplementedError

    def _retry_observation(self, notice: str | None) -> ObsType:
        """The observation after an invalid action the agent may retry."""
        raise NotImplementedError

    def _clear_view(self) -> None:
        """Set the view of an episode ended by a forfeit (no legal actions)."""
        raise NotImplementedError

    def forfeit_payoff(self, state: pyspiel.State, seat: int) -> float:
        """The agent's payoff when it forfeits in ``state``: by default the game's worst."""
        return self.game.min_utility()

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        """Start an episode. ``options``: ``instance`` (replay a deal), ``opponent`` (an id)."""
        super().reset(seed=seed)
        if seed is not None or self._state is None:
            self._rng = random.Random(int(self.np_random.integers(0, 2**63 - 1)))
        options = options or {}
        opponent_id = options.get("opponent")
        if opponent_id is None:
            opponent_id = self.population.sample(self._rng)
        instance = options.get("instance")
        if instance is None:
            instance = self._rng.getrandbits(63)
        self._instance = int(instance)
        self._opponent_id = str(opponent_id)
        self._opponent = self._opponent_for(self._opponent_id)
        self._opponent.reset(self._rng)
        if self.seat_option == "random":
            self._seat = self._instance & 1
        else:
            self._seat = int(self.seat_option)
        self._state = self.game.new_initial_state()
        self._chance = ChanceStream(self._instance)
        self._history_key: list[int] = [self._seat]
        self._retries_left = self.invalid_policy.max_retries
        self._done = False
        self._forfeited = False
        self._outcome: str | None = None
        self._advance()
        return self._observation, self._info(None)

    # ------------------------------------------------------------------ internals
    def _opponent_for(self, opponent_id: str) -> Opponent:
        opponent = self._opponents.get(opponent_id)
        if opponent is None:
            opponent = self.population.build(self.game_string, opponent_id)
            self._opponents[opponent_id] = opponent
        return opponent

    def _play(self, action: int) -> None:
        self._history_key.append(action)
        self._state.apply_action(action)

    def _advance(self) -> bool:
        """Play chance and opponent moves until it is the agent's turn; True if the game ended."""
        state, seat, history = self._state, self._seat, self._history_key
        while True:
            player = state.current_player()
            if player == seat:
                terminal = False
                break
            if player < 0 and state.is_terminal():
                terminal = True
                break
            action = self._chance.sample(state) if player == _CHANCE else self._opponent.act(state)
            history.append(action)
            state.apply_action(action)
        self._view(terminal)
        return terminal

    def _after_move(self, reward: float, invalid: dict[str, Any] | None) -> tuple:
        terminated = self._advance()
        if terminated:
            payoff = self._state.returns()[self._seat]
            reward += payoff * self.reward_scale
            self._finish("win" if payoff > 0 else "loss" if payoff < 0 else "draw")
        return self._observation, reward, terminated, False, self._info(invalid)

    def _invalid(self, parsed: ParsedAction, names: dict[str, int]) -> tuple:
        """Apply the invalid-action policy to ``parsed`` (``names``: the legal names -> ids)."""
        decision = judge_invalid(self.invalid_policy, parsed, list(names), self._retries_left, self._rng)
        self._retries_left = decision.retries_left
        reward = self.invalid_policy.penalty
        if decision.applied == "retry":
            return self._retry_observation(decision.notice), reward, False, False, self._info(decision.report)
        if decision.applied == "fallback":
            self._play(names[decision.substitute])
            return self._after_move(reward, decision.report)
        forfeit_return = self.invalid_policy.forfeit_return
        if forfeit_return is None:
            forfeit_return = self.forfeit_payoff(self._state, self._seat) * self.reward_scale
        self._finish("loss", forfeit=True)
        return self._observation, reward + forfeit_return, True, False, self._info(decision.report)

    def _finish(self, outcome: str, forfeit: bool = False) -> None:
        self._done = True
        self._outcome = outcome
        self._forfeited = forfeit
        if forfeit:
            self._clear_view()

    def _info(self, invalid: dict[str, Any] | None) -> dict[str, Any]:
        info: dict[str, Any] = {
            "legal_actions": list(self._legal),
            "opponent": self._opponent_id,
            "seat": self._seat,
            "invalid_action": invalid,
            "instance": self._instance,
        }
        if self._done:
            info["outcome"] = self._outcome
            info["success"] = self._outcome == "win"
            info["forfeit"] = self._forfeited
            summary = self._summary()
            if summary is not None:
                info["summary"] = summary
        return info

    def _summary(self) -> str | None:
        """A one-line account of the finished episode for ``info["summary"]`` (none here)."""
        return None

    # ------------------------------------------------------------------ introspection
    @property
    def state(self) -> pyspiel.State:
        """The live ``pyspiel`` state (read-only use; do not apply actions to it)."""
        if self._state is None:
            raise RuntimeError("call reset() first")
        return self._state

    @property
    def opponent(self) -> Opponent:
        """The opponent playing the current episode."""
        return self._opponent

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the game as its action history; opponents are rebuilt from their ids."""
        state = self.__dict__.copy()
        pyspiel_state = state.pop("_state", None)
        state["_serialized_history"] = None if pyspiel_state is None else pyspiel_state.history()
        for key in ("game", "_opponents", "_opponent"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled env; a search-bot opponent restarts with a seed from the env's rng."""
        history = state.pop("_serialized_history")
        self.__dict__.update(state)
        self.game = load_game(self.game_string)
        self._opponents = {}
        self._state = None
        if history is not None:
            self._state = self.game.new_initial_state()
            for action in history:
                self._state.apply_action(action)
            self._opponent = self._opponent_for(self._opponent_id)
            self._opponent.reset(self._rng)
