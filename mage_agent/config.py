"""Training configuration: dataclasses, YAML files and command-line overrides.

Every field has a unique name, so each one is a command-line flag (``gamma_traj`` ->
``--gamma-traj``); a YAML file mirrors the sections::

    model: {name_or_path: tiny}
    env: {env_id: mage/KuhnPoker-meta-v0, num_episodes: 3}
    algo: {scope: per-archetype, entropy_coef: 0.05}

Example:
    >>> config = TrainConfig()
    >>> config = apply_overrides(config, {"scope": "global", "iterations": 5})
    >>> config.algo.scope, config.run.iterations
    ('global', 5)
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .advantage import ESTIMATORS, SCOPES
from .loss import AGGREGATIONS

#: How a group's copies meet opponents: one archetype for the group, or one drawn per copy.
GROUP_OPPONENTS: tuple[str, ...] = ("shared", "mixed")
#: Model dtypes by name; ``"auto"`` is bfloat16 on a GPU and float32 on CPU.
DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")


@dataclass
class ModelConfig:
    """The policy network."""

    name_or_path: str = "tiny"  #: "tiny" (the embedded model), a local path or a hub id
    lora: bool = False  #: train a LoRA adapter instead of all weights
    lora_rank: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    device: str = "auto"  #: "auto" (cuda when available), "cpu", "cuda"...
    dtype: str = "auto"  #: "auto" (bfloat16 on GPU, float32 on CPU), "float32", "bfloat16", "float16"
    activation_checkpointing: bool = False  #: recompute layer activations in backward (less memory)


@dataclass
class EnvConfig:
    """The meta-environment and the opponent population."""

    env_id: str = "mage/KuhnPoker-meta-v0"
    num_episodes: int = 3
    reward_mode: str = "differential"  #: "differential" (MAGE), "final" or "cumulative" (ablation)
    reflection: bool = False  #: ask the model for reflections between episodes
    memory: bool = True  #: show earlier episodes' summaries (False: the no-memory control)
    repeat_instance: bool = True  #: the same deal every episode (paper protocol)
    prompt_style: str = "compact"  #: "compact" (no rules text, for small models) or "full"
    seat: str = "random"
    #: opponent archetype -> sampling weight (population-based training)
    population: dict[str, float] = field(
        default_factory=lambda: {"conservative": 1.0, "aggressive": 1.0, "intermediate": 1.0}
    )
    single_opponent: str = ""  #: ablation: train against this one archetype only
    heldout: list[str] = field(default_factory=lambda: ["bluffer", "calling-station", "maniac"])
    invalid_penalty: float = -1.0
    reward_scale: float = 1.0
    #: further ``gym.make`` arguments of the environment, e.g. ``{"max_steps": 30}`` for a task
    env_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class RolloutConfig:
    """Sampling and batch shape."""

    groups_per_iteration: int = 16  #: B: groups (seed, opponent) per iteration
    group_size: int = 8  #: G: copies per group
    #: "shared": a group's copies meet one archetype (MAGE); "mixed": each copy draws its own
    group_opponents: str = "shared"
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 1
    generation_batch_size: int = 0  #: prompts per generate call (0: every pending prompt at once)
    action_tokens: bool = True  #: sample one token among the legal action names


@dataclass
class AlgoConfig:
    """Credit assignment, advantages and optimisation."""

    estimator: str = "grpo"  #: "grpo" or "gigpo"
    scope: str = "per-archetype"  #: advantage normalisation: "per-archetype", "global", "group"
    #: DAPO's dynamic sampling: drop groups whose advantages are all zero, draw more groups
    dynamic_sampling: bool = False
    max_sampling_draws: int = 3  #: with dynamic_sampling: collections per iteration at most
    std_normalize: bool = False  #: divide by the scope's std (False: mean-only, as Dr. GRPO and MAGE's code)
    gamma_step: float = 0.95
    gamma_traj: float = 0.6
    clip: float = 0.2  #: PPO's clip range below 1 (and above, unless clip_high differs)
    clip_high: float = 0.28  #: clip range above 1 (DAPO's decoupled clip-higher; 0.2 is PPO's symmetric clip)
    loss_aggregation: str = "token"  #: "token" (mean over the step's tokens) or "sequence" (per completion first)
    kl_coef: float = 0.0
    entropy_coef: float = 0.1
    epochs: int = 2
    minibatch_size: int = 256  #: turns per optimizer step (split between processes)
    micro_batch_size: int = 0  #: turns per forward/backward pass (0: the minibatch); only memory changes
    learning_rate: float = 1e-3
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    warmup_iterations: int = 10
    schedule: str = "constant"  #: "constant" or "cosine" after warm-up


@dataclass
class RunConfig:
    """Length, seeds, output and evaluation."""

    iterations: int = 400
    seed: int = 0
    output_dir: str = "runs/mage"
    checkpoint_every: int = 50
    eval_meta_episodes: int = 300
    eval_seed: int = 1_000_000_000  #: evaluation seeds start here (disjoint from training)
    threads: int = 1  #: torch CPU threads (1 is fastest on a shared 2-core machine)
    tensorboard: bool = True


@dataclass
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` with a readable message for inconsistent settings."""
        if self.algo.scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, got {self.algo.scope!r}")
        if self.algo.estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {ESTIMATORS}, got {self.algo.estimator!r}")
        if self.algo.loss_aggregation not in AGGREGATIONS:
            raise ValueError(f"loss_aggregation must be one of {AGGREGATIONS}, got {self.algo.loss_aggregation!r}")
        if not (0 <= self.algo.clip < 1 and self.algo.clip_high >= 0):
            raise ValueError("clip must be in [0, 1) and clip_high >= 0")
        if self.algo.schedule not in ("constant", "cosine"):
            raise ValueError(f"schedule must be 'constant' or 'cosine', got {self.algo.schedule!r}")
        if self.rollout.group_opponents not in GROUP_OPPONENTS:
            raise ValueError(f"group_opponents must be one of {GROUP_OPPONENTS}, got {self.rollout.group_opponents!r}")
        if self.rollout.group_size < 2:
            raise ValueError("group_size must be >= 2: advantages are relative to the group")
        if self.model.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.model.dtype!r}")
        if self.env.prompt_style not in ("compact", "full"):
            raise ValueError(f"prompt_style must be 'compact' or 'full', got {self.env.prompt_style!r}")
        for name in ("iterations", "checkpoint_every", "eval_meta_episodes", "threads"):
            if getattr(self.run, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.algo.micro_batch_size < 0 or self.rollout.generation_batch_size < 0:
            raise ValueError("micro_batch_size and generation_batch_size must be >= 0 (0: no limit)")
        if self.algo.max_sampling_draws < 1:
            raise ValueError("max_sampling_draws must be >= 1")
        if self.algo.minibatch_size < 1:
            raise ValueError("minibatch_size must be >= 1")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        sections = {f.name: f.type for f in dataclasses.fields(cls)}
        unknown = set(data) - set(sections)
        if unknown:
            raise ValueError(f"unknown config section(s): {sorted(unknown)}; expected {sorted(sections)}")
        built = {}
        for section_field in dataclasses.fields(cls):
            section_cls = section_field.default_factory  # type: ignore[misc]
            values = data.get(section_field.name, {}) or {}
            names = {f.name for f in dataclasses.fields(section_cls)}
            bad = set(values) - names
            if bad:
                raise ValueError(f"unknown field(s) {sorted(bad)} in section {section_field.name!r}")
            built[section_field.name] = section_cls(**values)
        return cls(**built)


def load_config(path: str | Path) -> TrainConfig:
    """Read a YAML (or JSON) config file."""
    text = Path(path).read_text()
    if str(path).endswith(".json"):
        data = json.loads(text)
    else:
        import yaml

        data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a config file must hold a mapping of sections")
    return TrainConfig.from_dict(data)


def field_index(config: TrainConfig) -> dict[str, tuple[str, dataclasses.Field]]:
    """Field name -> (section name, field) over every section."""
    index: dict[str, tuple[str, dataclasses.Field]] = {}
    for section in dataclasses.fields(config):
        for f in dataclasses.fields(getattr(config, section.name)):
            if f.name in index:
                raise RuntimeError(f"field name {f.name!r} is used by two sections")
            index[f.name] = (section.name, f)
    return index


def apply_overrides(config: TrainConfig, overrides: dict[str, Any]) -> TrainConfig:
    """A copy of ``config`` with fields replaced by name (validated)."""
    data = config.to_dict()
    index = field_index(config)
    for name, value in overrides.items():
        if name not in index:
            raise ValueError(f"unknown setting {name!r}")
        data[index[name][0]][name] = value
    return TrainConfig.from_dict(data)
