"""Credit assignment and advantages, checked against numbers computed by hand."""

import numpy as np
import pytest

from mage_agent.advantage import TurnTable, discounted_returns, group_advantages


def table(**columns):
    n = len(columns["traj"])
    columns.setdefault("episode", np.zeros(n, int))
    columns.setdefault("reward", np.zeros(n))
    return TurnTable(**{k: np.asarray(v, dtype=object if k in ("archetype", "anchor") else None) for k, v in columns.items()})


def test_returns_discount_within_and_across_episodes():
    # one meta-episode: episode 0 has two turns (rewards 0, 1), episode 1 has one turn (reward -2),
    # episode 2 has two turns (rewards 0, 3); then a second trajectory with one turn
    t = table(traj=[0, 0, 0, 0, 0, 1], episode=[0, 0, 1, 2, 2, 0], reward=[0, 1, -2, 0, 3, 5])
    g = discounted_returns(t, gamma_step=0.9, gamma_traj=0.5)
    ep2_last = 3.0
    ep2_first = 0 + 0.9 * ep2_last           # 2.7
    ep1 = -2 + 0.5 * ep2_first               # -0.65
    ep0_last = 1 + 0.5 * ep1                 # 0.675
    ep0_first = 0 + 0.9 * ep0_last           # 0.6075
    assert g.tolist() == pytest.approx([ep0_first, ep0_last, ep1, ep2_first, ep2_last, 5.0])


def test_differential_rewards_with_unit_discounts_sum_to_final_return():
    # episode returns 1, -1, 2 -> differential rewards 1, -2, 3 at each episode's end
    t = table(traj=[0, 0, 0], episode=[0, 1, 2], reward=[1, -2, 3])
    assert discounted_returns(t, 1.0, 1.0)[0] == pytest.approx(2.0)  # = R(tau_3)


def test_bad_discount_is_rejected():
    with pytest.raises(ValueError):
        discounted_returns(table(traj=[0]), 1.5, 0.5)


SCOPE_CASE = dict(
    traj=[0, 1, 2, 3, 4, 5],
    group=[0, 0, 1, 1, 2, 2],
    archetype=["a", "a", "a", "a", "b", "b"],
)
RETURNS = np.array([1.0, 3.0, 0.0, 4.0, 10.0, 30.0])


def test_group_scope_is_plain_grpo():
    adv = group_advantages(table(**SCOPE_CASE), RETURNS, scope="group")
    # each group: centred on its mean, divided by its own std
    assert adv.tolist() == pytest.approx([-1, 1, -1, 1, -1, 1], abs=1e-5)


def test_per_archetype_scope_pools_the_std_within_each_archetype():
    adv = group_advantages(table(**SCOPE_CASE), RETURNS, scope="per-archetype")
    # archetype a: centred values -1, 1, -2, 2 -> rms sqrt((1+1+4+4)/4) = sqrt(2.5)
    rms_a = np.sqrt(2.5)
    assert adv[:4].tolist() == pytest.approx([-1 / rms_a, 1 / rms_a, -2 / rms_a, 2 / rms_a], abs=1e-5)
    assert adv[4:].tolist() == pytest.approx([-1, 1], abs=1e-5)  # archetype b alone: rms 10


def test_global_scope_lets_the_large_archetype_dominate():
    adv = group_advantages(table(**SCOPE_CASE), RETURNS, scope="global")
    rms = np.sqrt((1 + 1 + 4 + 4 + 100 + 100) / 6)
    assert adv.tolist() == pytest.approx([-1 / rms, 1 / rms, -2 / rms, 2 / rms, -10 / rms, 10 / rms], abs=1e-5)


def test_std_of_returns_divides_by_each_archetypes_reward_scale():
    adv = group_advantages(table(**SCOPE_CASE), RETURNS, scope="per-archetype", std_of="returns")
    # archetype a: returns 1, 3, 0, 4 (mean 2, std sqrt(2.5)); b: returns 10, 30 (std 10)
    std_a = np.std([1.0, 3.0, 0.0, 4.0])
    assert adv[:4].tolist() == pytest.approx([-1 / std_a, 1 / std_a, -2 / std_a, 2 / std_a], abs=1e-5)
    assert adv[4:].tolist() == pytest.approx([-1, 1], abs=1e-5)


def test_a_group_without_spread_does_not_inflate_the_others_under_std_of_returns():
    case = dict(traj=[0, 1, 2, 3], group=[0, 0, 1, 1], archetype=["a"] * 4)
    returns = np.array([0.0, 0.0, 1.0, 3.0])   # group 0 teaches nothing; group 1 centres to -1, 1
    of_advantages = group_advantages(table(**case), returns, scope="per-archetype")
    of_returns = group_advantages(table(**case), returns, scope="per-archetype", std_of="returns")
    assert of_advantages[2:].tolist() == pytest.approx([-np.sqrt(2), np.sqrt(2)], abs=1e-5)   # rms sqrt(1/2)
    assert of_returns[2:].tolist() == pytest.approx([-1 / np.sqrt(1.5), 1 / np.sqrt(1.5)], abs=1e-5)   # std of 0,0,1,3


@pytest.mark.parametrize("std_of", ["advantages", "returns"])
def test_per_archetype_statistics_ignore_an_archetypes_reward_scale(std_of):
    weights = np.array([1.0, 1.0, 1.0, 1.0, 10.0, 10.0])   # archetype b played for ten times the stakes
    plain = group_advantages(table(**SCOPE_CASE), RETURNS, scope="per-archetype", std_of=std_of)
    weighted = group_advantages(table(**SCOPE_CASE), RETURNS * weights, scope="per-archetype", std_of=std_of)
    assert weighted.tolist() == pytest.approx(plain.tolist(), abs=1e-6)


def test_mean_only_normalisation():
    adv = group_advantages(table(**SCOPE_CASE), RETURNS, scope="per-archetype", std=False)
    assert adv.tolist() == pytest.approx([-1, 1, -2, 2, -10, 10])


def test_statistics_never_mix_episode_indices_or_phases():
    t = table(traj=[0, 0, 1, 1], group=[0, 0, 0, 0], episode=[0, 1, 0, 1], archetype=["a"] * 4)
    adv = group_advantages(t, np.array([0.0, 100.0, 2.0, 104.0]), scope="group", std=False)
    assert adv.tolist() == pytest.approx([-1, -2, 1, 2])


def test_gigpo_adds_the_anchor_state_term():
    # two trajectories in one group, two turns each; the second turns share an anchor ("s")
    t = table(traj=[0, 0, 1, 1], group=[0, 0, 0, 0], episode=[0, 0, 0, 0], archetype=["a"] * 4,
              anchor=["x", "s", "y", "s"])
    returns = np.array([1.0, 2.0, 3.0, 6.0])
    grpo = group_advantages(t, returns, scope="group", estimator="grpo", std=False)
    gigpo = group_advantages(t, returns, scope="group", estimator="gigpo", std=False)
    assert grpo.tolist() == pytest.approx([-2, -1, 0, 3])  # group mean 3
    # anchor terms: x alone 0, s: 2 and 6 -> -2, +2, y alone 0
    assert gigpo.tolist() == pytest.approx([-2, -3, 0, 5])


def test_errors():
    with pytest.raises(ValueError):
        group_advantages(table(traj=[0]), np.zeros(1), scope="batch")
    with pytest.raises(ValueError):
        group_advantages(table(traj=[0]), np.zeros(1), estimator="ppo")
    with pytest.raises(ValueError):
        TurnTable(traj=np.zeros(2), episode=np.zeros(1), reward=np.zeros(2))


def test_mixed_groups_centre_within_archetype_or_pool_archetypes_under_global():
    # one group (one deal) whose four copies met two archetypes with returns 1, 3 (a) and 10, 30 (b)
    t = table(traj=[0, 1, 2, 3], group=[0, 0, 0, 0], archetype=["a", "a", "b", "b"])
    returns = np.array([1.0, 3.0, 10.0, 30.0])
    per_archetype = group_advantages(t, returns, scope="per-archetype", std=False)
    assert per_archetype.tolist() == [-1.0, 1.0, -10.0, 10.0]
    pooled = group_advantages(t, returns, scope="global", std=False)   # baseline 11 over both archetypes
    assert pooled.tolist() == [-10.0, -8.0, -1.0, 19.0]


def test_shared_groups_centre_alike_in_every_scope_when_mean_only():
    t = table(traj=[0, 1, 2, 3], group=[0, 0, 1, 1], archetype=["a", "a", "b", "b"])
    returns = np.array([1.0, 3.0, 10.0, 30.0])
    expected = [-1.0, 1.0, -10.0, 10.0]
    for scope in ("group", "per-archetype", "global"):
        assert group_advantages(t, returns, scope=scope, std=False).tolist() == expected


def test_advantage_diagnostics_per_archetype_by_hand():
    from mage_agent.advantage import advantage_diagnostics

    # archetype a: group 0 spread {0, 2} and group 1 all equal; archetype b: one group {1, 1}
    t = table(traj=[0, 1, 2, 3, 4, 5], group=[0, 0, 1, 1, 2, 2], archetype=["a", "a", "a", "a", "b", "b"],
              phase=[0, 0, 0, 0, 0, 0])
    returns = np.array([0.0, 2.0, 5.0, 5.0, 1.0, 1.0])
    advantages = group_advantages(t, returns, std=False)
    d = advantage_diagnostics(t, returns, advantages, np.log(np.array([0.5, 0.5, 1.0, 1.0, 0.25, 0.25])))
    assert d["return_spread/a"] == pytest.approx(0.5)          # (1 + 0) / 2
    assert d["advantage_scale/a"] == pytest.approx(0.5)        # |-1|, |1|, 0, 0
    assert d["zero_advantage_groups/a"] == 0.5 and d["zero_advantage_groups/b"] == 1.0
    assert d["entropy/a"] == pytest.approx(np.log(2) / 2) and d["entropy/b"] == pytest.approx(np.log(4))
