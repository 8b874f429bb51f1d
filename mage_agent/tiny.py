"""The embedded default model: a tiny Llama built from a config, with a tokenizer trained
locally on the environments' own text. Nothing is downloaded.

The tokenizer is a word-level vocabulary over the words and punctuation of the prompts the
registered games emit (collected by playing random games), so every legal action name is
one token. Both are written with ``save_pretrained`` and load back with
``AutoTokenizer`` / ``AutoModelForCausalLM`` like any checkpoint.

Example:
    >>> tokenizer = build_tokenizer(["Legal actions: check, bet"])
    >>> tokenizer.convert_ids_to_tokens(tokenizer("check, bet")["input_ids"])
    ['check', ',', 'bet']
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import gymnasium as gym
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

import mage_envs  # noqa: F401  (registers the environments whose text we learn)

SPECIAL_TOKENS = {"pad_token": "<pad>", "unk_token": "<unk>", "eos_token": "<eos>", "bos_token": "<bos>"}
#: Environments whose prompts make up the tokenizer's corpus.
CORPUS_ENVS = ("mage/KuhnPoker-meta-v0", "mage/LeducPoker-meta-v0", "mage/TicTacToe-meta-v0")


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


def env_corpus(
    games_per_env: int = 60, seed: int = 0, styles: Iterable[str] = ("full", "compact")
) -> list[str]:
    """Prompts from random play of every corpus env (all phases), deterministic in ``seed``."""
    rng = random.Random(seed)
    texts: list[str] = []
    for env_id in CORPUS_ENVS:
        for style in styles:
            env = gym.make(env_id, prompt_style=style)
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


def create_tiny(path: str | Path, config: TinyConfig = TinyConfig()) -> Path:
    """Build the tokenizer and model and ``save_pretrained`` both into ``path``."""
    path = Path(path)
    tokenizer = build_tokenizer(env_corpus(config.corpus_games, config.seed))
    model = build_model(tokenizer, config)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(path)
    model.save_pretrained(path)
    return path
