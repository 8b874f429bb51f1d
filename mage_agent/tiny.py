"""The embedded default model: a tiny Llama built from a config, with a tokenizer trained
locally on the environments' own text. Nothing is downloaded.

The tokenizer is a word-level vocabulary over the words and punctuation of the prompts the
registered games emit (collected by playing random games), so every legal action name is
one token. A run on a single-agent task extends it with the words of that task's prompts
(:func:`task_corpus`, played with the run's env options), appended after the games' ids
(:func:`extend_tokenizer`): the games' tokenizer, and so the default run's model, stay as
they were. Both are written with ``save_pretrained`` and load back with
``AutoTokenizer`` / ``AutoModelForCausalLM`` like any checkpoint.

Example:
    >>> tokenizer = build_tokenizer(["Legal actions: check, bet"])
    >>> tokenizer.convert_ids_to_tokens(tokenizer("check, bet")["input_ids"])
    ['check', ',', 'bet']
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import gymnasium as gym
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

import mage_envs  # noqa: F401  (registers the environments whose text we learn)

SPECIAL_TOKENS = {"pad_token": "<pad>", "unk_token": "<unk>", "eos_token": "<eos>", "bos_token": "<bos>"}
#: Environments whose prompts make up the tokenizer's corpus.
CORPUS_ENVS = ("mage/KuhnPoker-meta-v0", "mage/LeducPoker-meta-v0", "mage/TicTacToe-meta-v0")
#: The opponents the corpus plays, by env: Kuhn Poker's trainable split when the vocabulary was
#: fixed. An archetype added to a split later must not reorder the embedded model's vocabulary
#: (a word's id follows its frequency in the corpus), or every stored run's model would change.
CORPUS_OPPONENTS = {"mage/KuhnPoker-meta-v0": ("conservative", "aggressive", "intermediate", "random", "nash",
                                               "cfr-argmax")}


@dataclass(frozen=True)
class TinyConfig:
    """Size of the embedded model (about 130k parameters with the default vocabulary)."""

    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    max_position_embeddings: int = 1024
    corpus_games: int = 60
    seed: int = 0
    #: meta-episodes of a single-agent task played for its words (:func:`task_corpus`)
    task_games: int = 8


def env_corpus(
    games_per_env: int = 60, seed: int = 0, styles: Iterable[str] = ("full", "compact")
) -> list[str]:
    """Prompts from random play of every corpus env (all phases), deterministic in ``seed``."""
    rng = random.Random(seed)
    texts: list[str] = []
    for env_id in CORPUS_ENVS:
        for style in styles:
            kwargs: dict[str, Any] = {"prompt_style": style}
            if env_id in CORPUS_OPPONENTS:
                kwargs["opponent"] = list(CORPUS_OPPONENTS[env_id])
            env = gym.make(env_id, **kwargs)
            for game in range(games_per_env):
                obs, info = env.reset(seed=seed + game)
                while True:
                    texts.append(obs)
                    legal = info.get("legal_actions") or []
                    answer = "<reflection>ok</reflection>" if info.get("phase") == "reflect" or not legal else rng.choice(legal)
                    obs, _, terminated, truncated, info = env.step(answer)
                    if terminated or truncated:
                        texts.append(obs)
                        break
    return texts


#: Labels a task corpus holds when its env numbers its actions: ``"1"`` .. ``"300"`` are
#: then words of the vocabulary, however many actions the played states happened to show
#: (a Household state can list 77 commands or more).
MAX_LABEL = 300


def task_corpus(env_id: str, env_kwargs: dict[str, Any], games: int = 8, seed: int = 0) -> list[str]:
    """Prompts of ``games`` meta-episodes of ``env_id`` (built with ``env_kwargs``) played at
    random (a legal action, or its label, at every turn), deterministic in ``seed``; with
    ``action_labels`` on, also the labels ``1`` .. :data:`MAX_LABEL`.

    Example:
        >>> texts = task_corpus("mage/Sokoban-meta-v0", {"max_steps": 3, "action_labels": "numbers"}, games=1)
        >>> len(texts), "Legal actions: 1: up" in texts[0], texts[-1].split()[-1]
        (13, True, '300')
    """
    rng = random.Random(seed)
    env = gym.make(env_id, **env_kwargs)
    texts: list[str] = []
    for game in range(games):
        obs, info = env.reset(seed=seed + game)
        while True:
            texts.append(obs)
            legal = info.get("action_labels") or info.get("legal_actions") or []
            answer = "<reflection>ok</reflection>" if info.get("phase") == "reflect" or not legal else rng.choice(legal)
            obs, _, terminated, truncated, info = env.step(answer)
            if terminated or truncated:
                texts.append(obs)
                break
    env.close()
    if env_kwargs.get("action_labels", "none") != "none":
        texts.append(" ".join(str(label) for label in range(1, MAX_LABEL + 1)))
    return texts


def extend_tokenizer(tokenizer: PreTrainedTokenizerFast, texts: Iterable[str]) -> PreTrainedTokenizerFast:
    """``tokenizer`` (a word-level one, as :func:`build_tokenizer` makes) with the words of
    ``texts`` it lacks appended after its ids, the most frequent first (ties in
    alphabetical order); the same tokenizer when nothing is missing. Every existing word
    keeps its id.

    Example:
        >>> base = build_tokenizer(["check bet"])
        >>> extended = extend_tokenizer(base, ["up up, check"])
        >>> old, new = base.get_vocab(), extended.get_vocab()
        >>> all(new[word] == i for word, i in old.items()), [new[word] - len(base) for word in ("up", ",")]
        (True, [0, 1])
        >>> extended.convert_ids_to_tokens(extended("up, check")["input_ids"])
        ['up', ',', 'check']
    """
    core = tokenizer.backend_tokenizer
    vocab = core.get_vocab()
    pre = core.pre_tokenizer
    counts: Counter[str] = Counter(
        word for text in texts for word, _ in pre.pre_tokenize_str(text) if word not in vocab
    )
    if not counts:
        return tokenizer
    new = sorted(counts, key=lambda word: (-counts[word], word))
    extended = dict(vocab)
    extended.update({word: len(vocab) + i for i, word in enumerate(new)})
    grown = Tokenizer(models.WordLevel(vocab=extended, unk_token=SPECIAL_TOKENS["unk_token"]))
    grown.pre_tokenizer = pre
    grown.decoder = core.decoder
    grown.add_special_tokens(list(SPECIAL_TOKENS.values()))
    return PreTrainedTokenizerFast(tokenizer_object=grown, **SPECIAL_TOKENS)


def build_tokenizer(texts: Iterable[str]) -> PreTrainedTokenizerFast:
    """A word-level tokenizer over ``texts`` (words and single punctuation marks)."""
    core = Tokenizer(models.WordLevel(unk_token=SPECIAL_TOKENS["unk_token"]))
    core.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    core.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    trainer = trainers.WordLevelTrainer(special_tokens=list(SPECIAL_TOKENS.values()), min_frequency=1)
    core.train_from_iterator(list(texts) + ["<action> </action> <reflection> </reflection>"], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=core, **SPECIAL_TOKENS)


def build_model(tokenizer: PreTrainedTokenizerFast, config: TinyConfig = TinyConfig()) -> LlamaForCausalLM:
    """A freshly initialised Llama sized by ``config`` (seeded by ``config.seed``)."""
    torch.manual_seed(config.seed)
    llama = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_attention_heads,
        max_position_embeddings=config.max_position_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(llama)


def create_tiny(path: str | Path, config: TinyConfig = TinyConfig(), task_texts: Iterable[str] = ()) -> Path:
    """Build the tokenizer (extended with the words of ``task_texts``, e.g. a
    :func:`task_corpus`) and model and ``save_pretrained`` both into ``path``."""
    path = Path(path)
    tokenizer = extend_tokenizer(build_tokenizer(env_corpus(config.corpus_games, config.seed)), task_texts)
    model = build_model(tokenizer, config)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(path)
    model.save_pretrained(path)
    return path
