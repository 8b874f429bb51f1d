"""The first hand's equilibrium anchor: its value from the tabulated policy, its descent to
Nash, and the update that adds it."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from mage_agent.anchor import EQUILIBRIUM, EquilibriumAnchor
from mage_agent.build import build_policy, resolved
from mage_agent.cli import train_parser
from mage_agent.config import TrainConfig, apply_overrides, load_config
from mage_agent.exploitability import measure, policy_scorer
from mage_agent.trainer import Trainer
from mage_envs.facts import load_game
from mage_envs.opponents.registry import make_opponent
from mage_envs.oracle.tabular import archetype_table

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SMALL = {"iterations": 1, "groups_per_iteration": 4, "group_size": 2, "eval_meta_episodes": 0,
         "tensorboard": False, "minibatch_size": 8, "warmup_iterations": 0, "exploitability_every": 0}


@pytest.fixture(autouse=True)
def one_thread():
    """The embedded model runs fastest on one thread (as the trainer sets it)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_divergence_is_the_mean_over_states_of_the_tabulated_policys(tmp_path):
    config = apply_overrides(TrainConfig(), {"temperature": 0.8})
    policy = build_policy(config, tmp_path)
    anchor = EquilibriumAnchor(policy, config)
    nash = archetype_table(load_game("kuhn_poker"), make_opponent("kuhn_poker", EQUILIBRIUM))
    played = policy_scorer(policy, 0.8)(anchor.prompts)
    expected = np.mean([sum(p * math.log(p / probs[a]) for a, p in nash[prompt.key].items() if p > 0)
                        for prompt, probs in zip(anchor.prompts, played)])
    with torch.no_grad():
        assert anchor.kl().item() == pytest.approx(expected, rel=1e-6)
    assert sorted(p.key for p in anchor.prompts) == sorted(nash)   # both seats' 12 states


def test_a_fixed_seat_anchors_its_own_states_only(tmp_path):
    config = apply_overrides(TrainConfig(), {"seat": "1"})
    anchor = EquilibriumAnchor(build_policy(config, tmp_path), config)
    assert len(anchor.prompts) == 6 and {p.seat for p in anchor.prompts} == {1}


def test_descending_the_divergence_alone_reaches_nash(tmp_path):
    """Gradient steps on the anchor alone take the untrained model's first hand to the
    equilibrium: its exact exploitability falls from about 0.4 to near 0."""
    config = TrainConfig()
    policy = build_policy(config, tmp_path)
    anchor = EquilibriumAnchor(policy, config)
    before = measure(policy, config)[0]["first_hand"]["exploitability"]
    optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=3e-3)
    for _ in range(300):
        optimizer.zero_grad()
        divergence = anchor.kl()
        divergence.backward()
        optimizer.step()
    after = measure(policy, config)[0]["first_hand"]["exploitability"]
    assert before > 0.2 and divergence.item() < 1e-3 and after < 0.01


def test_the_update_adds_it_and_logs_it(tmp_path):
    """One iteration's update with no advantage and no entropy bonus: with the anchor the
    divergence falls and is logged (the mean over steps, the first before any step); without
    it the first hand does not move."""
    def run(name: str, coef: float) -> tuple[float, float, dict]:
        trainer = Trainer(apply_overrides(TrainConfig(), {**SMALL, "output_dir": str(tmp_path / name),
                                                          "entropy_coef": 0.0, "equilibrium_coef": coef}),
                          progress=False)
        turns, advantages, _ = trainer.credit(trainer.collect(0))
        anchor = trainer._anchor or EquilibriumAnchor(trainer.policy, trainer.config)
        with torch.no_grad():
            before = anchor.kl().item()
        logged = trainer.update(turns, np.zeros_like(advantages), 0)
        with torch.no_grad():
            return before, anchor.kl().item(), logged

    before, after, logged = run("anchored", 1.0)
    assert after < before and after <= logged["equilibrium_kl"] <= before
    still_before, still_after, plain = run("plain", 0.0)
    assert still_after == pytest.approx(still_before, abs=1e-7) and "equilibrium_kl" not in plain


def test_a_game_without_a_table_is_refused_with_the_reason(tmp_path):
    config = apply_overrides(TrainConfig(), {"env_id": "mage/TicTacToe-meta-v0", "equilibrium_coef": 1.0})
    with pytest.raises(ValueError, match="equilibrium_coef needs a tabular game: exact exploitability is computed"):
        EquilibriumAnchor(build_policy(config, tmp_path), config)


@pytest.mark.parametrize("weight", [-0.5, "1", True, math.nan])
def test_a_weight_that_is_not_a_number_at_least_0_is_refused(weight):
    with pytest.raises(ValueError, match="equilibrium_coef must be a number >= 0 or null"):
        apply_overrides(TrainConfig(), {"equilibrium_coef": weight})


@pytest.mark.parametrize(("overrides", "weight"), [
    ({}, 1.0),                                                   # Kuhn Poker, action tokens: measured, on
    ({"equilibrium_coef": 0.0}, 0.0),                            # turned off
    ({"equilibrium_coef": 2}, 2),                                # set
    ({"action_tokens": False}, 0.0),                             # free text: no table of the first hand
    ({"top_k": 5}, 0.0),                                         # truncated sampling: no table either
    ({"env_id": "mage/LeducPoker-meta-v0"}, 0.0),                # supported, never measured: off
    ({"name_or_path": "smollm2-135m"}, 0.0),                     # a hub model: supported, never measured
    ({"env_id": "mage/TicTacToe-meta-v0"}, 0.0),                 # not tabular
    ({"env_id": "mage/Sokoban-meta-v0"}, 0.0),                   # single-agent
])
def test_a_null_weight_resolves_to_the_game_default(overrides, weight):
    """The default (null) is 1 where it was measured (Kuhn Poker with action tokens) and 0
    elsewhere; what a run saves is the number."""
    config = apply_overrides(TrainConfig(), overrides)
    assert resolved(config).algo.equilibrium_coef == weight


def test_the_flag_takes_a_number_or_null_and_refuses_anything_else(capsys):
    parser = train_parser(load_config(EXAMPLES / "fresh_deals.yaml"))   # an example that sets it to 0
    assert [parser.parse_args(["--equilibrium-coef", text]).equilibrium_coef for text in (".5", "2", "null")] == [
        0.5, 2.0, None]
    with pytest.raises(SystemExit):
        parser.parse_args(["--equilibrium-coef", "strong"])
    assert "expected a number or null, got 'strong'" in capsys.readouterr().err


def test_the_default_run_trains_with_the_anchor_and_saves_its_weight(tmp_path):
    trainer = Trainer(apply_overrides(TrainConfig(), {**SMALL, "output_dir": str(tmp_path)}), progress=False)
    assert trainer._anchor is not None and trainer.config.to_dict()["algo"]["equilibrium_coef"] == 1.0
