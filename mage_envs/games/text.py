"""The text layer of a two-player OpenSpiel game: rules, views, prompts, answers.

:class:`GameText` is what the single-agent env (:class:`~mage_envs.games.base.OpenSpielTextEnv`,
one seat against an opponent population) and the PettingZoo env
(:class:`~mage_envs.pettingzoo.text_game.TextGameAEC`, both seats) share: each composes one
instance. It knows nothing of opponents, seeding or rewards. A game module subclasses it
and supplies the rules, the action names, a seat's private view, one line per move and the
end of the game; this class writes the prompts from them and reads the answers.

Example:
    >>> from mage_envs.games.kuhn_poker import KuhnPokerText
    >>> text = KuhnPokerText(prompt_style="compact")
    >>> state = text.game.new_initial_state()
    >>> for action in (2, 0, 0):                 # King to Player 1, Jack to Player 2, a check
    ...     state.apply_action(action)
    >>> print(text.prompt(state, 1, [2, 0, 0], list(text.action_names(state))))
    Kuhn Poker. You are Player 2.
    Legal actions: check, bet
    Moves: Opponent checks.
    Your card: Jack.
    >>> text.read("<action>bet</action>", text.action_names(state), text.answers(text.action_names(state)))
    'bet'
"""

from __future__ import annotations

import os
from typing import Any, ClassVar, Sequence

import pyspiel

from ..core.contract import clip_text
from ..core.parsing import ParsedAction, answer_instruction, canonical_answers, parse_action, tag_suffix
from ..facts import load_game

__all__ = ["FORFEIT_LINE", "GameText", "accepted_answer"]

#: The last line of the prompt of a player who forfeited.
FORFEIT_LINE = "You forfeited this game by not giving a legal action."
#: A text layer keeps the answer tables of at most this many sets of legal names.
ANSWERS_CACHE_LIMIT = 4096


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


class GameText:
    """The text layer of one game, seen from either seat.

    Args:
        accept_bare: accept an answer that is exactly a legal action without tags.
        prompt_style: ``"full"`` (rules, view, moves, legal actions, answer format) or
            ``"compact"`` (no rules text; the legal actions, the moves, then the private
            view last — for small models and tight token budgets).

    A subclass names ``game_string`` (its OpenSpiel game), ``title`` and
    ``max_observation_chars`` and implements the hooks :meth:`rules`,
    :meth:`action_names`, :meth:`private_view`, :meth:`describe_move`,
    :meth:`describe_end`, and :meth:`forfeit_payoff` when a forfeit is not the game's worst
    payoff.
    """

    #: OpenSpiel game string, e.g. ``"kuhn_poker"``.
    game_string: ClassVar[str]
    #: Human name used in prompts.
    title: ClassVar[str]
    #: Prompts never exceed this many characters (checked by the tests).
    max_observation_chars: ClassVar[int] = 4096

    def __init__(self, accept_bare: bool = True, prompt_style: str = "full") -> None:
        if prompt_style not in ("full", "compact"):
            raise ValueError(f"prompt_style must be 'full' or 'compact', got {prompt_style!r}")
        self.game: pyspiel.Game = load_game(self.game_string)
        self.accept_bare = accept_bare
        self.prompt_style = prompt_style
        self._header_cache: dict[int, str] = {}
        self._instruction_cache: dict[str, str] = {}
        self._answers_cache: dict[tuple[str, ...], dict[str, str]] = {}
        self._preamble: str | None = None

    # ------------------------------------------------------------------ hooks
    def rules(self, seat: int) -> str:
        """The rules and the seat, shown at the top of every full prompt."""
        raise NotImplementedError

    @property
    def preamble(self) -> str:
        """The opening lines every full prompt shares whatever the seat and state (the rules
        without the seat's line); ``""`` in the compact style. A meta-episode keeps them
        above its memory, so that all of a run's prompts begin alike.

        Example:
            >>> from mage_envs.games.kuhn_poker import KuhnPokerText
            >>> KuhnPokerText().preamble.splitlines()[0], KuhnPokerText(prompt_style="compact").preamble
            ('You are playing Kuhn Poker, a two-player card game.', '')
        """
        if self.prompt_style == "compact":
            return ""
        if self._preamble is None:
            shared = os.path.commonprefix([self.rules(seat) for seat in range(self.game.num_players())])
            self._preamble = shared[: shared.rfind("\n") + 1].rstrip("\n")
        return self._preamble

    def action_names(self, state: pyspiel.State) -> dict[str, int]:
        """Legal action names for the player to move, in display order, -> action ids."""
        raise NotImplementedError

    def private_view(self, state: pyspiel.State, seat: int) -> str:
        """What ``seat`` sees now besides the move list (its card, the board...)."""
        raise NotImplementedError

    def describe_move(self, state: pyspiel.State, player: int, action: int, seat: int) -> str | None:
        """One history line for ``action`` played in ``state``, as ``seat`` reads it
        (``None`` hides it)."""
        raise NotImplementedError

    def describe_end(self, state: pyspiel.State, seat: int) -> str:
        """What is revealed at the end (showdown, final board)."""
        raise NotImplementedError

    def forfeit_payoff(self, state: pyspiel.State, seat: int) -> float:
        """``seat``'s payoff when it forfeits in ``state``: by default the game's worst."""
        return self.game.min_utility()

    # ------------------------------------------------------------------ answers
    def answers(self, legal: dict[str, int]) -> dict[str, str]:
        """The answers read without parsing -> names, for the ``legal`` names (one table per
        set of names, shared: do not change it)."""
        names = tuple(legal)
        accepted = self._answers_cache.get(names)
        if accepted is None:
            if len(self._answers_cache) >= ANSWERS_CACHE_LIMIT:
                self._answers_cache.clear()
            accepted = self._answers_cache[names] = canonical_answers(names, self.accept_bare)
        return accepted

    def read(self, action: Any, legal: dict[str, int], accepted: dict[str, str]) -> str | ParsedAction:
        """The legal name ``action`` gives (looked up in ``accepted``, :meth:`answers`, else
        parsed), or the :class:`~mage_envs.core.parsing.ParsedAction` that says why none."""
        chosen = accepted_answer(accepted, action)
        if chosen is not None:
            return chosen
        parsed = parse_action(action, list(legal), accept_bare=self.accept_bare)
        return parsed if parsed.action is None else parsed.action

    # ------------------------------------------------------------------ prompts
    def trail(self, before: pyspiel.State, player: int, action: int, seat: int, trail: tuple[str, ...]) -> tuple[str, ...]:
        """``trail`` (the history lines ``seat`` has read) after ``player`` plays ``action``
        in ``before``."""
        line = self.describe_move(before, player, action, seat)
        return trail if line is None else (*trail, line)

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

    def summary_line(self, private: str, lines: Sequence[str], ending: str) -> str:
        """The episode summary: the ``private`` view (when one line), the history ``lines``
        and the ``ending`` (the end of the game or the forfeit line), on one line."""
        parts = [private] if "\n" not in private else []
        parts += lines
        parts.append(ending)
        return " ".join(parts)

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
            >>> from mage_envs.games.kuhn_poker import KuhnPokerText
            >>> text = KuhnPokerText()
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
        history = "- " + "\n- ".join(lines) if lines else "- (nothing yet)"
        parts = [header, "", private, "", "Moves so far:", history, ""]
        if ending is not None:
            parts.append(ending)
        else:
            if notice:
                parts.append(f"Note: {notice}")
            parts.append(f"Legal actions: {', '.join(legal)}")
            instruction = self._instruction_cache.get(legal[0])
            if instruction is None:
                instruction = self._instruction_cache[legal[0]] = answer_instruction(legal[0], think=True, legal=True)
            parts.append(instruction)
        prompt = "\n".join(parts)
        return prompt if len(prompt) <= self.max_observation_chars else clip_text(prompt, self.max_observation_chars)

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
