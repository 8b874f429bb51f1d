"""verifiers (``verifiers.v1``) on MAGE meta-episodes (``pip install "mage-rl[verifiers]"``).

A :class:`MageTaskset` of seeded meta-episodes of one ``mage/*-meta-v0`` id and a
:class:`MageEnv` whose ``run`` plays one of them with the model as the player, the MAGE env
as the user: each answer (actions and reflections alike) steps the env, the next
observation comes back as the user turn, the end of the meta-episode ends the exchange.
Scored on the trace:

- reward ``final_episode_return``: R(tau_N), the return of the last inner episode;
- metrics ``episode_<n>_return`` (R(tau_n)) and ``episode_<n>_differential``
  (R(tau_n) - R(tau_{n-1}), with R(tau_0) = 0: MAGE's differential reward), n = 1..N.

verifiers loads tasksets by the name of a top-level module, so ``vf-eval`` reaches this
one through the ``mage_verifiers`` package::

    vf-eval mage-verifiers --env.taskset.env-id mage/KuhnPoker-meta-v0 \\
        --env.taskset.env-kwargs '{"num_episodes": 2}' -n 4 --model <model> \\
        --client.base-url http://127.0.0.1:8000/v1 --no-push

This module needs verifiers (Python >= 3.11); ``import mage_envs`` does not import it.

Example:
    >>> env = load_environment("mage/KuhnPoker-meta-v0", num_episodes=2, opponent="nash")
    >>> task = next(iter(env.taskset))
    >>> task.data.name, task.data.seed
    ('mage/KuhnPoker-meta-v0#0', 0)
    >>> print(next(line for line in task.data.prompt.splitlines() if line.startswith("[Episode")))
    [Episode 1 of 2]
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import gymnasium as gym

try:
    import verifiers.v1 as vf
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'mage_envs.integrations.verifiers needs verifiers: pip install "mage-rl[verifiers]" (Python >= 3.11)'
    ) from error

import mage_envs  # noqa: F401  (registers the mage/* ids)

#: The taskset id ``vf-eval`` and ``vf.load_environment`` resolve (the ``mage_verifiers`` package).
TASKSET_ID = "mage_verifiers"


def meta_env_ids() -> list[str]:
    """The registered text meta-episode ids: the ids :func:`load_environment` accepts."""
    return [env_id for env_id in gym.registry if env_id.startswith("mage/") and env_id.endswith("-meta-v0")
            and "-tensor-" not in env_id]


class MageTasksetConfig(vf.TasksetConfig):
    """Which meta-episodes the taskset holds (``--env.taskset.*`` on the command line)."""

    env_id: str = "mage/KuhnPoker-meta-v0"
    """A text meta-episode id (``mage/<Game>-meta-v0``)."""
    env_kwargs: dict[str, Any] = {}
    """Keyword arguments of ``gym.make`` (``num_episodes``, ``opponent``, ``prompt_style``...)."""
    first_seed: int = 0
    """Task ``i`` resets the env with seed ``first_seed + i``."""


class MageData(vf.TaskData):
    """One meta-episode: the env, its arguments and its reset seed (``prompt`` is its first observation)."""

    env_id: str
    env_kwargs: dict[str, Any]
    seed: int


class MageTask(vf.Task[MageData, vf.State, vf.TaskConfig]):
    """A seeded meta-episode."""


class MageTaskset(vf.Taskset[MageTask, MageTasksetConfig]):
    """Seeded meta-episodes of one id, endless (``-n`` or ``take(n)`` bounds a run)."""

    INFINITE = True

    def load(self) -> Iterator[MageTask]:
        config = self.config
        if config.env_id not in meta_env_ids():
            raise ValueError(f"{config.env_id!r} is not a text meta-episode id; choose one of {meta_env_ids()}")
        env = gym.make(config.env_id, **config.env_kwargs)
        try:
            for seed in itertools.count(config.first_seed):
                prompt, _ = env.reset(seed=seed)
                data = MageData(name=f"{config.env_id}#{seed}", prompt=prompt, env_id=config.env_id,
                                env_kwargs=config.env_kwargs, seed=seed)
                yield MageTask(data, config.task)
        finally:
            env.close()


class MageEnvConfig(vf.EnvConfig):
    """One seat, ``player``: a tool-less chat loop (the ``null`` harness) run as a local subprocess."""

    player: vf.AgentConfig = vf.AgentConfig(harness=vf.HarnessConfig(id="null"), runtime=vf.SubprocessConfig())


class MageEnv(vf.Env[MageEnvConfig]):
    """Plays one meta-episode per task; the MAGE env is the user (see the module docstring)."""

    async def run(self, task: MageTask, agents: vf.Agents) -> None:
        data = task.data
        env = gym.make(data.env_id, **data.env_kwargs)
        try:
            observation, info = env.reset(seed=data.seed)
            if observation != data.prompt:
                raise ValueError(f"task {data.name}: the env's first observation is not the task's prompt")
            forfeited, done = 0, False
            # The first observation is the task's prompt, so the model speaks first (a bare turn()).
            async with agents.player.interaction(task) as interaction:
                segment = await interaction.turn()
                while not segment.terminated:
                    observation, _, terminated, truncated, info = env.step(segment.last_reply)
                    done = terminated or truncated
                    if done:
                        break
                    segment = await interaction.turn(observation)
                # A run cut short (a turn or token limit) is played out with empty answers, so the
                # env's invalid-action policy scores it: not answering must not pay better than losing.
                while not done:
                    _, _, terminated, truncated, info = env.step("")
                    forfeited += 1
                    done = terminated or truncated
                # Scored before the exchange closes, so the rollout's own log line reports the reward.
                record_scores(interaction.trace, info, forfeited)
        finally:
            env.close()


def record_scores(trace: Any, info: dict[str, Any], forfeited: int) -> None:
    """Record a finished meta-episode's reward, metrics and outcomes (see the module docstring) on ``trace``."""
    returns = [float(value) for value in info["episode_returns"]]
    trace.record_reward("final_episode_return", returns[-1])
    for n, (value, previous) in enumerate(zip(returns, [0.0, *returns]), start=1):
        trace.record_metric(f"episode_{n}_return", value)
        trace.record_metric(f"episode_{n}_differential", value - previous)
    trace.info["episode_outcomes"] = list(info["episode_outcomes"])
    trace.info["forfeited_turns"] = forfeited


def load_environment(env_id: str = "mage/KuhnPoker-meta-v0", first_seed: int = 0, **env_kwargs: Any) -> MageEnv:
    """The verifiers env for ``env_id``: its taskset holds the meta-episodes of seeds ``first_seed``, ``first_seed + 1``...

    ``env_kwargs`` go to ``gym.make`` (``num_episodes``, ``opponent``, ``prompt_style``...).
    """
    taskset = MageTasksetConfig(id=TASKSET_ID, env_id=env_id, env_kwargs=env_kwargs, first_seed=first_seed)
    return MageEnv(MageEnvConfig(taskset=taskset))
