"""The text view of every two-player OpenSpiel game, against an opponent population.

The engine is ``pyspiel``, driven by :class:`~mage_envs.games.engine.OpenSpielGameEnv`
(opponents, seat, seeding, chance, payoffs, the invalid-action policy); the text layer is
the game's :class:`~mage_envs.games.text.GameText` (rules, views, prompts, answers), which
the env composes as ``self.text``. A game module subclasses :class:`OpenSpielTextEnv` and
names its text layer in ``text_class``.

Randomness: as the engine's (:mod:`mage_envs.games.engine`): the deals and opponents that
follow a seed do not depend on the play, and ``reset(options={"instance": k})`` replays the
same deal and seat against whatever the opponent does.
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import pyspiel

from ..core.contract import ACTION_SPACE, InvalidActionPolicy, Seat, text_space
from ..core.parsing import ParsedAction
from ..opponents.population import OpponentSpec
from .engine import GameNode, OpenSpielGameEnv, View, splitmix64
from .text import FORFEIT_LINE, GameText, accepted_answer

__all__ = ["FORFEIT_LINE", "OpenSpielTextEnv", "Seat", "TextView", "accepted_answer", "splitmix64"]


class TextView(View):
    """What the text view shows at one history: the prompt, the legal names -> ids, the
    answers read without parsing (:meth:`~mage_envs.games.text.GameText.answers`) and, at
    the end of the game, the episode summary."""

    __slots__ = ("accepted",)

    def __init__(self, observation: str, legal: dict[str, int], accepted: dict[str, str], summary: str | None) -> None:
        self.observation = observation
        self.legal = legal
        self.accepted = accepted
        self.summary = summary


class OpenSpielTextEnv(OpenSpielGameEnv[str, str]):
    """A two-player OpenSpiel game against an opponent population, seen as text.

    Args: ``opponent``, ``seat``, ``invalid_action``, ``reward_scale`` and ``render_mode``
    as in :class:`~mage_envs.games.engine.OpenSpielGameEnv`; ``accept_bare`` and
    ``prompt_style`` as in :class:`~mage_envs.games.text.GameText`.

    At the end of an episode ``info["summary"]`` is a one-line account (private view, moves,
    result) that :class:`~mage_envs.MetaEpisodeWrapper` keeps in its memory.

    Each history's :class:`TextView` is computed once (the node's ``view``), and its
    history lines (the node's ``trail``) extend those of the history before it. The text
    layer's methods (``rules``, ``action_names``, ``private_view``, ``describe_move``,
    ``describe_end``, ``prompt``, ``compose_prompt``, ``history_lines``) are the env's too.
    """

    #: The game's text layer; ``game_string``, ``title`` and ``max_observation_chars`` are its.
    text_class: ClassVar[type[GameText]]
    #: Human name used in prompts.
    title: ClassVar[str]
    #: Observations never exceed this many characters (checked by the tests).
    max_observation_chars: ClassVar[int] = 4096

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        text_class = cls.__dict__.get("text_class")
        if text_class is not None:
            cls.game_string = text_class.game_string
            cls.title = text_class.title
            cls.max_observation_chars = text_class.max_observation_chars

    def __init__(
        self,
        opponent: OpponentSpec | None = None,
        seat: Seat = "random",
        invalid_action: str | InvalidActionPolicy | dict[str, Any] = "retry",
        reward_scale: float = 1.0,
        accept_bare: bool = True,
        render_mode: str | None = None,
        prompt_style: str = "full",
    ) -> None:
        text = self.text_class(accept_bare, prompt_style)
        super().__init__(opponent, seat, invalid_action, reward_scale, render_mode)
        self.text = text
        self.accept_bare = accept_bare
        self.prompt_style = prompt_style
        self.observation_space = text_space(self.max_observation_chars)
        self.action_space = ACTION_SPACE
        self._shown: TextView

    # ------------------------------------------------------------------ the text layer's
    @property
    def prompt_preamble(self) -> str:
        """What every prompt begins with, the same in every state (the text contract's
        optional ``prompt_preamble``; :attr:`~mage_envs.games.text.GameText.preamble`)."""
        return self.text.preamble

    def rules(self, seat: int) -> str:
        return self.text.rules(seat)

    def action_names(self, state: pyspiel.State) -> dict[str, int]:
        return self.text.action_names(state)

    def optimal_actions(self) -> list[str] | None:
        """The legal action names that keep the game value for the player to move in the
        current state, where the game is solved exactly (a perfect-information game; see
        :meth:`~mage_envs.games.tic_tac_toe.TicTacToeEnv.optimal_actions`); ``None`` here: this
        game has no exact solution to consult."""
        return None

    def private_view(self, state: pyspiel.State, seat: int) -> str:
        return self.text.private_view(state, seat)

    def describe_move(self, state: pyspiel.State, player: int, action: int, seat: int) -> str | None:
        return self.text.describe_move(state, player, action, seat)

    def describe_end(self, state: pyspiel.State, seat: int) -> str:
        return self.text.describe_end(state, seat)

    def forfeit_payoff(self, state: pyspiel.State, seat: int) -> float:
        return self.text.forfeit_payoff(state, seat)

    def prompt(self, state: pyspiel.State, seat: int, actions: Sequence[int], legal: Sequence[str],
               notice: str | None = None, closing: str | None = None) -> str:
        """:meth:`GameText.prompt <mage_envs.games.text.GameText.prompt>`."""
        return self.text.prompt(state, seat, actions, legal, notice, closing)

    def compose_prompt(self, seat: int, lines: Sequence[str], private: str, ending: str | None,
                       legal: Sequence[str], notice: str | None) -> str:
        return self.text.compose_prompt(seat, lines, private, ending, legal, notice)

    def history_lines(self, actions: Sequence[int], seat: int) -> list[str]:
        return self.text.history_lines(actions, seat)

    # ------------------------------------------------------------------ gym API
    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._actions is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            raise RuntimeError("the episode is over; call reset() to start a new one")
        shown = self._shown
        chosen = shown.accepted.get(action) if type(action) is str else None
        if chosen is None:  # not a canonical answer
            read = self.text.read(action, shown.legal, shown.accepted)
            if isinstance(read, ParsedAction):
                return self._invalid(read, shown.legal)
            chosen = read
        return self._after_move(shown.legal[chosen], 0.0, None)

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._shown.observation if self._actions is not None else ""
        return None

    # ------------------------------------------------------------------ internals
    def _retry_observation(self, notice: str | None) -> str:
        private = self.text.private_view(self._state, self._seat)
        return self.text.compose_prompt(self._seat, self._node.trail, private, None, list(self._shown.legal), notice)

    def _forfeit_view(self) -> TextView:
        text, trail = self.text, self._node.trail
        private = text.private_view(self._state, self._seat)
        observation = text.compose_prompt(self._seat, trail, private, FORFEIT_LINE, [], None)
        return TextView(observation, {}, {}, text.summary_line(private, trail, FORFEIT_LINE))

    def _new_view(self, terminal: bool) -> TextView:
        """The :class:`TextView` of the current node (the live state)."""
        text, state, seat, trail = self.text, self._state, self._seat, self._node.trail
        legal = {} if terminal else text.action_names(state)
        private = text.private_view(state, seat)
        ending = text.describe_end(state, seat) if terminal else None
        observation = text.compose_prompt(seat, trail, private, ending, [*legal], None)
        summary = None if ending is None else text.summary_line(private, trail, ending)
        return TextView(observation, legal, text.answers(legal), summary)

    def _grow(self, key: int, action: int) -> GameNode:
        """Apply ``action`` and add its node, with the history line it adds to the trail
        (read from the live state before the action is applied)."""
        parent, state = self._node, self._state
        trail = self.text.trail(state, parent.player, action, self._seat, parent.trail)
        return self._history.add(key, GameNode(self._apply(state, action), self._seat, trail))

    # ------------------------------------------------------------------ introspection
    def legal_action_names(self) -> Sequence[str]:
        return list(self._shown.legal)
