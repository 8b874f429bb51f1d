"""The Bayes-optimal adaptive value: the ceiling of a fresh-deal meta-episode.

With a new deal every episode (``repeat_instance=False``) an agent must tell the archetypes
apart from what earlier hands showed: its own cards, the betting, and the opponent's card
when a hand reaches showdown. The best any agent can do is Bayes-optimal: hold the
population as a prior, update it on each hand's record, and in the final hand play the
best response to the posterior mixture; since the final-episode (or differential) reward
pays only the last hand, earlier hands are free probes.

:func:`bayes_adaptive_value` solves this exactly by dynamic programming over the posterior
(the agent's plan for a hand is one pure strategy of that hand, chosen knowing its seat,
its card and the posterior). It lies between :func:`~mage_envs.oracle.best_nonadaptive_value`
(one hand, nothing learnt) and the population's mean
:func:`~mage_envs.oracle.best_response_value` (the archetype known). Tractable for Kuhn Poker.

Example (the three training styles, three hands: 0.240, 86% of the 0.278 that knowing the
style would give):
    >>> round(bayes_adaptive_value("kuhn_poker", ["conservative", "aggressive", "intermediate"], 3).value, 4)
    0.2402
"""

from __future__ import annotations

import functools
import itertools
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import pyspiel

from ..facts import load_game
from ..games.base import OpenSpielTextEnv
from ..games.kuhn_poker import KuhnPokerText
from ..games.text import GameText
from ..opponents.base import Opponent
from ..opponents.population import OpponentSpec, as_population, hidden_draws
from ..opponents.registry import make_opponent
from .agents import REFLECTION, answer, reflecting
from .result import OracleValue, Seat, seats
from .winnable import Deal, _deals

#: What the agent reads about a finished hand (the memory's record of it): its information
#: state and the end of hand text (which names the opponent's card at showdown).
Record = tuple[str, str]
#: The games it solves: one pure plan per hand and card must be few (Leduc's are not).
TEXTS: dict[str, type[GameText]] = {"kuhn_poker": KuhnPokerText}


@dataclass(frozen=True)
class _Outcomes:
    """One plan for one (seat, private card): per record, its probability under each archetype
    and, per archetype, the probability-weighted sum of the returns that end in it; and the
    env's one-line summary of each record (``info["summary"]``), which names it."""

    likelihood: dict[Record, np.ndarray]
    returns: dict[Record, np.ndarray]
    summaries: dict[str, Record]


#: A pure plan for one hand: the action at each of the agent's information states.
Plan = dict[str, int]


def supports(game: str) -> bool:
    """Whether :func:`bayes_adaptive_value` solves ``game``.

    Example:
        >>> supports("kuhn_poker"), supports("leduc_poker")
        (True, False)
    """
    return game in TEXTS


#: The most hands solved when an archetype draws a hidden policy per meta-episode: its
#: thousands of types make the cache of posteriors grow about 16-fold a hand (Kuhn Poker's
#: default population: 140 MB for three hands, 0.8 GB for four).
MAX_HANDS_WITH_DRAWS = 4


def unsolvable(game: str, population: OpponentSpec, num_episodes: int) -> str | None:
    """Why :func:`bayes_adaptive_value` does not solve ``population`` over ``num_episodes``
    hands of ``game`` (``None``: it does).

    Example:
        >>> unsolvable("kuhn_poker", ["conservative", "random-style"], 3) is None
        True
        >>> unsolvable("kuhn_poker", ["conservative", "random-style"], 5)
        'random-style draws a hidden style for each meta-episode: its styles make the Bayes solver too large beyond 4 hands'
    """
    if not supports(game):
        return f"bayes_adaptive_value covers {sorted(TEXTS)}, not {game!r}"
    if num_episodes > MAX_HANDS_WITH_DRAWS and (drawing := hidden_draws(game, population)):
        return (f"{', '.join(drawing)} draws a hidden style for each meta-episode: its styles make the Bayes solver "
                f"too large beyond {MAX_HANDS_WITH_DRAWS} hands")
    return None


def bayes_adaptive_value(game: str, population: OpponentSpec, num_episodes: int,
                         seat: Seat = "random", probe: bool = True) -> OracleValue:
    """The final episode's expected return of the Bayes-optimal agent that meets an archetype
    drawn from ``population`` (its prior) for ``num_episodes`` fresh-deal episodes, each on a
    seat drawn anew for ``"random"``, sees every earlier episode's record, and is paid for the
    final episode only: the most any agent can reach there, in the population's mean.

    One episode gives the best non-adaptive value, one archetype its best response value.
    Only the mean is a ceiling: Bayes-optimal agents that break ties differently split it
    differently between the archetypes. Where an env's memory clips earlier records (many
    episodes), it is an upper bound.

    An archetype that draws a hidden style for each meta-episode and keeps it (Kuhn's
    ``random-style``) is in the prior as the styles it may draw, so the agent reads the drawn
    style from the earlier hands as it reads the archetype (up to :data:`MAX_HANDS_WITH_DRAWS`
    hands).

    With ``probe=False`` the agent updates its belief the same way but plays every hand
    before the last for that hand's own expected return under its belief (it learns only
    what such play shows); the difference to ``probe=True`` is what probing is worth.

    Example:
        >>> round(bayes_adaptive_value("kuhn_poker", ["aggressive"], 3).value, 4)
        0.3333
        >>> styles = ["conservative", "aggressive", "intermediate"]
        >>> round(bayes_adaptive_value("kuhn_poker", styles, 3, probe=False).value, 4)
        0.2315
        >>> round(bayes_adaptive_value("kuhn_poker", [*styles, "random-style"], 3).value, 4)
        0.2817
    """
    if num_episodes < 1:
        raise ValueError(f"num_episodes must be >= 1, got {num_episodes}")
    if reason := unsolvable(game, population, num_episodes):
        raise ValueError(reason)
    solver, weights = _solver(game, population, seat)
    per_type = solver.values(num_episodes, belief_key(weights), probe)
    method = "Bayes-optimal adaptive agent (DP over the posterior)" if probe else \
        "Bayes agent without probes (each earlier hand played for its own return; DP over the posterior)"
    return OracleValue(float(weights @ per_type), method=method)


def _solver(game: str, population: OpponentSpec, seat: Seat) -> tuple[_Solver, np.ndarray]:
    """The dynamic programme of ``population``'s archetypes with weight, and its prior over
    the solver's types (an archetype that draws a hidden policy per meta-episode, each policy
    it may draw with the archetype's weight times the draw's probability)."""
    members = as_population(game, population)
    present = [(name, w) for name, w in zip(members.ids, members.weights) if w > 0]
    archetypes = tuple(members.given(name) or name for name, _ in present)
    solver = _cached_solver(game, archetypes, seats(seat))
    weights = np.asarray([w for _, w in present], dtype=float)[solver.archetype_of] * solver.draw_probability
    return solver, weights / weights.sum()


@functools.lru_cache(maxsize=2)
def _cached_solver(game: str, archetypes: tuple[str | Opponent, ...], seat_list: tuple[int, ...]) -> _Solver:
    """One solver (and its cache of values) per game, archetypes (registered ids, or the
    instances given) and seats: an evaluation's agents, one per opponent, share it."""
    opponents = tuple(make_opponent(game, a) if isinstance(a, str) else a for a in archetypes)
    return _Solver(game, opponents, seat_list)


class _Solver:
    """The dynamic programme: ``values(k, belief_key(belief), probe)`` per type with ``k`` episodes left.

    Its types are the archetypes, each that draws a hidden policy per meta-episode
    (:meth:`~mage_envs.opponents.Opponent.meta_episode_draws`) replaced by the policies it
    may draw: the agent's belief is over those, so what a hand shows of the drawn policy is
    read exactly (an archetype's type ``i`` is ``archetype_of[i]``, drawn with
    ``draw_probability[i]``)."""

    def __init__(self, game: str, archetypes: tuple[Opponent, ...], seat_list: tuple[int, ...]) -> None:
        self.game = load_game(game)
        self.text = TEXTS[game]()
        types = [(index, probability, drawn) for index, archetype in enumerate(archetypes)
                 for probability, drawn in archetype.meta_episode_draws() or [(1.0, archetype)]]
        self.archetype_of = np.asarray([index for index, _, _ in types], dtype=int)
        self.draw_probability = np.asarray([probability for _, probability, _ in types], dtype=float)
        self.opponents = tuple(drawn for _, _, drawn in types)
        self._move_cache: dict[str, dict[int, np.ndarray]] = {}
        #: (seat, private information state) -> its probability and its plans with their outcomes
        self.situations = {(s, private): (1.0 / len(seat_list) * p, plans)
                           for s in seat_list for private, (p, plans) in self._situations(s).items()}
        #: (seat, private) -> per record (named by the env's summary), its likelihood under each
        #: archetype, whatever the agent played: Bayes' rule on a hand an other agent played
        self.records = {key: _likelihoods(plans) for key, (_, plans) in self.situations.items()}
        self._move_cache.clear()   # the moves are in the outcomes now
        self.values = functools.lru_cache(maxsize=None)(self._values)

    def _values(self, left: int, belief: bytes, probe: bool = True) -> np.ndarray:
        prior = np.frombuffer(belief)
        total = np.zeros(len(self.opponents))
        for probability, plans in self.situations.values():
            total += probability * self._best(plans, left, prior, probe)[1]
        return total

    def _best(self, plans: list[tuple[Plan, _Outcomes]], left: int, prior: np.ndarray,
              probe: bool) -> tuple[int, np.ndarray]:
        """The index of the plan with the best expected final return under ``prior`` (without
        ``probe``: the best return in this hand; the first among ties) and its expected final
        return per archetype."""
        horizon = left if probe else 1
        best, best_value, best_score = -1, np.zeros(len(prior)), -np.inf
        for index, (_, outcomes) in enumerate(plans):
            per_archetype = self._continuation(outcomes, horizon, prior, probe)
            score = float(prior @ per_archetype)
            if score > best_score + 1e-12:
                best, best_value, best_score = index, per_archetype, score
        if horizon != left:
            best_value = self._continuation(plans[best][1], left, prior, probe)
        return best, best_value

    def choose(self, seat: int, private: str, left: int, prior: np.ndarray, probe: bool) -> Plan:
        """The Bayes-optimal plan for a hand on ``seat`` with ``private``
        information, ``left`` hands to go (this one included) and belief ``prior``; without
        ``probe``, the plan best for this hand's own return."""
        _, plans = self.situations[seat, private]
        return plans[self._best(plans, left, prior, probe)[0]][0]

    def _continuation(self, outcomes: _Outcomes, left: int, prior: np.ndarray, probe: bool) -> np.ndarray:
        """Per archetype, the expected final return after this hand is played by ``outcomes``' plan."""
        if left == 1:
            return sum(outcomes.returns.values(), np.zeros(len(prior)))
        out = np.zeros(len(prior))
        for record, likelihood in outcomes.likelihood.items():
            posterior = prior * likelihood
            if posterior.sum() <= 0:
                continue
            out += likelihood * self.values(left - 1, belief_key(posterior), probe)
        return out

    def _situations(self, seat: int) -> dict[str, tuple[float, list[tuple[Plan, _Outcomes]]]]:
        """Per private card of ``seat``: its probability and each of its plans with its outcomes."""
        by_card: dict[str, list[tuple[Deal, float]]] = defaultdict(list)
        for deal, probability in _deals(self.game):
            by_card[self._private(deal, seat)].append((deal, probability))
        situations = {}
        for private, deals in by_card.items():
            mass = sum(p for _, p in deals)
            infosets = self._infosets(deals, seat)
            plans = [dict(zip(infosets, choice)) for choice in itertools.product(*infosets.values())]
            situations[private] = (mass, [(plan, self._outcomes(plan, [(d, p / mass) for d, p in deals], seat))
                                          for plan in plans])
        return situations

    def _private(self, deal: Deal, seat: int) -> str:
        state = self.game.new_initial_state()
        for outcome in deal:
            if not state.is_chance_node():
                break
            state.apply_action(outcome)
        return state.information_state_string(seat)

    def _infosets(self, deals: list[tuple[Deal, float]], seat: int) -> dict[str, list[int]]:
        """Every information state of ``seat`` reachable on these deals, with its legal actions."""
        found: dict[str, list[int]] = {}
        stack = [(self.game.new_initial_state(), deal, 0) for deal, _ in deals]
        while stack:
            state, deal, drawn = stack.pop()
            if state.is_terminal():
                continue
            if state.is_chance_node():
                stack.append((state.child(deal[drawn]), deal, drawn + 1))
                continue
            if state.current_player() == seat:
                found.setdefault(state.information_state_string(seat), state.legal_actions())
            stack.extend((state.child(a), deal, drawn) for a in state.legal_actions())
        return dict(sorted(found.items()))

    def _outcomes(self, plan: dict[str, int], deals: list[tuple[Deal, float]], seat: int) -> _Outcomes:
        """The hand's records under ``plan``, walked once for every archetype at a time (the
        probability of reaching a state is a vector over the archetypes)."""
        size = len(self.opponents)
        likelihood: dict[Record, np.ndarray] = defaultdict(lambda: np.zeros(size))
        returns: dict[Record, np.ndarray] = defaultdict(lambda: np.zeros(size))
        summaries: dict[str, Record] = {}
        stack = [(self.game.new_initial_state(), deal, 0, np.full(size, p)) for deal, p in deals]
        while stack:
            state, deal, drawn, reach = stack.pop()
            if state.is_terminal():
                record = (state.information_state_string(seat), self.text.describe_end(state, seat))
                if record not in likelihood:   # a new record: name it by the env's summary once
                    summaries[self.text.summary_line(self.text.private_view(state, seat),
                                                     self.text.history_lines(state.history(), seat),
                                                     record[1])] = record
                likelihood[record] += reach
                returns[record] += reach * state.returns()[seat]
            elif state.is_chance_node():
                stack.append((state.child(deal[drawn]), deal, drawn + 1, reach))
            elif state.current_player() == seat:
                stack.append((state.child(plan[state.information_state_string(seat)]), deal, drawn, reach))
            else:
                for action, probability in self._moves(state).items():
                    if (onward := reach * probability).any():
                        stack.append((state.child(action), deal, drawn, onward))
        return _Outcomes(dict(likelihood), dict(returns), summaries)

    def _moves(self, state: pyspiel.State) -> dict[int, np.ndarray]:
        """The opponents' move distributions at ``state``: per action, its probability under
        each archetype (computed once per state)."""
        key = state.history_str()
        if key not in self._move_cache:
            table: dict[int, np.ndarray] = defaultdict(lambda: np.zeros(len(self.opponents)))
            for index, opponent in enumerate(self.opponents):
                probs = opponent.action_probabilities(state)
                if probs is None:
                    raise ValueError(f"opponent {opponent.name!r} has no closed-form move distribution")
                for action, probability in probs.items():
                    table[action][index] = probability
            self._move_cache[key] = dict(table)
        return self._move_cache[key]


def belief_key(belief: np.ndarray) -> bytes:
    """``belief`` normalised, each entry's binary mantissa rounded to 12 decimals (about 12
    significant digits; tiny values kept), as bytes: the same posterior reached by different
    hands is one key of the dynamic programme's cache.

    Example:
        >>> belief_key(np.array([1.0, 2.0])) == belief_key(np.array([1.0 + 1e-15, 2.0]))
        True
    """
    belief = np.asarray(belief, dtype=float)
    total = belief.sum()
    if not (np.isfinite(total) and total > 0 and (belief >= 0).all()):
        raise ValueError(f"a belief is non-negative with a positive, finite sum; got {belief}")
    mantissa, exponent = np.frexp(belief / total)
    return np.ldexp(np.round(mantissa, 12), exponent).tobytes()


def _likelihoods(plans: list[tuple[Plan, _Outcomes]]) -> dict[str, np.ndarray]:
    """Every record some plan can end in, by summary, with its likelihood per archetype: the
    chance and opponent moves that lead to it (the agent's own moves, the same under every
    archetype, drop out of the posterior; every plan that can end there gives this vector)."""
    found: dict[str, np.ndarray] = {}
    for _, outcomes in plans:
        for summary, record in outcomes.summaries.items():
            found.setdefault(summary, outcomes.likelihood[record])
    return found


class BayesAdaptiveAgent:
    """The Bayes-optimal agent of fresh-deal meta-episodes, played through the text interface.

    It holds ``population`` as its prior (default: the env's population; an env made for
    one opponent makes that a point mass, so pass the population explicitly when evaluating
    one opponent at a time), picks each hand's plan by the dynamic programme of
    :func:`bayes_adaptive_value` (the hands before the last are probes, the last a best
    response to the posterior), and after every hand updates the posterior on the hand's
    record, read from the env's summary of it (what the memory shows: its card, the
    betting, the opponent's card at showdown). It reads its card and information state from
    ``env.unwrapped.state``, never the opponent's card or the archetype. Its mean final-hand
    return is :func:`bayes_adaptive_value` (with ``probe=False``, that of ``probe=False``:
    every hand before the last played for its own return). Kuhn Poker meta envs with fresh deals.

    Example:
        >>> import gymnasium as gym, mage_envs
        >>> env = gym.make("mage/KuhnPoker-meta-v0", opponent="aggressive", repeat_instance=False,
        ...                reflection=False, num_episodes=3)
        >>> agent = BayesAdaptiveAgent(env, population=["conservative", "aggressive", "intermediate"])
        >>> obs, info = env.reset(seed=0)
        >>> agent(obs, info) in ("<action>check</action>", "<action>bet</action>",
        ...                      "<action>fold</action>", "<action>call</action>")
        True
    """

    def __init__(self, env: gym.Env, population: OpponentSpec | None = None, probe: bool = True) -> None:
        base = env.unwrapped
        game = getattr(base, "game_string", None)
        if not isinstance(base, OpenSpielTextEnv) or not isinstance(game, str) or not supports(game):
            raise TypeError(f"BayesAdaptiveAgent plays the text envs of {sorted(TEXTS)}, got {type(base).__name__}")
        if not _has_attribute(env, "num_episodes"):
            raise TypeError("BayesAdaptiveAgent plays meta-episodes: give it a -meta- env (e.g. mage/KuhnPoker-meta-v0)")
        if _has_attribute(env, "repeat_instance") and env.get_wrapper_attr("repeat_instance"):
            raise ValueError("BayesAdaptiveAgent is the optimum of fresh deals: make the env with "
                             "repeat_instance=False (with repeated deals the deal-known play is the ceiling)")
        self._env = base
        population = base.population if population is None else population
        if reason := unsolvable(game, population, int(env.get_wrapper_attr("num_episodes"))):
            raise ValueError(f"BayesAdaptiveAgent: {reason}")
        self._solver, self._prior = _solver(game, population, base.seat_option)
        self._belief = self._prior
        self._probe = probe
        self._live: pyspiel.State | None = None   # the hand being played (the env builds a state per hand)
        self._plan: Plan = {}
        self._hand: tuple[int, str] | None = None   # its (seat, private card) until its record is read

    @property
    def belief(self) -> np.ndarray:
        """The posterior over the population's archetypes (with weight), in its order (an
        archetype that draws a hidden policy: the posterior mass of the policies it may draw)."""
        return np.bincount(self._solver.archetype_of, weights=self._belief)

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        finished = info if reflecting(info) else info.get("finished_episode_info")
        if finished is not None and self._hand is not None:
            if finished.get("forfeit"):   # cut short by an invalid answer (another agent's): read as nothing
                self._hand = None
            else:
                self._learn(str(finished["summary"]))
        if reflecting(info):
            return REFLECTION
        state, seat, hand = self._env.state, int(info["seat"]), int(info["episode_index"])
        if state is not self._live:   # a new hand
            if hand == 0:
                self._belief = self._prior
            private = self._solver._private(tuple(state.history()), seat)   # its card, before any move
            self._plan = self._solver.choose(seat, private, int(info["num_episodes"]) - hand, self._belief, self._probe)
            self._live, self._hand = state, (seat, private)
        action = self._plan[state.information_state_string(seat)]
        names = {action_id: name for name, action_id in self._env.action_names(state).items()}
        return answer(names[action])

    def _learn(self, summary: str) -> None:
        """Bayes' rule on the finished hand's record (named by its summary)."""
        assert self._hand is not None
        likelihood = self._solver.records[self._hand].get(summary)   # listed: possible under some archetype
        posterior = None if likelihood is None else self._belief * likelihood
        if posterior is None or posterior.sum() <= 0:
            raise ValueError(f"BayesAdaptiveAgent: {summary!r} is impossible under every archetype of its belief "
                             "(is the opponent in the population it was given?)")
        self._belief = posterior / posterior.sum()
        self._hand = None


def _has_attribute(env: gym.Env, name: str) -> bool:
    """Whether ``env`` or one of its wrappers has ``name``."""
    try:
        env.get_wrapper_attr(name)
    except AttributeError:
        return False
    return True


class BayesFinalHand:
    """``agent`` plays every hand but the last; a :class:`BayesAdaptiveAgent` watches those
    hands (Bayes' rule on each record, whoever played it) and plays the last one as the
    best response to its posterior.

    Against ``agent``'s own final hand it separates two shortfalls: what ``agent`` leaves
    unread of what its earlier hands showed (this agent's final hand minus ``agent``'s),
    and what those hands did not show (the Bayes agent's minus this one's). ``agent`` is
    asked every question, the final hand's too, and only its final-hand answers are
    replaced, so a seeded ``agent`` plays the same early hands here as on its own. Reflection
    prompts go to ``agent``. A hand that ``agent`` forfeits (an invalid answer) is read as
    showing nothing. ``population`` is the watcher's prior (default: the env's, which for an
    env made for one opponent is that opponent: pass the population when evaluating one
    opponent at a time).

    Example:
        >>> import gymnasium as gym, mage_envs
        >>> from mage_envs.oracle.agents import RandomLegalAgent
        >>> env = gym.make("mage/KuhnPoker-meta-v0", opponent="aggressive", repeat_instance=False,
        ...                reflection=False, num_episodes=3)
        >>> agent = BayesFinalHand(RandomLegalAgent(seed=0), env, ["conservative", "aggressive", "intermediate"])
        >>> obs, info = env.reset(seed=0)
        >>> while not info.get("meta_done"):
        ...     obs, reward, terminated, truncated, info = env.step(agent(obs, info))
        >>> len(info["episode_returns"])
        3
    """

    def __init__(self, agent: Callable[[str, dict[str, Any]], str], env: gym.Env,
                 population: OpponentSpec | None = None) -> None:
        self.agent = agent
        self.bayes = BayesAdaptiveAgent(env, population)

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        theirs = self.agent(observation, info)
        ours = self.bayes(observation, info)   # it follows every hand (its own plan) and reads every record
        final = not reflecting(info) and int(info["episode_index"]) == int(info["num_episodes"]) - 1
        return ours if final else theirs
