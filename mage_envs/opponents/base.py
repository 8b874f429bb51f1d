"""The ``Opponent`` protocol and the two kinds every archetype is built from.

An opponent plays one seat of an OpenSpiel game. The env hands it a ``random.Random``
derived from the env's ``np_random`` at every episode start, so the same env seed gives
the same games. Opponents whose move distribution is known in closed form expose it
through :meth:`Opponent.action_probabilities`; the exact oracles use it.

Example:
    >>> import random, pyspiel
    >>> game = pyspiel.load_game("kuhn_poker")
    >>> always_bet = PolicyOpponent("always-bet", lambda state: {1: 1.0})
    >>> always_bet.reset(random.Random(0))
    >>> state = game.new_initial_state(); state.apply_action(0); state.apply_action(1)
    >>> always_bet.act(state)
    1
"""

from __future__ import annotations

import bisect
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar, Hashable, Iterator, Literal, Mapping

import pyspiel

ActionProbs = Mapping[int, float]


class Opponent(ABC):
    """One seat's player. Subclasses implement :meth:`act`; stateful ones :meth:`reset`."""

    #: Stable archetype id, e.g. ``"aggressive"``; reported in ``info["opponent"]``.
    name: str = "opponent"
    #: True when :meth:`act` is ``sample_action(action_probabilities(state), rng)`` with the
    #: ``rng`` given to :meth:`reset` and the distribution a function of the state alone: an
    #: env may then keep its :meth:`move_table_at` per history and draw from it with that ``rng``
    #: (a subclass that changes :meth:`act` or :meth:`reset` sets it back to False).
    stationary: ClassVar[bool] = False

    def reset(self, rng: random.Random) -> None:
        """Start a new episode; all randomness must come from ``rng``."""
        self._rng = rng

    def continue_episodes(self, rng: random.Random) -> None:
        """Start the next episode of the same meta-episode (``reset(options={"same_opponent":
        True})``, which :class:`~mage_envs.core.meta.MetaEpisodeWrapper` passes from the second
        episode on). By default the same as :meth:`reset`; an opponent whose style is drawn
        per meta-episode keeps it here."""
        self.reset(rng)

    @abstractmethod
    def act(self, state: pyspiel.State) -> int:
        """The action to play in ``state`` (the opponent is the player to move)."""

    def action_probabilities(self, state: pyspiel.State) -> ActionProbs | None:
        """The exact move distribution in ``state``, or ``None`` when it has no closed form."""
        return None

    def meta_episode_draws(self) -> list[tuple[float, Opponent]] | None:
        """For an opponent that draws a policy per meta-episode and keeps it (see
        :meth:`continue_episodes`): each policy it may draw, with its probability, as an
        opponent of its own. ``None`` (the default): it plays one distribution throughout.
        A repeated deal's final-hand ceiling is the expectation over the draws (the deal and
        the drawn policy known), not the ceiling against :meth:`action_probabilities`."""
        return None

    def move_table_at(self, state: pyspiel.State) -> MoveTable:
        """The :func:`move_table` of the move distribution in ``state`` (``TypeError`` when it
        has no closed form)."""
        probs = self.action_probabilities(state)
        if probs is None:
            raise TypeError(f"{self!r} has no closed-form move distribution")
        return move_table(probs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


#: A move distribution as :func:`draw_move` reads it: (cumulative probabilities, actions).
MoveTable = tuple[tuple[float, ...], tuple[int, ...]]


def sample_action(probs: ActionProbs, rng: random.Random) -> int:
    """Draw an action from ``probs``; a pure strategy consumes no randomness.

    Example:
        >>> sample_action({0: 0.0, 1: 1.0}, random.Random(0))
        1
    """
    return draw_move(move_table(probs), rng)


def move_table(probs: ActionProbs) -> MoveTable:
    """``probs`` as a :data:`MoveTable`: the actions of positive probability with their
    cumulative probabilities, in the order of ``probs``; a distribution over one action is
    pure (no cumulative probabilities: drawing it consumes no randomness).

    Example:
        >>> move_table({0: 0.25, 1: 0.0, 2: 0.75}), move_table({1: 1.0})
        (((0.25, 1.0), (0, 2)), ((), (1,)))
    """
    if len(probs) == 1:
        return (), (next(iter(probs)),)
    cumulative, actions, total = [], [], 0.0
    for action, prob in probs.items():
        if prob > 0.0:
            total += prob
            cumulative.append(total)
            actions.append(action)
    if not actions:
        raise ValueError(f"action distribution has no positive mass: {dict(probs)}")
    return tuple(cumulative), tuple(actions)


def draw_move(table: MoveTable, rng: random.Random) -> int:
    """An action drawn from ``table``: the first whose cumulative probability exceeds one
    uniform number from ``rng`` (the last if rounding leaves none; none drawn when pure).

    Example:
        >>> draw_move(((0.25, 1.0), (0, 2)), random.Random(0)), draw_move(((), (1,)), random.Random(0))
        (2, 1)
    """
    cumulative, actions = table
    if not cumulative:
        return actions[0]
    index = bisect.bisect_right(cumulative, rng.random())
    return actions[index] if index < len(actions) else actions[-1]


def tabulate_policy(game: pyspiel.Game, policy: pyspiel.Policy) -> dict[str, dict[int, float]]:
    """A ``pyspiel.Policy`` as ``{information state: {action: probability}}`` over all
    decision nodes of ``game`` (walks the tree; meant for small games).

    Example:
        >>> import pyspiel
        >>> game = pyspiel.load_game("kuhn_poker")
        >>> table = tabulate_policy(game, pyspiel.UniformRandomPolicy(game))
        >>> len(table), sorted(table["0"].items())
        (12, [(0, 0.5), (1, 0.5)])
    """
    table: dict[str, dict[int, float]] = {}
    for state in decision_states(game):
        key = state.information_state_string()
        if key not in table:
            table[key] = {int(a): float(p) for a, p in policy.action_probabilities(state).items()}
    return table


def decision_states(game: pyspiel.Game) -> Iterator[pyspiel.State]:
    """Every non-terminal, non-chance history of ``game`` (depth first; small games only).

    Example:
        >>> import pyspiel
        >>> sum(1 for _ in decision_states(pyspiel.load_game("kuhn_poker")))
        24
    """
    stack = [game.new_initial_state()]
    while stack:
        state = stack.pop()
        if state.is_terminal():
            continue
        if state.is_chance_node():
            stack.extend(state.child(a) for a, _ in state.chance_outcomes())
            continue
        yield state
        stack.extend(state.child(a) for a in state.legal_actions())


class PolicyOpponent(Opponent):
    """An opponent given by a move distribution, cached per information state.

    ``policy(state)`` returns ``{action: probability}`` over legal actions; it must depend
    only on what the opponent can observe. The cache is keyed on ``key(state)``, by default
    the information state string; a policy that depends on less (a board, not the order of
    the moves) can pass a coarser key to keep the cache small.
    """

    def __init__(
        self,
        name: str,
        policy: Callable[[pyspiel.State], ActionProbs],
        key: Callable[[pyspiel.State], Hashable] | None = None,
    ) -> None:
        self.name = name
        self._policy = policy
        self._key = key
        self._cache: dict[Hashable, dict[int, float]] = {}
        self._tables: dict[Hashable, MoveTable] = {}
        self._rng = random.Random(0)

    def _state_key(self, state: pyspiel.State) -> Hashable:
        return state.information_state_string() if self._key is None else self._key(state)

    def action_probabilities(self, state: pyspiel.State) -> dict[int, float]:
        key = self._state_key(state)
        probs = self._cache.get(key)
        if probs is None:
            probs = {a: float(p) for a, p in self._policy(state).items() if p > 0.0}
            legal = set(state.legal_actions())
            if not probs or not set(probs) <= legal or abs(sum(probs.values()) - 1.0) > 1e-9:
                raise ValueError(
                    f"opponent {self.name!r} returned {probs} in information state {key!r}; "
                    f"expected probabilities over legal actions {sorted(legal)} summing to 1"
                )
            self._cache[key] = probs
        return probs

    def move_table_at(self, state: pyspiel.State) -> MoveTable:
        """The move table in ``state``, one per cache key (shared by every history that has it)."""
        key = self._state_key(state)
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = move_table(self.action_probabilities(state))
        return table

    stationary = True

    def act(self, state: pyspiel.State) -> int:
        return sample_action(self.action_probabilities(state), self._rng)


class BotOpponent(Opponent):
    """An OpenSpiel ``pyspiel.Bot`` rebuilt with a fresh seed from the env at each episode.

    ``make_bot(seed)`` builds the bot (for example a C++ ``pyspiel.MCTSBot``).
    """

    def __init__(self, name: str, make_bot: Callable[[int], pyspiel.Bot]) -> None:
        self.name = name
        self._make_bot = make_bot
        self._bot: pyspiel.Bot | None = None

    def reset(self, rng: random.Random) -> None:
        self._rng = rng
        self._bot = self._make_bot(rng.getrandbits(31))

    def act(self, state: pyspiel.State) -> int:
        if self._bot is None:
            raise RuntimeError(f"{self!r}.act() called before reset()")
        return int(self._bot.step(state))


#: An archetype's split: ``"trainable"`` (a training population may hold it) or ``"heldout"``
#: (for evaluation only: ``mage train`` refuses it). A *population* is the archetypes a run
#: trains against, a choice among the trainable ones (``mage train``'s default: three).
Split = Literal["trainable", "heldout"]
OpponentFactory = Callable[[pyspiel.Game], Opponent]


@dataclass(frozen=True)
class Archetype:
    """One row of a game's archetype table: a stable id, the factory that builds the
    opponent for a ``pyspiel.Game``, its split and a one-line description.

    Each archetype module exports its table (``ARCHETYPE_TABLE``, a tuple of these); the
    registry loads it by an entry-point string (``"module:ARCHETYPE_TABLE"``), so the
    modules do not import the registry.
    """

    name: str
    factory: OpponentFactory
    split: Split = "trainable"
    description: str = ""
