"""Two learners in self-play through PettingZoo's API: both seats trained, each its own policy.

Every iteration plays ``groups_per_iteration`` groups of ``group_size`` meta-episodes of
:class:`~mage_envs.pettingzoo.MetaEpisodeAEC` (Kuhn or Leduc Poker, ``num_episodes`` hands,
the deal repeated, learner ``player_i`` always in seat ``i``) in lockstep: at each round
every env waiting on a learner gets its answer from that learner's batched sampler (one
action token among the legal names), the other seat passes. Each learner then runs the MAGE
stages on its own turns, as a one-learner run does: discounted per-turn returns, advantages
centred on the copies of its group, PPO-clip updates (a :class:`~mage_agent.trainer.Trainer`
per learner holds the policy, optimizer and schedules and is used for those stages only).
A meta-reward paid at a step the other learner made (its fold ends the hand) goes to the
learner's last turn. The first hand's equilibrium anchor stays off unless ``equilibrium_coef``
is set: self-play is measured finding its own way toward Nash.

Every ``exploitability_every`` iterations (and after the first and last) the first hand of
both learners is tabulated with the prompts the AEC env shows at each information state
(:func:`~mage_envs.pettingzoo.tabulate.aec_table_prompts`): learner 0's policy in seat 0's
states and learner 1's in seat 1's, one joint profile whose exact NashConv and
exploitability OpenSpiel computes. Metrics go to ``<output_dir>/metrics.jsonl``.

Example (two iterations of two untrained embedded models):
    >>> import tempfile
    >>> from mage_agent.config import TrainConfig, apply_overrides
    >>> config = apply_overrides(TrainConfig(), {"iterations": 2, "groups_per_iteration": 2, "group_size": 2,
    ...     "output_dir": tempfile.mkdtemp(), "tensorboard": False, "exploitability_every": 0})
    >>> history = TwoLearners(config).train()
    >>> len(history), sorted(history[-1]["final_return"]), round(sum(history[-1]["final_return"].values()), 9)
    (2, ['player_0', 'player_1'], 0.0)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from mage_envs.oracle.learner import policy_report, tabulate
from mage_envs.pettingzoo import MetaEpisodeAEC, kuhn_poker_v0, leduc_poker_v0
from mage_envs.pettingzoo.tabulate import aec_table_prompts
from mage_envs.pettingzoo.text_game import AGENTS
from mage_envs.registration import game_of

from .agents import action_token_ids
from .build import sampling_of
from .config import TrainConfig, apply_overrides
from .exploitability import SCORE_BATCH, policy_scorer
from .rollout import RolloutBatch, Turn, anchor_of, rejection
from .sampling import Sampling, TorchSampler
from .trainer import Trainer

#: The PettingZoo module of each game two learners can play.
GAMES = {"kuhn_poker": kuhn_poker_v0, "leduc_poker": leduc_poker_v0}


def make_env(config: TrainConfig) -> MetaEpisodeAEC:
    """The two-learner meta-episode env of ``config``'s game and prompt style (no reflections, no seat swap)."""
    game = game_of(config.env.env_id)
    if game not in GAMES:
        raise ValueError(f"two learners play Kuhn or Leduc Poker, not {config.env.env_id!r}")
    if config.env.reflection or not config.rollout.action_tokens:
        raise ValueError("two learners answer with action tokens and write no reflections (reflection: false, "
                         "action_tokens: true)")
    return MetaEpisodeAEC(GAMES[game].raw_env(prompt_style=config.env.prompt_style), num_episodes=config.env.num_episodes,
                          reward_mode=config.env.reward_mode, reflection=False,
                          include_summaries=config.env.memory, repeat_instance=config.env.repeat_instance)


class TwoLearnerRunner:
    """``num_envs`` two-learner meta-episode envs, stepped in lockstep."""

    def __init__(self, config: TrainConfig, num_envs: int) -> None:
        self.envs = [make_env(config) for _ in range(num_envs)]

    def collect(self, samplers: dict[str, TorchSampler], seeds: list[int], group_size: int, sampling: Sampling,
                seed: int) -> dict[str, RolloutBatch]:
        """One meta-episode per env, group ``g``'s copies reset with ``seeds[g]``; each
        learner's turns and per-meta-episode returns."""
        count = len(seeds) * group_size
        if count != len(self.envs):
            raise ValueError(f"{len(seeds)} groups x {group_size} copies != {len(self.envs)} envs")
        other = dict(zip(AGENTS, reversed(AGENTS)))
        batches = {agent: RolloutBatch(episode_returns=[[] for _ in range(count)],
                                       episode_successes=[[] for _ in range(count)], opponents=[other[agent]] * count)
                   for agent in AGENTS}
        last: dict[tuple[str, int], Turn] = {}
        for i, env in enumerate(self.envs):
            env.reset(seed=seeds[i // group_size])
        active, round_index = list(range(count)), 0
        while active:
            waiting: dict[str, list[int]] = {agent: [] for agent in AGENTS}
            still = []
            for i in active:
                if self._advance(i, batches, last):
                    waiting[self.envs[i].agent_selection].append(i)
                    still.append(i)
            active = still
            for index, (agent, rows) in enumerate(waiting.items()):
                if rows:
                    self._answer(agent, rows, samplers[agent], sampling, seed * 1_000_003 + 2 * round_index + index,
                                 group_size, batches, last)
            round_index += 1
        return batches

    def _advance(self, i: int, batches: dict[str, RolloutBatch], last: dict[tuple[str, int], Turn]) -> bool:
        """Step env ``i``'s passing seats until a learner must answer (``True``) or the
        meta-episode is over (``False``: its returns recorded)."""
        env = self.envs[i]
        while True:
            agent = env.agent_selection
            if all(env.terminations.values()) or all(env.truncations.values()):
                for learner in AGENTS:
                    batches[learner].episode_returns[i] = list(env.infos[learner]["episode_returns"])
                    batches[learner].episode_successes[i] = list(env.infos[learner]["episode_successes"])
                return False
            if env.infos[agent]["legal_actions"]:
                return True
            env.step("")
            _pay(env, i, last)

    def _answer(self, agent: str, rows: list[int], sampler: TorchSampler, sampling: Sampling, seed: int,
                group_size: int, batches: dict[str, RolloutBatch], last: dict[tuple[str, int], Turn]) -> None:
        """``agent``'s answers in envs ``rows`` (one batched call), stepped and recorded."""
        infos = [self.envs[i].infos[agent] for i in rows]
        prompts = [self.envs[i].observe(agent)["prompt"] for i in rows]
        allowed = [action_token_ids(sampler.policy, info) for info in infos]
        generations = sampler.generate(prompts, sampling, allowed_ids=allowed, seed=seed)
        batch = batches[agent]
        for i, info, prompt, generation in zip(rows, infos, prompts, generations):
            env = self.envs[i]
            env.step(generation.text)
            turn = Turn(traj=i, group=i // group_size, opponent=batch.opponents[i], episode=int(info["episode_index"]),
                        phase="act", prompt_ids=generation.prompt_ids, completion_ids=generation.completion_ids,
                        logprobs=generation.logprobs, reward=0.0,
                        truncated=generation.truncated, anchor=anchor_of(prompt), allowed_ids=generation.allowed_ids,
                        rejected=rejection(env.infos[agent]["invalid_action"], generation.text))
            batch.turns.append(turn)
            batch.generated_tokens += len(generation.completion_ids)
            last[agent, i] = turn
            _pay(env, i, last)


def _pay(env: MetaEpisodeAEC, i: int, last: dict[tuple[str, int], Turn]) -> None:
    """Add the rewards of env ``i``'s last step to each learner's latest turn there."""
    for agent, reward in env.rewards.items():
        if reward:
            last[agent, i].reward += float(reward)


class TwoLearners:
    """Self-play of two learners (``player_0`` and ``player_1``, initialised with seeds
    ``seed`` and ``seed + 1``) on ``config``'s game; :meth:`train` runs it."""

    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        self.output = Path(config.run.output_dir)
        self.output.mkdir(parents=True, exist_ok=True)
        self.trainers = {agent: Trainer(apply_overrides(config, {
            "seed": config.run.seed + k, "output_dir": str(self.output / agent), "exploitability_every": 0,
            "league": False, "checkpoint_every": 0, "equilibrium_coef": config.algo.equilibrium_coef or 0.0}),
            progress=False, overwrite=True) for k, agent in enumerate(AGENTS)}
        self.samplers = {agent: TorchSampler(trainer.policy) for agent, trainer in self.trainers.items()}
        self.sampling = sampling_of(config)
        rollout = config.rollout
        self.runner = TwoLearnerRunner(config, rollout.groups_per_iteration * rollout.group_size)
        every = config.run.exploitability_every
        self._prompts = aec_table_prompts(lambda: make_env(config)) if every else None
        self.history: list[dict[str, Any]] = []

    def exploitability(self) -> dict[str, Any]:
        """The joint first-hand profile's ``nash_conv`` and ``exploitability``, and each
        seat's value against its best response."""
        assert self._prompts is not None
        table: dict[str, dict[int, float]] = {}
        for seat, (agent, trainer) in enumerate(self.trainers.items()):
            scorer = policy_scorer(trainer.policy, self.config.rollout.temperature, SCORE_BATCH)
            table.update(tabulate([p for p in self._prompts if p.seat == seat], scorer))
        report = policy_report(str(game_of(self.config.env.env_id)), table)
        return {key: report[key] for key in ("nash_conv", "exploitability", "value_vs_best_response")}

    def train(self) -> list[dict[str, Any]]:
        """Run every iteration; return (and write to ``metrics.jsonl``) the metrics."""
        rollout, run = self.config.rollout, self.config.run
        (self.output / "metrics.jsonl").unlink(missing_ok=True)
        for iteration in range(run.iterations):
            base = (run.seed * 100_003 + iteration) * rollout.groups_per_iteration
            seeds = [base + g for g in range(rollout.groups_per_iteration)]
            batches = self.runner.collect(self.samplers, seeds, rollout.group_size, self.sampling, base)
            metrics: dict[str, Any] = {"iteration": iteration + 1, "final_return": {}, "policy_loss": {}}
            for agent, trainer in self.trainers.items():
                turns, advantages, _ = trainer.credit(batches[agent])
                stats = trainer.update(turns, advantages, iteration)
                metrics["final_return"][agent] = float(np.mean([r[-1] for r in batches[agent].episode_returns]))
                metrics["policy_loss"][agent] = stats.get("policy_loss")
            metrics["return_by_hand"] = np.mean(batches[AGENTS[0]].episode_returns, axis=0).tolist()
            done = iteration + 1
            if self._prompts is not None and (done == 1 or done % run.exploitability_every == 0
                                              or done == run.iterations):
                metrics.update(self.exploitability())
            self.history.append(metrics)
            with (self.output / "metrics.jsonl").open("a") as f:
                f.write(json.dumps(metrics) + "\n")
        return self.history
