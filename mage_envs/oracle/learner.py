"""Exact analysis of a learner's tabulated policy: exploitability, values, its best response.

A learner that reads text is tabulated by asking it, at every information state, with the
env's own prompt (:mod:`mage_envs.oracle.prompts`); a ``scorer`` turns prompts into move
distributions (``mage_agent.exploitability`` scores a model's action tokens). Then
OpenSpiel does the rest:

* :func:`policy_report` — NashConv and exploitability of the first hand's table, the
  learner's value against its best response per seat, its value against each archetype;
* :func:`later_hand_report` — the second hand's policy given the memory of every possible
  first hand (Kuhn Poker: every chance event comes before the betting): its exploitability
  and value, and their expectations over the first hands each archetype leads to, which
  are the exact expected returns of hands 1 and 2;
* :func:`third_hand_report` — the same for the third hand of a repeated deal, given the
  memory of every reachable pair of earlier hands;
* :func:`best_response_opponent` / :func:`register_best_response` — the best response to
  the table as an opponent archetype (``best-response-to``).

Example (a uniform "learner": its NashConv is 11/12, as OpenSpiel's own test says):
    >>> prompts = first_hand_prompts("mage/KuhnPoker-meta-v0", {"reflection": False})
    >>> uniform = lambda ps: [{a: 1 / len(p.actions) for a in p.actions.values()} for p in ps]
    >>> report = policy_report("kuhn_poker", tabulate(prompts, uniform), ["aggressive"])
    >>> round(report["nash_conv"], 6), round(report["value"]["aggressive"], 4)
    (0.916667, -0.4583)
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import pyspiel

from ..core.contract import Seat
from ..facts import load_game
from ..opponents.base import decision_states
from ..opponents.registry import make_opponent, register_opponent
from ..opponents.table import Table, TableOpponent
from . import tabular
from .prompts import PromptWalker, Scorer, StatePrompt, first_hand_prompts, terminal_histories
from .result import seats

__all__ = [
    "BEST_RESPONSE_NAME", "archetype_table", "best_response_opponent", "first_hand_prompts", "later_hand_report",
    "match_value", "policy_report", "register_best_response", "seat_keys", "seat_table", "tabulate",
    "third_hand_report",
]

#: The archetype id of the best response to a learner's table.
BEST_RESPONSE_NAME = "best-response-to"


def tabulate(prompts: Sequence[StatePrompt], scorer: Scorer) -> Table:
    """``{information state: {action: probability}}`` from one call of ``scorer``."""
    return {prompt.key: dict(probs) for prompt, probs in zip(prompts, scorer(prompts), strict=True)}


@functools.cache
def seat_keys(game_string: str, seat: int) -> frozenset[str]:
    """The information states at which ``seat`` moves."""
    game = load_game(game_string)
    return frozenset(state.information_state_string() for state in decision_states(game)
                     if state.current_player() == seat)


def seat_table(game_string: str, table: Mapping[str, Mapping[int, float]], seat: int) -> tabular.PolicyTable:
    """``table`` checked (:func:`~mage_envs.oracle.tabular.complete_table`) and cut to ``seat``'s states."""
    keys = seat_keys(game_string, seat)
    return {key: probs for key, probs in tabular.complete_table(load_game(game_string), table).items() if key in keys}


def match_value(game_string: str, own: tabular.PolicyTable, opponent: tabular.PolicyTable, seat: int,
                start: pyspiel.State | None = None) -> float:
    """Expected return of the ``own`` table in ``seat`` against the other seat's ``opponent``
    table (both cut to their seat: :func:`seat_table`), from ``start`` (default: the root)."""
    game = load_game(game_string)
    joint = pyspiel.TabularPolicy({**own, **opponent})
    state = game.new_initial_state() if start is None else start
    return float(pyspiel.expected_returns(state, joint, -1, True)[seat])


def archetype_table(game_string: str, name: str, seat: int) -> tabular.PolicyTable:
    """Archetype ``name`` playing ``seat``, as a table."""
    return tabular.opponent_table(load_game(game_string), make_opponent(game_string, name), seat)


def policy_report(game_string: str, table: Mapping[str, Mapping[int, float]],
                  archetypes: Sequence[str] = (), seat: Seat = "random") -> dict[str, Any]:
    """``nash_conv`` and ``exploitability`` of ``table`` (both seats); per seat, the value
    of the learner against its best response (``value_vs_best_response``, the equilibrium
    value minus the seat's exploitability); the value against each of ``archetypes``,
    averaged over the seats of ``seat``."""
    game = load_game(game_string)
    root = game.new_initial_state()
    own = {s: seat_table(game_string, table, s) for s in (0, 1)}
    against_br = [-float(tabular.best_response(game, 1 - s, own[s]).value_from_state(root)) for s in (0, 1)]
    played = seats(seat)
    values = {name: sum(match_value(game_string, own[s], archetype_table(game_string, name, 1 - s), s)
                        for s in played) / len(played) for name in archetypes}
    return {
        "nash_conv": tabular.nash_conv(game, table),
        "exploitability": tabular.exploitability(game, table),
        "value_vs_best_response": against_br,
        "value": values,
    }


def _dealt_first_histories(game: pyspiel.Game, game_string: str) -> list[list[int]]:
    """The terminal histories of ``game``, refused for a game with chance after the first move."""
    histories = terminal_histories(game)
    if any(_late_chance(game, h) for h in histories):
        raise ValueError(f"later hands are analysed for games dealt before the first move (Kuhn Poker), not "
                         f"{game_string}: its public card comes after the first betting round")
    return histories


def later_hand_report(walker: PromptWalker, scorer: Scorer, first: Mapping[str, Mapping[int, float]],
                      population: Mapping[str, float], seat: Seat = "random",
                      repeat_instance: bool = True) -> dict[str, Any]:
    """The second hand, given the memory of each first hand the learner may play.

    For every terminal history ``h`` of the first hand and seat ``s`` the learner played it
    from, the second hand's policy is tabulated with ``h``'s summary in the memory; its
    ``exploitability``, and its ``value`` against each archetype of ``population`` (at the
    same deal and seat when ``repeat_instance``, else over fresh deals and the seats of
    ``seat``). ``reach[o]`` is the probability of ``(s, h)`` when the learner's first hand
    ``first`` meets archetype ``o``. Their expectations per archetype are the exact expected
    returns of hands 1 and 2 (``value_by_hand``) and the expected exploitability of hand 2.

    Only games whose chance events all come before the first move (Kuhn Poker): later
    public cards would make a repeated deal's value depend on what hand 1 did not show.
    """
    game, game_string = walker.game, walker.game_string
    histories = _dealt_first_histories(game, game_string)
    played = seats(seat)
    cases = [(s, h) for s in played for h in histories]
    prompts = [walker.table_prompts([(s, h)]) for s, h in cases]
    flat = [p for block in prompts for p in block]
    tables = iter(scorer(flat))
    opponents = {name: {s: archetype_table(game_string, name, 1 - s) for s in (0, 1)} for name in population}
    rows, first_value, second_value, second_expl = [], {}, {o: 0.0 for o in population}, {o: 0.0 for o in population}
    for (s, h), block in zip(cases, prompts):
        table = {p.key: next(tables) for p in block}
        exploitability = tabular.exploitability(game, table)
        own = {s2: seat_table(game_string, table, s2) for s2 in (0, 1)}
        reach = {o: _reach(game, first, opponents[o][s], s, h) / len(played) for o in population}
        if repeat_instance:
            values = {o: match_value(game_string, own[s], opponents[o][s], s, _dealt(game, h)) for o in population}
        else:
            values = {o: sum(match_value(game_string, own[s2], opponents[o][s2], s2) for s2 in played) / len(played)
                      for o in population}
        for o in population:
            second_value[o] += reach[o] * values[o]
            second_expl[o] += reach[o] * exploitability
        rows.append({"seat": s, "history": h, "memory": block[0].observation.split("\n\n[Episode")[0],
                     "exploitability": exploitability, "value": values, "reach": reach})
    first_own = {s: seat_table(game_string, first, s) for s in played}
    for o in population:
        first_value[o] = sum(match_value(game_string, first_own[s], opponents[o][s], s) for s in played) / len(played)
    weight = sum(population.values())
    return {
        "hand": 2,
        "value_by_hand": {o: [first_value[o], second_value[o]] for o in population},
        "exploitability": second_expl,
        "population_value_by_hand": [sum(population[o] * v[i] for o, v in
                                         {o: [first_value[o], second_value[o]] for o in population}.items()) / weight
                                     for i in (0, 1)],
        "population_exploitability": sum(population[o] * second_expl[o] for o in population) / weight,
        "by_history": rows,
    }


def third_hand_report(walker: PromptWalker, scorer: Scorer, first: Mapping[str, Mapping[int, float]],
                      population: Mapping[str, float], seat: Seat = "random") -> dict[str, Any]:
    """The third hand of a repeated deal, given the memory of each pair of earlier hands.

    For every seat ``s`` and pair of terminal histories ``(h1, h2)`` of the same deal, the
    second hand's policy is tabulated given ``h1`` and the third's given ``h1`` and ``h2``;
    ``reach[o]`` is the probability of ``(s, h1, h2)`` when the learner meets archetype ``o``
    (its first hand ``first``, its second the table given ``h1``). The expectations per
    archetype are the exact expected returns of hands 1 to 3 (``value_by_hand``) and the
    expected exploitability of hand 3; ``by_history`` holds every pair that any archetype
    reaches. Kuhn Poker only, as :func:`later_hand_report`.
    """
    game, game_string = walker.game, walker.game_string
    histories = _dealt_first_histories(game, game_string)
    played = seats(seat)
    deal = {tuple(h): tuple(_dealt(game, h).history()) for h in histories}
    firsts = [(s, h) for s in played for h in histories]
    triples = [(s, h1, h2) for s, h1 in firsts for h2 in histories if deal[tuple(h2)] == deal[tuple(h1)]]
    second_prompts = [walker.table_prompts([(s, h)]) for s, h in firsts]
    third_prompts = [walker.table_prompts([(s, h1), (s, h2)]) for s, h1, h2 in triples]
    scored = iter(scorer([p for block in second_prompts + third_prompts for p in block]))
    second = {(s, tuple(h)): {p.key: next(scored) for p in block} for (s, h), block in zip(firsts, second_prompts)}
    opponents = {name: {s: archetype_table(game_string, name, 1 - s) for s in (0, 1)} for name in population}
    value = {o: [0.0, 0.0, 0.0] for o in population}
    expected_exploitability = dict.fromkeys(population, 0.0)
    rows = []
    for (s, h1, h2), block in zip(triples, third_prompts):
        table = {p.key: next(scored) for p in block}
        earlier = second[s, tuple(h1)]
        dealt = _dealt(game, h1)
        chance = _reach(game, {}, {}, s, deal[tuple(h1)])   # the deal's probability: chance moves only
        reach = {o: _reach(game, first, opponents[o][s], s, h1) * _reach(game, earlier, opponents[o][s], s, h2)
                 / chance / len(played) for o in population}
        if not any(reach.values()):
            continue
        exploitability = tabular.exploitability(game, table)
        own = [seat_table(game_string, t, s) for t in (first, earlier, table)]
        values = [{o: match_value(game_string, own[k], opponents[o][s], s, dealt) for o in population} for k in range(3)]
        for o in population:
            for k in range(3):
                value[o][k] += reach[o] * values[k][o]
            expected_exploitability[o] += reach[o] * exploitability
        rows.append({"seat": s, "histories": [h1, h2], "exploitability": exploitability, "value": values[2],
                     "reach": reach})
    weight = sum(population.values())
    return {
        "hand": 3,
        "value_by_hand": value,
        "exploitability": expected_exploitability,
        "population_value_by_hand": [sum(population[o] * value[o][k] for o in population) / weight for k in range(3)],
        "population_exploitability": sum(population[o] * expected_exploitability[o] for o in population) / weight,
        "by_history": rows,
    }


def _late_chance(game: pyspiel.Game, history: Sequence[int]) -> bool:
    """Whether a chance event of ``history`` comes after a player's move."""
    state, moved = game.new_initial_state(), False
    for action in history:
        if state.is_chance_node() and moved:
            return True
        moved = moved or not state.is_chance_node()
        state.apply_action(action)
    return False


def _dealt(game: pyspiel.Game, history: Sequence[int]) -> pyspiel.State:
    """The state after ``history``'s opening chance events (the deal)."""
    state = game.new_initial_state()
    for action in history:
        if not state.is_chance_node():
            break
        state.apply_action(action)
    return state


def _reach(game: pyspiel.Game, learner: Mapping[str, Mapping[int, float]], opponent: tabular.PolicyTable,
           seat: int, history: Sequence[int]) -> float:
    """The probability of ``history`` with the learner in ``seat`` and ``opponent`` in the other."""
    state, probability = game.new_initial_state(), 1.0
    for action in history:
        if state.is_chance_node():
            probability *= dict(state.chance_outcomes())[action]
        elif state.current_player() == seat:
            probability *= learner[state.information_state_string()].get(action, 0.0)
        else:
            probability *= dict(opponent[state.information_state_string()]).get(action, 0.0)
        if probability == 0.0:
            return 0.0
        state.apply_action(action)
    return probability


def best_response_opponent(game_string: str, table: Mapping[str, Mapping[int, float]],
                           name: str = BEST_RESPONSE_NAME) -> TableOpponent:
    """The exact best response to ``table`` in each seat (``pyspiel.TabularBestResponse``),
    as a deterministic opponent.

    Example:
        >>> from mage_envs.opponents.kuhn_poker import cfr_average_policy
        >>> br = best_response_opponent("kuhn_poker", {k: {1: 1.0} if len(k) == 1 or k[1:] in ("b", "pb") else
        ...     {0: 1.0} for k in cfr_average_policy()})    # bet first, call every bet, check when checked to
        >>> br.table["0b"], br.table["2b"]                  # fold the Jack, call with the King
        ({0: 1.0}, {1: 1.0})
    """
    game = load_game(game_string)
    moves: Table = {}
    for seat in (0, 1):
        response = tabular.best_response(game, seat, seat_table(game_string, table, 1 - seat))
        for key, action in response.get_best_response_actions().items():
            if key in seat_keys(game_string, seat):
                moves[key] = {int(action): 1.0}
    return TableOpponent(name, moves)


def register_best_response(game_string: str, table: Mapping[str, Mapping[int, float]],
                           name: str = BEST_RESPONSE_NAME) -> None:
    """Register :func:`best_response_opponent` of ``table`` as held-out archetype ``name``
    (replacing an earlier one of that name)."""
    opponent = best_response_opponent(game_string, table, name)
    register_opponent(game_string, name, lambda game: TableOpponent(name, opponent.table), split="heldout",
                      description="the exact best response to a learner's tabulated first-hand policy",
                      overwrite=True)
