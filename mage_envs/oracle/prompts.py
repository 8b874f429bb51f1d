"""The prompt the env shows at every information state, for tabulating an agent's policy.

To compute the exact exploitability of a policy that reads text, it is asked at every
information state of the game, seat by seat, with the very observation the env would show
there. :func:`first_hand_prompts` drives the real env (``gym.make`` of the run's id and
arguments) to one history of each information state: the deal comes from an instance number
whose chance stream deals it (:func:`instance_for`), the opponent's moves from a
:class:`ScriptedOpponent`, the agent's from the history itself.
:meth:`PromptWalker.table_prompts` does the same for a later hand of a meta-episode, after
given earlier hands (whose summaries are then in the memory). Reflections are not
supported: their text would be sampled.

Example:
    >>> prompts = first_hand_prompts("mage/KuhnPoker-meta-v0", {"reflection": False, "prompt_style": "compact"})
    >>> len(prompts), prompts[0].key, prompts[0].seat, prompts[0].actions
    (12, '0', 0, {'check': 0, 'bet': 1})
    >>> print(prompts[0].observation)
    [Episode 1 of 3]
    Kuhn Poker. You are Player 1.
    Legal actions: check, bet
    Moves: none
    Your card: Jack.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import pyspiel

from ..facts import load_game
from ..games.base import OpenSpielTextEnv
from ..games.engine import ChanceStream
from ..opponents.base import Opponent, decision_states
from ..registration import game_of

#: Instances tried per chance path before :func:`instance_for` gives up.
INSTANCE_SEARCH_LIMIT = 1_000_000


@dataclass(frozen=True)
class StatePrompt:
    """What the env shows the agent at one information state: ``observation`` and ``info``,
    with ``actions`` (the legal names -> OpenSpiel action ids) and the ``key`` (OpenSpiel's
    information state string) and ``seat`` it stands for."""

    key: str
    seat: int
    observation: str
    info: dict[str, Any]
    actions: dict[str, int]


#: A function from prompts to the agent's move distribution at each: ``{action id: probability}``.
Scorer = Callable[[Sequence[StatePrompt]], list[dict[int, float]]]


class ScriptedOpponent(Opponent):
    """Plays the opponent's moves of given histories, one history per episode (each
    ``reset`` starts the next); a state off the script is an error."""

    name = "scripted"

    def __init__(self) -> None:
        self._hands: list[list[int]] = []
        self._hand = -1

    def load(self, hands: Sequence[Sequence[int]]) -> None:
        """The histories (OpenSpiel actions, chance included) of the coming episodes."""
        self._hands = [list(h) for h in hands]
        self._hand = -1

    def reset(self, rng: random.Random) -> None:
        self._rng = rng
        self._hand += 1

    def act(self, state: pyspiel.State) -> int:
        history, script = state.history(), self._hands[self._hand]
        if history != script[: len(history)] or len(history) >= len(script):
            raise RuntimeError(f"the game left its script: at {history}, scripted {script}")
        return script[len(history)]


def instance_for(game: pyspiel.Game, history: Sequence[int], parity: int) -> int:
    """The smallest instance number of the given parity (the seat under ``seat="random"``)
    whose chance stream deals the chance outcomes of ``history``.

    Example:
        >>> instance_for(pyspiel.load_game("kuhn_poker"), [2, 0], 1) % 2
        1
    """
    state, end = game.new_initial_state(), 0
    for i, action in enumerate(history):
        if state.is_chance_node():
            end = i + 1
        state.apply_action(action)
    return _instance(str(game), tuple(history[:end]), parity)


@functools.lru_cache(maxsize=None)
def _instance(game_string: str, prefix: tuple[int, ...], parity: int) -> int:
    game = load_game(game_string)
    for k in itertools.islice(itertools.count(parity, 2), INSTANCE_SEARCH_LIMIT):
        stream, state = ChanceStream(k), game.new_initial_state()
        for action in prefix:
            if state.is_chance_node() and stream.sample(state) != action:
                break
            state.apply_action(action)
        else:
            return k
    raise RuntimeError(f"no instance deals {prefix} within {INSTANCE_SEARCH_LIMIT} tries")


def seat_histories(game: pyspiel.Game, seat: int) -> dict[str, list[int]]:
    """One history (the first found, depth first) of every information state of ``seat``.

    Example:
        >>> sorted(seat_histories(pyspiel.load_game("kuhn_poker"), 1).items())[:2]
        [('0b', [2, 0, 1]), ('0p', [2, 0, 0])]
    """
    found: dict[str, list[int]] = {}
    for state in decision_states(game):
        if state.current_player() == seat:
            found.setdefault(state.information_state_string(), state.history())
    return found


def terminal_histories(game: pyspiel.Game) -> list[list[int]]:
    """Every terminal history of ``game`` (small games only).

    Example:
        >>> len(terminal_histories(pyspiel.load_game("kuhn_poker")))   # 6 deals x 5 betting sequences
        30
    """
    out, stack = [], [game.new_initial_state()]
    while stack:
        state = stack.pop()
        if state.is_terminal():
            out.append(state.history())
            continue
        actions = [a for a, _ in state.chance_outcomes()] if state.is_chance_node() else state.legal_actions()
        stack.extend(state.child(a) for a in actions)
    return sorted(out)


#: One hand to replay: the agent's seat and the hand's history (OpenSpiel actions, chance included).
Hand = tuple[int, Sequence[int]]


class PromptWalker:
    """Drives the real env of ``env_id`` (made with ``env_kwargs``, the opponent scripted)
    along given hands. The seat of each hand is set through its instance's parity (the env
    is made with ``seat="random"``); several hands are played as fresh deals (the
    instance of each given), which shows the same prompts as repeated ones."""

    def __init__(self, env_id: str, env_kwargs: Mapping[str, Any]) -> None:
        game_string = game_of(env_id)
        if game_string is None:
            raise ValueError(f"{env_id!r} is not a two-player game env: there is no policy table to build")
        if env_kwargs.get("reflection", False):
            raise ValueError("tabulating a policy needs reflection=False: a reflection is sampled text, so the "
                             "memory would not be a function of the earlier hands")
        self.env_id = env_id
        self.game_string = game_string
        self.game = load_game(game_string)
        self.opponent = ScriptedOpponent()
        kwargs = {**env_kwargs, "opponent": self.opponent, "seat": "random"}
        self.env = gym.make(env_id, **kwargs)
        self._fresh: gym.Env | None = None
        self._kwargs = kwargs
        self._tables: dict[tuple[tuple[int, tuple[int, ...]], ...], list[StatePrompt]] = {}

    def _env_for(self, hands: int) -> gym.Env:
        if hands == 1:
            return self.env
        if self._fresh is None:
            self._fresh = gym.make(self.env_id, **{**self._kwargs, "repeat_instance": False})
        return self._fresh

    def prompt(self, hands: Sequence[Hand]) -> StatePrompt:
        """The prompt at the end of the last of ``hands`` (the earlier ones are terminal)."""
        env = self._env_for(len(hands))
        self.opponent.load([history for _, history in hands])
        instances = [instance_for(self.game, history, seat) for seat, history in hands]
        options: dict[str, Any] = {"instance": instances[0]}
        if len(hands) > 1:   # the hands after the last are not played: any instance will do
            padding = int(env.get_wrapper_attr("num_episodes")) - len(hands)
            if padding < 0:
                raise ValueError(f"{len(hands)} hands do not fit in a meta-episode of {len(hands) + padding}")
            options = {"instances": instances + instances[-1:] * padding}
        obs, info = env.reset(seed=0, options=options)
        base = env.unwrapped
        if not isinstance(base, OpenSpielTextEnv):
            raise TypeError(f"{self.env_id!r} is not an OpenSpiel text env")
        for index, (seat, script) in enumerate(hands):
            last = index == len(hands) - 1
            while info.get("phase", "act") == "act" and info.get("episode_index", 0) == index:
                state = base.state
                history = state.history()
                if last and history == list(script):
                    return StatePrompt(state.information_state_string(), seat, obs, info,
                                       dict(base.action_names(state)))
                if history != list(script[: len(history)]) or state.current_player() != seat:
                    raise RuntimeError(f"the env left the script at {history} (scripted {list(script)})")
                names = {a: name for name, a in base.action_names(state).items()}
                obs, _, terminated, truncated, info = env.step(names[script[len(history)]])
                if terminated or truncated:
                    break
            if info.get("phase") == "reflect":
                raise ValueError("tabulating a policy needs reflection=False")
            if last or info.get("episode_index", 0) != index + 1:
                raise RuntimeError(f"hand {index + 1} did not end where its history {list(script)} does")
        raise AssertionError("unreachable")

    def table_prompts(self, earlier: Sequence[Hand] = ()) -> list[StatePrompt]:
        """The prompt at every information state of both seats (seat 0's first, each in
        information-state order) in the hand after the ``earlier`` ones; remembered (a
        checkpoint's prompts are the next one's)."""
        key = tuple((seat, tuple(history)) for seat, history in earlier)
        if key not in self._tables:
            self._tables[key] = [self.prompt([*earlier, (seat, history)]) for seat in (0, 1)
                                 for _, history in sorted(seat_histories(self.game, seat).items())]
        return self._tables[key]


def first_hand_prompts(env_id: str, env_kwargs: Mapping[str, Any]) -> list[StatePrompt]:
    """The first hand's prompt (empty memory) at every information state:
    :meth:`PromptWalker.table_prompts` with no earlier hand."""
    return PromptWalker(env_id, env_kwargs).table_prompts()
