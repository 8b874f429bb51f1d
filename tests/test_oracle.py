"""Exact oracles: known analytic values, the population calibration, winnable fractions,
the search-bot estimate and the reference agents played through the text env."""

import math

import gymnasium as gym
import pyspiel
import pytest

from mage_envs.opponents import (
    BotOpponent,
    PolicyOpponent,
    list_opponents,
    make_opponent,
)
from mage_envs.opponents.base import tabulate_policy
from mage_envs.opponents.registry import load_game
from mage_envs.oracle import (
    BestResponseAgent,
    OracleValue,
    RandomLegalAgent,
    best_nonadaptive_value,
    best_response_value,
    equilibrium_value,
    expectimax,
    exploitability,
    nash_conv,
    sampled,
    tabular,
    values,
    winnable,
)

KUHN, LEDUC, TTT = "kuhn_poker", "leduc_poker", "tic_tac_toe"
KUHN_TRAIN_TRIO = ["conservative", "aggressive", "intermediate"]
#: Leduc's game value for the first player (OpenSpiel's CFR literature, to 4 digits).
LEDUC_VALUE_P0 = -0.0856


def always(action):
    return lambda state: {action: 1.0}


def uniform(state):
    legal = state.legal_actions()
    return {a: 1.0 / len(legal) for a in legal}


# ---------------------------------------------------------------------- Kuhn: analytic values
def test_kuhn_equilibrium_value_is_minus_one_eighteenth():
    assert equilibrium_value(KUHN, 0) == pytest.approx(-1 / 18, abs=1e-9)
    assert equilibrium_value(KUHN, 1) == pytest.approx(1 / 18, abs=1e-9)
    assert equilibrium_value(KUHN, "random") == pytest.approx(0.0, abs=1e-9)


def test_kuhn_nash_conv_of_uniform_random_is_eleven_twelfths():
    game = load_game(KUHN)
    table = tabulate_policy(game, pyspiel.UniformRandomPolicy(game))
    assert nash_conv(KUHN, table) == pytest.approx(11 / 12, abs=1e-12)
    assert exploitability(KUHN, table) == pytest.approx(11 / 24, abs=1e-12)


def test_nash_archetype_is_unexploitable():
    table = tabular.archetype_table(load_game(KUHN), make_opponent(KUHN, "nash"))
    assert exploitability(KUHN, table) == pytest.approx(0.0, abs=1e-12)
    assert nash_conv(KUHN, table) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(
    "policy, expected",
    [(always(1), 1 / 3), (always(0), 1.0), (uniform, 1 / 2)],
    ids=["always-bet", "always-pass", "uniform"],
)
def test_kuhn_best_response_as_first_player(policy, expected):
    result = best_response_value(KUHN, PolicyOpponent("custom", policy), seat=0)
    assert result.exact and result.stderr == 0.0
    assert result.value == pytest.approx(expected, abs=1e-12)


def test_best_response_against_nash_gains_nothing():
    assert best_response_value(KUHN, "nash", 0).value == pytest.approx(-1 / 18, abs=1e-12)
    assert best_response_value(KUHN, "nash", 1).value == pytest.approx(1 / 18, abs=1e-12)


def test_random_seat_is_the_mean_of_both_seats():
    both = best_response_value(KUHN, "random", "random").value
    halves = [best_response_value(KUHN, "random", s).value for s in (0, 1)]
    assert both == pytest.approx(sum(halves) / 2, abs=1e-12)


def test_poker_oracle_needs_a_closed_form():
    bot = BotOpponent("uniform-bot", lambda seed: pyspiel.make_uniform_random_bot(1, seed))
    with pytest.raises(ValueError, match="closed-form"):
        best_response_value(KUHN, bot, seat=0)


def test_exploitability_rejects_an_incomplete_table():
    with pytest.raises(ValueError, match="no entry"):
        exploitability(KUHN, {"0": {0: 1.0}})


# ---------------------------------------------------------------------- populations
def test_kuhn_calibration_best_nonadaptive_vs_per_archetype():
    per_archetype = [best_response_value(KUHN, name).value for name in KUHN_TRAIN_TRIO]
    assert sum(per_archetype) / 3 == pytest.approx(5 / 18, abs=1e-12)  # 0.2778
    nonadaptive = best_nonadaptive_value(KUHN, KUHN_TRAIN_TRIO)
    assert nonadaptive.exact
    assert nonadaptive.value == pytest.approx(1 / 9, abs=1e-12)  # 0.1111


def test_mixture_with_one_weighted_member_is_that_member():
    game = load_game(KUHN)
    members = [make_opponent(KUHN, "aggressive"), make_opponent(KUHN, "conservative")]
    mixed = tabular.mixture_table(game, members, [1.0, 0.0], seat=1)
    direct = best_response_value(KUHN, "aggressive", 0).value
    br = tabular.best_response(game, 0, mixed).value_from_state(game.new_initial_state())
    assert br == pytest.approx(direct, abs=1e-12)


def test_nonadaptive_value_accepts_weights_and_is_bounded():
    weighted = best_nonadaptive_value(KUHN, {"aggressive": 3.0, "conservative": 1.0}, seat=0).value
    ceiling = 0.75 * best_response_value(KUHN, "aggressive", 0).value + 0.25 * best_response_value(
        KUHN, "conservative", 0
    ).value
    assert weighted <= ceiling + 1e-12
    assert weighted >= best_response_value(KUHN, "nash", 0).value - 1e-12


def test_ttt_nonadaptive_between_fixed_policy_and_per_archetype():
    pop = ["preferred-cell-center-first", "preferred-cell-corners-first", "random"]
    nonadaptive = best_nonadaptive_value(TTT, pop, seat=0)
    per_archetype = sum(best_response_value(TTT, o, 0).value for o in pop) / 3
    assert nonadaptive.exact
    assert 0.9 < nonadaptive.value <= per_archetype + 1e-12
    single = best_nonadaptive_value(TTT, ["random"], seat=0).value
    assert single == pytest.approx(best_response_value(TTT, "random", 0).value, abs=1e-12)


# ---------------------------------------------------------------------- Leduc
def test_leduc_equilibrium_value_from_shipped_policy():
    gap = nash_conv(LEDUC, values._nash_table(LEDUC))
    assert gap < values.NASH_CONV_TOLERANCE
    assert equilibrium_value(LEDUC, 0) == pytest.approx(LEDUC_VALUE_P0, abs=max(gap, 1e-4))
    assert best_response_value(LEDUC, "nash", 0).value >= equilibrium_value(LEDUC, 0) - 1e-12


def test_leduc_best_response_beats_heuristics():
    for name in ("conservative", "calling-station"):
        assert best_response_value(LEDUC, name).value > 0.5


# ---------------------------------------------------------------------- Tic-Tac-Toe
def test_ttt_equilibrium_is_a_draw():
    assert equilibrium_value(TTT, 0) == 0.0
    assert equilibrium_value(TTT, 1) == 0.0


@pytest.mark.parametrize("seat", [0, 1])
def test_ttt_best_response_vs_minimax_is_a_draw(seat):
    assert best_response_value(TTT, "minimax", seat).value == pytest.approx(0.0, abs=1e-12)


def test_ttt_best_response_vs_random():
    as_x = best_response_value(TTT, "random", 0)
    assert as_x.exact and as_x.value > 0.9
    assert as_x.value == pytest.approx(191 / 192, abs=1e-12)


@pytest.mark.parametrize("seat", [0, 1])
def test_ttt_preferred_cell_is_always_beaten(seat):
    for name in list_opponents(TTT):
        if name.startswith("preferred-cell-"):
            assert best_response_value(TTT, name, seat).value == 1.0, name


def test_mcts_estimate_is_marked_inexact():
    result = best_response_value(TTT, "mcts-100", 0, model_samples=2, eval_games=20, seed=1)
    assert isinstance(result, OracleValue)
    assert not result.exact and "estimate" in result.method
    assert math.isfinite(result.stderr) and result.stderr >= 0
    assert -1.0 <= result.value <= 1.0
    again = best_response_value(TTT, "mcts-100", 0, model_samples=2, eval_games=20, seed=1)
    assert again == result  # seeded


def _win_probability_brute_force(state, seat, opponent):
    """Independent of Expectimax: the best probability of winning against a known model."""
    if state.is_terminal():
        return 1.0 if state.returns()[seat] > 0 else 0.0
    children = {a: _win_probability_brute_force(state.child(a), seat, opponent) for a in state.legal_actions()}
    if state.current_player() == seat:
        return max(children.values())
    return sum(p * children[a] for a, p in opponent(state).items())


@pytest.mark.parametrize("seat", [0, 1])
def test_win_payoff_maximises_the_probability_of_winning(seat):
    game = load_game(TTT)
    root = game.new_initial_state()
    by_win = expectimax.Expectimax(seat, [uniform], [1.0], payoff=expectimax.win)
    by_return = expectimax.Expectimax(seat, [uniform], [1.0])
    assert by_win.value(root) == pytest.approx(_win_probability_brute_force(root, seat, uniform), abs=1e-12)
    # the return's best response wins no more often than the win's (its draws count for it)
    return_policy_wins = expectimax.Expectimax(seat, [uniform], [1.0], payoff=expectimax.win)
    return_policy_wins.best_action = by_return.best_action  # play the return's policy, score wins
    assert return_policy_wins.policy_value(root, uniform) <= by_win.value(root) + 1e-12
    assert by_return.value(root) == pytest.approx(best_response_value(TTT, "random", seat).value, abs=1e-12)


def test_played_returns_of_a_deterministic_opponent_equal_the_exact_value():
    game = load_game(TTT)
    first_free = make_opponent(TTT, "preferred-cell-row-major")
    solver = expectimax.Expectimax(1, [first_free.action_probabilities], [1.0])
    returns = sampled.play_returns(game, solver, first_free, games=3, seed=0)
    assert returns == [solver.value(game.new_initial_state())] * 3 == [1.0] * 3


# ---------------------------------------------------------------------- winnable fraction
def test_winnable_fraction_hand_checked():
    # Conservative bets/calls only with the King. As first player we win (J,Q) by a bluff,
    # (Q,J) at showdown, (K,J) and (K,Q) by betting; (J,K) and (Q,K) are lost: 4 of 6.
    assert winnable.winnable_fraction(KUHN, "conservative", 0) == pytest.approx(4 / 6, abs=1e-12)
    # The CFR argmax (alpha ~ 0.197 > 1/6) bets the King first and calls a bet with the
    # Queen: as first player 4 of 6 deals, as second only (J,Q), (J,K), (Q,K): 7/12 overall.
    assert winnable.winnable_fraction(KUHN, "cfr-argmax", 0) == pytest.approx(4 / 6, abs=1e-12)
    assert winnable.winnable_fraction(KUHN, "cfr-argmax", 1) == pytest.approx(3 / 6, abs=1e-12)
    assert winnable.winnable_fraction(KUHN, "cfr-argmax") == pytest.approx(7 / 12, abs=1e-12)


def test_winnable_fraction_ranges_and_errors():
    assert 0.0 <= winnable.winnable_fraction(LEDUC, "cfr-argmax") <= 1.0
    assert winnable.winnable_fraction(TTT, "preferred-cell-center-first") == 1.0
    with pytest.raises(ValueError, match="stochastic"):
        winnable.winnable_fraction(KUHN, "random")
    with pytest.raises(ValueError, match="closed-form"):
        winnable.winnable_fraction(TTT, "mcts-100")


# ---------------------------------------------------------------------- agents in the env
def play(env, agent, hands, seed):
    returns = []
    obs, info = env.reset(seed=seed)
    for _ in range(hands):
        total, done = 0.0, False
        while not done:
            obs, reward, done, _, info = env.step(agent(obs, info))
            total += reward
            assert info["invalid_action"] is None
        returns.append(total)
        obs, info = env.reset()
    return returns


def mean_and_stderr(xs):
    n = len(xs)
    mean = sum(xs) / n
    return mean, math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1) / n)


@pytest.mark.parametrize("opponent", ["random", KUHN_TRAIN_TRIO], ids=["random", "trio"])
def test_best_response_agent_reaches_the_oracle_value_in_the_env(opponent):
    env = gym.make("mage/KuhnPoker-v0", opponent=opponent, seat="random")
    returns = play(env, BestResponseAgent(env), hands=20000, seed=7)
    mean, stderr = mean_and_stderr(returns)
    names = [opponent] if isinstance(opponent, str) else opponent
    target = sum(best_response_value(KUHN, name).value for name in names) / len(names)
    assert abs(mean - target) < 3 * stderr, (mean, stderr, target)


def test_best_response_agent_in_leduc_and_tic_tac_toe():
    leduc = gym.make("mage/LeducPoker-v0", opponent="random", seat="random")
    mean, stderr = mean_and_stderr(play(leduc, BestResponseAgent(leduc), hands=2000, seed=3))
    assert abs(mean - best_response_value(LEDUC, "random").value) < 3 * stderr
    ttt = gym.make("mage/TicTacToe-v0", opponent="preferred-cell-spiral", seat="random")
    assert play(ttt, BestResponseAgent(ttt), hands=20, seed=0) == [1.0] * 20


@pytest.mark.parametrize("make_agent", [BestResponseAgent, lambda env: RandomLegalAgent(0)])
def test_agents_answer_reflection_prompts_in_meta_envs(make_agent):
    env = gym.make("mage/KuhnPoker-meta-v0", opponent="aggressive", num_episodes=3)
    agent = make_agent(env)
    obs, info = env.reset(seed=0)
    phases = []
    while True:
        phases.append(info["phase"])
        obs, _, terminated, truncated, info = env.step(agent(obs, info))
        if terminated or truncated:
            break
    assert "reflect" in phases and len(info["episode_returns"]) == 3


def test_random_legal_agent_is_seeded_and_legal():
    env = gym.make("mage/KuhnPoker-v0", opponent="aggressive")
    first = play(env, RandomLegalAgent(seed=3), hands=50, seed=0)
    assert play(env, RandomLegalAgent(seed=3), hands=50, seed=0) == first


def test_bot_model_is_a_distribution():
    bot = BotOpponent("uniform", lambda seed: pyspiel.make_uniform_random_bot(1, seed))
    model = sampled.EmpiricalModel(bot, samples=5, seed=0)
    state = load_game(TTT).new_initial_state().child(4)
    probs = model(state)
    assert sum(probs.values()) == pytest.approx(1.0) and set(probs) <= set(state.legal_actions())
    assert model(state) is probs  # cached per position



def test_instance_optimal_value_by_hand():
    """Seat 0 against `conservative` knowing the deal (J<Q<K): bet as a bluff when the
    opponent holds Q or J (it folds everything but the King), check-fold against the King.
    Deals JQ +1, JK -1, QJ +1, QK -1, KJ +1, KQ +1 -> 2/6."""
    from mage_envs.oracle import instance_optimal_value

    assert instance_optimal_value("kuhn_poker", "conservative", seat=0) == pytest.approx(1 / 3)
    # knowing the deal is worth more than any best response that does not
    for name in ("aggressive", "intermediate", "nash", "random"):
        assert instance_optimal_value("kuhn_poker", name) > best_response_value("kuhn_poker", name).value
    # against minimax in Tic-Tac-Toe (no hidden information) it equals the best response
    assert instance_optimal_value("tic_tac_toe", "minimax", seat=0) == pytest.approx(0.0)


@pytest.mark.parametrize("game, env_id", [("kuhn_poker", "mage/KuhnPoker-v0"), ("leduc_poker", "mage/LeducPoker-v0")])
def test_instance_deal_is_what_the_env_deals(game, env_id):
    import pyspiel

    from mage_envs.oracle.agents import RandomLegalAgent
    from mage_envs.oracle.winnable import instance_deal

    env, agent = gym.make(env_id), RandomLegalAgent(seed=1)
    for instance in range(40):
        obs, info = env.reset(seed=instance, options={"instance": instance})
        done = False
        while not done:
            obs, _, terminated, truncated, info = env.step(agent(obs, info))
            done = terminated or truncated
        dealt = tuple(s.action for s in env.unwrapped.state.full_history() if s.player == pyspiel.PlayerId.CHANCE)
        assert instance_deal(game, instance)[: len(dealt)] == dealt   # a hand that ended early dealt a prefix


def test_stratified_instances_cover_every_cell_equally_and_ceilings_average_to_the_expectation():
    from mage_envs.oracle.winnable import instance_deal, instance_value, stratified_instances

    instances = stratified_instances("kuhn_poker", 36, seed=4)
    cells = [(instance_deal("kuhn_poker", k), k & 1) for k in instances]
    assert len(set(instances)) == 36 and all(cells.count(c) == 3 for c in set(cells)) and len(set(cells)) == 12
    for rnd in range(3):   # every round of 12 holds each cell once
        assert len(set(cells[12 * rnd:12 * rnd + 12])) == 12
    for style in ("conservative", "aggressive", "intermediate"):
        mean = sum(instance_value("kuhn_poker", style, k, k & 1) for k in instances) / 36
        assert mean == pytest.approx(winnable.instance_optimal_value("kuhn_poker", style))
    assert stratified_instances("kuhn_poker", 36, seed=4) == instances
    assert stratified_instances("kuhn_poker", 36, seed=5) != instances
    fixed_seat = stratified_instances("kuhn_poker", 6, seed=0, seat_from_instance=False)
    assert len({instance_deal("kuhn_poker", k) for k in fixed_seat}) == 6


@pytest.mark.parametrize("game,cells", [("kuhn_poker", 12), ("leduc_poker", 240)])
def test_best_response_on_each_instance_averages_to_the_best_response_value(game, cells):
    from mage_envs.oracle.winnable import best_response_instance_value, stratified_instances

    instances = stratified_instances(game, cells, seed=2)
    styles = ("conservative", "aggressive", "nash") if game == "kuhn_poker" else ("aggressive",)
    for style in styles:   # nash: stochastic, so an expectation over its moves on each deal
        mean = sum(best_response_instance_value(game, style, k, k & 1) for k in instances) / cells
        assert mean == pytest.approx(best_response_value(game, style).value)
    assert best_response_instance_value("kuhn_poker", "conservative", 17, seat=1) == -1.0   # Jack v King: it calls
    assert best_response_instance_value("kuhn_poker", "aggressive", 0, seat=0) == -1.0     # Jack v Queen: we fold


def test_deal_known_action_reaches_the_instance_value():
    import pyspiel

    from mage_envs.oracle.winnable import deal_known_action, instance_deal, instance_value

    game = pyspiel.load_game("kuhn_poker")
    for style in ("conservative", "aggressive", "intermediate"):
        for instance in range(12):
            seat, deal = instance & 1, instance_deal("kuhn_poker", instance)
            state = game.new_initial_state()
            for card in deal:
                state.apply_action(card)
            opponent = make_opponent("kuhn_poker", style)
            while not state.is_terminal():   # deterministic styles: play their single move
                if state.current_player() == seat:
                    state.apply_action(deal_known_action("kuhn_poker", style, state, instance, seat))
                else:
                    probs = opponent.action_probabilities(state)
                    state.apply_action(max(probs, key=probs.get))
            assert state.returns()[seat] == instance_value("kuhn_poker", style, instance, seat)
