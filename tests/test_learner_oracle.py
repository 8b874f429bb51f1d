"""Exact exploitability of a text policy: the env's prompts at every information state, hand-solved cases."""

import json
import random
import re

import gymnasium as gym
import pyspiel
import pytest

import mage_envs  # noqa: F401
from mage_envs.evaluation import evaluate
from mage_envs.opponents.base import decision_states
from mage_envs.opponents.kuhn_poker import NASH
from mage_envs.opponents.registry import list_opponents, make_opponent, unregister_opponent
from mage_envs.oracle import tabular
from mage_envs.oracle.learner import (
    best_response_opponent,
    later_hand_report,
    match_value,
    policy_report,
    register_best_response,
    seat_table,
    tabulate,
    third_hand_report,
)
from mage_envs.oracle.prompts import PromptWalker, ScriptedOpponent, first_hand_prompts, instance_for

KUHN = "mage/KuhnPoker-meta-v0"
KWARGS = {"reflection": False, "prompt_style": "compact"}
CARDS = {"Jack": 0, "Queen": 1, "King": 2}


def uniform(prompts):
    return [{a: 1 / len(p.actions) for a in p.actions.values()} for p in prompts]


def kuhn_key(observation: str) -> str:
    """Kuhn's information state string read back from the text of the current hand only."""
    hand = observation.split("\n\n")[-1]
    card = CARDS[re.findall(r"Your card: (\w+)\.", hand)[-1]]
    moves = re.findall(r"Moves: (.*)", hand)[-1]
    letters = "".join("b" if verb in ("bet", "bets", "call", "calls") else "p"
                      for verb in re.findall(r"(?:You|Opponent) (\w+)\.", moves))
    return f"{card}{letters}"


def nash_from_text(prompts):
    """Kuhn's equilibrium (alpha = 1/6), played from what the prompt says."""
    out = []
    for p in prompts:
        bet = NASH.bet_probability(kuhn_key(p.observation))
        out.append({a: bet if a == 1 else 1 - bet for a in p.actions.values()})
    return out


def test_uniform_policy_nash_conv_is_eleven_twelfths():
    report = policy_report("kuhn_poker", tabulate(first_hand_prompts(KUHN, KWARGS), uniform))
    assert report["nash_conv"] == pytest.approx(11 / 12, abs=1e-12)
    assert report["exploitability"] == pytest.approx(11 / 24, abs=1e-12)


def test_a_policy_read_from_the_prompts_alone_is_the_equilibrium_it_plays():
    table = tabulate(first_hand_prompts(KUHN, KWARGS), nash_from_text)
    report = policy_report("kuhn_poker", table, ["aggressive"])
    assert report["nash_conv"] == pytest.approx(0.0, abs=1e-12)
    # against its best response each seat gets the game value: -1/18 first, +1/18 second
    assert report["value_vs_best_response"] == pytest.approx([-1 / 18, 1 / 18], abs=1e-12)


def test_uniform_leduc_matches_openspiel_on_its_own_uniform_policy():
    game = pyspiel.load_game("leduc_poker")
    table = tabulate(first_hand_prompts("mage/LeducPoker-meta-v0", KWARGS), uniform)
    assert len(table) == 936
    expected = pyspiel.nash_conv(game, pyspiel.UniformRandomPolicy(game))
    assert policy_report("leduc_poker", table)["nash_conv"] == pytest.approx(expected, abs=1e-9)


def test_every_history_of_an_information_state_shows_one_prompt():
    walker = PromptWalker(KUHN, KWARGS)
    shown: dict[str, set[str]] = {}
    for state in decision_states(walker.game):
        prompt = walker.prompt([(state.current_player(), state.history())])
        assert prompt.key == state.information_state_string()
        shown.setdefault(prompt.key, set()).add(prompt.observation)
    assert len(shown) == 12 and all(len(texts) == 1 for texts in shown.values())
    assert len({text for texts in shown.values() for text in texts}) == 12


def test_fresh_deal_prompts_of_a_later_hand_are_those_of_a_repeated_deal():
    first, second = [2, 0, 1, 1], [2, 0, 0, 1]  # King v Jack: bet, called; then check, bet
    opponent = ScriptedOpponent()
    opponent.load([first, second])
    env = gym.make(KUHN, **KWARGS, opponent=opponent, seat="random", repeat_instance=True)
    obs, info = env.reset(seed=0, options={"instance": instance_for(env.unwrapped.game, first, 0)})
    obs, *_ = env.step("bet")
    obs, *_ = env.step("check")
    assert env.unwrapped.state.history() == second
    walker = PromptWalker(KUHN, KWARGS)
    assert walker.prompt([(0, first), (0, second)]).observation == obs
    assert "[Episode 1] Your card: King. You bet. Opponent calls." in obs


def test_later_hands_give_the_exact_returns_by_hand_of_a_memory_reading_agent():
    """An agent that bets the Queen in hand 2 only when hand 1 showed a bet from the
    opponent: the report's exact hand-by-hand returns match the real env played out."""

    def rule(observation: str) -> dict[int, float]:
        key = kuhn_key(observation)
        memory = observation.split("\n\n")[0] if "Memory" in observation else ""
        aggressive_seen = "Opponent bets" in memory or "Opponent calls" in memory
        bet = NASH.bet_probability(key) if key[0] != "1" else float(aggressive_seen and key[1:] in ("", "p"))
        return {0: 1 - bet, 1: bet}

    def scorer(prompts):
        return [rule(p.observation) for p in prompts]

    walker = PromptWalker(KUHN, {**KWARGS, "num_episodes": 2})
    first = tabulate(walker.table_prompts(), scorer)
    report = later_hand_report(walker, scorer, first, {"aggressive": 1.0, "conservative": 1.0})

    rng = random.Random(0)

    def sampled(observation, info):
        p_bet = rule(observation)[1]
        bet_name = {"check": "bet", "fold": "call"}
        passive = info["legal_actions"][0]
        return bet_name[passive] if rng.random() < p_bet else passive

    played = evaluate(sampled, KUHN, opponents=["aggressive", "conservative"], meta_episodes=3000, seed=5,
                      env_kwargs={**KWARGS, "num_episodes": 2}, progress=False, oracle=False)
    for name in ("aggressive", "conservative"):
        result = played.opponents[name]
        for hand in (0, 1):
            exact = report["value_by_hand"][name][hand]
            assert abs(result.mean_return_by_episode[hand] - exact) < 4 * result.stderr_return_by_episode[hand] + 1e-9
    assert report["value_by_hand"]["aggressive"][1] != pytest.approx(report["value_by_hand"]["aggressive"][0])
    reach = sum(row["reach"]["aggressive"] for row in report["by_history"])
    assert reach == pytest.approx(1.0, abs=1e-12)


def test_the_third_hand_gives_the_exact_returns_by_hand_of_a_memory_reading_agent():
    """The Queen bets in a later hand only when an earlier one showed the opponent bet or call,
    and the King checks in hand 3 after a hand 2 it won: the exact returns of hands 1-3 match
    the real env played out."""

    def rule(observation: str) -> dict[int, float]:
        key = kuhn_key(observation)
        memory = observation.split("\n\n")[0] if "Memory" in observation else ""
        bet = NASH.bet_probability(key)
        if key[0] == "1":
            bet = float(("Opponent bets" in memory or "Opponent calls" in memory) and key[1:] in ("", "p"))
        if key[0] == "2" and "[Episode 2]" in memory and key[1:] in ("", "p"):
            bet = 0.0 if "win" in memory.split("[Episode 2]")[1] else bet
        return {0: 1 - bet, 1: bet}

    def scorer(prompts):
        return [rule(p.observation) for p in prompts]

    walker = PromptWalker(KUHN, {**KWARGS, "num_episodes": 3})
    first = tabulate(walker.table_prompts(), scorer)
    population = {"aggressive": 1.0, "intermediate": 1.0}
    report = third_hand_report(walker, scorer, first, population)
    second = later_hand_report(walker, scorer, first, population)
    rng = random.Random(0)

    def sampled(observation, info):
        bet_name = {"check": "bet", "fold": "call"}
        passive = info["legal_actions"][0]
        return bet_name[passive] if rng.random() < rule(observation)[1] else passive

    played = evaluate(sampled, KUHN, opponents=list(population), meta_episodes=1500, seed=5,
                      env_kwargs={**KWARGS, "num_episodes": 3}, progress=False, oracle=False)
    for name in population:
        result = played.opponents[name]
        exact = report["value_by_hand"][name]
        assert exact[:2] == pytest.approx(second["value_by_hand"][name], abs=1e-12)
        for hand in range(3):
            assert abs(result.mean_return_by_episode[hand] - exact[hand]) < 4 * result.stderr_return_by_episode[hand] + 1e-9
        assert sum(row["reach"][name] for row in report["by_history"]) == pytest.approx(1.0, abs=1e-12)
    assert report["value_by_hand"]["intermediate"][2] != pytest.approx(report["value_by_hand"]["intermediate"][1])
    assert all(len(row["histories"]) == 2 for row in report["by_history"])


def test_best_response_opponent_gains_the_nash_conv():
    table = tabulate(first_hand_prompts(KUHN, KWARGS), uniform)
    br = best_response_opponent("kuhn_poker", table)
    gains = [-match_value("kuhn_poker", seat_table("kuhn_poker", table, s), seat_table("kuhn_poker", br.table, 1 - s), s)
             for s in (0, 1)]
    assert sum(gains) == pytest.approx(policy_report("kuhn_poker", table)["nash_conv"], abs=1e-12)
    register_best_response("kuhn_poker", table)
    try:
        assert "best-response-to" in list_opponents("kuhn_poker", "heldout")
        assert make_opponent("kuhn_poker", "best-response-to").table == br.table
    finally:
        unregister_opponent("kuhn_poker", "best-response-to")


def test_later_hands_refuse_a_game_with_a_public_card():
    walker = PromptWalker("mage/LeducPoker-meta-v0", KWARGS)
    with pytest.raises(ValueError, match="public card"):
        later_hand_report(walker, uniform, {}, {"aggressive": 1.0})


def test_reflections_are_refused():
    with pytest.raises(ValueError, match="reflection=False"):
        PromptWalker(KUHN, {"reflection": True})


def test_tabular_checks_a_table_missing_states():
    with pytest.raises(ValueError, match="no entry for information state"):
        tabular.nash_conv(pyspiel.load_game("kuhn_poker"), {"0": {0: 1.0}})


def test_a_saved_best_response_is_an_opponent_by_its_path(tmp_path, monkeypatch):
    """``table:PATH`` names a saved table wherever an archetype id goes (the env, evaluations,
    tournaments): here the best response to the uniform learner, as ``mage exploitability`` saves it."""
    from mage_envs.opponents.registry import UnknownOpponentError, make_opponent
    from mage_envs.opponents.table import save_table
    from mage_envs.tournament import archetype_entrant

    table = tabulate(first_hand_prompts(KUHN, KWARGS), uniform)
    monkeypatch.chdir(tmp_path)
    save_table(best_response_opponent("kuhn_poker", table).table, "br.json")
    name = "table:br.json"
    assert make_opponent("kuhn_poker", name).table == best_response_opponent("kuhn_poker", table).table
    played = evaluate(lambda obs, info: info["legal_actions"][0], KUHN, opponents=[name], meta_episodes=12,
                      env_kwargs=KWARGS, progress=False, oracle=False)
    assert name in played.opponents
    entrant = archetype_entrant("kuhn_poker", name)
    own = {s: seat_table("kuhn_poker", table, s) for s in (0, 1)}
    gain = -sum(match_value("kuhn_poker", own[s], seat_table("kuhn_poker", entrant.table, 1 - s), s) for s in (0, 1))
    assert gain == pytest.approx(policy_report("kuhn_poker", table)["nash_conv"], abs=1e-12)
    with pytest.raises(UnknownOpponentError, match="no policy table at"):
        make_opponent("kuhn_poker", f"table:{tmp_path / 'missing.json'}")
    from mage_envs.cli import main

    assert main(["tournament", "--agents", f"nash,{name}", "--games", "2", "--output-dir", "t"]) == 0
    result = json.loads((tmp_path / "t" / "tournament.json").read_text())
    assert result["names"] == ["nash", name]
