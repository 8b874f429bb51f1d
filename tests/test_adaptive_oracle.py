"""The Bayes-optimal adaptive value of fresh-deal meta-episodes, checked against the exact
oracles it must meet at its two ends (one hand: nothing learnt; one archetype: nothing to
learn), against values solved independently, and against what a prior's agent must beat."""

import pytest

from mage_envs.oracle import bayes_adaptive_value, best_nonadaptive_value, best_response_value
from mage_envs.oracle.adaptive import _Solver

TRAINING = ["conservative", "aggressive", "intermediate"]


def _value(population, episodes, seat="random"):
    return bayes_adaptive_value("kuhn_poker", population, episodes, seat).value


@pytest.mark.parametrize("population", [TRAINING, ["conservative", "maniac"], ["nash", "random", "bluffer"]])
def test_one_hand_is_the_best_nonadaptive_value(population):
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
    tilted_agent, even_agent = solver.values(episodes, tuple(tilted)), solver.values(episodes, tuple(even))
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
