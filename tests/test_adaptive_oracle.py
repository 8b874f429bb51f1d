"""The Bayes-optimal adaptive value of fresh-deal meta-episodes, checked against the exact
oracles it must meet at its two ends: one hand (nothing learnt) and one archetype (nothing
to learn)."""

import pytest

from mage_envs.oracle import bayes_adaptive_values, best_nonadaptive_value, best_response_value

TRAINING = ["conservative", "aggressive", "intermediate"]


def _mean(values):
    return sum(values.values()) / len(values)


@pytest.mark.parametrize("population", [TRAINING, ["conservative", "maniac"], ["nash", "random", "bluffer"]])
def test_one_hand_is_the_best_nonadaptive_value(population):
    assert _mean(bayes_adaptive_values("kuhn_poker", population, 1)) == pytest.approx(
        best_nonadaptive_value("kuhn_poker", population).value, abs=1e-9)


@pytest.mark.parametrize("archetype", ["conservative", "aggressive", "intermediate", "nash", "random", "maniac"])
@pytest.mark.parametrize("seat", ["random", 0, 1])
def test_a_known_archetype_is_its_best_response(archetype, seat):
    value = bayes_adaptive_values("kuhn_poker", [archetype], 3, seat=seat)[archetype]
    assert value == pytest.approx(best_response_value("kuhn_poker", archetype, seat=seat).value, abs=1e-9)


def test_more_hands_learn_more_and_never_pass_knowing_the_archetype():
    ceiling = sum(best_response_value("kuhn_poker", a).value for a in TRAINING) / 3
    means = [_mean(bayes_adaptive_values("kuhn_poker", TRAINING, k)) for k in range(1, 6)]
    assert means[0] == pytest.approx(1 / 9)
    assert all(a < b for a, b in zip(means, means[1:]))
    assert means[-1] < ceiling
    # three hands: aggressive is found out, intermediate hides behind conservative
    values = bayes_adaptive_values("kuhn_poker", TRAINING, 3)
    assert values["aggressive"] == pytest.approx(0.331, abs=5e-4)
    assert values["intermediate"] / 0.25 < 0.7 < values["conservative"] / 0.25


@pytest.mark.parametrize("episodes", [1, 2, 3])
def test_the_agent_of_a_prior_is_the_best_under_that_prior(episodes):
    # the agent built for an even prior is one policy among those the tilted prior's agent beats
    prior = {"conservative": 9.0, "aggressive": 1.0, "intermediate": 2.0}
    tilted = bayes_adaptive_values("kuhn_poker", prior, episodes)
    even = bayes_adaptive_values("kuhn_poker", list(prior), episodes)

    def under_prior(values):
        return sum(prior[a] * v for a, v in values.items()) / sum(prior.values())

    assert under_prior(tilted) >= under_prior(even) - 1e-12
    assert _mean(even) >= _mean(tilted) - 1e-12
    assert tilted["conservative"] >= even["conservative"] - 1e-12


def test_bad_requests_are_refused():
    with pytest.raises(ValueError, match="num_episodes"):
        bayes_adaptive_values("kuhn_poker", TRAINING, 0)
    with pytest.raises(ValueError, match="kuhn_poker"):
        bayes_adaptive_values("leduc_poker", TRAINING, 3)
