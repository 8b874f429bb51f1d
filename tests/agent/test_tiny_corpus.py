"""The embedded model's vocabulary does not move when an archetype joins a split."""

from mage_agent.tiny import build_tokenizer, env_corpus
from mage_envs.opponents import PolicyOpponent, register_opponent, unregister_opponent


def test_an_archetype_added_to_the_trainable_split_leaves_the_corpus_and_vocabulary_alone():
    before = env_corpus(games_per_env=4)
    register_opponent("kuhn_poker", "test-always-bet", lambda game: PolicyOpponent("test-always-bet", lambda s: {1: 1.0}))
    try:
        after = env_corpus(games_per_env=4)
    finally:
        unregister_opponent("kuhn_poker", "test-always-bet")
    assert after == before
    assert build_tokenizer(after).get_vocab() == build_tokenizer(before).get_vocab()
    assert len(build_tokenizer(env_corpus()).get_vocab()) == 318   # the default model's vocabulary


def test_the_tiny_models_size_follows_the_config_and_bad_sizes_are_refused(tmp_path):
    import json
    from pathlib import Path

    import pytest

    from mage_agent.build import base_model_path
    from mage_agent.config import TrainConfig, apply_overrides

    config = apply_overrides(TrainConfig(), {"tiny_hidden_size": 96, "tiny_layers": 3})
    built = json.loads((Path(base_model_path(config, tmp_path)) / "config.json").read_text())
    assert (built["hidden_size"], built["intermediate_size"], built["num_hidden_layers"]) == (96, 192, 3)
    # the run's folder holds that model: asking it for another size is refused, not ignored
    with pytest.raises(ValueError, match="holds a tiny model of width 96 and 3 layers.*asks for 64 and 2"):
        base_model_path(TrainConfig(), tmp_path)
    for bad in ({"tiny_layers": 0}, {"tiny_hidden_size": 66}, {"tiny_hidden_size": 12}):
        with pytest.raises(ValueError, match="tiny_layers must be >= 1"):
            apply_overrides(TrainConfig(), bad)
