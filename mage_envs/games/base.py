"""The text view of every two-player OpenSpiel game.

The engine is ``pyspiel``, driven by :class:`~mage_envs.games.engine.OpenSpielGameEnv`
(opponents, seat, seeding, chance, payoffs, the invalid-action policy); this module only
turns its state into prompts and parses the agent's answers. A game module subclasses
:class:`OpenSpielTextEnv` and supplies the text layer: rules, action names, the agent's
private view and one line per move.

Randomness: ``reset(seed=...)`` seeds ``np_random``; from it the env derives one
``random.Random`` handed to the opponent and to the seat draw. Chance events (the deal)
come from the episode's *instance* number, so ``reset(options={"instance": k})`` replays
the same deal and seat against whatever the opponent does.
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import pyspiel

from ..core.contract import ACTION_SPACE, InvalidActionPolicy, Seat, clip_text, text_space
from ..core.parsing import answer_instruction, canonical_answers, parse_action, tag_suffix
from ..opponents.population import OpponentSpec
from .engine import GameNode, OpenSpielGameEnv, splitmix64

__all__ = ["FORFEIT_LINE", "OpenSpielTextEnv", "Seat", "accepted_answer", "splitmix64"]

#: The last line of the prompt of a player who forfeited.
FORFEIT_LINE = "You forfeited this game by not giving a legal action."
#: What the text view keeps per history: the observation, the legal names -> ids, the
#: answers accepted without parsing (each name tagged, and bare with ``accept_bare``) ->
#: names, and at the end of the game the episode summary.
TextView = tuple[str, dict[str, int], dict[str, str], str | None]


def accepted_answer(accepted: dict[str, str], action: Any) -> str | None:
    """The legal name that ``action`` gives without parsing: ``accepted`` maps the canonical
    answers (a tagged name, a bare one) to names; an answer that reasons, then gives one
    canonical tag, is looked up by its :func:`~mage_envs.core.parsing.tag_suffix`. ``None``
    when the answer must be parsed."""
    if not isinstance(action, str):
        return None
    chosen = accepted.get(action)
    if chosen is None:
        suffix = tag_suffix(action)
        return None if suffix is None else accepted.get(suffix)
    return chosen


class OpenSpielTextEnv(OpenSpielGameEnv[str, str]):
    """A two-player OpenSpiel game against an opponent population, seen as text.

    Args: ``opponent``, ``seat``, ``invalid_action``, ``reward_scale`` and ``render_mode``
    as in :class:`~mage_envs.games.engine.OpenSpielGameEnv`, and:
        accept_bare: accept an answer that is exactly a legal action without tags.
        prompt_style: ``"full"`` (rules, view, moves, legal actions, answer format) or
            ``"compact"`` (no rules text; the legal actions, the moves, then the private
            view last — for small models and tight token budgets).

    At the end of an episode ``info["summary"]`` is a one-line account (private view, moves,
    result) that :class:`~mage_envs.MetaEpisodeWrapper` keeps in its memory.

    Each history's observation, legal names, accepted answers and summary are computed
    once (the node's ``view``), and its history lines (the node's ``trail``) extend those
    of the history before it.
    """

    #: Human name used in prompts.
    title: ClassVar[str]
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
        prompt_style: str = "full",
    ) -> None:
        if prompt_style not in ("full", "compact"):
            raise ValueError(f"prompt_style must be 'full' or 'compact', got {prompt_style!r}")
        super().__init__(opponent, seat, invalid_action, reward_scale, render_mode)
        self.accept_bare = accept_bare
        self.prompt_style = prompt_style
        self.observation_space = text_space(self.max_observation_chars)
        self.action_space = ACTION_SPACE
        self._header_cache: dict[int, str] = {}
        self._accepted: dict[str, str]  # set by the view with self._legal

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

    # ------------------------------------------------------------------ gym API
    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            raise RuntimeError("the episode is over; call reset() to start a new one")
        chosen = accepted_answer(self._accepted, action)
        if chosen is None:
            parsed = parse_action(action, list(self._legal), accept_bare=self.accept_bare)
            if parsed.action is None:
                return self._invalid(parsed, self._legal)
            chosen = parsed.action
        self._play(self._legal[chosen])
        return self._after_move(0.0, None)

    def render(self) -> str | None:
        if self.render_mode == "ansi":
            return self._observation if self._state is not None else ""
        return None

    # ------------------------------------------------------------------ internals
    def _retry_observation(self, notice: str | None) -> str:
        private = self.private_view(self._state, self._seat)
        return self.compose_prompt(self._seat, self._node.trail, private, None, list(self._legal), notice)

    def _clear_view(self) -> None:
        self._legal, self._accepted = {}, {}
        private = self.private_view(self._state, self._seat)
        self._observation = self.compose_prompt(self._seat, self._node.trail, private, FORFEIT_LINE, [], None)
        self._summary_text = self._summary_line(private, FORFEIT_LINE)

    def _view(self, terminal: bool) -> None:
        """Set the observation, legal names and accepted answers (computed once per node)."""
        view = self._node.view
        if view is None:
            view = self._node.view = self._new_view(terminal)
        self._observation, self._legal, self._accepted, self._summary_text = view

    def _new_view(self, terminal: bool) -> TextView:
        """The :data:`TextView` of the current node (the live state)."""
        state, seat = self._state, self._seat
        legal = {} if terminal else self.action_names(state)
        accepted = canonical_answers(legal, self.accept_bare)
        private = self.private_view(state, seat)
        ending = self.describe_end(state, seat) if terminal else None
        observation = self.compose_prompt(seat, self._node.trail, private, ending, list(legal), None)
        summary = None if ending is None else self._summary_line(private, ending)
        return observation, legal, accepted, summary

    def _grow(self, key: int, action: int) -> GameNode:
        """Apply ``action`` and add its node, with the history line it adds to the trail."""
        parent, before = self._node, self._state.clone()
        self._state.apply_action(action)
        line = self.describe_move(before, parent.player, action, self._seat)
        return self._add_node(key, parent.trail if line is None else (*parent.trail, line))

    def _summary(self) -> str | None:
        return self._summary_text

    def _summary_line(self, private: str, ending: str) -> str:
        """The episode summary: the ``private`` view (when one line), the moves and the
        ``ending`` (the end of the game or the forfeit line), on one line."""
        parts = [private] if "\n" not in private else []
        parts += self._node.trail
        parts.append(ending)
        return " ".join(parts)

    # ------------------------------------------------------------------ prompts
    def _compact_prompt(
        self,
        seat: int,
        lines: Sequence[str],
        private: str,
        ending: str | None,
        legal: Sequence[str],
        notice: str | None,
    ) -> str:
        """The compact style: title and seat, legal actions, moves, private view last."""
        parts = [f"{self.title}. You are Player {seat + 1}."]
        if ending is None:
            if notice:
                parts.append(f"Note: {notice}")
            parts.append(f"Legal actions: {', '.join(legal)}")
        parts.append("Moves: " + (" ".join(lines) or "none"))
        parts.append(private)
        if ending is not None:
            parts.append(ending)
        return clip_text("\n".join(parts), self.max_observation_chars)

    def history_lines(self, actions: Sequence[int], seat: int) -> list[str]:
        """The history lines ``seat`` reads for ``actions`` played from the initial state."""
        replay = self.game.new_initial_state()
        lines = []
        for action in actions:
            line = self.describe_move(replay, replay.current_player(), action, seat)
            if line is not None:
                lines.append(line)
            replay.apply_action(action)
        return lines

    def prompt(
        self,
        state: pyspiel.State,
        seat: int,
        actions: Sequence[int],
        legal: Sequence[str],
        notice: str | None = None,
        closing: str | None = None,
    ) -> str:
        """The prompt ``seat`` reads in ``state``, reached by ``actions`` (chance included).

        Rules, private view and moves so far, then: ``closing`` if given (a forfeit, a seat
        that must wait), else the end of the game, else ``notice`` and the ``legal`` names
        with the answer format. Clipped to ``max_observation_chars``.

        Example:
            >>> from mage_envs.games.kuhn_poker import KuhnPokerEnv
            >>> text = KuhnPokerEnv()
            >>> state = text.game.new_initial_state()
            >>> for action in (2, 0):                       # deal: King to Player 1, Jack to Player 2
            ...     state.apply_action(action)
            >>> prompt = text.prompt(state, 0, [2, 0], ["check", "bet"])
            >>> print(prompt[prompt.index("Your card"):])
            Your card: King.
            <BLANKLINE>
            Moves so far:
            - (nothing yet)
            <BLANKLINE>
            Legal actions: check, bet
            Think briefly if you like, then answer with exactly one legal action inside tags, e.g. <action>check</action>.
        """
        lines = self.history_lines(actions, seat)
        private = self.private_view(state, seat)
        if closing is None and state.is_terminal():
            closing = self.describe_end(state, seat)
        return self.compose_prompt(seat, lines, private, closing, legal, notice)

    def compose_prompt(
        self,
        seat: int,
        lines: Sequence[str],
        private: str,
        ending: str | None,
        legal: Sequence[str],
        notice: str | None,
    ) -> str:
        """:meth:`prompt` from its parts: the history ``lines`` and ``private`` view the seat
        reads, and the ``ending`` (a closing line or the end of the game; ``None`` while
        the seat is to answer, with ``notice`` and the ``legal`` names)."""
        if self.prompt_style == "compact":
            return self._compact_prompt(seat, lines, private, ending, legal, notice)
        header = self._header_cache.get(seat)
        if header is None:
            header = self._header_cache[seat] = self.rules(seat)
        history = "\n".join(f"- {line}" for line in lines) or "- (nothing yet)"
        parts = [header, "", private, "", "Moves so far:", history, ""]
        if ending is not None:
            parts.append(ending)
        else:
            if notice:
                parts.append(f"Note: {notice}")
            parts.append(f"Legal actions: {', '.join(legal)}")
            parts.append(answer_instruction(legal[0], think=True, legal=True))
        return clip_text("\n".join(parts), self.max_observation_chars)

    # ------------------------------------------------------------------ introspection
    def legal_action_names(self) -> Sequence[str]:
        return list(self._legal)
