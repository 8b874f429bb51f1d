"""Two learners in self-play through MetaEpisodeAEC: both policies learn, the same seed gives
the same run, each learner's turns carry its meta-rewards, the profile's exploitability is
the exact one of the tables the two policies play."""

import pytest
import torch

from mage_agent.config import TrainConfig, apply_overrides
from mage_agent.exploitability import policy_scorer
from mage_agent.two_learners import TwoLearners
from mage_envs.oracle.learner import policy_report, tabulate
from mage_envs.oracle.prompts import first_hand_prompts

pytest.importorskip("pettingzoo")


def _config(tmp_path, name, **overrides):
    return apply_overrides(TrainConfig(), {"iterations": 2, "groups_per_iteration": 2, "group_size": 2,
                                           "output_dir": str(tmp_path / name), "tensorboard": False,
                                           "exploitability_every": 1, **overrides})


def _parameters(run):
    return {agent: [p.detach().clone() for p in trainer.policy.model.parameters()]
            for agent, trainer in run.trainers.items()}


def test_a_short_run_updates_both_learners(tmp_path):
    run = TwoLearners(_config(tmp_path, "a"))
    before = _parameters(run)
    history = run.train()
    after = _parameters(run)
    for agent in ("player_0", "player_1"):
        assert any(not torch.equal(b, a) for b, a in zip(before[agent], after[agent])), agent
    assert not all(torch.equal(a, b) for a, b in zip(after["player_0"], after["player_1"]))   # two policies
    assert [m["iteration"] for m in history] == [1, 2] and all("exploitability" in m for m in history)
    assert all(sum(m["final_return"].values()) == pytest.approx(0.0) for m in history)   # zero-sum
    assert (tmp_path / "a" / "metrics.jsonl").read_text().count("\n") == 2


@pytest.mark.slow
def test_the_same_seed_repeats_the_run(tmp_path):
    first, again = TwoLearners(_config(tmp_path, "a")), TwoLearners(_config(tmp_path, "b"))
    assert first.train() == again.train()
    ours, theirs = _parameters(first), _parameters(again)
    assert all(torch.equal(a, b) for agent in ours for a, b in zip(ours[agent], theirs[agent]))


@pytest.fixture(scope="module")
def untrained(tmp_path_factory):
    """Two untrained learners (the tests that use them do not train)."""
    return TwoLearners(_config(tmp_path_factory.mktemp("untrained"), "run"))


def test_each_learners_turns_carry_its_meta_rewards(untrained):
    run = untrained
    batches = run.runner.collect(run.samplers, [3, 4], 2, run.sampling, seed=0)
    for agent, batch in batches.items():
        assert {t.opponent for t in batch.turns} == {"player_1" if agent == "player_0" else "player_0"}
        for traj, returns in enumerate(batch.episode_returns):
            turns = [t for t in batch.turns if t.traj == traj]
            assert len(returns) == 3 and {t.episode for t in turns} == {0, 1, 2}
            # differential meta-rewards sum to the final hand's return, paid on the learner's own turns
            assert sum(t.reward for t in turns) == pytest.approx(returns[-1])
            for episode in range(3):
                own = [t.reward for t in turns if t.episode == episode]
                assert all(r == 0.0 for r in own[:-1])   # paid on the hand's last turn only
    assert batches["player_0"].episode_returns == [[-r for r in rs] for rs in batches["player_1"].episode_returns]


def test_the_profile_is_each_learner_in_its_seat(untrained):
    run = untrained
    prompts = first_hand_prompts("mage/KuhnPoker-meta-v0", {"reflection": False, "prompt_style": "compact"})
    table = {}
    for seat, trainer in enumerate(run.trainers.values()):
        table.update(tabulate([p for p in prompts if p.seat == seat], policy_scorer(trainer.policy)))
    expected = policy_report("kuhn_poker", table)
    measured = run.exploitability()
    assert measured["exploitability"] == pytest.approx(expected["exploitability"], abs=1e-12)
    assert measured["nash_conv"] == pytest.approx(expected["nash_conv"], abs=1e-12)
