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
