"""The engine loop shared by every view of a two-player OpenSpiel game.

:class:`OpenSpielGameEnv` owns what does not depend on how the agent sees the game: the
opponent population, the seat, seeding, the instance's chance stream, the loop that plays
chance and the opponent until it is the agent's turn, payoffs, the invalid-action policy
and pickling. A view subclasses it and supplies the observation (:meth:`_new_view`) and how an
action arrives: the text view (:class:`~mage_envs.games.base.OpenSpielTextEnv`) parses an
answer, the numeric view (:class:`~mage_envs.numeric.OpenSpielTensorEnv`) takes an id.

Randomness: ``reset(seed=...)`` seeds ``np_random``; from it the env derives two
``random.Random`` streams: one handed to the opponent (its play, and the first episode's
opponent, instance and seat), and one that draws the opponent and instance of every later
unseeded ``reset()``. So the deals that follow a seed do not depend on how the agent or the
opponent played: two agents reset with one seed meet the same sequence of deals (common
random numbers, as in duplicate poker). Chance events (the deal) come from the episode's
*instance* number, so ``reset(options={"instance": k})`` replays the same deal and seat
against whatever the opponent does. Both views draw the same opponent, instance and seat
from the same seed:

Example:
    >>> from mage_envs.games.kuhn_poker import KuhnPokerEnv
    >>> from mage_envs.numeric import KuhnPokerTensorEnv
    >>> _, text = KuhnPokerEnv(opponent="trainable").reset(seed=4)
    >>> _, tensor = KuhnPokerTensorEnv(opponent="trainable").reset(seed=4)
    >>> [text[key] == tensor[key] for key in ("opponent", "seat", "instance")]
    [True, True, True]
"""

from __future__ import annotations

import bisect
import math
import random
from typing import Any, Callable, ClassVar, Generic, Sequence, TypeVar

import gymnasium as gym
import numpy as np
import pyspiel

from ..core.contract import InvalidActionPolicy, Seat
from ..core.invalid import judge_invalid
from ..core.parsing import ParsedAction
from ..facts import load_game
from ..opponents.base import MoveTable, Opponent, draw_move
from ..opponents.population import OpponentSpec, as_population

ObsType = TypeVar("ObsType")
ActType = TypeVar("ActType")
_MASK64 = (1 << 64) - 1
#: The chance streams' 64-bit LCG (Knuth's MMIX constants) and its top 53 bits as a float in [0, 1).
_LCG_MULTIPLIER, _LCG_INCREMENT = 6364136223846793005, 1442695040888963407
_UNIT = 1.0 / 9007199254740992.0
_CHANCE = int(pyspiel.PlayerId.CHANCE)
_TERMINAL = int(pyspiel.PlayerId.TERMINAL)
#: An env's table of visited histories is a cache: it is cleared past this many nodes.
NODE_LIMIT = 200_000


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


def checked_reward_scale(reward_scale: float) -> float:
    """``reward_scale`` as a float, or ``ValueError`` unless it is a positive number.

    Example:
        >>> checked_reward_scale(5)
        5.0
    """
    if not np.isfinite(reward_scale) or reward_scale <= 0:
        raise ValueError(f"reward_scale must be a positive number, got {reward_scale!r}")
    return float(reward_scale)


def chance_table(outcomes: Sequence[tuple[int, float]]) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """A chance node's ``chance_outcomes()`` as (cumulative probabilities, actions).

    Example:
        >>> chance_table([(0, 0.25), (2, 0.75)])
        ((0.25, 1.0), (0, 2))
    """
    cumulative, total = [], 0.0
    for _, prob in outcomes:
        total += prob
        cumulative.append(total)
    return tuple(cumulative), tuple(action for action, _ in outcomes)


def chance_thresholds(cumulative: Sequence[float]) -> tuple[int, ...]:
    """The cumulative probabilities of a :func:`chance_table` as thresholds on the 64-bit
    state of a chance stream: ``bisect_right(thresholds, state)`` is
    ``bisect_right(cumulative, (state >> 11) * 2**-53)`` (what :meth:`ChanceStream.draw`
    computes) without the shift and the float: ``c <= k * 2**-53`` exactly when
    ``ceil(c * 2**53) <= k``, and for ``k = state >> 11`` that is
    ``ceil(c * 2**53) << 11 <= state``.

    Example:
        >>> state = 0x5555555555555555 << 1   # 2/3 of 2**64 rounded down, above the float 2/3
        >>> bisect.bisect_right(chance_thresholds((1 / 3, 2 / 3, 1.0)), state)
        2
        >>> bisect.bisect_right((1 / 3, 2 / 3, 1.0), (state >> 11) * _UNIT)
        2
    """
    return tuple(math.ceil(c * 9007199254740992.0) << 11 for c in cumulative)


class ChanceStream:
    """The chance outcomes of one instance: a 64-bit LCG seeded by SplitMix64 of its number.

    The same instance draws the same outcomes, on every platform and in every view.

    Example:
        >>> state = pyspiel.load_game("kuhn_poker").new_initial_state()
        >>> a, b = ChanceStream(5), ChanceStream(5)
        >>> a.sample(state) == b.draw(*chance_table(state.chance_outcomes()))
        True
    """

    def __init__(self, instance: int) -> None:
        self._state = splitmix64(instance)

    def draw(self, cumulative: Sequence[float], actions: Sequence[int]) -> int:
        """The next outcome of a chance node given as its :func:`chance_table`: the first
        action whose cumulative probability exceeds the next uniform number (the last
        action if rounding leaves none)."""
        self._state = (self._state * _LCG_MULTIPLIER + _LCG_INCREMENT) & _MASK64
        index = bisect.bisect_right(cumulative, (self._state >> 11) * _UNIT)
        return actions[index] if index < len(actions) else actions[-1]

    def sample(self, state: pyspiel.State) -> int:
        """The next chance outcome for the chance node ``state``."""
        return self.draw(*chance_table(state.chance_outcomes()))


def key_base(game: pyspiel.Game) -> int:
    """The base of an env's history keys for ``game``: every action and chance outcome id
    plus one is a digit (``1 .. base - 1``), and so is a seat plus one.

    Example:
        >>> key_base(pyspiel.load_game("tic_tac_toe"))
        10
    """
    return max(game.num_distinct_actions(), game.max_chance_outcomes(), 2) + 1


class GameNode:
    """What an env keeps about one history of the game, seen from one seat.

    ``player`` is OpenSpiel's player to move (``-1`` chance, ``-4`` terminal); a chance node
    keeps its :func:`chance_table` (``cumulative``, ``outcomes``) and the same table as
    :func:`chance_thresholds` (``thresholds``), a terminal node the seat's ``payoff`` and
    ``outcome`` (``"win"``, ``"loss"`` or ``"draw"``). ``trail`` is what the view derives
    move by move (the text view: the history lines the seat reads) and ``view`` what it
    shows at this history, kept by :class:`OpenSpielGameEnv` from its first showing on, or
    from its second (``False`` once shown once: :attr:`OpenSpielGameEnv.keep_first_view`),
    ``None`` until then. ``moves`` keeps the move tables
    (:meth:`~mage_envs.opponents.Opponent.move_table_at`) of the stationary opponents
    (:attr:`~mage_envs.opponents.Opponent.stationary`) that have played here, by opponent id.

    Example:
        >>> state = pyspiel.load_game("kuhn_poker").new_initial_state()
        >>> GameNode(state, 0).outcomes
        (0, 1, 2)
    """

    __slots__ = ("player", "terminal", "payoff", "outcome", "cumulative", "outcomes", "thresholds", "trail", "view",
                 "moves")

    def __init__(self, state: pyspiel.State, seat: int, trail: tuple[Any, ...] = ()) -> None:
        player = self.player = state.current_player()
        self.terminal = player == _TERMINAL  # OpenSpiel's player to move in a terminal state
        self.payoff: float | None = None
        self.outcome: str | None = None
        if self.terminal:
            payoff = self.payoff = state.returns()[seat]
            self.outcome = "win" if payoff > 0 else "loss" if payoff < 0 else "draw"
        self.cumulative: tuple[float, ...] = ()
        self.outcomes: tuple[int, ...] = ()
        self.thresholds: tuple[int, ...] = ()
        if player == _CHANCE:
            self.cumulative, self.outcomes = chance_table(state.chance_outcomes())
            self.thresholds = chance_thresholds(self.cumulative)
        self.trail = trail
        self.view: Any = None
        self.moves: dict[str, MoveTable] | None = None


class View:
    """What a view shows at one history: the ``observation``, the ``legal`` names -> ids
    of the agent to move (empty when it may not act) and, at the end of a game, the one-line
    ``summary`` of the episode for ``info["summary"]`` (``None``: none). A view's subclass
    adds its own."""

    __slots__ = ("observation", "legal", "summary")

    def __init__(self, observation: Any, legal: dict[str, int], summary: str | None = None) -> None:
        self.observation = observation
        self.legal = legal
        self.summary = summary


NodeT = TypeVar("NodeT")


class HistoryCache(Generic[NodeT]):
    """What an env keeps per history it has played, keyed by an int that encodes it.

    A history's key is a root key (the seat plus one for an env seen from one seat) and
    its actions as the digits of a bijective base :func:`key_base` number:
    ``key * base + action + 1`` per action. The table is a cache: it is cleared when it
    holds :data:`NODE_LIMIT` nodes (``width`` nodes per entry: one per seat kept).

    Example:
        >>> cache = HistoryCache(pyspiel.load_game("kuhn_poker"))
        >>> cache.base, cache.child_key(1, 2)
        (4, 7)
    """

    def __init__(self, game: pyspiel.Game, width: int = 1) -> None:
        self.base = key_base(game)
        self.width = width
        self._nodes: dict[int, NodeT] = {}
        #: The node at a key, or ``None`` (the table's own ``dict.get``: this is the hot path).
        self.get: Callable[[int], NodeT | None] = self._nodes.get

    def child_key(self, key: int, action: int) -> int:
        """The key of the history ``key`` followed by ``action``."""
        return key * self.base + action + 1

    def add(self, key: int, node: NodeT) -> NodeT:
        """Keep ``node`` at ``key``, clearing the table first when it is full."""
        if self.width * len(self._nodes) >= NODE_LIMIT:
            self._nodes.clear()
        self._nodes[key] = node
        return node

    def play(self, key: int, action: int, state: pyspiel.State, grow: Callable[[int, int], NodeT]) -> tuple[int, NodeT]:
        """Apply ``action`` to the live ``state`` at history ``key``: the child's key and
        node, which ``grow(child_key, action)`` makes (applying the action itself) the first
        time the child is reached."""
        child = key * self.base + action + 1
        node = self._nodes.get(child)
        if node is None:
            node = grow(child, action)
        else:
            state.apply_action(action)
        return child, node


class OpenSpielGameEnv(gym.Env[ObsType, ActType]):
    """A two-player OpenSpiel game against an opponent population; the view is a subclass's.

    Args:
        opponent: an archetype id, ``"trainable"``/``"heldout"``/``"all"``, a list or dict of
            ids, a :class:`~mage_envs.opponents.Population` or an
            :class:`~mage_envs.opponents.Opponent`; drawn at every ``reset``.
        seat: the agent's seat, ``0`` (moves first), ``1`` or ``"random"`` (the parity of
            the episode's instance number, so a replayed instance keeps its seat).
        invalid_action: ``"retry"``, ``"forfeit"``, ``"fallback"`` or an
            :class:`~mage_envs.core.contract.InvalidActionPolicy`.
        reward_scale: multiplies every game payoff (MAGE used 5 for Kuhn chips, 10 for
            Tic-Tac-Toe).
        render_mode: ``None`` or ``"ansi"``.

    A view returns its :class:`View` of the current node from :meth:`_new_view` (the engine
    keeps it in ``self._node.view``: see :attr:`keep_first_view`), that of an episode ended
    by a forfeit from :meth:`_forfeit_view`, and the observation a retry shows from
    :meth:`_retry_observation`; the env keeps the view shown in ``self._shown``.

    The env keeps a :class:`GameNode` per (seat, history) it has played in a
    :class:`HistoryCache` (``self._history``; ``self._key`` encodes the current history and
    ``self._node`` is its node), so what depends only on the seat and the history (who
    moves, the chance odds, the payoff, the view, a stationary opponent's move distribution)
    is computed once. The episode is its list of actions (``self._actions``); the live
    ``pyspiel`` state (``self._state``) is built from them only when something reads it (a
    new node, a search-bot opponent, :attr:`state`), so a game on known histories calls no
    ``pyspiel`` at all.
    """

    #: OpenSpiel game string, e.g. ``"kuhn_poker"``.
    game_string: ClassVar[str]
    #: Default ``opponent`` argument.
    default_opponent: ClassVar[str] = "trainable"
    #: Keep a history's view (its prompt, or tensor) from its first showing on; ``False``: from
    #: its second, for a game whose histories rarely repeat: random Tic-Tac-Toe shows most of
    #: its 550,000 histories per seat once, and keeping each prompt and view object made the
    #: garbage collector a fifth of its step (a history shown twice then costs one view
    #: more: a sixth more instructions for Leduc's random games, so the poker games keep it).
    keep_first_view: ClassVar[bool] = True
    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}

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
        scale = checked_reward_scale(reward_scale)
        self.game: pyspiel.Game = load_game(self.game_string)
        self.population = as_population(
            self.game_string, self.default_opponent if opponent is None else opponent
        )
        self.seat_option: Seat = seat
        self.invalid_policy = InvalidActionPolicy.from_spec(invalid_action)
        self.reward_scale = scale
        self.render_mode = render_mode
        self._opponents: dict[str, Opponent] = {}
        self._rng = random.Random(0)
        self._deals = random.Random(0)  # opponents and instances of unseeded resets
        self._actions: list[int] | None = None  # the episode's actions (None before reset)
        # the live pyspiel.State, applied up to self._actions[:self._applied] (None until read;
        # pyspiel has no type stubs: Any to mypy)
        self._live: Any = None
        self._applied = 0
        self._history: HistoryCache[GameNode] = HistoryCache(self.game)
        self._shown: View  # the view of the current state (set at reset)

    # ------------------------------------------------------------------ view hooks
    def _new_view(self, terminal: bool) -> View:
        """The view of the current node (``terminal``: the game is over); :meth:`_advance`
        keeps it in the node (:attr:`keep_first_view`)."""
        raise NotImplementedError

    def _retry_observation(self, notice: str | None) -> ObsType:
        """The observation after an invalid action the agent may retry."""
        raise NotImplementedError

    def _forfeit_view(self) -> View:
        """The view of an episode ended by a forfeit (no legal actions)."""
        raise NotImplementedError

    def forfeit_payoff(self, state: pyspiel.State, seat: int) -> float:
        """The agent's payoff when it forfeits in ``state``: by default the game's worst."""
        return self.game.min_utility()

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        """Start an episode. ``options``: ``instance`` (replay a deal), ``opponent`` (an id),
        ``same_opponent`` (the next episode of a meta-episode: the opponent keeps what it drew
        for the meta-episode, see :meth:`~mage_envs.opponents.Opponent.continue_episodes`)."""
        if seed is not None:  # gymnasium's reset only seeds
            super().reset(seed=seed)
        seeded = seed is not None or self._actions is None
        if seeded:
            self._rng = random.Random(int(self.np_random.integers(0, 2**63 - 1)))
            self._deals = random.Random(int(self.np_random.integers(0, 2**63 - 1)))
        draws = self._rng if seeded else self._deals
        opponent_id = instance = None
        if options:
            opponent_id, instance = options.get("opponent"), options.get("instance")
        # the opponent is drawn before the instance
        opponent_id = self._opponent_id = self.population.sample(draws) if opponent_id is None else str(opponent_id)
        instance = self._instance = draws.getrandbits(63) if instance is None else int(instance)
        opponent = self._opponents.get(opponent_id)
        if opponent is None:
            opponent = self._opponent_for(opponent_id)
        self._opponent = opponent
        if options and options.get("same_opponent"):
            opponent.continue_episodes(self._rng)
        else:
            opponent.reset(self._rng)
        seat_option = self.seat_option
        self._seat = instance & 1 if seat_option == "random" else int(seat_option)
        self._actions, self._live = [], None
        self._enter_root()
        self._chance = splitmix64(instance)  # the state of the instance's ChanceStream
        self._retries_left = self.invalid_policy.max_retries
        self._done = False
        self._forfeited = False
        self._outcome: str | None = None
        self._advance()
        return self._shown.observation, self._info(None)

    # ------------------------------------------------------------------ internals
    def _opponent_for(self, opponent_id: str) -> Opponent:
        opponent = self._opponents.get(opponent_id)
        if opponent is None:
            opponent = self.population.build(self.game_string, opponent_id)
            self._opponents[opponent_id] = opponent
        return opponent

    @property
    def _state(self) -> Any:
        """The live ``pyspiel`` state of the episode (``None`` before the first reset), built
        or brought up to date from ``self._actions`` when read."""
        actions, live = self._actions, self._live
        if live is not None and self._applied == len(actions):  # type: ignore[arg-type]  # live: reset
            return live
        if actions is None:
            return None
        if live is None:
            live = self._live = self.game.new_initial_state()
            self._applied = 0
        while self._applied < len(actions):
            live.apply_action(actions[self._applied])
            self._applied += 1
        return live

    def _enter_root(self) -> None:
        """Move to the node of the initial state: key ``seat + 1``."""
        key = self._key = self._seat + 1
        node = self._history.get(key)
        self._node = self._add_node(key, ()) if node is None else node

    def _play(self, action: int) -> None:
        """Play ``action`` and move to its node, which :meth:`_grow` adds the first time its
        history is reached (the live state is not touched otherwise)."""
        key = self._key * self._history.base + action + 1
        node = self._history.get(key)
        if node is None:
            node = self._grow(key, action)
        else:
            self._actions.append(action)  # type: ignore[union-attr]  # set at reset
        self._key, self._node = key, node

    def _apply(self, state: Any, action: int) -> Any:
        """Apply ``action`` to the live ``state`` (``self._state``, read by the caller) and
        record it; the live state after it."""
        state.apply_action(action)
        self._actions.append(action)  # type: ignore[union-attr]  # set at reset
        self._applied += 1
        return state

    def _grow(self, key: int, action: int) -> GameNode:
        """Play ``action``, not played from this history before (:meth:`_apply`), and add its
        node at ``key``."""
        return self._history.add(key, GameNode(self._apply(self._state, action), self._seat))

    def _add_node(self, key: int, trail: tuple[Any, ...]) -> GameNode:
        """Add the node of the live state at ``key`` (the current node lives on in
        ``self._node`` when the cache is cleared)."""
        return self._history.add(key, GameNode(self._state, self._seat, trail))

    def _advance(self, action: int | None = None) -> bool:
        """Play ``action`` (the agent's move, if given), then chance and opponent moves until
        it is the agent's turn, and show that node's view (kept in the node as
        :attr:`keep_first_view` says); True if the game ended. :meth:`_play`,
        :meth:`ChanceStream.draw` (by the node's :func:`chance_thresholds`) and :func:`~mage_envs.opponents.base.draw_move` of a known
        move table of a stationary opponent are inlined: this loop is most of a step."""
        seat, base, get, opponent_id = self._seat, self._history.base, self._history.get, self._opponent_id
        stationary = self._opponent.stationary
        node, key = self._node, self._key
        while True:
            if action is not None:
                key = key * base + action + 1
                child = get(key)
                if child is None:
                    child = self._grow(key, action)
                else:
                    self._actions.append(action)  # type: ignore[union-attr]  # set at reset
                node = self._node = child
            player = node.player
            if player == seat or node.terminal:
                self._key = key
                view = node.view
                if not view:  # None: never shown; False: shown once, not kept
                    shown = self._new_view(player != seat)
                    node.view = False if view is None and not self.keep_first_view else shown
                    view = shown
                self._shown = view
                return player != seat
            if player == _CHANCE:
                chance = self._chance = (self._chance * _LCG_MULTIPLIER + _LCG_INCREMENT) & _MASK64
                outcomes = node.outcomes
                index = bisect.bisect_right(node.thresholds, chance)
                action = outcomes[index] if index < len(outcomes) else outcomes[-1]
                continue
            moves = node.moves
            table = moves.get(opponent_id) if moves is not None and stationary else None
            if table is None:
                action = self._opponent_move(node)
                continue
            cumulative, actions = table
            if cumulative:
                index = bisect.bisect_right(cumulative, self._rng.random())
                action = actions[index] if index < len(actions) else actions[-1]
            else:
                action = actions[0]

    def _opponent_move(self, node: GameNode) -> int:
        """The opponent's action at ``node``. A stationary opponent's distribution there is
        asked for once and kept in the node (:meth:`_advance` draws from it next time) with
        the stream the env gave the opponent at reset, as the opponent's own
        :meth:`~mage_envs.opponents.Opponent.act` would."""
        opponent = self._opponent
        if not opponent.stationary:
            return opponent.act(self._state)
        if node.moves is None:
            node.moves = {}
        table = node.moves[self._opponent_id] = opponent.move_table_at(self._state)
        return draw_move(table, self._rng)

    def _after_move(self, action: int, reward: float, invalid: dict[str, Any] | None) -> tuple:
        """Play the agent's ``action`` and what follows (:meth:`_advance`); the step's result."""
        terminated = self._advance(action)
        if terminated:
            node = self._node
            assert node.payoff is not None  # a terminal node keeps the seat's payoff and outcome
            reward += node.payoff * self.reward_scale
            self._done, self._outcome = True, node.outcome
        return self._shown.observation, reward, terminated, False, self._info(invalid)

    def _invalid(self, parsed: ParsedAction, names: dict[str, int]) -> tuple:
        """Apply the invalid-action policy to ``parsed`` (``names``: the legal names -> ids)."""
        decision = judge_invalid(self.invalid_policy, parsed, list(names), self._retries_left, self._rng)
        self._retries_left = decision.retries_left
        reward = self.invalid_policy.penalty
        if decision.applied == "retry":
            return self._retry_observation(decision.notice), reward, False, False, self._info(decision.report)
        if decision.applied == "fallback":
            return self._after_move(names[decision.substitute], reward, decision.report)
        forfeit_return = self.invalid_policy.forfeit_value(
            lambda: self.forfeit_payoff(self._state, self._seat) * self.reward_scale
        )
        self._done, self._outcome, self._forfeited = True, "loss", True
        self._shown = self._forfeit_view()
        return self._shown.observation, reward + forfeit_return, True, False, self._info(decision.report)

    def _info(self, invalid: dict[str, Any] | None) -> dict[str, Any]:
        info: dict[str, Any] = {
            "legal_actions": [*self._shown.legal],
            "opponent": self._opponent_id,
            "seat": self._seat,
            "invalid_action": invalid,
            "instance": self._instance,
        }
        if self._done:
            info["outcome"] = self._outcome
            info["success"] = self._outcome == "win"
            info["forfeit"] = self._forfeited
            summary = self._shown.summary
            if summary is not None:
                info["summary"] = summary
        return info

    # ------------------------------------------------------------------ introspection
    @property
    def state(self) -> pyspiel.State:
        """The live ``pyspiel`` state (read-only use; do not apply actions to it)."""
        if self._actions is None:
            raise RuntimeError("call reset() first")
        return self._state

    @property
    def opponent(self) -> Opponent:
        """The opponent playing the current episode."""
        return self._opponent

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the game as its action history, without the table of nodes; opponents are
        rebuilt from their ids."""
        state = self.__dict__.copy()
        actions = state.pop("_actions", None)
        state["_serialized_history"] = None if actions is None else list(actions)
        for key in ("game", "_opponents", "_opponent", "_history", "_node", "_key", "_live", "_applied"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled env; a search-bot opponent restarts with a seed from the env's rng."""
        history = state.pop("_serialized_history")
        self.__dict__.update(state)
        if "_deals" not in state:   # pickled before fresh deals had a stream of their own
            self._deals = random.Random(self._rng.getrandbits(63))
        chance = state.get("_chance")
        if isinstance(chance, ChanceStream):  # pickled when the env kept its stream as an object
            self._chance = chance._state
        self.game = load_game(self.game_string)
        self._opponents = {}
        self._history = HistoryCache(self.game)
        self._actions, self._live, self._applied = None, None, 0
        if history is not None:
            self._actions = []
            self._enter_root()
            for action in history:
                self._play(action)
            self._opponent = self._opponent_for(self._opponent_id)
            self._opponent.reset(self._rng)
