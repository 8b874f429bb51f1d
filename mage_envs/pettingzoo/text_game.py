"""Both seats of a text game as one PettingZoo AEC env: :class:`TextGameAEC`.

The agents ``"player_0"`` (seat 0, moves first) and ``"player_1"`` are the game's two
seats: two learners, or one model in self-play. Each observes a dict:

* ``"prompt"``: the prompt the single-agent env shows that seat (rules, its private view,
  the moves so far, the legal actions and the answer format), built by the game's text
  layer, the same :class:`~mage_envs.games.text.GameText` the single-agent env composes;
* ``"legal_moves"``: a 0/1 mask over the engine's action ids (all zeros when the seat may
  not act). It is not called ``"action_mask"``: actions are text, not ids.

Actions are text, read as in the single-agent env (docs/text_contract.md).

Cycles: PettingZoo's parallel API steps every agent once per *cycle*. So that
``aec_to_parallel`` is exact for a turn-based game, each cycle is one turn: the seat to
move answers, the other seat passes (no legal moves, its prompt ends with
:data:`WAIT_LINE`, its answer is ignored). The game ends, and ``max_cycles`` truncates it,
at the end of a cycle.

Invalid answers follow an :class:`~mage_envs.core.contract.InvalidActionPolicy`, per seat
and game; the default :data:`DEFAULT_INVALID_ACTION` lets a seat retry three times and
forfeits it at its fourth invalid answer, so every game ends even under random text.

Rewards are the engine's payoffs times ``reward_scale``, paid to both seats at the step
that ends the game (zero-sum). A forfeit pays the forfeiting seat its forfeit payoff (a
fold in poker, a loss in Tic-Tac-Toe) and the other seat the opposite; a ``penalty`` for
an invalid answer goes to the offender alone.

Example:
    >>> from mage_envs.pettingzoo import kuhn_poker_v0
    >>> env = kuhn_poker_v0.raw_env()
    >>> env.reset(seed=1)
    >>> [env.infos[agent]["legal_actions"] for agent in env.agents]   # player_0 moves first
    [['check', 'bet'], []]
    >>> env.step("<action>bet</action>")                             # player_0 bets
    >>> env.step("")                                                  # player_1 passes
    >>> env.agent_selection, env.observe("player_0")["legal_moves"]   # next cycle: player_1's turn
    ('player_0', array([0, 0], dtype=int8))
    >>> env.observe("player_0")["prompt"].splitlines()[-1]
    'It is not your turn to act: wait. Any answer now is ignored.'
    >>> env.step("")                                                  # player_0 passes
    >>> env.step("fold")                                              # player_1 folds
    >>> env.rewards, env.terminations
    ({'player_0': 1.0, 'player_1': -1.0}, {'player_0': True, 'player_1': True})
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

import gymnasium
import numpy as np
import pyspiel
from gymnasium import spaces
from gymnasium.utils import EzPickle, seeding
from pettingzoo import AECEnv

from ..core.contract import MAX_ACTION_CHARS, InvalidActionPolicy, text_space
from ..core.invalid import judge_invalid
from ..core.parsing import ParsedAction
from ..games.base import OpenSpielTextEnv
from ..games.engine import ChanceStream, GameNode, HistoryCache, checked_reward_scale
from ..games.text import FORFEIT_LINE

AGENTS = ("player_0", "player_1")
#: Default invalid-action policy: three retries per seat and game, then a forfeit.
DEFAULT_INVALID_ACTION = InvalidActionPolicy("retry", max_retries=3)
#: The last line of the prompt of a seat that passes this cycle.
WAIT_LINE = "It is not your turn to act: wait. Any answer now is ignored."
#: The last line of the prompt of a seat whose opponent forfeited.
OPPONENT_FORFEIT_LINE = "The opponent forfeited this game by not giving a legal action."
#: The last line of the prompts of a game cut off by ``max_cycles``.
TRUNCATED_LINE = "The game was stopped: it reached its limit of {cycles} turns."
_CHANCE = int(pyspiel.PlayerId.CHANCE)
#: What the env keeps per history: one :class:`~mage_envs.games.engine.GameNode` per seat.
NodePair = tuple[GameNode, GameNode]


class SeatView:
    """What one seat reads at one history, computed once (a :class:`GameNode`'s ``view``).

    ``private``: its private view; ``ending``: the end of the game at a terminal history;
    ``legal``: its legal names -> ids when it is the seat to move (else empty), with
    ``accepted`` (the answers read without parsing) and ``mask`` (its ``legal_moves``, never
    handed out: observations get a copy); ``prompts``: its prompts without a notice, by the
    line that ends them (``None``: the legal actions).
    """

    __slots__ = ("accepted", "ending", "legal", "mask", "private", "prompts")

    def __init__(
        self, private: str, ending: str | None, legal: dict[str, int], accepted: dict[str, str], mask: np.ndarray
    ) -> None:
        self.private = private
        self.ending = ending
        self.legal = legal
        self.accepted = accepted
        self.mask = mask
        self.prompts: dict[str | None, str] = {}


def render_prompt(env: AECEnv) -> str | None:
    """``render()`` of a text AEC env: the selected agent's prompt (``"ansi"``), printed
    (``"human"``), or ``None`` with a warning when the env has no render mode."""
    if env.render_mode is None:
        gymnasium.logger.warn("You are calling render method without specifying any render mode.")
        return None
    agent = env.agent_selection
    text = f"[{agent}]\n{env.observe(agent)['prompt']}"
    if env.render_mode == "human":
        print(text)
        return None
    return text


class TextGameAEC(AECEnv, EzPickle):
    """A two-player OpenSpiel text game where both seats are PettingZoo agents.

    A game module subclasses it and names ``text_env``, the game's single-agent env class;
    the AEC env composes that env's text layer (``text_env.text_class``, as ``self.text``),
    not the env itself.

    Args:
        invalid_action: ``"retry"``, ``"forfeit"``, ``"fallback"``, a dict or an
            :class:`~mage_envs.core.contract.InvalidActionPolicy`, applied per seat.
        reward_scale: multiplies every payoff.
        accept_bare: accept an answer that is exactly a legal action without tags.
        max_cycles: truncate the game after this many turns (a complete game is shorter).
        prompt_style: ``"full"`` or ``"compact"`` (no rules text, for small models), as in
            :class:`~mage_envs.games.text.GameText`.
        render_mode: ``None``, ``"ansi"`` (``render()`` returns the selected agent's
            prompt) or ``"human"`` (prints it at every step).

    As the single-agent envs do (:class:`~mage_envs.games.engine.OpenSpielGameEnv`), the
    env keeps a :class:`~mage_envs.games.engine.GameNode` per seat and history it has
    played, in a :class:`~mage_envs.games.engine.HistoryCache` (``self._key`` encodes the
    history; ``self._pair`` holds the current nodes), so the chance odds, payoffs, history
    lines and each seat's :class:`SeatView` (prompts, legal names, mask) are computed once
    per history.
    """

    text_env: ClassVar[type[OpenSpielTextEnv]]
    metadata: ClassVar[dict[str, Any]] = {
        "name": "text_game",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": True,
        "render_fps": 1,
    }

    def __init__(
        self,
        invalid_action: str | InvalidActionPolicy | dict[str, Any] = DEFAULT_INVALID_ACTION,
        reward_scale: float = 1.0,
        accept_bare: bool = True,
        max_cycles: int = 100,
        render_mode: str | None = None,
        prompt_style: str = "full",
    ) -> None:
        EzPickle.__init__(
            self,
            invalid_action=invalid_action,
            reward_scale=reward_scale,
            accept_bare=accept_bare,
            max_cycles=max_cycles,
            render_mode=render_mode,
            prompt_style=prompt_style,
        )
        super().__init__()
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode must be None, 'ansi' or 'human', got {render_mode!r}")
        if not isinstance(max_cycles, int) or max_cycles < 1:
            raise ValueError(f"max_cycles must be a positive integer, got {max_cycles!r}")
        self.reward_scale = checked_reward_scale(reward_scale)
        self.invalid_policy = InvalidActionPolicy.from_spec(invalid_action)
        self.text = self.text_env.text_class(accept_bare=accept_bare, prompt_style=prompt_style)
        self.game = self.text.game
        self.max_cycles = max_cycles
        self.render_mode = render_mode
        self.possible_agents = list(AGENTS)
        num_actions = self.game.num_distinct_actions()
        self.observation_spaces = {
            agent: spaces.Dict(
                {
                    "prompt": text_space(self.text.max_observation_chars),
                    "legal_moves": spaces.MultiBinary(num_actions),
                }
            )
            for agent in AGENTS
        }
        # one action space per agent (the contract's ACTION_SPACE), each seeded on its own
        self.action_spaces = {agent: text_space(MAX_ACTION_CHARS) for agent in AGENTS}
        self._rng: random.Random | None = None
        # the live pyspiel.State once reset (pyspiel has no type stubs: Any to mypy)
        self._state: Any = None
        self._history: HistoryCache[NodePair] = HistoryCache(self.game, width=len(AGENTS))
        self._no_moves = np.zeros(num_actions, dtype=np.int8)

    @property
    def prompt_preamble(self) -> str:
        """What every prompt begins with, the same in every state (the rules without the
        seat's line: :attr:`~mage_envs.games.text.GameText.preamble`)."""
        return self.text.preamble

    def observation_space(self, agent: str) -> spaces.Dict:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Text:
        return self.action_spaces[agent]

    # ------------------------------------------------------------------ AEC API
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start a game. ``options``: ``instance`` (replay a deal)."""
        if seed is not None or self._rng is None:
            np_random, _ = seeding.np_random(seed)
            self._rng = random.Random(int(np_random.integers(0, 2**63 - 1)))
        instance = (options or {}).get("instance")
        self._instance = int(self._rng.getrandbits(63) if instance is None else instance)
        self._chance = ChanceStream(self._instance)
        self._state = self.game.new_initial_state()
        self._enter_root()
        self._play_chance()
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self._retries = [self.invalid_policy.max_retries] * len(AGENTS)
        self._notices: list[str | None] = [None] * len(AGENTS)
        self._reports: dict[str, dict[str, Any] | None] = dict.fromkeys(self.agents)
        self._forfeiter: int | None = None
        self._cycles = 0
        self.agent_selection = self.agents[0]
        self._start_turn()
        self._update_infos()

    def step(self, action: str | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        self._reports[agent] = None
        seat = AGENTS.index(agent)
        if self._may_act(seat):
            self._answer(seat, action)
        position = self.agents.index(agent)
        if position == len(self.agents) - 1:
            self._end_cycle()
        self.agent_selection = self.agents[(position + 1) % len(self.agents)]
        self._accumulate_rewards()
        self._update_infos()
        if self.render_mode == "human":
            self.render()

    def observe(self, agent: str) -> dict[str, Any]:
        seat = AGENTS.index(agent)
        view = self._view(seat)
        mask = view.mask if self._may_act(seat) else self._no_moves
        return {"prompt": self._prompt(seat, view), "legal_moves": mask.copy()}

    def render(self) -> str | None:
        return render_prompt(self)

    def close(self) -> None:
        """Nothing to release."""

    @property
    def game_state(self) -> pyspiel.State:
        """The live ``pyspiel`` state (read-only use; do not apply actions to it)."""
        if self._state is None:
            raise RuntimeError("call reset() first")
        return self._state

    # ------------------------------------------------------------------ nodes
    def _enter_root(self) -> None:
        """Move to the nodes of the initial state (``self._state``): key ``1``."""
        pair = self._history.get(1)
        self._key, self._pair = 1, self._add_pair(1, ((), ())) if pair is None else pair

    def _play(self, action: int) -> None:
        """Apply ``action`` to the live state and move to its nodes
        (:meth:`~mage_envs.games.engine.HistoryCache.play`)."""
        self._key, self._pair = self._history.play(self._key, action, self._state, self._grow)

    def _grow(self, key: int, action: int) -> NodePair:
        """Apply ``action``, not played from this history before, and add its nodes, each
        seat's trail extended by the history line it reads for ``action`` (read from the
        live state before the action is applied: no clone)."""
        state = self._state
        first, second = [self.text.trail(state, parent.player, action, seat, parent.trail)
                         for seat, parent in enumerate(self._pair)]
        state.apply_action(action)
        return self._add_pair(key, (first, second))

    def _add_pair(self, key: int, trails: tuple[tuple[str, ...], tuple[str, ...]]) -> NodePair:
        """Add the nodes of the live state at ``key``."""
        return self._history.add(key, (GameNode(self._state, 0, trails[0]), GameNode(self._state, 1, trails[1])))

    def _view(self, seat: int) -> SeatView:
        """``seat``'s :class:`SeatView` of the current history."""
        node = self._pair[seat]
        view = node.view
        if view is None:
            view = node.view = self._new_view(seat, node)
        return view

    def _new_view(self, seat: int, node: GameNode) -> SeatView:
        """``seat``'s :class:`SeatView` of the live state, whose node is ``node``."""
        text, state = self.text, self._state
        legal = text.action_names(state) if node.player == seat else {}
        accepted = text.answers(legal)
        mask = np.zeros(len(self._no_moves), dtype=np.int8)
        mask[list(legal.values())] = 1
        ending = text.describe_end(state, seat) if node.terminal else None
        return SeatView(text.private_view(state, seat), ending, legal, accepted, mask)

    def _prompt(self, seat: int, view: SeatView) -> str:
        """``seat``'s prompt now (see :meth:`~mage_envs.games.base.OpenSpielTextEnv.prompt`):
        kept in ``view`` unless it carries a notice."""
        ending = self._closing(seat)
        if ending is None:
            ending = view.ending
        notice = self._notices[seat] if ending is None else None
        prompt = view.prompts.get(ending) if notice is None else None
        if prompt is None:
            legal = list(view.legal) if ending is None else []
            prompt = self.text.compose_prompt(seat, self._pair[seat].trail, view.private, ending, legal, notice)
            if notice is None:
                view.prompts[ending] = prompt
        return prompt

    # ------------------------------------------------------------------ turns
    @property
    def _over(self) -> bool:
        return self._forfeiter is not None or self._pair[0].terminal

    def _start_turn(self) -> None:
        """Begin a cycle: the seat to move may answer once."""
        self._mover = None if self._over else self._state.current_player()
        self._moved = False

    def _may_act(self, seat: int) -> bool:
        return not self._moved and seat == self._mover and not any(self.truncations.values())

    def _legal(self, seat: int) -> list[str]:
        """The legal action names of ``seat`` now (none when it may not act)."""
        return list(self._view(seat).legal) if self._may_act(seat) else []

    def _closing(self, seat: int) -> str | None:
        """The line that ends ``seat``'s prompt in place of the legal actions, if any."""
        if self._forfeiter is not None:
            return FORFEIT_LINE if seat == self._forfeiter else OPPONENT_FORFEIT_LINE
        if self._pair[0].terminal:
            return None  # the game's own ending (showdown, final board)
        if any(self.truncations.values()):
            return TRUNCATED_LINE.format(cycles=self._cycles)
        return None if self._may_act(seat) else WAIT_LINE

    def _answer(self, seat: int, action: Any) -> None:
        """Read the answer of the seat to move and apply it, or the invalid-action policy."""
        self._moved = True
        view = self._view(seat)
        names = view.legal
        answer = self.text.read(action, names, view.accepted)
        chosen = self._invalid(seat, answer, names) if isinstance(answer, ParsedAction) else answer
        if chosen is None:
            return
        self._notices[seat] = None
        self._play(names[chosen])
        self._play_chance()
        if self._pair[0].terminal:
            for agent, node in zip(AGENTS, self._pair):
                assert node.payoff is not None  # a terminal node keeps each seat's payoff
                self.rewards[agent] += node.payoff * self.reward_scale

    def _invalid(self, seat: int, parsed: ParsedAction, names: dict[str, int]) -> str | None:
        """Apply the invalid-action policy to ``seat``'s ``parsed`` answer (``names``: its
        legal names -> ids): the name to play instead, or ``None`` (a retry, a forfeit)."""
        policy = self.invalid_policy
        assert self._rng is not None  # seeded by reset()
        decision = judge_invalid(policy, parsed, list(names), self._retries[seat], self._rng)
        self._retries[seat] = decision.retries_left
        self._reports[AGENTS[seat]] = decision.report
        self.rewards[AGENTS[seat]] += policy.penalty
        if decision.applied == "retry":
            self._notices[seat] = decision.notice
            return None
        if decision.applied == "forfeit":
            self._forfeit(seat)
            return None
        return decision.substitute

    def _forfeit(self, seat: int) -> None:
        state, text = self._state, self.text
        forfeit_return = self.invalid_policy.forfeit_value(lambda: text.forfeit_payoff(state, seat) * self.reward_scale)
        self._forfeiter = seat
        self.rewards[AGENTS[seat]] += forfeit_return
        self.rewards[AGENTS[1 - seat]] -= forfeit_return

    def _play_chance(self) -> None:
        """Deal from the instance's chance stream until a player is to move (or the end)."""
        node = self._pair[0]
        while node.player == _CHANCE:
            self._play(self._chance.draw(node.cumulative, node.outcomes))
            node = self._pair[0]

    def _end_cycle(self) -> None:
        self._cycles += 1
        if self._over:
            self.terminations = dict.fromkeys(self.agents, True)
        elif self._cycles >= self.max_cycles:
            self.truncations = dict.fromkeys(self.agents, True)
        else:
            self._start_turn()

    def _outcome(self, seat: int) -> str | None:
        if self._forfeiter is not None:
            return "loss" if seat == self._forfeiter else "win"
        payoff = self._pair[seat].payoff
        if payoff is None:
            return None
        return "win" if payoff > 0 else "loss" if payoff < 0 else "draw"

    def _update_infos(self) -> None:
        over = self._over
        self.infos = {}
        for agent in self.agents:
            seat = AGENTS.index(agent)
            info: dict[str, Any] = {
                "legal_actions": self._legal(seat),
                "seat": seat,
                "invalid_action": self._reports[agent],
                "instance": self._instance,
            }
            if over:
                outcome = self._outcome(seat)
                info.update(outcome=outcome, success=outcome == "win", forfeit=self._forfeiter is not None)
            self.infos[agent] = info
