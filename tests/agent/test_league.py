"""The league: snapshot opponents play their saved policy; a league run resumes bit-identically."""

import json
import random

import pyspiel
import pytest
import torch

from mage_agent.config import TrainConfig, apply_overrides
from mage_agent.exploitability import measure
from mage_agent.league import LEARNER, League
from mage_agent.trainer import Trainer, earlier_run
from mage_envs.opponents.base import decision_states
from mage_envs.opponents.table import TableOpponent

LEAGUE_RUN = {"iterations": 4, "groups_per_iteration": 4, "group_size": 2, "checkpoint_every": 2,
              "eval_meta_episodes": 0, "tensorboard": False, "minibatch_size": 8, "warmup_iterations": 1,
              "league": True, "league_interval": 1, "league_pool_size": 2, "league_sampling": "pfsp",
              "exploitability_every": 0}


def league_config(tmp_path, name, **extra):
    return apply_overrides(TrainConfig(), {**LEAGUE_RUN, "output_dir": str(tmp_path / name), **extra})


def test_a_snapshot_opponent_plays_exactly_its_saved_policy(tmp_path):
    config = league_config(tmp_path, "run")
    trainer = Trainer(config, progress=False)
    _, table = measure(trainer.policy, config)
    snapshot = TableOpponent("snapshot", table)
    game = pyspiel.load_game("kuhn_poker")
    counts: dict[str, dict[int, int]] = {}
    snapshot.reset(random.Random(3))
    draws = 4000
    for key in table:
        state = _state_of(game, key)
        assert snapshot.action_probabilities(state) == pytest.approx(table[key], abs=0)
        counts[key] = {a: 0 for a in table[key]}
        for _ in range(draws):
            counts[key][snapshot.act(state)] += 1
        for action, probability in table[key].items():   # a binomial's 5 standard deviations
            assert abs(counts[key][action] / draws - probability) < 5 * (probability * (1 - probability) / draws) ** 0.5
    # the same seed, the same moves
    again = TableOpponent("snapshot", table)
    again.reset(random.Random(3))
    first = [again.act(_state_of(game, key)) for key in table for _ in range(50)]
    snapshot.reset(random.Random(3))
    assert first == [snapshot.act(_state_of(game, key)) for key in table for _ in range(50)]


def _state_of(game, key):
    return next(s for s in decision_states(game) if s.information_state_string() == key)


def test_league_run_meets_its_snapshots_and_resumes_bit_identically(tmp_path, train_until_killed):
    straight = Trainer(league_config(tmp_path, "straight"), progress=False)
    history = straight.train()
    met = {key.split("/", 1)[1] for m in history for key in m if key.startswith("final_return/snapshot-")}
    assert met and met <= {"snapshot-000001", "snapshot-000002", "snapshot-000003"}
    assert list(straight.league.snapshots) == ["snapshot-000003", "snapshot-000004"]
    summary = json.loads((tmp_path / "straight" / "league.json").read_text())
    matrix = summary["payoff_matrix"]
    assert set(matrix) == {LEARNER, "snapshot-000003", "snapshot-000004", "conservative", "aggressive",
                           "intermediate", "random-style"}   # the default population
    for a in matrix:   # a zero-sum game: the exact matrix is antisymmetric
        for b in matrix:
            assert matrix[a][b] == pytest.approx(-matrix[b][a], abs=1e-12)
    assert history[-1]["league_size"] == 2 and f"rating/{LEARNER}" in history[-1]
    assert tmp_path / "straight" / "league.json" in earlier_run(tmp_path / "straight")   # --overwrite removes it

    train_until_killed(Trainer(league_config(tmp_path, "killed"), progress=False), "collect", 2)
    resumed = Trainer(league_config(tmp_path, "killed"), resume=True, progress=False)
    assert list(resumed.league.snapshots) == ["snapshot-000001", "snapshot-000002"]
    resumed.train()
    a = dict(straight.policy.model.named_parameters())
    b = dict(resumed.policy.model.named_parameters())
    assert all(torch.equal(a[n], b[n]) for n in a)
    drop = ("seconds", "tokens_per_second")
    assert [{k: v for k, v in m.items() if k not in drop} for m in resumed.history] == \
        [{k: v for k, v in m.items() if k not in drop} for m in straight.history]
    assert resumed.league.state_dict() == straight.league.state_dict()


def test_pfsp_meets_most_the_member_it_beats_least():
    league = League("kuhn_poker", {"a": 1.0, "b": 1.0}, interval=1, pool_size=1, share=0.5, sampling="pfsp",
                    pfsp_power=2.0)
    league.record(["a"] * 10 + ["b"] * 10, [[True]] * 10 + [[False]] * 10, [1.0] * 10 + [-1.0] * 10)
    assert league.ratings[LEARNER][1] < League("kuhn_poker", {}, 1, 1, 0.5, "uniform", 0.0).ratings[LEARNER][1]
    weights = league.weights()
    assert weights["b"] > weights["a"] and sum(weights.values()) == pytest.approx(1.0)
    # win rates with a one-win one-loss prior: 11/12 and 1/12
    assert weights["a"] / weights["b"] == pytest.approx((1 / 12) ** 2 / (11 / 12) ** 2)
    assert league.ratings["b"][0] > league.ratings["a"][0]


def test_league_settings_are_checked(tmp_path):
    with pytest.raises(ValueError, match="league_share"):
        apply_overrides(TrainConfig(), {"league_share": 1.0})
    with pytest.raises(ValueError, match="league: exact exploitability"):
        Trainer(apply_overrides(TrainConfig(), {"league": True, "action_tokens": False, "iterations": 1,
                                                "output_dir": str(tmp_path / "x")}), progress=False)


def test_each_snapshot_brings_its_exact_best_response_and_they_leave_together():
    from mage_envs.oracle import exploitability
    from mage_envs.oracle.learner import best_response_opponent

    league = League("kuhn_poker", {"aggressive": 1.0}, interval=1, pool_size=1, share=0.5, sampling="uniform",
                    pfsp_power=2.0, members="both")
    game = pyspiel.load_game("kuhn_poker")
    uniform = {s.information_state_string(): {a: 0.5 for a in s.legal_actions()} for s in decision_states(game)}
    league.add_snapshot(2, uniform)
    assert list(league.snapshots) == ["snapshot-000002", "best-response-000002"]
    assert league.snapshots["best-response-000002"] == best_response_opponent("kuhn_poker", uniform).table
    # the best response's exact return against the snapshot, both seats averaged, is its exploitability
    matrix = league.payoff_matrix(uniform)
    assert matrix["best-response-000002"]["snapshot-000002"] == pytest.approx(11 / 24, abs=1e-12)
    assert exploitability("kuhn_poker", uniform) == pytest.approx(11 / 24, abs=1e-12)
    assert league.weights() == pytest.approx({"aggressive": 0.5, "snapshot-000002": 0.25,
                                              "best-response-000002": 0.25})
    bet = {key: {max(probs): 1.0} for key, probs in uniform.items()}
    league.add_snapshot(4, bet)   # the pool holds one snapshot: the older one and its best response leave
    assert list(league.snapshots) == ["snapshot-000004", "best-response-000004"]
    assert set(league.ratings) == {LEARNER, "snapshot-000004", "best-response-000004"}
    assert list(league.frozen) == ["000004"] and league.frozen["000004"] == bet
    restored = League("kuhn_poker", {"aggressive": 1.0}, 1, 1, 0.5, "uniform", 2.0, members="both")
    restored.load_state_dict(json.loads(json.dumps(league.state_dict())))
    assert restored.state_dict() == league.state_dict()


def test_a_best_response_league_meets_only_the_best_responses():
    league = League("kuhn_poker", {"aggressive": 1.0}, 1, 2, 0.5, "uniform", 2.0, members="best-responses")
    game = pyspiel.load_game("kuhn_poker")
    for stamp in (1, 2, 3):
        league.add_snapshot(stamp, {s.information_state_string(): {a: 0.5 for a in s.legal_actions()}
                                    for s in decision_states(game)})
    assert list(league.snapshots) == ["best-response-000002", "best-response-000003"]
    assert list(league.frozen) == ["000002", "000003"]
    # a checkpoint written before best-response members (snapshots only) restores its snapshots
    old = League("kuhn_poker", {"aggressive": 1.0}, 1, 2, 0.5, "uniform", 2.0)
    old.add_snapshot(5, league.frozen["000003"])
    state = old.state_dict()
    legacy = {"snapshots": {"snapshot-000005": state["frozen"]["000005"]},
              **{k: v for k, v in state.items() if k != "frozen"}}   # the state_dict of the code before
    old.load_state_dict(legacy)
    assert list(old.frozen) == ["000005"] and list(old.snapshots) == ["snapshot-000005"]
    assert old.state_dict() == state
