"""Build what a run needs from a :class:`~mage_agent.config.TrainConfig`: the policy, the env
arguments, the population, the device, the sampling settings.

Example:
    >>> from mage_agent.config import TrainConfig
    >>> env_kwargs(TrainConfig())["reward_mode"]
    'differential'
    >>> population_of(TrainConfig())
    {'conservative': 1.0, 'aggressive': 1.0, 'intermediate': 1.0, 'random-style': 1.0}
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Any

import torch

from mage_envs import InvalidActionPolicy
from mage_envs.eval_protocol import INVALID_RETRIES, protocol_opponents, training_population
from mage_envs.opponents.registry import archetype, list_opponents
from mage_envs.registration import game_of

from .agents import PolicyAgent
from .config import DTYPES, TrainConfig, did_you_mean
from .packing import supports
from .policy import LoraSettings, Policy, default_dtype
from .pretrained import resolve_model_path
from .sampling import Sampler, Sampling
from .tiny import TinyConfig, create_tiny, task_corpus

TINY = "tiny"
LOG = logging.getLogger(__name__)


def resolve_device(name: str) -> str:
    """``"auto"`` -> ``"cuda"`` when available, else ``"cpu"``."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


#: CPU flags (``/proc/cpuinfo``) of native bfloat16 matrix products: AMX tiles, or AVX-512's
#: bfloat16 dot products (measured on one: matmuls 2.4x float32's speed, a LoRA iteration of
#: SmolLM2 see docs/benchmarks.md).
BFLOAT16_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_bfloat16_flag(cpuinfo: str | None = None) -> str | None:
    """The first of :data:`BFLOAT16_FLAGS` that this CPU has (``cpuinfo``: the text of
    ``/proc/cpuinfo``, read when not given), or ``None`` (none, or no ``/proc/cpuinfo``).

    Example:
        >>> cpu_bfloat16_flag("flags : fpu avx512f avx512_bf16"), cpu_bfloat16_flag("flags : fpu avx2")
        ('avx512_bf16', None)
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return None
    flags = {flag for line in cpuinfo.splitlines() if line.startswith("flags") for flag in line.split()}
    return next((flag for flag in BFLOAT16_FLAGS if flag in flags), None)


def resolve_dtype(name: str, device: str, frozen_packed: bool = False, cpuinfo: str | None = None) -> torch.dtype:
    """The named dtype, or for ``"auto"``: bfloat16 on a GPU; on CPU bfloat16 when the weights
    are frozen and every forward pass is the packed one (``frozen_packed``: a LoRA run of a
    Llama-family model, whose scoring and sampling, one token or free text, both take it; the
    packed forward keeps the stream, adapters and logits in float32, transformers' own
    forward would add the adapters in bfloat16) on a CPU with native bfloat16 products
    (:func:`cpu_bfloat16_flag`), else float32. The choice and its reason are logged.

    Example:
        >>> resolve_dtype("auto", "cpu"), resolve_dtype("auto", "cuda:1"), resolve_dtype("bfloat16", "cpu")
        (torch.float32, torch.bfloat16, torch.bfloat16)
        >>> resolve_dtype("auto", "cpu", frozen_packed=True, cpuinfo="flags : amx_bf16")
        torch.bfloat16
    """
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {name!r}")
    if name != "auto":
        return getattr(torch, name)
    if torch.device(device).type != "cpu":
        return default_dtype(device)
    flag = cpu_bfloat16_flag(cpuinfo)
    if not frozen_packed:
        LOG.info("dtype auto: float32 (bfloat16 on CPU is taken only when every forward is the packed one: LoRA "
                 "on a Llama-family model, without activation checkpointing)")
        return torch.float32
    if flag is None:
        LOG.info("dtype auto: float32 (this CPU has no native bfloat16 products: none of %s)", ", ".join(BFLOAT16_FLAGS))
        return torch.float32
    LOG.info("dtype auto: bfloat16 frozen weights (the CPU has %s); the residual stream, LoRA adapters, logits, "
             "optimizer and loss stay in float32", flag)
    return torch.bfloat16


#: Models with at least this many parameters train on every core by default (``threads: 0``):
#: their matrix products are large enough to share (SmolLM2-135M: 1.5-1.8x on two cores);
#: smaller ones (the embedded tiny model) are fastest on one.
MANY_THREADS_PARAMETERS = 10_000_000


def threads_for(threads: int, model: torch.nn.Module) -> int:
    """The torch CPU threads of a run: ``threads`` when set, else (0) every core this process
    may use for a model of :data:`MANY_THREADS_PARAMETERS` or more, one for a smaller one.

    Example:
        >>> threads_for(3, torch.nn.Linear(2, 2)), threads_for(0, torch.nn.Linear(2, 2))
        (3, 1)
    """
    if threads:
        return threads
    parameters = sum(p.numel() for p in model.parameters())
    if parameters < MANY_THREADS_PARAMETERS:
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    LOG.info("threads auto: %d (a model of %d M parameters)", cores, parameters // 10**6)
    return cores


def base_model_path(config: TrainConfig, output: Path) -> str:
    """The model to start from: the embedded tiny model is built once into the run folder
    (for a single-agent task with the words of its prompts, played with the run's env
    options on training instances, appended to the games' vocabulary); an embedded
    pretrained model (``smollm2-135m``) resolves to its converted folder."""
    if config.model.name_or_path != TINY:
        return resolve_model_path(config.model.name_or_path)
    path = output / "base_model"
    tiny = tiny_config(config)
    if not (path / "config.json").exists():
        task = game_of(config.env.env_id) is None
        texts = task_corpus(config.env.env_id, env_kwargs(config), tiny.task_games, tiny.seed) if task else []
        create_tiny(path, tiny, texts)
    built = json.loads((path / "config.json").read_text())
    asked = {"hidden_size": tiny.hidden_size, "num_hidden_layers": tiny.num_hidden_layers}
    if any(built.get(key) != value for key, value in asked.items()):
        raise ValueError(f"{path} holds a tiny model of width {built.get('hidden_size')} and "
                         f"{built.get('num_hidden_layers')} layers, built for this run, which now asks for "
                         f"{tiny.hidden_size} and {tiny.num_hidden_layers}: keep the run's sizes, or start it anew "
                         "(--overwrite, or another --output-dir)")
    return str(path)


def tiny_config(config: TrainConfig) -> TinyConfig:
    """The embedded tiny model's size and seed in ``config``.

    Example:
        >>> from mage_agent.config import apply_overrides
        >>> tiny = tiny_config(apply_overrides(TrainConfig(), {"tiny_hidden_size": 128, "tiny_layers": 4}))
        >>> tiny.hidden_size, tiny.intermediate_size, tiny.num_hidden_layers
        (128, 256, 4)
    """
    model = config.model
    return TinyConfig(hidden_size=model.tiny_hidden_size, intermediate_size=2 * model.tiny_hidden_size,
                      num_hidden_layers=model.tiny_layers, seed=config.run.seed)


def build_policy(config: TrainConfig, output: Path, checkpoint: Path | None = None,
                 device: str | None = None) -> Policy:
    """The policy at the start of training, or as saved in ``checkpoint`` (resume), on
    ``device`` (default: the config's), with activation checkpointing if configured."""
    policy = _load_policy(config, output, checkpoint, device)
    if config.model.activation_checkpointing:
        policy.enable_activation_checkpointing()
    return policy


def _load_policy(config: TrainConfig, output: Path, checkpoint: Path | None, device: str | None) -> Policy:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = device or resolve_device(config.model.device)
    base = base_model_path(config, output)
    packed = packs(config, base)
    dtype = resolve_dtype(config.model.dtype, device, frozen_packed=config.model.lora and packed)
    model_cfg = config.model
    lora = None
    if model_cfg.lora:
        lora = LoraSettings(model_cfg.lora_rank, model_cfg.lora_alpha, model_cfg.lora_dropout,
                            tuple(model_cfg.lora_target_modules), model_cfg.lora_top_layers)
    keep_reference = config.algo.kl_coef > 0
    if checkpoint is None:
        return Policy.from_pretrained(base, lora=lora, device=device, keep_reference=keep_reference, dtype=dtype,
                                      system_prompt=model_cfg.system_prompt, packed_forward=packed)
    tokenizer = AutoTokenizer.from_pretrained(base)
    saved = checkpoint / "model"
    if lora is not None:
        from peft import PeftModel

        adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype=dtype), saved,
                                            is_trainable=True)
        return Policy(adapted, tokenizer, device=device, system_prompt=model_cfg.system_prompt,
                      packed_forward=packed)
    model = AutoModelForCausalLM.from_pretrained(saved, dtype=dtype)
    reference = AutoModelForCausalLM.from_pretrained(base, dtype=dtype) if keep_reference else None
    return Policy(model, tokenizer, device=device, keep_reference=False, reference_model=reference,
                  system_prompt=model_cfg.system_prompt, packed_forward=packed)


def packs(config: TrainConfig, base: str) -> bool:
    """Whether the run takes the packed forward (:mod:`mage_agent.packing`): asked for (the
    default), without activation checkpointing, on a Llama-family model at ``base``. When it
    is asked for but does not apply, the plain forward runs and the log says why."""
    from transformers import AutoConfig

    model = config.model
    if not model.packed_forward:
        return False
    if model.activation_checkpointing:
        LOG.info("packed_forward: off (activation checkpointing is on); the plain forward runs")
        return False
    model_type = AutoConfig.from_pretrained(base).model_type
    if not supports(model_type):
        LOG.info("packed_forward: off (model type %r is not Llama-family); the plain forward runs", model_type)
        return False
    return True


def sampling_of(config: TrainConfig) -> Sampling:
    """The run's sampling settings (training rollouts and evaluation alike).

    Example:
        >>> sampling_of(TrainConfig()).max_new_tokens
        1
    """
    rollout = config.rollout
    return Sampling(temperature=rollout.temperature, top_p=rollout.top_p, top_k=rollout.top_k,
                    max_new_tokens=rollout.max_new_tokens, batch_size=rollout.generation_batch_size,
                    stop=tuple(rollout.stop))


def policy_agent(policy: Policy, config: TrainConfig, seed: int, name: str = "policy",
                 sampler: Sampler | None = None) -> PolicyAgent:
    """The agent that plays ``policy`` as the run does: its sampling, action tokens and
    answer prefix (evaluation and benchmarks build it so), drawing through ``sampler``
    (default: a :class:`~mage_agent.sampling.TorchSampler` of ``policy``).

    Example:
        >>> from mage_agent.tiny import build_model, build_tokenizer
        >>> tok = build_tokenizer(["check bet"])
        >>> policy_agent(Policy(build_model(tok), tok), TrainConfig(), seed=0).name
        'policy'
    """
    rollout = config.rollout
    return PolicyAgent(policy, sampling_of(config), action_tokens=rollout.action_tokens, seed=seed, name=name,
                       answer_prefix=rollout.answer_prefix, answer_question=rollout.answer_question, sampler=sampler)


def population_of(config: TrainConfig) -> dict[str, float]:
    """Training archetypes and weights (one archetype under the single-opponent ablation; an
    empty population: the game's default, :func:`~mage_envs.eval_protocol.training_population`,
    each weighted 1); empty for a single-agent task. Unknown archetypes (in the population, ``single_opponent``
    or ``heldout``) are refused with the closest known id, and so are held-out archetypes of
    ``mage_envs`` in training."""
    game = game_of(config.env.env_id)
    if game is None:
        return {}
    if config.env.single_opponent:
        population = {config.env.single_opponent: 1.0}
    else:
        population = dict(config.env.population) or dict.fromkeys(training_population(game), 1.0)
    known = list_opponents(game)
    for name in [*population, *heldout_of(config)]:
        if name not in known:
            raise ValueError(f"unknown archetype {name!r} for {game}{did_you_mean(name, known)}; "
                             f"known: {', '.join(known)}")
    for name in config.algo.reward_weights:
        if name not in population:
            raise ValueError(f"reward_weights names {name!r}, which is not a training archetype of this run "
                             f"({', '.join(population)})")
    for name in population:
        if archetype(game, name).split == "heldout":
            raise ValueError(
                f"{name!r} is a held-out archetype of {game}: it is for evaluation only "
                f"(trainable archetypes: {', '.join(list_opponents(game, 'trainable'))})"
            )
    return population


def heldout_of(config: TrainConfig) -> list[str]:
    """The held-out archetypes the evaluations add: ``env.heldout``, or when it is ``None`` the
    game's (:func:`~mage_envs.eval_protocol.protocol_opponents`); none for a single-agent task.

    Example:
        >>> heldout_of(TrainConfig())
        ['bluffer', 'calling-station', 'maniac']
        >>> from mage_agent.config import apply_overrides
        >>> heldout_of(apply_overrides(TrainConfig(), {"env_id": "mage/TicTacToe-meta-v0"}))[-1]
        'mcts-1000'
    """
    game = game_of(config.env.env_id)
    if game is None:
        return []
    return list(config.env.heldout) if config.env.heldout is not None else protocol_opponents(game)[1]


def resolved(config: TrainConfig) -> TrainConfig:
    """``config`` with the game's defaults written out (an empty population, a null ``heldout``
    or ``equilibrium_coef``), so that what a run saves (``config.json``, its checkpoints) says
    what it trained with whatever a later release's default is; ``config`` itself when there is
    nothing to resolve.

    Example:
        >>> list(resolved(TrainConfig()).env.population), resolved(TrainConfig()).algo.equilibrium_coef
        (['conservative', 'aggressive', 'intermediate', 'random-style'], 1.0)
    """
    env, algo = config.env, config.algo
    if algo.equilibrium_coef is None:
        config = dataclasses.replace(config, algo=dataclasses.replace(algo, equilibrium_coef=equilibrium_coef_of(config)))
    if game_of(env.env_id) is None:
        return config
    changes: dict[str, Any] = {}
    if not (env.population or env.single_opponent):
        changes["population"] = population_of(config)
    if env.heldout is None:
        changes["heldout"] = heldout_of(config)
    return dataclasses.replace(config, env=dataclasses.replace(env, **changes)) if changes else config


#: Games whose information states are few enough to tabulate at every checkpoint.
TABULAR_GAMES = ("kuhn_poker", "leduc_poker")
#: ``equilibrium_coef`` where the config leaves it null, by game, for the embedded model (0 for
#: the other games and models): measured on Kuhn Poker over seeds 20-29 (docs/league.md);
#: Leduc's anchor and a hub model's work but were never measured.
DEFAULT_EQUILIBRIUM_COEF = {"kuhn_poker": 1.0}


def supported(config: TrainConfig) -> str | None:
    """Why the learner's first hand cannot be tabulated for ``config`` (exact exploitability,
    the equilibrium anchor); ``None``: it can.

    Example:
        >>> supported(TrainConfig()) is None
        True
    """
    game = game_of(config.env.env_id)
    if game not in TABULAR_GAMES:
        return f"exact exploitability is computed for {', '.join(TABULAR_GAMES)}, not {game or config.env.env_id}"
    if not config.rollout.action_tokens:
        return "exact exploitability reads the action-token probabilities: it needs action_tokens=true"
    if config.env.reflection:
        return "exact exploitability needs reflection=false (a reflection is sampled text)"
    if config.rollout.top_p < 1 or config.rollout.top_k:
        return "top_p / top_k truncate sampling, which the action-token probabilities do not show: turn them off"
    return None


def equilibrium_coef_of(config: TrainConfig) -> float:
    """``algo.equilibrium_coef``, or where it is null the game's
    (:data:`DEFAULT_EQUILIBRIUM_COEF`) for the embedded model when the anchor applies to
    ``config``, else 0.

    Example:
        >>> from mage_agent.config import apply_overrides
        >>> [equilibrium_coef_of(apply_overrides(TrainConfig(), overrides)) for overrides in
        ...  ({}, {"action_tokens": False}, {"env_id": "mage/LeducPoker-meta-v0"}, {"name_or_path": "smollm2-135m"},
        ...   {"equilibrium_coef": 0.5})]
        [1.0, 0.0, 0.0, 0.0, 0.5]
    """
    if config.algo.equilibrium_coef is not None:
        return config.algo.equilibrium_coef
    if config.model.name_or_path != TINY or supported(config) is not None:
        return 0.0
    return DEFAULT_EQUILIBRIUM_COEF.get(game_of(config.env.env_id) or "", 0.0)


def env_kwargs(config: TrainConfig) -> dict[str, Any]:
    """``gym.make`` arguments of the meta-environment the run trains on (game options only
    for games: the training population, the seat, the prompt style).

    Example:
        >>> env_kwargs(TrainConfig())["opponent"]
        ['conservative', 'aggressive', 'intermediate', 'random-style']
    """
    env = config.env
    kwargs: dict[str, Any] = {
        "num_episodes": env.num_episodes,
        "reward_mode": env.reward_mode,
        "reflection": env.reflection,
        "include_summaries": env.memory,
        "repeat_instance": env.repeat_instance,
        "invalid_action": InvalidActionPolicy("retry", max_retries=INVALID_RETRIES, penalty=env.invalid_penalty),
        **env.env_options,
    }
    population = population_of(config)
    if population:
        kwargs.update(
            prompt_style=env.prompt_style,
            seat=env.seat if env.seat == "random" else int(env.seat),
            reward_scale=env.reward_scale,
            opponent=list(population),
        )
    return kwargs


def evaluation_opponents(config: TrainConfig) -> list[str]:
    """The evaluations' opponents: the training population, then the held-out archetypes
    (none for a single-agent task).

    Example:
        >>> evaluation_opponents(TrainConfig())[3:]
        ['random-style', 'bluffer', 'calling-station', 'maniac']
    """
    population = population_of(config)
    return [*population, *(o for o in heldout_of(config) if o not in population)] if population else []


def eval_env_kwargs(config: TrainConfig) -> dict[str, Any]:
    """The evaluations' ``gym.make`` arguments: :func:`env_kwargs` against the
    :func:`evaluation_opponents`, with ``eval_env_options`` over them.

    Example:
        >>> from mage_agent.config import apply_overrides
        >>> config = apply_overrides(TrainConfig(), {"env_id": "mage/Sokoban-meta-v0",
        ...     "env_options": {"instance_split": "train"}, "eval_env_options": {"instance_split": "eval"}})
        >>> env_kwargs(config)["instance_split"], eval_env_kwargs(config)["instance_split"]
        ('train', 'eval')
    """
    opponents = evaluation_opponents(config)
    return {**env_kwargs(config), **({"opponent": opponents} if opponents else {}), **config.env.eval_env_options}
