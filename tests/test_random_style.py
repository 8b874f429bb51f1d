"""The ``random-style`` Kuhn archetype: a pure style drawn per meta-episode, kept for its hands."""

import random
from collections import Counter

import gymnasium as gym
import pytest

import mage_envs  # noqa: F401  (registers the ids)
from mage_envs.facts.kuhn_poker import BET
from mage_envs.opponents import make_opponent
from mage_envs.opponents.kuhn_poker import STRATEGIES, KuhnStrategy, RandomStyle, random_style_marginals
from mage_envs.oracle.winnable import stratified_instances


def test_the_style_is_kept_within_a_meta_episode_and_redrawn_across():
    opponent = make_opponent("kuhn_poker", "random-style")
    assert isinstance(opponent, RandomStyle) and opponent.name == "random-style"
    rng = random.Random(0)
    styles = []
    for _ in range(200):
        opponent.reset(rng)
        drawn = opponent.strategy
        for _ in range(2):                       # the meta-episode's later hands
            opponent.continue_episodes(rng)
            assert opponent.strategy == drawn
        styles.append(drawn)
    assert len(set(styles)) > 150               # 4,093 styles: 200 draws rarely repeat
    held_out = {STRATEGIES[name][0] for name in ("bluffer", "calling-station", "maniac")}
    assert not held_out & set(styles)


def test_a_held_out_style_drawn_is_drawn_again():
    class Bits(random.Random):
        """Gives calling-station's twelve bits first, then twelve zeros."""

        def __init__(self) -> None:
            super().__init__(0)
            station = STRATEGIES["calling-station"][0]
            self.queue = [int(p) for table in (station.open, station.check_raise_call, station.bet_when_checked,
                                                station.call) for p in table] + [0] * 12

        def getrandbits(self, k: int) -> int:
            return self.queue.pop(0)

    opponent = RandomStyle()
    opponent.reset(Bits())
    assert opponent.strategy == KuhnStrategy((0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 0, 0))


def test_the_meta_env_keeps_the_drawn_style_for_every_hand():
    """Repeated deals, always check or call: the opponent meets the same information states in
    every hand, and a style kept for the meta-episode answers each the same way every time."""
    env = gym.make("mage/KuhnPoker-meta-v0", opponent="random-style", num_episodes=3)
    seen_styles = set()
    for j, instance in enumerate(stratified_instances("kuhn_poker", 24, 0)):
        _, info = env.reset(seed=j, options={"instance": instance})
        opponent = env.unwrapped._opponent   # the engine's opponent of this meta-episode
        style = opponent.strategy
        seen_styles.add(style)
        done, hands_seen = False, set()
        while not done:
            action = "call" if "call" in info["legal_actions"] else "check"
            _, _, terminated, truncated, info = env.step(f"<action>{action}</action>")
            hands_seen.add(info["episode_index"])
            assert env.unwrapped._opponent is opponent and opponent.strategy == style
            done = terminated or truncated
        assert hands_seen == {0, 1, 2}
    assert len(seen_styles) > 12


def test_its_exact_move_distribution_is_what_the_draws_give():
    table = random_style_marginals()
    assert set(table) == {f"{card}{history}" for card in range(3) for history in ("", "b", "p", "pb")}
    opponent = RandomStyle()
    rng = random.Random(1)
    counts: Counter = Counter()
    draws = 20_000
    for _ in range(draws):
        opponent.reset(rng)
        counts["0"] += opponent.strategy.bet_probability("0")
        if opponent.strategy.open[2] == 0.0:     # a King checked first: its call after check-bet
            counts["2pb-reached"] += 1
            counts["2pb"] += opponent.strategy.bet_probability("2pb")
    assert counts["0"] / draws == pytest.approx(table["0"][BET], abs=0.012)
    assert counts["2pb"] / counts["2pb-reached"] == pytest.approx(table["2pb"][BET], abs=0.02)
    # exact: 2,048 styles bet the Jack first, of which the held-out bluffer and maniac
    assert table["0"][BET] == pytest.approx((2048 - 2) / 4093)


def test_the_final_hand_ceiling_knows_the_drawn_style_as_well_as_the_deal():
    from mage_envs.opponents import PolicyOpponent
    from mage_envs.oracle import instance_optimal_value
    from mage_envs.oracle.winnable import instance_value

    draws = RandomStyle().meta_episode_draws()
    assert len(draws) == 4093 and sum(p for p, _ in draws) == pytest.approx(1.0)
    # the draw with conservative's style has conservative's ceiling
    conservative = STRATEGIES["conservative"][0]
    def support(probs):
        return {a: p for a, p in probs.items() if p > 0}

    matching = [drawn for _, drawn in draws if all(support(drawn.action_probabilities(s)) == support(conservative.policy(s))
                                                   for s in _opponent_states())]
    assert len(matching) == 1
    assert instance_optimal_value("kuhn_poker", matching[0]) == pytest.approx(
        instance_optimal_value("kuhn_poker", "conservative"), abs=1e-12)
    # knowing the style is worth more than meeting its one-hand marginals
    ceiling = instance_optimal_value("kuhn_poker", "random-style")
    marginal = instance_optimal_value("kuhn_poker", PolicyOpponent("marginal", lambda s: random_style_marginals()[
        s.information_state_string()]))
    assert ceiling == pytest.approx(0.750143, abs=1e-6) and marginal == pytest.approx(0.500244, abs=1e-6)
    # the per-instance ceilings the evaluations average are the same expectation
    instances = stratified_instances("kuhn_poker", 12)
    assert sum(instance_value("kuhn_poker", "random-style", k, k & 1) for k in instances) / 12 == pytest.approx(ceiling)


def _opponent_states():
    from mage_envs.opponents.base import decision_states
    from mage_envs.opponents.registry import load_game

    return decision_states(load_game("kuhn_poker"))
