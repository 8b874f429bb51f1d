"""The loss and sampling options: DAPO's decoupled clip, token vs sequence aggregation, dynamic sampling,
the entropy schedule and per-archetype reward weights."""

import math

import numpy as np
import pytest
import torch

from mage_agent.loss import KL_ESTIMATORS, aggregate, ppo_loss
from mage_agent.trainer import Trainer

from .test_trainer import parameters, run_config

ONE = torch.ones(1, 1, dtype=torch.bool)


def surrogate(ratio, advantage, **kwargs):
    new, old = torch.log(torch.tensor([[ratio]])), torch.zeros(1, 1)
    return ppo_loss(new, old, None, torch.zeros(1, 1), torch.tensor([advantage]), ONE, **kwargs)


@pytest.mark.parametrize("ratio, advantage, clip_high, expected, clipped", [
    (1.5, 1.0, 0.2, -1.2, True),     # positive advantage: capped at 1 + clip
    (1.5, 1.0, 0.28, -1.28, True),   # DAPO: the upper bound moves, 1 + clip_high
    (1.25, 1.0, 0.28, -1.25, False),  # inside the wider range: not clipped
    (0.5, -1.0, 0.28, 0.8, True),    # negative advantage: the lower bound 1 - clip stays
    (1.5, -1.0, 0.28, 1.5, True),    # negative advantage, ratio above: min() keeps the unclipped term
])
def test_decoupled_clip_by_hand(ratio, advantage, clip_high, expected, clipped):
    stats = surrogate(ratio, advantage, clip=0.2, clip_high=clip_high)
    assert stats.loss.item() == pytest.approx(expected)
    assert stats.clip_fraction == float(clipped)


@pytest.mark.parametrize("estimator, penalty, slope", [
    # d = ref - new = log 8: k3 = 8 - d - 1, its gradient along new 1 - 8; k2 = d^2 / 2, gradient -d
    ("k3", 7 - math.log(8), 1 - 8),
    ("k2", math.log(8) ** 2 / 2, -math.log(8)),
])
def test_the_kl_penalty_by_estimator_by_hand(estimator, penalty, slope):
    new = torch.zeros(1, 1, requires_grad=True)
    ref = torch.full((1, 1), math.log(8))
    stats = ppo_loss(new, new.detach(), ref, torch.zeros(1, 1), torch.tensor([0.0]), ONE, kl_coef=0.5,
                     kl_estimator=estimator)
    stats.loss.backward()
    assert stats.loss.item() == pytest.approx(0.5 * penalty)
    assert new.grad.item() == pytest.approx(0.5 * slope)
    assert stats.kl == pytest.approx(7 - math.log(8))   # the logged value is k3's either way


def test_an_unknown_kl_estimator_is_refused():
    with pytest.raises(ValueError, match="kl_estimator"):
        ppo_loss(torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1, 1), torch.zeros(1), ONE,
                 kl_coef=0.1, kl_estimator="k1")


def test_token_and_sequence_aggregation_by_hand():
    # completion 0: one token, surrogate 3; completion 1: three tokens, surrogate 1 each
    values = torch.tensor([[3.0, 9.0, 9.0], [1.0, 1.0, 1.0]])
    mask = torch.tensor([[True, False, False], [True, True, True]])
    assert aggregate(values, mask, "token").item() == pytest.approx(6 / 4)
    assert aggregate(values, mask, "sequence").item() == pytest.approx((3 + 1) / 2)
    assert aggregate(values, mask, "sequence", count=4).item() == pytest.approx((3 + 1) / 4)
    with pytest.raises(ValueError, match="aggregation"):
        aggregate(values, mask, "tokens")


def test_sequence_aggregation_weighs_each_completion_once_in_the_gradient():
    new = torch.zeros(2, 3, requires_grad=True)
    mask = torch.tensor([[True, False, False], [True, True, True]])
    loss = ppo_loss(new, torch.zeros(2, 3), None, torch.zeros(2, 3), torch.tensor([1.0, 1.0]), mask,
                    aggregation="sequence").loss
    loss.backward()
    # d(-ratio)/d(new) = -1 per token, / tokens of its completion, / 2 completions
    assert torch.allclose(new.grad, torch.tensor([[-0.5, 0, 0], [-1 / 6, -1 / 6, -1 / 6]]))


def test_dynamic_sampling_refills_from_further_draws(tmp_path, monkeypatch):
    trainer = Trainer(run_config(tmp_path, "dapo", dynamic_sampling=True, max_sampling_draws=3, iterations=1),
                      progress=False)
    credit = trainer.credit

    def group_one_teaches_nothing(batch):   # whatever the draw, group 1 gets zero advantages
        turns, advantages, diagnostics = credit(batch)
        advantages = np.where([t.group == 1 for t in turns], 0.0, advantages)
        return turns, advantages, diagnostics

    monkeypatch.setattr(trainer, "credit", group_one_teaches_nothing)
    batch = trainer.collect(0)
    turns, advantages, _ = trainer.credit(batch)
    assert len(_groups_with_signal(turns, advantages)) == 3   # 4 groups drawn, one uninformative
    kept_turns, kept, info = trainer.refill(0, batch, turns, advantages)
    assert info == {"sampling_draws": 2, "informative_groups": 4}
    assert {t.group for t in kept_turns} == {0, 2, 3, 4}    # group 4: the first of the second draw
    assert _groups_with_signal(kept_turns, kept) == {0, 2, 3, 4}
    assert len(batch.episode_returns) == 4 * 2 and max(t.group for t in batch.turns) == 3   # first draw untouched
    further = trainer.collect(0, draw=1)   # a further draw plays other seeds than the first
    assert [t.prompt_ids for t in further.turns] != [t.prompt_ids for t in batch.turns]


def _groups_with_signal(turns, advantages):
    return {t.group for t, a in zip(turns, advantages) if abs(a) > 1e-9}


def test_refill_drops_groups_whose_advantages_are_all_zero(tmp_path):
    trainer = Trainer(run_config(tmp_path, "drop", dynamic_sampling=True, max_sampling_draws=1, iterations=1),
                      progress=False)
    batch = trainer.collect(0)
    turns, advantages, _ = trainer.credit(batch)
    advantages = np.where([t.group == 1 for t in turns], 0.0, advantages)   # group 1 now teaches nothing
    kept_turns, _, info = trainer.refill(0, batch, turns, advantages)
    assert 1 not in {t.group for t in kept_turns} and info["sampling_draws"] == 1


@pytest.mark.parametrize("options", [
    {"dynamic_sampling": True},
    {"clip_high": 0.28, "loss_aggregation": "sequence"},
    {"group_opponents": "mixed", "scope": "global", "std_normalize": True},
    {"entropy_schedule": "cosine", "reward_weights": {"aggressive": 4.0}, "std_normalize": True, "std_of": "returns"},
    {"entropy_hold": 0.5},
    {"packed_forward": False},
])
def test_resume_stays_bit_identical_with_each_option(tmp_path, train_until_killed, options):
    straight = Trainer(run_config(tmp_path, "straight", **options), progress=False)
    straight.train()
    train_until_killed(Trainer(run_config(tmp_path, "killed", **options), progress=False), "update", 2)
    resumed = Trainer(run_config(tmp_path, "killed", **options), resume=True, progress=False)
    resumed.train()
    a, b = parameters(straight), parameters(resumed)
    assert all(torch.equal(a[n], b[n]) for n in a)


def test_mixed_groups_meet_several_archetypes(tmp_path):
    trainer = Trainer(run_config(tmp_path, "mixed", group_opponents="mixed", group_size=8, iterations=1),
                      progress=False)
    batch = trainer.collect(0)
    per_group = {}
    for t in batch.turns:
        per_group.setdefault(t.group, set()).add(t.opponent)
    assert any(len(opponents) > 1 for opponents in per_group.values())
    assert {o for opponents in per_group.values() for o in opponents} <= {"conservative", "aggressive", "intermediate",
                                                                            "random-style"}   # the default population


@pytest.mark.parametrize("overrides, message", [
    ({"loss_aggregation": "tokens"}, "loss_aggregation"),
    ({"group_opponents": "random"}, "group_opponents"),
    ({"clip": 1.5}, "clip"),
    ({"clip_high": -0.1}, "clip_high"),
    ({"max_sampling_draws": 0}, "max_sampling_draws"),
    ({"entropy_schedule": "exponential"}, "entropy_schedule"),
    ({"entropy_hold": 1.0}, "entropy_hold"),
    ({"entropy_hold": -0.1}, "entropy_hold"),
    ({"entropy_tokens": "answers"}, "entropy_tokens"),
    ({"kl_estimator": "k1"}, "kl_estimator"),
    ({"std_of": "rewards"}, "std_of"),
    ({"reward_weights": {"aggressive": 0.0}}, "reward_weights must be positive"),
])
def test_new_options_are_validated_when_the_config_is_built(overrides, message):
    from mage_agent.config import TrainConfig, apply_overrides

    with pytest.raises(ValueError, match=message):
        apply_overrides(TrainConfig(), overrides)


def test_dynamic_sampling_is_refused_under_several_processes(tmp_path):
    from mage_agent.distributed import World

    world = World(rank=0, size=2)   # refused before any collective is called
    with pytest.raises(ValueError, match="single process"):
        Trainer(run_config(tmp_path, "two", dynamic_sampling=True), progress=False, world=world)


@pytest.mark.parametrize("schedule, expected", [
    ("constant", [0.1, 0.1, 0.1, 0.1]),
    ("linear", [0.1, 0.075, 0.05, 0.025]),             # iteration i of 4: 0.1 * (1 - i / 4)
    ("cosine", [0.1 * (1 + math.cos(math.pi * i / 4)) / 2 for i in range(4)]),
    ("hold", [0.1, 0.1, 0.1, 0.05]),                    # held for half the run, then linear over the rest
])
def test_entropy_weight_follows_its_schedule_and_is_logged(tmp_path, schedule, expected):
    options = {"entropy_schedule": "linear", "entropy_hold": 0.5} if schedule == "hold" else {
        "entropy_schedule": schedule}
    trainer = Trainer(run_config(tmp_path, schedule, entropy_coef=0.1, **options), progress=False)
    trainer.train()
    assert [m["entropy_coef"] for m in trainer.history] == pytest.approx(expected)


def test_reward_weights_scale_one_archetypes_training_rewards_only(tmp_path):
    plain = Trainer(run_config(tmp_path, "plain", iterations=1), progress=False)
    weighted = Trainer(run_config(tmp_path, "weighted", iterations=1, reward_weights={"aggressive": 4.0}),
                       progress=False)
    batch = plain.collect(0)
    assert batch.opponents.count("aggressive") and len(set(batch.opponents)) > 1
    turns, advantages, _ = plain.credit(batch)
    _, weighted_advantages, _ = weighted.credit(batch)
    factor = np.array([4.0 if t.opponent == "aggressive" else 1.0 for t in turns])
    # mean-only advantages are linear in the group's rewards: scaled by the archetype's weight
    assert weighted_advantages == pytest.approx(advantages * factor)
    assert [t.reward for t in batch.turns] == [t.reward for t in plain.collect(0).turns]   # game units kept


def test_reward_weights_must_name_training_archetypes(tmp_path):
    with pytest.raises(ValueError, match="not a training archetype"):
        Trainer(run_config(tmp_path, "bad", reward_weights={"maniac": 2.0}), progress=False)


def test_an_entropy_mask_limits_the_bonus_to_its_tokens_by_hand():
    entropy = torch.zeros(2, 2, requires_grad=True)
    mask = torch.tensor([[True, False], [True, True]])
    choices = torch.tensor([[True, False], [False, False]])   # row 0 answered among legal actions
    loss = ppo_loss(torch.zeros(2, 2), torch.zeros(2, 2), None, entropy, torch.zeros(2), mask, entropy_coef=0.5,
                    token_count=3, entropy_mask=choices, entropy_count=1).loss
    loss.backward()
    assert torch.equal(entropy.grad, torch.tensor([[-0.5, 0.0], [0.0, 0.0]]))


@pytest.mark.parametrize("kind", ["action-tokens", "free-text", "reflection"])
def test_the_entropy_bonus_counts_choices_among_legal_actions_only(tmp_path, kind):
    """By default (entropy_tokens: choices) an action-token answer's bonus is that of 'all';
    a free-text answer gets one on its first token, renormalised over the legal first tokens
    (so neither none nor 'all''s); a reflection (no choice) gets none."""
    import dataclasses

    def updated(name: str, **options) -> dict:
        trainer = Trainer(run_config(tmp_path, name, iterations=1, **options), progress=False)
        turns, advantages, _ = trainer.credit(trainer.collect(0))
        if kind != "action-tokens":
            turns = [dataclasses.replace(t, allowed_ids=None, choice_ids=t.allowed_ids if kind == "free-text" else None)
                     for t in turns]
        trainer.update(turns, advantages, 0)
        return parameters(trainer)

    choices = updated("choices", entropy_coef=0.5)
    every = updated("all", entropy_coef=0.5, entropy_tokens="all")
    without = updated("without", entropy_coef=0.0)
    like_all = all(torch.equal(choices[n], every[n]) for n in choices)
    like_none = all(torch.equal(choices[n], without[n]) for n in choices)
    assert (like_all, like_none) == {"action-tokens": (True, False), "free-text": (False, False),
                                     "reflection": (False, True)}[kind]


@pytest.mark.parametrize("aggregation", ["token", "sequence"])
def test_a_free_text_answer_gets_the_bonus_on_its_first_token_and_a_reflection_none(tmp_path, monkeypatch,
                                                                                    aggregation):
    """Free-text answers of three tokens beside reflections: the bonus's mask holds each
    answer's first token alone, its count is the step's answers, and the logged entropy is the
    mean over those tokens (not a mean of the steps' means)."""
    import dataclasses

    from mage_agent import trainer as trainer_module

    trainer = Trainer(run_config(tmp_path, aggregation, iterations=1, entropy_coef=0.5, loss_aggregation=aggregation,
                                 minibatch_size=8), progress=False)
    turns, advantages, _ = trainer.credit(trainer.collect(0))
    turns = [dataclasses.replace(t, completion_ids=t.completion_ids * 3, logprobs=t.logprobs * 3, allowed_ids=None,
                                 choice_ids=t.allowed_ids if i % 3 else None, phase="act" if i % 3 else "reflect")
             for i, t in enumerate(turns)]
    calls = []

    def recorded(new, old, ref, entropy, advantages, mask, **options):
        calls.append((mask, options["entropy_mask"], options["entropy_count"], entropy.detach()))
        return ppo_loss(new, old, ref, entropy, advantages, mask, **options)

    monkeypatch.setattr(trainer_module, "ppo_loss", recorded)
    logged = trainer.update(turns, advantages, 0)
    first = torch.tensor([True, False, False])
    for mask, bonus, count, _ in calls:
        answers = [bool(row[0]) for row in bonus]
        assert all(torch.equal(row, first if answer else torch.zeros(3, dtype=torch.bool))
                   for row, answer in zip(bonus, answers)) and mask.all()
        assert count == sum(answers)   # one micro-batch per step here: the step's answers
    assert len({int(bonus.sum()) for _, bonus, _, _ in calls}) > 1   # steps with more answers weigh more
    chosen = torch.cat([entropy[bonus] for _, bonus, _, entropy in calls])
    assert logged["entropy"] == pytest.approx(float(chosen.mean()), rel=1e-5)


def test_format_coef_raises_the_legal_first_tokens_mass(tmp_path):
    """Free-text turns with no advantage and no entropy bonus: with format_coef the update
    raises the first token's probability of starting a legal answer (logged as choice_mass,
    the mean over the update's steps), without it nothing moves."""
    import dataclasses

    def update(name: str, format_coef: float) -> tuple[Trainer, list, dict]:
        trainer = Trainer(run_config(tmp_path, name, iterations=1, entropy_coef=0.0, format_coef=format_coef,
                                     warmup_iterations=0), progress=False)
        turns, advantages, _ = trainer.credit(trainer.collect(0))
        turns = [dataclasses.replace(t, allowed_ids=None, choice_ids=t.allowed_ids[:1]) for t in turns]
        before = mass(trainer, turns)
        logged = trainer.update(turns, np.zeros_like(advantages), 0)
        return before, mass(trainer, turns), logged

    def mass(trainer: Trainer, turns: list) -> float:
        with torch.no_grad():
            scored = trainer.policy.score_completions([t.prompt_ids for t in turns], [t.completion_ids for t in turns],
                                                      choice_ids=[t.choice_ids for t in turns])
        return float(scored.choice_log_mass.exp().mean())

    before, after, logged = update("format", 1.0)
    assert 0 < before < after < 1
    assert before <= logged["choice_mass"] <= after   # the steps' mean, the first one scored before any step
    still_before, still_after, plain = update("plain", 0.0)
    assert still_after == pytest.approx(still_before, abs=1e-7) and plain["choice_mass"] == pytest.approx(before, abs=1e-6)


def test_the_kl_estimator_reaches_the_update(tmp_path):
    """The same seeded iteration with each estimator: the first step starts at the reference
    (both penalties' gradients are 0), later steps differ."""
    extra = {"iterations": 1, "kl_coef": 1.0, "epochs": 2}
    runs = {name: Trainer(run_config(tmp_path, name, kl_estimator=name, **extra), progress=False) for name in KL_ESTIMATORS}
    metrics = {name: trainer.train()[-1] for name, trainer in runs.items()}
    weights = {name: parameters(trainer) for name, trainer in runs.items()}
    assert metrics["k3"]["return_ep1"] == metrics["k2"]["return_ep1"]   # the same rollouts
    assert any(not torch.equal(weights["k3"][n], weights["k2"][n]) for n in weights["k3"])


TIC_TAC_TOE = {"env_id": "mage/TicTacToe-meta-v0", "population": {"random": 1.0, "preferred-cell-row-major": 1.0},
               "heldout": []}


def test_minimax_coef_raises_the_value_keeping_moves_mass(tmp_path):
    """Tic-Tac-Toe turns with no advantage and no entropy bonus: with minimax_coef the update
    raises the probability of the moves that keep the game value (logged as optimal_mass,
    the mean over the update's steps), without it nothing moves. The rollout marks exactly
    the turns where some legal move gives the value away, and optimal_moves is the share of
    those where the sampled move kept it."""

    def mass(trainer: Trainer, turns: list) -> float:
        with torch.no_grad():
            scored = trainer.policy.score_completions([t.prompt_ids for t in turns], [t.completion_ids for t in turns],
                                                      allowed_ids=[t.allowed_ids for t in turns],
                                                      target_ids=[t.optimal_ids for t in turns])
        return float(scored.target_log_mass.exp().mean())

    def update(name: str, minimax_coef: float) -> tuple[float, float, dict, list]:
        trainer = Trainer(run_config(tmp_path, name, iterations=1, entropy_coef=0.0, minimax_coef=minimax_coef,
                                     warmup_iterations=0, **TIC_TAC_TOE), progress=False)
        batch = trainer.collect(0)
        turns, advantages, _ = trainer.credit(batch)
        marked = [t for t in turns if t.optimal_ids]
        assert 0 < len(marked) < len(turns)
        assert all(set(t.optimal_ids) < set(t.allowed_ids) for t in marked)
        shares = trainer.summarise(0, batch, {}, 1.0, 1.0)["optimal_moves"]
        assert shares == pytest.approx(np.mean([t.completion_ids[0] in t.optimal_ids for t in marked]))
        before = mass(trainer, marked)
        logged = trainer.update(turns, np.zeros_like(advantages), 0)
        return before, mass(trainer, marked), logged, marked

    before, after, logged, marked = update("minimax", 1.0)
    assert 0 < before < after < 1
    assert before <= logged["optimal_mass"] <= after   # the steps' mean, the first one scored before any step
    still_before, still_after, plain, _ = update("plain", 0.0)
    assert still_after == pytest.approx(still_before, abs=1e-7) and "optimal_mass" not in plain


def test_minimax_coef_needs_a_game_the_env_solves(tmp_path):
    with pytest.raises(ValueError, match="solves exactly"):
        Trainer(run_config(tmp_path, "kuhn", minimax_coef=1.0), progress=False)
    with pytest.raises(ValueError, match="minimax_coef must be a finite number"):
        run_config(tmp_path, "negative", minimax_coef=-1.0)
