"""The MAGE training loop: collect -> credit -> advantage -> update -> log -> checkpoint.

Each iteration draws ``groups_per_iteration`` (seed, opponent) groups from the opponent
population, plays ``group_size`` copies of each meta-episode in lockstep with batched
generation, assigns per-turn returns with the step and cross-episode discounts, turns them
into group-relative advantages (centred on the copies of the same seed and archetype;
optionally scaled per archetype), and takes ``epochs`` passes of PPO-clip minibatch
updates (DAPO's clip-higher by default).

Every ``exploitability_every`` iterations the first hand's exact exploitability is logged
(:mod:`mage_agent.exploitability`); a ``league`` run adds frozen snapshots of the learner to
the opponent population (:mod:`mage_agent.league`).

Under ``torchrun`` each process plays an equal share of the groups and the statistics and
gradients are pooled over processes (:mod:`mage_agent.distributed`); rank 0 writes the logs
and checkpoints.

Example (a two-iteration run of the embedded model):
    >>> import tempfile
    >>> from mage_agent.config import TrainConfig, apply_overrides
    >>> config = apply_overrides(TrainConfig(), {"iterations": 2, "groups_per_iteration": 4,
    ...     "eval_meta_episodes": 0, "output_dir": tempfile.mkdtemp(), "tensorboard": False})
    >>> history = Trainer(config, progress=False).train()
    >>> len(history), "return_ep3" in history[-1]
    (2, True)
"""

from __future__ import annotations

import json
import math
import shutil
import time
import warnings
from collections import Counter, defaultdict
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from mage_envs.core.checker import INVALID_REASONS
from mage_envs.opponents import Opponent
from mage_envs.registration import game_of

from .advantage import TurnTable, advantage_diagnostics, discounted_returns, group_advantages
from .anchor import EquilibriumAnchor
from .build import (
    TINY,
    base_model_path,
    build_policy,
    env_kwargs,
    equilibrium_coef_of,
    population_of,
    resolve_device,
    resolved,
    sampling_of,
    supported,
    threads_for,
)
from .checkpoint import latest_checkpoint, load_training_state, save_checkpoint
from .config import TrainConfig
from .distributed import World
from .exploitability import ExploitabilityProbe, measure
from .league import LEARNER, League
from .loss import ppo_loss
from .memory import activation_bytes_per_token, available_bytes, default_token_budget, micro_batches, padded_tokens
from .policy import Policy
from .rollout import GroupSpec, RolloutBatch, RolloutRunner, Turn, solves_exactly
from .run_lock import lock_run_folder
from .sampling import Sampler, TorchSampler

#: The per-step diagnostics averaged into each iteration's metrics.
_LOSS_KEYS = ("policy_loss", "kl", "entropy", "clip_fraction", "approx_kl", "grad_norm")
#: The update's count of the tokens its logged entropy averages over (not logged itself).
_ENTROPY_TOKENS = "entropy_tokens"
#: The update's first minibatch, scored before any optimizer step: the sum over its tokens of
#: |sampling-time − scoring-time log-prob| and their count. Their ratio, ``sampling_gap``, is
#: float rounding when the sampler plays the policy that is trained, and large when it does not.
_GAP, _GAP_TOKENS = "sampling_gap", "sampling_gap_tokens"
#: The update's free-text answers as scored by its steps: the sum of their first tokens'
#: probability of starting a legal answer, and their count. Their ratio, ``choice_mass``, falls
#: below 1 where an update leaks probability to first tokens that name no legal action.
_MASS, _MASS_ROWS = "choice_mass", "choice_mass_rows"
#: With ``algo.equilibrium_coef``: the mean over the update's steps of the first hand's
#: KL(equilibrium || policy) (:class:`~mage_agent.anchor.EquilibriumAnchor`), before each step.
_EQUILIBRIUM_KL = "equilibrium_kl"
#: With ``algo.minimax_coef``: the update's turns with value-keeping moves (``Turn.optimal_ids``)
#: as scored by its steps: the sum of the probability of such a move, and their count. Their
#: ratio, ``optimal_mass``, is how sure the policy is to keep the game value where it can lose it.
_OPTIMAL, _OPTIMAL_ROWS = "optimal_mass", "optimal_mass_rows"
#: Reset seeds of dynamic sampling's further draws start here (beyond training and evaluation seeds).
_REFILL_SEEDS = 2**40
#: What a run writes into its output folder (besides ``eval*.json`` / ``eval*.png`` and
#: ``transcript*.jsonl``).
RUN_FILES = ("metrics.jsonl", "invalid_answers.jsonl", "checkpoints", "tensorboard", "base_model", "config.json",
             "training.png", "league.json")
#: The invalid answers an iteration keeps verbatim in ``invalid_answers.jsonl`` (the first ones collected).
REJECTED_KEPT = 8


def _logged_iteration(line: str) -> float:
    """The iteration of a log line; a torn or blank line (a kill mid-write) counts as after any."""
    try:
        return float(json.loads(line)["iteration"])
    except (ValueError, KeyError, TypeError):
        return math.inf


def earlier_run(output: Path) -> list[Path]:
    """The files an earlier run left in ``output`` (its model, logs, checkpoints, evaluations).

    Example:
        >>> earlier_run(Path("/nonexistent"))
        []
    """
    named = [output / name for name in RUN_FILES if (output / name).exists()]
    evaluations = [path for pattern in ("eval*.json", "eval*.png", "transcript*.jsonl")
                   for path in sorted(output.glob(pattern))]
    return named + evaluations


#: Settings that do not change what a run computes.
NOT_RESULTS = ("output_dir", "threads", "tensorboard", "device", "checkpoint_every", "exploitability_every")
#: Settings of the embedded tiny model alone: no change for any other model.
TINY_ONLY = ("tiny_hidden_size", "tiny_layers")


def changed_settings(stored: dict[str, Any], config: TrainConfig) -> str:
    """``name old -> new`` for each setting of ``config`` that a checkpoint's stored config
    (:meth:`TrainConfig.to_dict`) holds otherwise, or is silent on ('' when none).

    Example:
        >>> stored = resolved(TrainConfig()).to_dict()   # a run saves its population written out
        >>> stored["run"]["iterations"] = 400
        >>> changed_settings(stored, TrainConfig())
        'iterations 400 -> 900'
    """
    return ", ".join(setting_changes(stored, config))


def setting_changes(stored: dict[str, Any], config: TrainConfig, unset: bool = True) -> list[str]:
    """:func:`changed_settings` one entry per setting; ``unset=False`` leaves out the settings
    the stored config is silent on (those its code predates).

    Example:
        >>> stored = resolved(TrainConfig()).to_dict()
        >>> stored["run"]["iterations"] = 400
        >>> del stored["algo"]["std_of"]
        >>> setting_changes(stored, TrainConfig()), setting_changes(stored, TrainConfig(), unset=False)
        (["std_of unset -> 'advantages'", 'iterations 400 -> 900'], ['iterations 400 -> 900'])

    The tiny model's own settings count only for it:
        >>> from mage_agent.config import apply_overrides
        >>> hub = apply_overrides(TrainConfig(), {"name_or_path": "smollm2-135m"})
        >>> stored = resolved(hub).to_dict()
        >>> del stored["model"]["tiny_layers"]
        >>> setting_changes(stored, hub)
        []
    """
    changes = []
    ignored = NOT_RESULTS if config.model.name_or_path == TINY else NOT_RESULTS + TINY_ONLY
    for section, fields in resolved(config).to_dict().items():
        for name, value in fields.items():
            old = stored.get(section, {}).get(name, _UNSET)
            if name not in ignored and old != value and (unset or old is not _UNSET):
                changes.append(f"{name} {'unset' if old is _UNSET else repr(old)} -> {value!r}")
    return changes


_UNSET = object()


def _count(turns: list[Turn], aggregation: str) -> int:
    """What the loss averages over in ``turns``: their completions (``sequence``) or tokens."""
    return len(turns) if aggregation == "sequence" else sum(len(t.completion_ids) for t in turns)


def _choice_tokens(turn: Turn) -> int:
    """How many of ``turn``'s first tokens are a choice among legal actions, which the entropy
    bonus counts with ``entropy_tokens: choices``: all of an action-token answer, the first
    of a free-text answer when its legal actions start with two first tokens or more (its
    entropy renormalised over them), none of a reflection.

    Example:
        >>> free = Turn(0, 0, "a", 0, "act", [7], [5, 9, 2], [0.0] * 3, 0.0, False, "", None, [5, 6])
        >>> one_way = Turn(0, 0, "a", 0, "act", [7], [5, 9, 2], [0.0] * 3, 0.0, False, "", None, [5])
        >>> _choice_tokens(free), _choice_tokens(one_way)
        (1, 0)
    """
    if turn.allowed_ids is not None:
        return len(turn.completion_ids)
    return min(1, len(turn.completion_ids)) if turn.choice_ids is not None and len(turn.choice_ids) > 1 else 0


def _choice_count(turns: list[Turn], aggregation: str) -> int:
    """What the entropy bonus averages over in ``turns`` with ``entropy_tokens: choices``:
    the turns with a choice (``sequence``) or their choice tokens."""
    counts = [_choice_tokens(t) for t in turns]
    return sum(c > 0 for c in counts) if aggregation == "sequence" else sum(counts)


class Trainer:
    """Runs :class:`~mage_agent.config.TrainConfig`; ``resume=True`` continues from the
    newest checkpoint in the output directory. A new run refuses a folder that holds an
    earlier run's files (:func:`earlier_run`), unless ``overwrite=True`` removes them."""

    def __init__(self, config: TrainConfig, resume: bool = False, progress: bool = True,
                 world: World | None = None, overwrite: bool = False) -> None:
        config = resolved(config)   # the population it trains against, written out (what it saves)
        self.config = config
        self.output = Path(config.run.output_dir)
        self.output.mkdir(parents=True, exist_ok=True)
        device = resolve_device(config.model.device)
        self.world = world or World.from_environment(device)
        if self.world.is_main:   # before anything is written: a second trainer in the folder stops here
            lock_run_folder(self.output)
        device = self.world.device(device)  # before any collective: NCCL needs each process's GPU
        self.shard = self.world.shard_bounds(config.rollout.groups_per_iteration)
        self.progress = progress and self.world.is_main
        self._bar: tqdm | None = None   # the loop's progress bar, while train() runs
        torch.manual_seed(config.run.seed)
        self.start_iteration = 0
        self.history: list[dict[str, Any]] = []
        self.population = population_of(config)  # first: a bad population fails before any work
        if config.algo.dynamic_sampling and self.world.size > 1:
            raise ValueError("dynamic_sampling runs in a single process for now (torchrun: leave it off)")
        if not resume:
            self._claim_output(overwrite)
        checkpoint = latest_checkpoint(self.output / "checkpoints") if resume else None
        checkpoint_extras: dict[str, Any] = {}
        if checkpoint is None and self.world.is_main:  # a resumed run that never saved starts over
            (self.output / "metrics.jsonl").unlink(missing_ok=True)
            (self.output / "invalid_answers.jsonl").unlink(missing_ok=True)
        if self.world.is_main:  # the embedded model is built once, by one process
            base_model_path(config, self.output)
        self.world.barrier()
        self.policy: Policy = build_policy(config, self.output, checkpoint, device=device)
        torch.set_num_threads(threads_for(config.run.threads, self.policy.model))
        self.world.broadcast_parameters(self.policy.model)
        self.sampling = sampling_of(config)
        #: what draws the rollouts' answers; another backend (a vLLM engine) replaces it before
        #: :meth:`train` (see docs/training.md, "Sampling backends")
        self.sampler: Sampler = TorchSampler(self.policy)
        algo = config.algo
        self.optimizer = torch.optim.AdamW(
            self.policy.trainable_parameters(), lr=algo.learning_rate, weight_decay=algo.weight_decay
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        #: activations per token of the update's forward pass (an estimate), and the tokens a
        #: micro-batch holds (``micro_batch_tokens``, or what fits the default memory budget)
        weights = next(self.policy.model.parameters())
        trained_layers = config.model.lora_top_layers if config.model.lora else 0
        self.bytes_per_token = activation_bytes_per_token(self.policy.model.config, weights.element_size(),
                                                          trained_layers)
        self.token_budget = algo.micro_batch_tokens or default_token_budget(self.policy.model.config,
                                                                           weights.element_size(), trained_layers)
        self.runner = RolloutRunner(
            config.env.env_id, env_kwargs(config),
            num_envs=(self.shard[1] - self.shard[0]) * config.rollout.group_size,
        )
        if algo.minimax_coef and not (config.rollout.action_tokens and solves_exactly(self.runner.envs[0])):
            raise ValueError("minimax_coef needs action tokens and a game the env solves exactly (its "
                             f"optimal_actions(): Tic-Tac-Toe); {config.env.env_id} with action_tokens="
                             f"{config.rollout.action_tokens} has none")
        if checkpoint is not None:
            state = load_training_state(checkpoint, self.optimizer, self.scheduler)
            changed = changed_settings(state.config, config)
            if changed and self.world.is_main:
                warnings.warn(f"resuming {checkpoint} with settings that differ from the run's: {changed}; it "
                              "continues with the new ones (schedules follow the new iterations)", stacklevel=2)
            self.start_iteration = state.iteration
            self.history = state.extras["history"]
            checkpoint_extras = state.extras
            if self.world.is_main:  # a killed run may have logged iterations after its last checkpoint
                lines = "".join(json.dumps(m) + "\n" for m in self.history)
                (self.output / "metrics.jsonl").write_text(lines)
                self._drop_rejected_after(state.iteration)
        self._writer = self._tensorboard() if config.run.tensorboard and self.world.is_main else None
        self._probe = ExploitabilityProbe.of(config) if self.world.is_main else None
        #: the first hand's equilibrium anchor and its weight (``config`` is resolved: a number)
        self._anchor_weight = equilibrium_coef_of(config)
        self._anchor = EquilibriumAnchor(self.policy, config) if self._anchor_weight else None
        self.league = self._league(checkpoint_extras)
        #: tabulates the snapshots of a league run (its prompts built once)
        self._snapshots = ExploitabilityProbe(config) if self.league is not None else None

    def _league(self, extras: dict[str, Any]) -> League | None:
        """The league of a ``league`` run (restored from a checkpoint's ``extras``), its
        snapshots in the envs' populations; ``None`` otherwise."""
        settings = self.config.league
        if not settings.league:
            return None
        reason = supported(self.config)
        if reason is not None or self.world.size > 1:
            raise ValueError(f"league: {reason or 'it runs in a single process for now (torchrun: leave it off)'}")
        league = League(str(game_of(self.config.env.env_id)), self.population,
                        settings.league_interval, settings.league_pool_size, settings.league_share,
                        settings.league_sampling, settings.league_pfsp_power, settings.league_members)
        if "league" in extras:
            league.load_state_dict(extras["league"])
        self._install(league)
        return league

    def _install(self, league: League) -> None:
        members: list[str | Opponent] = [*env_kwargs(self.config)["opponent"], *league.opponents()]
        self.runner.set_opponents(members)

    def _league_step(self, iteration: int, batch: RolloutBatch) -> dict[str, Any]:
        """Record the iteration's results; take a snapshot when due (``league.json``: the
        members, weights, win rates, ratings and payoff matrix); the league's metrics."""
        league, snapshots = self.league, self._snapshots
        assert league is not None and snapshots is not None
        league.record(batch.opponents, batch.episode_successes, [r[-1] for r in batch.episode_returns])
        metrics: dict[str, Any] = {}
        if league.due(iteration):
            _, table = measure(self.policy, self.config, walker=snapshots.walker)
            league.add_snapshot(iteration + 1, table)
            self._install(league)
            summary = league.summary(table)
            (self.output / "league.json").write_text(json.dumps({"iteration": iteration + 1, **summary}, indent=1))
            metrics.update({f"payoff/{name}": value for name, value in summary["payoff_matrix"][LEARNER].items()
                            if name != LEARNER})
        return {**league.metrics(), **metrics}

    def _claim_output(self, overwrite: bool) -> None:
        """Refuse an earlier run's folder (nothing is lost), or remove its files if ``overwrite``."""
        found = earlier_run(self.output)
        if found and not overwrite:
            raise FileExistsError(
                f"{self.output} holds an earlier run ({', '.join(p.name for p in found)}): continue it with "
                "--resume, replace it with --overwrite, or choose another --output-dir"
            )
        self.world.barrier()  # every process has looked before anything is removed
        if found and self.world.is_main:
            for path in found:
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()

    # ------------------------------------------------------------------ the loop
    def train(self) -> list[dict[str, Any]]:
        """Run the remaining iterations; return the per-iteration metrics."""
        run = self.config.run
        bar = tqdm(range(self.start_iteration, run.iterations), initial=self.start_iteration,
                   total=run.iterations, desc="mage train", disable=not self.progress)
        self._bar = bar
        for iteration in bar:
            metrics, batch = self.run_iteration(iteration)
            self.log(metrics, bar)
            self.keep_rejected(iteration + 1, batch)
            if run.checkpoint_every and (iteration + 1) % run.checkpoint_every == 0 and self.world.is_main:
                self.save(iteration + 1)
        final_save = not run.checkpoint_every or run.iterations % run.checkpoint_every
        if run.iterations > self.start_iteration and final_save and self.world.is_main:
            self.save(run.iterations)
        if self._writer is not None:
            self._writer.close()
        return self.history

    def run_iteration(self, iteration: int) -> tuple[dict[str, Any], RolloutBatch]:
        """One iteration's stages (collect, credit, dynamic sampling's refill, update) and its
        metrics, the probe's and the league's included, beside its first draw's rollouts;
        nothing is logged or saved (:meth:`train` does that)."""
        started = time.perf_counter()
        batch = self.collect(iteration)
        rollout_seconds = time.perf_counter() - started  # the first draw: what tokens_per_second counts
        turns, advantages, diagnostics = self.credit(batch)
        if self.config.algo.dynamic_sampling:
            turns, advantages, refill = self.refill(iteration, batch, turns, advantages)
            diagnostics.update(refill)
        stats = self.update(turns, advantages, iteration)
        metrics = self.summarise(iteration, batch, {**diagnostics, **stats}, rollout_seconds,
                                 time.perf_counter() - started)
        if self._probe is not None and self._probe.due(iteration):
            metrics.update(self._probe.measure(self.policy))
        if self.league is not None:
            metrics.update(self._league_step(iteration, batch))
        return metrics, batch

    def collect(self, iteration: int, draw: int = 0) -> RolloutBatch:
        """Stage 1: draw the groups of this iteration and play this process's share.
        ``draw > 0``: a further draw of the same iteration (dynamic sampling), on seeds
        disjoint from every first draw."""
        rollout = self.config.rollout
        rng = np.random.default_rng([self.config.run.seed, iteration, *([draw] if draw else [])])
        base = (self.config.run.seed * 100_003 + iteration) * rollout.groups_per_iteration
        if draw:
            base = _REFILL_SEEDS + (base * self.config.algo.max_sampling_draws + draw) * rollout.groups_per_iteration
        population = self.population if self.league is None else self.league.weights()
        if population:
            ids, weights = zip(*population.items())
            probabilities = np.array(weights, dtype=float) / sum(weights)
            drawn = [ids[o] for o in rng.choice(len(ids), size=rollout.groups_per_iteration, p=probabilities)]
        else:  # a single-agent task: the group shares its instance only
            drawn = [None] * rollout.groups_per_iteration
        groups = [GroupSpec(seed=base + b, opponent=o) for b, o in enumerate(drawn)]
        if population and rollout.group_opponents == "mixed":  # each copy draws its own archetype
            copies = rng.choice(len(ids), size=(len(groups), rollout.group_size), p=probabilities)
            groups = [GroupSpec(g.seed, None, tuple(ids[o] for o in row)) for g, row in zip(groups, copies)]
        start, stop = self.shard
        groups = groups[start:stop]
        return self.runner.collect(self.policy, groups, rollout.group_size, self.sampling,
                                   action_tokens=rollout.action_tokens, seed=base + start,
                                   answer_prefix=rollout.answer_prefix, answer_question=rollout.answer_question,
                                   on_turn=lambda turn, playing: self._stage(f"collect: turn {turn}, {playing} playing"),
                                   sampler=self.sampler)

    def _stage(self, text: str) -> None:
        """Show what the iteration is doing beside the progress bar (a slow model spends
        minutes inside one iteration)."""
        if self._bar is not None and self.progress:
            self._bar.set_description_str(f"mage train [{text}]")

    def credit(self, batch: RolloutBatch) -> tuple[list[Turn], np.ndarray, dict[str, float]]:
        """Stages 2-3: discounted per-turn returns, then group-relative advantages, with the
        statistics taken over every process's turns; also their per-archetype diagnostics
        (:func:`~mage_agent.advantage.advantage_diagnostics`)."""
        algo = self.config.algo
        turns = batch.ordered_turns()
        first_group = self.shard[0]
        first_traj = first_group * self.config.rollout.group_size
        columns = {
            "traj": np.array([first_traj + t.traj for t in turns], dtype=int),
            "episode": np.array([t.episode for t in turns], dtype=int),
            "reward": np.array([t.reward * algo.reward_weights.get(t.opponent, 1.0) for t in turns], dtype=float),
            "group": np.array([first_group + t.group for t in turns], dtype=int),
            "archetype": np.array([t.opponent for t in turns], dtype=object),
            "phase": np.array([int(t.phase != "act") for t in turns], dtype=int),
            "anchor": np.array([t.anchor for t in turns], dtype=object),
            "logprob": np.array([sum(t.logprobs) for t in turns], dtype=float),
        }
        shards = self.world.gather(columns)
        merged = {name: np.concatenate([shard[name] for shard in shards]) for name in columns}
        logprob = merged.pop("logprob")
        table = TurnTable(**merged)
        returns = discounted_returns(table, algo.gamma_step, algo.gamma_traj)
        advantages = group_advantages(table, returns, scope=algo.scope, estimator=algo.estimator,
                                      std=algo.std_normalize, std_of=algo.std_of)
        diagnostics = advantage_diagnostics(table, returns, advantages, logprob)
        offset = sum(len(shard["traj"]) for shard in shards[: self.world.rank])
        return turns, advantages[offset:offset + len(turns)], diagnostics

    def refill(self, iteration: int, batch: RolloutBatch, turns: list[Turn],
               advantages: np.ndarray) -> tuple[list[Turn], np.ndarray, dict[str, float]]:
        """DAPO's dynamic sampling: while fewer than ``groups_per_iteration`` groups have a
        non-zero advantage, draw another collection (at most ``max_sampling_draws`` in all);
        keep the first ``groups_per_iteration`` informative groups. ``batch`` is not changed."""
        wanted = self.config.rollout.groups_per_iteration
        pool, draws = RolloutBatch(), 1
        pool.extend(batch)   # a copy: the first draw's numbering, kept
        while len(_informative_groups(turns, advantages)) < wanted and draws < self.config.algo.max_sampling_draws:
            pool.extend(self.collect(iteration, draw=draws))
            draws += 1
            turns, advantages, _ = self.credit(pool)
        kept = set(_informative_groups(turns, advantages)[:wanted])
        rows = [i for i, t in enumerate(turns) if t.group in kept]
        return [turns[i] for i in rows], advantages[rows], {"sampling_draws": draws, "informative_groups": len(kept)}

    def update(self, turns: list[Turn], advantages: np.ndarray, iteration: int) -> dict[str, float]:
        """Stage 4: ``epochs`` passes of PPO-clip over shuffled minibatches.

        With several processes each optimizer step takes one minibatch from every process
        (``minibatch_size`` is split between them) and sums their gradients."""
        algo, world = self.config.algo, self.world
        keep = [i for i, t in enumerate(turns) if (algo.train_truncated or not t.truncated) and t.completion_ids]
        size = math.ceil(algo.minibatch_size / world.size)
        steps_per_epoch = world.maximum(math.ceil(len(keep) / size))
        if not steps_per_epoch:  # every completion was cut off (and those are not trained on): nothing to learn from
            self.scheduler.step()   # the schedule follows the iterations, learned from or not
            return {}
        rng = np.random.default_rng([self.config.run.seed, iteration, 1 + world.rank])
        # an update's epochs score the same turns: the frozen bottom layers run once (Policy.caching_trunk)
        with self.policy.caching_trunk() if algo.epochs > 1 or algo.kl_coef > 0 else nullcontext():
            if algo.kl_coef > 0 and keep:
                self._stage("update: the reference model's log-probs")
            reference = self._reference_logprobs([turns[i] for i in keep]) if algo.kl_coef > 0 and keep else None
            entropy_coef = self._entropy_coef(iteration)
            sums: dict[str, float] = defaultdict(float)
            steps = 0
            lengths = np.array([len(turns[i].prompt_ids) + len(turns[i].completion_ids) for i in keep])
            # with 'choices' the entropy bonus counts the choices among legal actions only (_choice_tokens)
            choices_only = algo.entropy_tokens == "choices"
            for epoch in range(algo.epochs):
                buckets = _length_buckets(lengths, size, rng)
                for step, chosen in enumerate(buckets + [np.array([], dtype=int)] * (steps_per_epoch - len(buckets))):
                    batch = [turns[keep[i]] for i in chosen]
                    # every process's tokens (or completions) of this step: the loss's denominator
                    token_count = world.sum(_count(batch, algo.loss_aggregation))
                    bonus_count = world.sum(_choice_count(batch, algo.loss_aggregation)) if choices_only else token_count
                    free_text_rows = world.sum(sum(1 for t in batch if t.choice_ids)) if algo.format_coef else 0
                    optimal_rows = world.sum(sum(1 for t in batch if t.optimal_ids)) if algo.minimax_coef else 0
                    self.optimizer.zero_grad(set_to_none=True)
                    if batch:
                        stats = self._minibatch_gradients(batch, advantages[[keep[i] for i in chosen]],
                                                          None if reference is None else reference[chosen], token_count,
                                                          entropy_coef if bonus_count else 0.0,
                                                          bonus_count if choices_only else None,
                                                          measure_gap=epoch == 0 and step == 0,
                                                          free_text_rows=free_text_rows, optimal_rows=optimal_rows)
                        for key, value in stats.items():
                            sums[key] += value
                        steps += 1
                    if self._anchor is not None:   # every process the same term: its share of the sum
                        divergence = self._anchor.kl()
                        (self._anchor_weight / world.size * divergence).backward()
                        if batch:
                            sums[_EQUILIBRIUM_KL] += float(divergence.detach())
                    self._stage(f"update: epoch {epoch + 1}/{algo.epochs}, step {step + 1}/{steps_per_epoch}")
                    world.sum_gradients(self.policy.trainable_parameters())
                    grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.trainable_parameters(), algo.max_grad_norm)
                    self.optimizer.step()
                    if batch:
                        sums["grad_norm"] += float(grad_norm)
        self.scheduler.step()
        totals = world.gather((dict(sums), steps))
        steps = sum(count for _, count in totals)
        total = {key: sum(part.get(key, 0.0) for part, _ in totals) for key in {k for part, _ in totals for k in part}}
        # the entropy: a mean over every token the bonus counts (a step without any adds nothing)
        entropy_tokens = total.pop(_ENTROPY_TOKENS, 0.0)
        gap_tokens, gap = total.pop(_GAP_TOKENS, 0.0), total.pop(_GAP, 0.0)
        mass_rows, mass = total.pop(_MASS_ROWS, 0.0), total.pop(_MASS, 0.0)
        optimal_rows, optimal = total.pop(_OPTIMAL_ROWS, 0.0), total.pop(_OPTIMAL, 0.0)
        equilibrium = total.pop(_EQUILIBRIUM_KL, None)
        means = {key: value / (entropy_tokens if key == "entropy" else steps) for key, value in total.items()
                 if key != "entropy" or entropy_tokens}
        return {**{key: means[key] for key in sorted(means, key=list(_LOSS_KEYS).index)}, "entropy_coef": entropy_coef,
                **({_GAP: gap / gap_tokens} if gap_tokens else {}), **({_MASS: mass / mass_rows} if mass_rows else {}),
                **({_OPTIMAL: optimal / optimal_rows} if optimal_rows else {}),
                **({_EQUILIBRIUM_KL: equilibrium / steps} if equilibrium is not None else {})}

    def _minibatch_gradients(self, batch: list[Turn], advantages: np.ndarray, reference: torch.Tensor | None,
                             token_count: float, entropy_coef: float,
                             bonus_count: float | None = None, measure_gap: bool = False,
                             free_text_rows: float = 0, optimal_rows: float = 0) -> dict[str, float]:
        """Forward and backward on one minibatch, one micro-batch at a time (the gradients
        accumulate; :meth:`_micro_batches`). The loss averages over ``token_count`` tokens (the
        step's tokens on every process), the entropy bonus over ``bonus_count`` choice tokens
        (:func:`_choice_tokens`; ``None``: every token); returns the minibatch's token-mean
        diagnostics, but the entropy as a sum over the tokens the bonus counts, beside their
        number (:data:`_ENTROPY_TOKENS`); with ``measure_gap`` (before any optimizer step of the
        update) also the sampler's log-probs against the policy's (:data:`_GAP`). With
        ``algo.format_coef`` the loss adds ``-format_coef * log(choice mass)`` of each free-text
        answer (:data:`_MASS`), averaged over ``free_text_rows`` (the step's on every process);
        with ``algo.minimax_coef`` ``-minimax_coef * log(probability of a move that keeps the
        game value)`` of each turn that has them (:data:`_OPTIMAL`), averaged over
        ``optimal_rows``."""
        algo = self.config.algo
        own_tokens = sum(len(t.completion_ids) for t in batch)
        stats: dict[str, float] = defaultdict(float)
        for rows in self._micro_batches(batch):
            part = [batch[i] for i in rows]
            free_text = torch.tensor([bool(t.choice_ids) for t in part])
            scored = self.policy.score_completions(
                [t.prompt_ids for t in part], [t.completion_ids for t in part],
                temperature=self.sampling.temperature, allowed_ids=[t.allowed_ids for t in part],
                choice_ids=[t.choice_ids for t in part] if bool(free_text.any()) else None,
                choice_entropy=bonus_count is not None,
                target_ids=[t.optimal_ids for t in part] if optimal_rows else None,
            )
            new, entropy, mask = scored.logprobs, scored.entropy, scored.mask
            old = _pad([t.logprobs for t in part], new.shape[1]).to(new.device)
            ref = None if reference is None else reference[rows, : new.shape[1]].to(new.device)
            part_advantages = torch.tensor(advantages[rows], dtype=torch.float32, device=new.device)
            choices = None if bonus_count is None else mask & (
                torch.arange(mask.shape[1], device=mask.device)[None, :]
                < torch.tensor([_choice_tokens(t) for t in part], device=mask.device)[:, None])
            part_stats = ppo_loss(new, old, ref, entropy, part_advantages, mask, clip=algo.clip,
                                  kl_coef=algo.kl_coef, kl_estimator=algo.kl_estimator, entropy_coef=entropy_coef,
                                  token_count=token_count, clip_high=algo.clip_high, aggregation=algo.loss_aggregation,
                                  entropy_mask=choices, entropy_count=bonus_count)
            loss = part_stats.loss
            if free_text_rows:
                loss = loss - algo.format_coef * scored.choice_log_mass.sum() / free_text_rows
            if scored.target_log_mass is not None:
                loss = loss - algo.minimax_coef * scored.target_log_mass.sum() / optimal_rows
                has_optimal = torch.tensor([bool(t.optimal_ids) for t in part], device=new.device)
                stats[_OPTIMAL] += float(scored.target_log_mass.detach().exp()[has_optimal].sum())
                stats[_OPTIMAL_ROWS] += float(has_optimal.sum())
            loss.backward()
            if bool(free_text.any()):
                stats[_MASS] += float(scored.choice_log_mass.detach().exp()[free_text.to(new.device)].sum())
                stats[_MASS_ROWS] += float(free_text.sum())
            if measure_gap:
                stats[_GAP] += float(((old - new.detach()).abs() * mask).sum())
                stats[_GAP_TOKENS] += float(mask.sum())
            weight = sum(len(t.completion_ids) for t in part) / own_tokens
            for key in _LOSS_KEYS[:-1]:
                if key != "entropy":
                    stats[key] += weight * getattr(part_stats, key)
            bonus_tokens = float((mask if choices is None else choices).sum())
            stats["entropy"] += part_stats.entropy * bonus_tokens
            stats[_ENTROPY_TOKENS] += bonus_tokens
        return stats

    def _micro_batches(self, batch: list[Turn]) -> list[list[int]]:
        """The minibatch's rows by micro-batch: ``micro_batch_size`` turns at a time when set,
        else cut to :attr:`token_budget` tokens (:func:`~mage_agent.memory.micro_batches`; the
        rows in their order when they fit in one). A micro-batch whose activations would not
        fit in the memory available stops the run with a clear error, before it is run."""
        micro = self.config.algo.micro_batch_size
        if micro:
            return [list(range(start, min(start + micro, len(batch)))) for start in range(0, len(batch), micro)]
        inputs = [t.prompt_ids + t.completion_ids[:-1] for t in batch]
        parts = micro_batches(inputs, self.token_budget)
        if len(parts) == 1:
            return [list(range(len(batch)))]
        largest = max(padded_tokens([inputs[i] for i in part]) for part in parts)
        available = available_bytes()
        if available is not None and largest * self.bytes_per_token > 0.9 * available:
            raise MemoryError(
                f"a micro-batch of {largest} tokens needs about {largest * self.bytes_per_token / 2**30:.1f} GiB of "
                f"activations and {available / 2**30:.1f} GiB are available: lower --micro-batch-tokens "
                f"(now {self.token_budget}) or the prompt length; the run stops here, its checkpoints kept")
        return parts

    # ------------------------------------------------------------------ bookkeeping
    def summarise(self, iteration: int, batch: RolloutBatch, stats: dict[str, float],
                  rollout_seconds: float, seconds: float) -> dict[str, Any]:
        """Per-iteration metrics over every process's meta-episodes: returns and success by
        episode index and archetype, invalid-action rate, reflection length, throughput, the loss
        diagnostics."""
        act_turns = [t for t in batch.turns if t.phase == "act"]
        reflect_turns = [t for t in batch.turns if t.phase == "reflect"]
        shards = self.world.gather({
            "returns": batch.episode_returns, "successes": batch.episode_successes, "opponents": batch.opponents,
            "reasons": Counter(t.rejected[0] for t in act_turns if t.rejected is not None), "act_turns": len(act_turns),
            "reflection_tokens": sum(len(t.completion_ids) for t in reflect_turns), "reflections": len(reflect_turns),
            "tokens": batch.generated_tokens,
            "optimal": [int(t.completion_ids[:1][0] in t.optimal_ids) for t in act_turns
                        if t.optimal_ids and t.completion_ids],
        })
        returns = np.array([row for shard in shards for row in shard["returns"]], dtype=float)
        successes = np.array([row for shard in shards for row in shard["successes"]], dtype=float)
        opponents = [o for shard in shards for o in shard["opponents"]]
        metrics: dict[str, Any] = {"iteration": iteration + 1, "lr": self.scheduler.get_last_lr()[0],
                                   "meta_episodes": len(returns)}
        for i in range(returns.shape[1]):
            metrics[f"return_ep{i + 1}"] = float(returns[:, i].mean())
            metrics[f"success_ep{i + 1}"] = float(successes[:, i].mean())
        for opponent in sorted(set(opponents)):
            rows = [k for k, o in enumerate(opponents) if o == opponent]
            metrics[f"final_return/{opponent}"] = float(returns[rows, -1].mean())
        acting = max(sum(s["act_turns"] for s in shards), 1)
        reasons: Counter[str] = sum((s["reasons"] for s in shards), Counter())
        metrics["invalid_rate"] = reasons.total() / acting
        for reason in sorted({*INVALID_REASONS, *reasons}):   # every MAGE reason, 0 included: unbroken curves
            metrics[f"invalid/{reason}"] = reasons[reason] / acting
        reflections = sum(s["reflections"] for s in shards)
        if reflections:   # the model writes its own reflections: their mean length in tokens
            metrics["reflection_tokens"] = sum(s["reflection_tokens"] for s in shards) / reflections
        optimal = [kept for shard in shards for kept in shard["optimal"]]
        if optimal:   # a game the env solves: how often the learner kept the value where it could lose it
            metrics["optimal_moves"] = float(np.mean(optimal))
        metrics["tokens_per_second"] = sum(s["tokens"] for s in shards) / max(rollout_seconds, 1e-9)
        metrics["seconds"] = seconds
        metrics.update(stats)
        return metrics

    def log(self, metrics: dict[str, Any], bar: tqdm) -> None:
        self.history.append(metrics)
        if not self.world.is_main:
            return
        with open(self.output / "metrics.jsonl", "a") as handle:
            handle.write(json.dumps(metrics) + "\n")
        if self._writer is not None:
            for key, value in metrics.items():
                if key != "iteration" and isinstance(value, (int, float)) and math.isfinite(value):
                    self._writer.add_scalar(key, value, metrics["iteration"])
        n = self.config.env.num_episodes
        bar.set_postfix_str(
            f"R1 {metrics['return_ep1']:+.3f} R{n} {metrics[f'return_ep{n}']:+.3f} "
            f"H {metrics.get('entropy', float('nan')):.3f} kl {metrics.get('approx_kl', float('nan')):.4f}"
        )

    def keep_rejected(self, iteration: int, batch: RolloutBatch) -> None:
        """Append the iteration's first invalid answers (reason and text; in rank order, each
        process's first ones) to ``invalid_answers.jsonl``: what the format's failures look like,
        without a probe."""
        kept = [t.rejected for t in batch.turns if t.rejected is not None][:REJECTED_KEPT]
        answers = [answer for shard in self.world.gather(kept) for answer in shard][:REJECTED_KEPT]
        if answers and self.world.is_main:
            with open(self.output / "invalid_answers.jsonl", "a") as handle:
                rows = [{"reason": reason, "text": text} for reason, text in answers]
                handle.write(json.dumps({"iteration": iteration, "answers": rows}) + "\n")

    def _drop_rejected_after(self, iteration: int) -> None:
        """Keep the invalid answers of the iterations up to ``iteration`` (a resumed run's checkpoint)."""
        path = self.output / "invalid_answers.jsonl"
        if path.exists():
            path.write_text("".join(line for line in path.read_text().splitlines(keepends=True)
                                    if _logged_iteration(line) <= iteration))

    def save(self, iteration: int) -> Path:
        return save_checkpoint(
            self.output / "checkpoints", iteration, self.policy.model, self.policy.tokenizer,
            self.optimizer, self.scheduler, self.config.to_dict(),
            {"history": self.history, **({"league": self.league.state_dict()} if self.league is not None else {})},
        )

    def _reference_logprobs(self, turns: list[Turn]) -> torch.Tensor:
        """The reference policy's log-probs of the turns' completions, ``(turns, longest)``,
        scored in the update's micro-batches (:meth:`_micro_batches`: the same memory bound)."""
        scored = torch.zeros(len(turns), max(len(t.completion_ids) for t in turns))
        for rows in self._micro_batches(turns):
            part = [turns[i] for i in rows]
            ref, _, _ = self.policy.completion_logprobs(
                [t.prompt_ids for t in part], [t.completion_ids for t in part],
                temperature=self.sampling.temperature, allowed_ids=[t.allowed_ids for t in part], reference=True,
            )
            scored[rows, : ref.shape[1]] = ref.cpu()
        return scored

    def _lr_factor(self, step: int) -> float:
        algo, total = self.config.algo, max(self.config.run.iterations, 1)
        if step < algo.warmup_iterations:
            return (step + 1) / algo.warmup_iterations
        return decay(algo.schedule, (step - algo.warmup_iterations) / max(total - algo.warmup_iterations, 1))

    def _entropy_coef(self, iteration: int) -> float:
        algo = self.config.algo
        progress = iteration / max(self.config.run.iterations, 1)
        return algo.entropy_coef * decay(algo.entropy_schedule, (progress - algo.entropy_hold) / (1 - algo.entropy_hold))

    def _tensorboard(self):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # tensorboard is optional
            return None
        return SummaryWriter(log_dir=str(self.output / "tensorboard"))


def decay(schedule: str, progress: float) -> float:
    """A coefficient's factor at ``progress`` (0 at the start, 1 at the end) of a schedule.

    Example:
        >>> [round(decay(kind, 0.5), 3) for kind in ("constant", "linear", "cosine")]
        [1.0, 0.5, 0.5]
        >>> decay("cosine", 0.25) > decay("linear", 0.25), decay("linear", 1.5)
        (True, 0.0)
    """
    progress = min(max(progress, 0.0), 1.0)
    if schedule == "linear":
        return 1.0 - progress
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    return 1.0


def _informative_groups(turns: list[Turn], advantages: np.ndarray) -> list[int]:
    """The groups, in order, with at least one non-zero advantage.

    Example:
        >>> from mage_agent.rollout import Turn
        >>> turn = lambda g: Turn(0, g, "a", 0, "act", [], [1], [0.0], 0.0, False, "", None)
        >>> _informative_groups([turn(0), turn(0), turn(1), turn(2)], np.array([0.0, 0.0, 0.5, -1.0]))
        [1, 2]
    """
    return sorted({t.group for t, a in zip(turns, advantages) if abs(a) > 1e-9})


def _length_buckets(lengths: np.ndarray, size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Minibatches of similar lengths (little padding), in random order, ties broken at random.

    Example:
        >>> sorted(sorted(b.tolist()) for b in _length_buckets(np.array([5, 1, 5, 1]), 2, np.random.default_rng(0)))
        [[0, 2], [1, 3]]
    """
    order = np.lexsort((rng.random(len(lengths)), lengths))
    buckets = [order[start:start + size] for start in range(0, len(order), size)]
    return [buckets[i] for i in rng.permutation(len(buckets))]


def _pad(rows: list[list[float]], width: int) -> torch.Tensor:
    out = torch.zeros((len(rows), width))
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row[:width])
    return out
