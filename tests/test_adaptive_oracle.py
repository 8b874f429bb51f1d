"""The Bayes-optimal adaptive value of fresh-deal meta-episodes, checked against the exact
oracles it must meet at its two ends (one hand: nothing learnt; one archetype: nothing to
learn), against values solved independently, and against what a prior's agent must beat."""

import pytest

from mage_envs.oracle import bayes_adaptive_value, best_nonadaptive_value, best_response_value
from mage_envs.oracle.adaptive import _Solver, _solver, belief_key

TRAINING = ["conservative", "aggressive", "intermediate"]


def _value(population, episodes, seat="random", probe=True):
    return bayes_adaptive_value("kuhn_poker", population, episodes, seat, probe).value


@pytest.mark.parametrize("population", [TRAINING, ["conservative", "maniac"], ["nash", "random", "bluffer"],
                                        [*TRAINING, "random-style"], ["random-style"]])
def test_one_hand_is_the_best_nonadaptive_value(population):
    # random-style: the DP holds its 4,093 styles, the non-adaptive value its one-hand marginal
    assert _value(population, 1) == pytest.approx(best_nonadaptive_value("kuhn_poker", population).value, abs=1e-9)


@pytest.mark.parametrize("archetype", ["conservative", "aggressive", "intermediate", "nash", "random", "maniac"])
@pytest.mark.parametrize("seat", ["random", 0, 1])
def test_a_known_archetype_is_its_best_response(archetype, seat):
    assert _value([archetype], 3, seat) == pytest.approx(
        best_response_value("kuhn_poker", archetype, seat=seat).value, abs=1e-9)


def test_values_solved_independently():
    # an exact solver in fractions, written apart from this module, and for two hands a
    # brute force over every pure strategy of hand 1 (4**6) with the best hand 2 after it
    assert [_value(TRAINING, k) for k in (1, 2, 3, 4)] == pytest.approx([1 / 9, 0.201389, 0.240162, 0.258150], abs=1e-6)
    assert _value(["conservative", "maniac"], 3) == pytest.approx(0.277778, abs=1e-6)
    assert _value(["random", "bluffer", "calling-station"], 2) == pytest.approx(0.364583, abs=1e-6)
    assert _value({"conservative": 9, "aggressive": 1, "intermediate": 2}, 2) == pytest.approx(0.232639, abs=1e-6)
    assert (_value(TRAINING, 3, 0), _value(TRAINING, 3, 1)) == pytest.approx((0.237654, 0.246914), abs=1e-6)


def test_without_probes_it_learns_less_but_not_much_less():
    # every earlier hand played for its own return: 25/108 in the final hand, 96% of the
    # probing agent's 0.2402 (probes are worth +0.009 against the training styles)
    assert _value(TRAINING, 3, probe=False) == pytest.approx(25 / 108, abs=1e-12)
    assert [_value(TRAINING, k, probe=False) for k in (1, 2, 4)] == pytest.approx([1 / 9, 7 / 36, 1 / 4], abs=1e-12)
    for k in (2, 3, 4):
        assert _value(TRAINING, k, probe=False) < _value(TRAINING, k)
    assert _value(["aggressive"], 3, probe=False) == pytest.approx(
        best_response_value("kuhn_poker", "aggressive").value, abs=1e-12)


def test_more_hands_learn_more_and_never_pass_knowing_the_archetype():
    ceiling = sum(best_response_value("kuhn_poker", a).value for a in TRAINING) / 3
    means = [_value(TRAINING, k) for k in range(1, 6)]
    assert all(a < b for a, b in zip(means, means[1:])) and means[-1] < ceiling
    # conservative and intermediate need no telling apart: one plan best-responds to both
    assert _value(["conservative", "intermediate"], 3) == pytest.approx(0.25)


@pytest.mark.parametrize("episodes", [1, 2, 3])
def test_the_agent_of_a_prior_is_the_best_under_that_prior(episodes):
    # the agent built for an even prior is one policy among those the tilted prior's agent beats
    import numpy as np

    from mage_envs.opponents import make_opponent
    from mage_envs.oracle.result import seats

    tilted = np.array([9.0, 1.0, 2.0]) / 12
    even = np.full(3, 1 / 3)
    solver = _Solver("kuhn_poker", tuple(make_opponent("kuhn_poker", a) for a in TRAINING), seats("random"))
    tilted_agent, even_agent = solver.values(episodes, belief_key(tilted)), solver.values(episodes, belief_key(even))
    assert tilted @ tilted_agent >= tilted @ even_agent - 1e-12
    assert even @ even_agent >= even @ tilted_agent - 1e-12
    assert tilted @ tilted_agent == pytest.approx(_value(dict(zip(TRAINING, [9, 1, 2])), episodes))


def test_an_archetype_without_weight_changes_nothing():
    assert _value({"conservative": 1, "aggressive": 0, "intermediate": 1}, 3) == pytest.approx(
        _value(["conservative", "intermediate"], 3))
    tiny = _value({"conservative": 1, "aggressive": 1e-13, "intermediate": 1}, 3)
    assert tiny == pytest.approx(0.25, abs=1e-9)


def test_bad_requests_are_refused():
    with pytest.raises(ValueError, match="num_episodes"):
        bayes_adaptive_value("kuhn_poker", TRAINING, 0)
    with pytest.raises(ValueError, match="kuhn_poker"):
        bayes_adaptive_value("leduc_poker", TRAINING, 3)
    # random-style's 4,093 styles: solved up to four hands, refused beyond (the cache would not fit)
    with pytest.raises(ValueError, match="random-style draws a hidden style .* beyond 4 hands"):
        bayes_adaptive_value("kuhn_poker", [*TRAINING, "random-style"], 5)
    assert _value(TRAINING, 5) > _value(TRAINING, 4)   # fixed archetypes: no such limit
    for bad in ([0.0, 0.0], [1.0, -0.5], [1.0, float("nan")]):
        with pytest.raises(ValueError, match="a belief is non-negative"):
            belief_key(bad)


class _Dealt:
    """Stands in for the env's deal stream: hands out the given instance numbers in turn."""

    def __init__(self, instances):
        self._instances = list(instances)

    def getrandbits(self, bits):
        return self._instances.pop(0)


def _every_deal_sequence(make_agent, opponents=TRAINING, per_opponent=False):
    """Every sequence of (deal, seat) cells over three hands (12**3, equally likely), forced
    through the env's deal stream: the agent's mean first and final hands over ``opponents``
    (with ``per_opponent``: the final hand's per opponent)."""
    import itertools

    import gymnasium as gym
    import numpy as np

    import mage_envs  # noqa: F401
    from mage_envs.oracle.winnable import stratified_instances

    cells = stratified_instances("kuhn_poker", 12)
    openers, finals = {}, {}
    for style in opponents:
        env = gym.make("mage/KuhnPoker-meta-v0", opponent=style, repeat_instance=False, reflection=False,
                       num_episodes=3)
        agent = make_agent(env)
        returns = []
        for first, *later in itertools.product(cells, repeat=3):
            obs, info = env.reset(seed=0, options={"instance": first})
            env.unwrapped._deals = _Dealt(later)
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(agent(obs, info))
                done = terminated or truncated
            returns.append(info["episode_returns"])
        openers[style], finals[style] = np.mean(returns, axis=0)[[0, -1]]
    if per_opponent:
        return list(finals.values())
    return float(np.mean(list(openers.values()))), float(np.mean(list(finals.values())))


@pytest.mark.parametrize("probe", [True, False])
def test_the_bayes_agent_reaches_the_bayes_value_exactly_in_the_real_env(probe):
    """The agent's mean final hand is the exact Bayes value (with or without probes); without
    probes its first hand is the best non-adaptive play, with them it pays for what it learns."""
    from mage_envs.oracle import BayesAdaptiveAgent

    first, final = _every_deal_sequence(lambda env: BayesAdaptiveAgent(env, population=TRAINING, probe=probe))
    assert final == pytest.approx(_value(TRAINING, 3, probe=probe), abs=1e-9)
    if probe:
        assert first < _value(TRAINING, 1) - 0.05
    else:
        assert first == pytest.approx(_value(TRAINING, 1), abs=1e-9)


def test_random_style_is_read_as_the_styles_it_draws():
    """A population with random-style: the agent's prior holds each of its 4,093 styles, so
    against any one of them (the style random-style drew) its mean final hand is exactly the
    DP's value of that style; the value lies between one hand's and the styles known."""
    import numpy as np

    from mage_envs.opponents.base import PolicyOpponent
    from mage_envs.opponents.kuhn_poker import drawable_styles
    from mage_envs.oracle import BayesAdaptiveAgent

    population = [*TRAINING, "random-style"]
    solver, prior = _solver("kuhn_poker", population, "random")
    assert len(prior) == 3 + 4093 and prior[:3] == pytest.approx([0.25] * 3)
    assert prior[3:].sum() == pytest.approx(0.25) and np.ptp(prior[3:]) < 1e-15
    per_type = solver.values(3, belief_key(prior))
    assert prior @ per_type == pytest.approx(_value(population, 3), abs=1e-12)
    picked = [0, 1234, 4092]
    styles = [PolicyOpponent("random-style", drawable_styles()[i].policy) for i in picked]
    finals = _every_deal_sequence(lambda env: BayesAdaptiveAgent(env, population=population), styles,
                                  per_opponent=True)
    assert finals == pytest.approx(per_type[[3 + i for i in picked]], abs=1e-9)
    # reading a drawn style is worth more with every hand (one hand: the best response to its
    # marginal), and knowing the style would be worth more still
    marginal = best_response_value("kuhn_poker", "random-style").value
    values = [_value(["random-style"], k) for k in (1, 2, 3)]
    assert values[0] == pytest.approx(marginal, abs=1e-12) and values == sorted(values) and values[0] < values[-1]
    for index, style in zip(picked, styles):
        assert per_type[3 + index] <= best_response_value("kuhn_poker", style).value + 1e-12


@pytest.mark.parametrize("probe", [True, False])
def test_the_watcher_reads_another_agents_hands_as_that_agent_does(probe):
    """BayesFinalHand over a Bayes agent: the watcher's posterior after hands it did not play is
    the player's own, so the final hand keeps the exact value of the agent it watched."""
    from mage_envs.oracle import BayesAdaptiveAgent, BayesFinalHand

    _, final = _every_deal_sequence(
        lambda env: BayesFinalHand(BayesAdaptiveAgent(env, population=TRAINING, probe=probe), env, TRAINING))
    assert final == pytest.approx(_value(TRAINING, 3, probe=probe), abs=1e-9)


def test_the_watcher_learns_from_any_play_and_never_does_worse_than_not_learning():
    """Behind a random player the watcher reads every record (no impossible ones) and its final
    hand, which knows more than nothing, beats the best non-adaptive value (random early hands
    show nearly all there is to know: about +0.22 against the probing agent's +0.240)."""
    from mage_envs.oracle import BayesFinalHand, RandomLegalAgent

    first, final = _every_deal_sequence(lambda env: BayesFinalHand(RandomLegalAgent(seed=0), env, TRAINING))
    assert first < 0 < _value(TRAINING, 1) < final


@pytest.mark.parametrize("mode", ["forfeit", "retry"])
def test_the_watcher_reads_a_forfeited_hand_as_nothing(mode):
    import gymnasium as gym
    import numpy as np

    import mage_envs  # noqa: F401
    from mage_envs.oracle import BayesFinalHand

    env = gym.make("mage/KuhnPoker-meta-v0", opponent="aggressive", repeat_instance=False, reflection=False,
                   num_episodes=3, invalid_action=mode)
    agent = BayesFinalHand(lambda observation, info: "<action>dance</action>", env, TRAINING)
    for seed in range(12):
        obs, info = env.reset(seed=seed)
        while not info.get("meta_done"):
            final = info["episode_index"] == 2
            obs, _, _, _, info = env.step(agent(obs, info))
            assert not (final and info.get("invalid_action"))   # the watcher answers the last hand
        np.testing.assert_allclose(agent.bayes.belief, np.full(3, 1 / 3))   # nothing learnt


def test_every_plan_that_can_end_in_a_record_gives_it_one_likelihood():
    import numpy as np

    from mage_envs.opponents import make_opponent
    from mage_envs.oracle.result import seats

    solver = _Solver("kuhn_poker", tuple(make_opponent("kuhn_poker", a) for a in TRAINING), seats("random"))
    checked = 0
    for key, (_, plans) in solver.situations.items():
        for _, outcomes in plans:
            for summary, record in outcomes.summaries.items():
                np.testing.assert_allclose(solver.records[key][summary], outcomes.likelihood[record], atol=1e-15)
                checked += 1
    # 6 (seat, card) situations x 4 plans; 36 distinct records, most reachable by several plans
    assert (checked, sum(len(records) for records in solver.records.values())) == (63, 36)


def _likelihood(terminal, seat, opponent):
    """P(what ``seat`` saw of this hand | the opponent's archetype), by replaying every card
    the opponent may hold (the one shown, at showdown) through its action probabilities."""
    history = terminal.history()
    shown = history[-2:] != [1, 0]   # not a bet then a fold: a showdown names the opponent's card
    cards = [history[1 - seat]] if shown else [c for c in range(3) if c != history[seat]]
    total = 0.0
    for card in cards:
        replay = terminal.get_game().new_initial_state()
        probability = 0.5
        for index, action in enumerate(history):
            if index == 1 - seat:
                action = card
            if not replay.is_chance_node() and replay.current_player() != seat:
                probability *= opponent.action_probabilities(replay).get(action, 0.0)
            replay.apply_action(action)
        total += probability
    return total


@pytest.mark.parametrize("style", TRAINING)
def test_the_bayes_agent_updates_its_belief_by_bayes_rule(style):
    import gymnasium as gym
    import numpy as np

    import mage_envs  # noqa: F401
    from mage_envs.opponents import make_opponent
    from mage_envs.oracle import BayesAdaptiveAgent

    archetypes = [make_opponent("kuhn_poker", a) for a in TRAINING]
    env = gym.make("mage/KuhnPoker-meta-v0", opponent=style, repeat_instance=False, reflection=True, num_episodes=3)
    agent = BayesAdaptiveAgent(env, population=TRAINING)
    checked = 0
    for seed in range(12):
        obs, info = env.reset(seed=seed)
        belief, done = np.full(3, 1 / 3), False
        while not done:
            answer = agent(obs, info)
            if info["phase"] == "reflect":   # the hand just ended: the env still holds its last state
                assert answer.startswith("<reflection>")
                terminal = env.unwrapped.state
                belief = belief * [_likelihood(terminal, info["seat"], a) for a in archetypes]
                belief /= belief.sum()
                assert agent.belief.tolist() == pytest.approx(belief.tolist(), abs=1e-9)
                checked += 1
            obs, _, terminated, truncated, info = env.step(answer)
            done = terminated or truncated
    assert checked == 24


def test_the_bayes_agent_refuses_a_drawn_style_over_too_many_hands():
    import gymnasium as gym

    import mage_envs  # noqa: F401
    from mage_envs.oracle import BayesAdaptiveAgent

    env = gym.make("mage/KuhnPoker-meta-v0", opponent="random-style", repeat_instance=False, num_episodes=5)
    with pytest.raises(ValueError, match="BayesAdaptiveAgent: random-style draws .* beyond 4 hands"):
        BayesAdaptiveAgent(env, population=[*TRAINING, "random-style"])


def test_the_bayes_agent_refuses_what_it_cannot_play():
    import gymnasium as gym

    import mage_envs  # noqa: F401
    from mage_envs.oracle import BayesAdaptiveAgent

    with pytest.raises(TypeError, match="kuhn_poker"):
        BayesAdaptiveAgent(gym.make("mage/LeducPoker-meta-v0", repeat_instance=False))
    with pytest.raises(TypeError, match="meta"):
        BayesAdaptiveAgent(gym.make("mage/KuhnPoker-v0"))
    with pytest.raises(ValueError, match="repeat_instance=False"):
        BayesAdaptiveAgent(gym.make("mage/KuhnPoker-meta-v0"))


@pytest.mark.parametrize("seat", ["random", 0, 1])
def test_the_bayes_agent_plays_one_hand_meta_episodes_as_the_best_nonadaptive_policy(seat):
    """One hand: nothing to learn, so the agent is the best non-adaptive policy; its hands
    start afresh every meta-episode even when the next deal extends the last history seen."""
    import itertools

    import gymnasium as gym
    import numpy as np

    import mage_envs  # noqa: F401
    from mage_envs.oracle import BayesAdaptiveAgent
    from mage_envs.oracle.winnable import stratified_instances

    cells = stratified_instances("kuhn_poker", 12 if seat == "random" else 6, seat_from_instance=seat == "random")
    means = []
    for style in TRAINING:
        env = gym.make("mage/KuhnPoker-meta-v0", opponent=style, repeat_instance=False, num_episodes=1, seat=seat)
        agent = BayesAdaptiveAgent(env, population=TRAINING)
        returns = []
        for first, second in itertools.product(cells, repeat=2):   # every pair of consecutive deals
            for instance in (first, second):
                obs, info = env.reset(seed=0, options={"instance": instance})
                done = False
                while not done:
                    obs, _, terminated, truncated, info = env.step(agent(obs, info))
                    done = terminated or truncated
                returns.append(info["episode_returns"][-1])
        means.append(np.mean(returns))
    value = best_nonadaptive_value("kuhn_poker", TRAINING, seat=seat).value
    assert np.mean(means) == pytest.approx(value, abs=1e-9)


def test_the_bayes_agent_says_when_a_hand_is_impossible_under_its_prior():
    import gymnasium as gym

    import mage_envs  # noqa: F401
    from mage_envs.oracle import BayesAdaptiveAgent

    # the maniac bets everything; a prior of the conservative style alone cannot explain it
    env = gym.make("mage/KuhnPoker-meta-v0", opponent="maniac", repeat_instance=False, reflection=False, seat=1)
    agent = BayesAdaptiveAgent(env, population=["conservative"])
    with pytest.raises(ValueError, match="impossible under every archetype of its belief"):
        for seed in range(12):
            obs, info = env.reset(seed=seed)
            done = False
            while not done:
                obs, _, terminated, truncated, info = env.step(agent(obs, info))
                done = terminated or truncated
