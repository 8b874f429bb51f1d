"""The shared machinery of every two-player OpenSpiel game as a text environment.

The engine is ``pyspiel``; this module only turns its state into prompts, parses the
agent's answers, runs chance and the opponent, and applies the invalid-action policy.
A game module subclasses :class:`OpenSpielTextEnv` and supplies the text layer:
rules, action names, the agent's private view and one line per move.

Randomness: ``reset(seed=...)`` seeds ``np_random``; from it the env derives one
``random.Random`` handed to the opponent and to the seat draw. Chance events (the deal)
come from the episode's *instance* number, so ``reset(options={"instance": k})`` replays
the same deal and seat against whatever the opponent does.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar, Literal, Sequence

import gymnasium as gym
import numpy as np
import pyspiel

from ..core.contract import (
    ACTION_SPACE,
    InvalidActionPolicy,
    clip_text,
    text_space,
)
from ..core.invalid import judge_invalid
from ..core.parsing import ParsedAction, parse_action
from ..opponents.base import Opponent
from ..opponents.population import OpponentSpec, as_population
from ..opponents.registry import load_game

Seat = Literal[0, 1, "random"]
_MASK64 = (1 << 64) - 1
_CHANCE = int(pyspiel.PlayerId.CHANCE)
#: Observations are cached per (seat, history); the cache is cleared past this size.
_OBS_CACHE_LIMIT = 200_000


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


class OpenSpielTextEnv(gym.Env[str, str]):
    """A two-player OpenSpiel game against an opponent population, seen as text.

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
        accept_bare: accept an answer that is exactly a legal action without tags.
        render_mode: ``None`` or ``"ansi"``.
    """

    #: OpenSpiel game string, e.g. ``"kuhn_poker"``.
    game_string: ClassVar[str]
    #: Human name used in prompts.
    title: ClassVar[str]
    #: Default ``opponent`` argument.
    default_opponent: ClassVar[str] = "train"
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 4}
    #: Observations never exceed this many characters (checked by the tests).
    max_observation_chars: ClassVar[int] = 4096

    def __init__(
        self,
        opponent: OpponentSpec | None = None,
        seat: Seat = "random",
        invalid_action: str | InvalidActionPolicy | dict[str, Any] = "retry",
        reward_scale: float = 1.0,
        accept_bare: bool = True,
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
        self.accept_bare = accept_bare
        self.render_mode = render_mode
        self.observation_space = text_space(self.max_observation_chars)
        self.action_space = ACTION_SPACE
        self._opponents: dict[str, Opponent] = {}
        self._rng = random.Random(0)
        self._state: pyspiel.State | None = None
        self._view_cache: dict[tuple, tuple[str, dict[str, int], dict[str, str]]] = {}
        self._header_cache: dict[int, str] = {}

    # ------------------------------------------------------------------ text layer
    def rules(self, seat: int) -> str:
        """The rules and the agent's seat, shown at the top of every prompt."""
        raise NotImplementedError

    def action_names(self, state: pyspiel.State) -> dict[str, int]:
        """Legal action names for the player to move, in display order, -> action ids."""
        raise NotImplementedError

    def private_view(self, state: pyspiel.State, seat: int) -> str:
        """What the agent sees now besides the move list (its card, the board...)."""
        raise NotImplementedError

    def describe_move(self, state: pyspiel.State, player: int, action: int, seat: int) -> str | None:
        """One history line for ``action`` played in ``state`` (``None`` hides it)."""
        raise NotImplementedError

    def describe_end(self, state: pyspiel.State, seat: int) -> str:
        """What is revealed at the end (showdown, final board)."""
        raise NotImplementedError

    def forfeit_payoff(self, state: pyspiel.State, seat: int) -> float:
        """The agent's payoff when it forfeits in ``state``: by default the game's worst."""
        return self.game.min_utility()

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
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
        self._chance_state = splitmix64(self._instance)
        self._history_key: list[int] = [self._seat]
        self._retries_left = self.invalid_policy.max_retries
        self._done = False
        self._forfeited = False
        self._outcome: str | None = None
        self._advance()
        return self._observation, self._info(None)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            raise RuntimeError("the episode is over; call reset() to start a new one")
        chosen = self._accepted.get(action) if isinstance(action, str) else None
        if chosen is None:
            parsed = parse_action(action, list(self._legal), accept_bare=self.accept_bare)
            if parsed.action is None:
                return self._invalid(parsed, self._legal)
            chosen = parsed.action
        action_id = self._legal[chosen]
        self._history_key.append(action_id)
        self._state.apply_action(action_id)
        return self._after_move(0.0, None)

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._observation if self._state is not None else ""
        return None

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
            action = self._sample_chance(state) if player == _CHANCE else self._opponent.act(state)
            history.append(action)
            state.apply_action(action)
        self._view(terminal)
        return terminal

    def _sample_chance(self, state: pyspiel.State) -> int:
        """A chance outcome from the instance's stream (a 64-bit LCG seeded by SplitMix64)."""
        self._chance_state = (self._chance_state * 6364136223846793005 + 1442695040888963407) & _MASK64
        threshold = (self._chance_state >> 11) / 9007199254740992.0
        cumulative = 0.0
        outcomes = state.chance_outcomes()
        for action, prob in outcomes:
            cumulative += prob
            if threshold < cumulative:
                return action
        return outcomes[-1][0]

    def _after_move(self, reward: float, invalid: dict[str, Any] | None) -> tuple:
        terminated = self._advance()
        if terminated:
            payoff = self._state.returns()[self._seat]
            reward += payoff * self.reward_scale
            self._finish("win" if payoff > 0 else "loss" if payoff < 0 else "draw")
        return self._observation, reward, terminated, False, self._info(invalid)

    def _invalid(self, parsed: ParsedAction, names: dict[str, int]) -> tuple:
        decision = judge_invalid(self.invalid_policy, parsed, list(names), self._retries_left, self._rng)
        self._retries_left = decision.retries_left
        reward = self.invalid_policy.penalty
        if decision.applied == "retry":
            return self._compose(decision.notice), reward, False, False, self._info(decision.report)
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
            self._legal, self._accepted = {}, {}
            self._observation = self._compose(None)

    def _view(self, terminal: bool) -> None:
        """Set the observation, legal names and accepted answers (cached per history)."""
        key = tuple(self._history_key)
        view = self._view_cache.get(key)
        if view is None:
            if len(self._view_cache) >= _OBS_CACHE_LIMIT:
                self._view_cache.clear()
            self._legal = {} if terminal else self.action_names(self._state)
            accepted = {f"<action>{name}</action>": name for name in self._legal}
            if self.accept_bare:
                accepted.update({name: name for name in self._legal})
            view = self._view_cache[key] = (self._compose(None), self._legal, accepted)
        self._observation, self._legal, self._accepted = view

    def _replayed_history(self) -> list[str]:
        """The history lines of this episode, rebuilt by replaying its actions."""
        replay = self.game.new_initial_state()
        lines = []
        for action in self._history_key[1:]:
            line = self.describe_move(replay, replay.current_player(), action, self._seat)
            if line is not None:
                lines.append(line)
            replay.apply_action(action)
        return lines

    def _compose(self, notice: str | None) -> str:
        state, seat = self._state, self._seat
        header = self._header_cache.get(seat)
        if header is None:
            header = self._header_cache[seat] = self.rules(seat)
        history = "\n".join(f"- {line}" for line in self._replayed_history()) or "- (nothing yet)"
        parts = [header, "", self.private_view(state, seat), "", "Moves so far:", history, ""]
        if self._forfeited:
            parts.append("You forfeited this game by not giving a legal action.")
        elif state.is_terminal():
            parts.append(self.describe_end(state, seat))
        else:
            if notice:
                parts.append(f"Note: {notice}")
            legal = ", ".join(self._legal)
            parts.append(f"Legal actions: {legal}")
            parts.append(
                "Think briefly if you like, then answer with exactly one legal action "
                "inside tags, e.g. <action>" + next(iter(self._legal)) + "</action>."
            )
        return clip_text("\n".join(parts), self.max_observation_chars)

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
        return info

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

    def legal_action_names(self) -> Sequence[str]:
        return list(self._legal)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the game as its action history; opponents are rebuilt from their ids."""
        state = self.__dict__.copy()
        pyspiel_state = state.pop("_state", None)
        state["_serialized_history"] = None if pyspiel_state is None else pyspiel_state.history()
        for key in ("game", "_opponents", "_opponent"):
            state.pop(key, None)
        state["_view_cache"] = {}
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
