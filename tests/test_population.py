"""Populations and the opponent registry."""

import random

import pytest

from mage_envs.games.kuhn_poker import KuhnPokerEnv
from mage_envs.opponents import (
    Opponent,
    PolicyOpponent,
    Population,
    as_population,
    list_opponents,
    make_opponent,
    register_opponent,
    registry,
    unregister_opponent,
)


def test_weighted_sampling_matches_weights():
    population = Population({"aggressive": 3.0, "conservative": 1.0, "nash": 0.0})
    rng = random.Random(0)
    draws = [population.sample(rng) for _ in range(20000)]
    assert draws.count("nash") == 0
    assert draws.count("aggressive") / len(draws) == pytest.approx(0.75, abs=0.015)


def test_named_splits_are_disjoint_and_complete():
    train = Population.named("kuhn_poker", "trainable").ids
    heldout = Population.named("kuhn_poker", "heldout").ids
    assert {"nash", "cfr-argmax", "conservative", "aggressive", "intermediate", "random"} <= set(train)
    assert len(heldout) >= 2 and not set(train) & set(heldout)
    assert set(Population.named("kuhn_poker", "all").ids) == set(train) | set(heldout)


def test_the_split_once_named_train_is_trainable_with_a_deprecation_warning(monkeypatch):
    with pytest.warns(DeprecationWarning, match="now named 'trainable'"):
        assert Population.named("kuhn_poker", "train").ids == Population.named("kuhn_poker", "trainable").ids
    with pytest.warns(DeprecationWarning):
        assert list_opponents("kuhn_poker", "train") == list_opponents("kuhn_poker", "trainable")
    with pytest.warns(DeprecationWarning):
        assert KuhnPokerEnv(opponent="train").population.ids == KuhnPokerEnv().population.ids
    registry.list_opponents("kuhn_poker")
    monkeypatch.setitem(registry._REGISTRY, "kuhn_poker", dict(registry._REGISTRY["kuhn_poker"]))
    with pytest.warns(DeprecationWarning):
        register_opponent("kuhn_poker", "test-old-split", lambda game: None, split="train")
    assert registry.archetype("kuhn_poker", "test-old-split").split == "trainable"
    with pytest.raises(ValueError, match="split must be 'trainable' or 'heldout'"):
        register_opponent("kuhn_poker", "test-bad-split", lambda game: None, split="seen")


def test_env_never_meets_heldout_opponents_when_training():
    env = KuhnPokerEnv(opponent="trainable")
    env.reset(seed=0)
    met = {env.reset()[1]["opponent"] for _ in range(300)}
    assert met == set(Population.named("kuhn_poker", "trainable").ids)


def test_user_registered_opponent_is_usable_by_name(monkeypatch):
    # a private copy of the (loaded) registry, so the new archetype does not leak into other tests
    registry.list_opponents("kuhn_poker")
    monkeypatch.setitem(registry._REGISTRY, "kuhn_poker", dict(registry._REGISTRY["kuhn_poker"]))
    register_opponent(
        "kuhn_poker", "test-always-check", lambda game: PolicyOpponent("test-always-check", lambda s: {0: 1.0}),
        split="heldout", overwrite=True,
    )
    assert "test-always-check" in list_opponents("kuhn_poker", "heldout")
    env = KuhnPokerEnv(opponent="test-always-check", seat=1)
    obs, info = env.reset(seed=0)
    assert "Opponent checks." in obs and info["opponent"] == "test-always-check"
    with pytest.raises(ValueError, match="already registered"):
        register_opponent("kuhn_poker", "test-always-check", lambda game: None)


def test_opponent_instances_and_errors():
    class Folder(Opponent):
        name = "folder"

        def act(self, state):
            return 0

    population = as_population("kuhn_poker", [Folder(), "aggressive"])
    assert population.ids == ("folder", "aggressive")
    with pytest.raises(KeyError, match="no opponent 'ghost'"):
        as_population("kuhn_poker", ["ghost"])
    with pytest.raises(ValueError):
        Population([])
    with pytest.raises(ValueError):
        Population({"a": -1.0})
    with pytest.raises(ValueError, match="duplicate"):
        Population(["nash", "nash"])
    with pytest.raises(ValueError, match="population split"):
        register_opponent("kuhn_poker", "train", lambda game: None)
    with pytest.raises(KeyError):
        make_opponent("kuhn_poker", "nobody")


def test_same_seed_same_opponent_draws():
    def draws(seed):
        env = KuhnPokerEnv(opponent="all")
        return [env.reset(seed=seed if i == 0 else None)[1]["opponent"] for i in range(50)]

    assert draws(1) == draws(1) and draws(1) != draws(2)


def test_unregister_removes_an_archetype_and_rejects_unknown_ones(monkeypatch):
    registry.list_opponents("kuhn_poker")
    monkeypatch.setitem(registry._REGISTRY, "kuhn_poker", dict(registry._REGISTRY["kuhn_poker"]))
    register_opponent("kuhn_poker", "test-gone", lambda game: PolicyOpponent("test-gone", lambda s: {0: 1.0}))
    unregister_opponent("kuhn_poker", "test-gone")
    assert "test-gone" not in list_opponents("kuhn_poker")
    with pytest.raises(KeyError, match="no opponent 'test-gone'"):
        unregister_opponent("kuhn_poker", "test-gone")


def test_registry_doctest_leaves_the_registry_as_it_found_it():
    """The registry's example registers an archetype: run it, then the registry is unchanged
    (a leaked archetype whose factory refers to the doctest's globals breaks later tests)."""
    import doctest

    list_opponents("kuhn_poker")
    before = {game: list(specs) for game, specs in registry._REGISTRY.items()}
    result = doctest.testmod(registry, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
    assert {game: list(specs) for game, specs in registry._REGISTRY.items()} == before
    assert all(make_opponent("kuhn_poker", name).name == name for name in list_opponents("kuhn_poker"))


def test_an_unknown_archetype_names_the_closest_ones_through_gym_make():
    import gymnasium as gym

    from mage_envs.opponents import UnknownOpponentError

    with pytest.raises(ValueError) as raised:   # what a gym.make user catches
        gym.make("mage/LeducPoker-meta-v0", opponent="agresive")
    assert isinstance(raised.value, UnknownOpponentError) and isinstance(raised.value, KeyError)
    message = str(raised.value)
    assert message.startswith("no opponent 'agresive' for game 'leduc_poker' (did you mean 'aggressive'?); known: ")
    assert message.endswith(", ".join(sorted(list_opponents("leduc_poker"))))
    with pytest.raises(KeyError, match=r"^no opponents are registered for game 'kuhn' \(did you mean 'kuhn_poker'\?\)"):
        make_opponent("kuhn", "nash")
    with pytest.raises(KeyError, match=r"'nobody' for game 'kuhn_poker'; known"):  # nothing close: no guess
        make_opponent("kuhn_poker", "nobody")
