"""``MetaEpisodeWrapper``: N episodes against one opponent, with reflection and meta-rewards.

A meta-episode is ``num_episodes`` inner episodes of a contract env against the same
opponent. Between episodes (when ``reflection=True``) the agent is asked to reflect
(``info["phase"] == "reflect"``); its answer goes into a :class:`ReflectionMemory` shown
above every later prompt (below the inner env's ``prompt_preamble``, its fixed rules, when
it has one). Rewards are paid at the end of each inner episode:

* ``"differential"``: R(tau_n) - R(tau_{n-1}), with R(tau_0) = 0 — they sum to R(tau_N);
* ``"final"``: R(tau_N) at the end of the last episode, 0 before;
* ``"cumulative"``: R(tau_n) at the end of every episode.

``info`` always carries ``episode_returns``, ``episode_successes`` and
``episode_outcomes`` (the finished inner episodes), ``episode_index``, ``num_episodes``,
``phase`` and ``opponent``, so any trainer can recompute any scheme.

Example:
    >>> import gymnasium as gym, mage_envs
    >>> env = gym.make("mage/KuhnPoker-meta-v0", num_episodes=2, opponent="aggressive")
    >>> obs, info = env.reset(seed=0)
    >>> info["phase"], info["episode_index"]
    ('act', 0)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from .contract import text_space
from .meta_tracker import MetaEpisodeTracker, MetaOptions, Phase, chosen_instances, replay_reset


class MetaEpisodeWrapper(gym.Wrapper[str, str, str, str], gym.utils.RecordConstructorArgs):
    """Turn a contract text env into a meta-episode of ``num_episodes`` episodes.

    The bookkeeping (returns, memory, reward modes, prompts) is a
    :class:`~mage_envs.core.meta_tracker.MetaEpisodeTracker`, ``self.tracker``.

    Args:
        env: any env following the text contract (docs/text_contract.md; check it with
            :func:`~mage_envs.check_text_env`).
        **options: the fields of :class:`~mage_envs.core.meta_tracker.MetaOptions`
            (``num_episodes``, ``reward_mode``, ``reflection``, ``memory_budget``,
            ``repeat_instance``, ``include_summaries``), kept in ``self.options``.
    """

    def __init__(self, env: gym.Env[str, str], **options: Any) -> None:
        meta = MetaOptions.of("MetaEpisodeWrapper", options)
        tracker = meta.tracker()
        if not isinstance(env.observation_space, gym.spaces.Text):
            raise TypeError(
                f"MetaEpisodeWrapper needs a text env (observation space Text), got {env.observation_space}"
            )
        gym.utils.RecordConstructorArgs.__init__(self, **meta.as_kwargs())
        gym.Wrapper.__init__(self, env)
        self.options = meta
        self.tracker = tracker
        self.num_episodes = meta.num_episodes
        self.reward_mode = meta.reward_mode
        self.reflection = meta.reflection
        self.repeat_instance = meta.repeat_instance
        self.memory = tracker.memory
        self._inner_max = env.observation_space.max_length
        self._preamble: str = getattr(env.unwrapped, "prompt_preamble", "")
        self.observation_space = text_space(MetaEpisodeTracker.prompt_length(self._inner_max, meta.memory_budget))
        self._phase: Phase = "act"
        self._instances: list[int] | None = None

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start a meta-episode; ``options`` are passed to the first inner reset, except
        ``instances``: with fresh deals (``repeat_instance=False``), the instance of every
        episode in turn (one per episode), e.g. to stratify an evaluation over each hand.

        Example:
            >>> import gymnasium as gym, mage_envs
            >>> env = gym.make("mage/KuhnPoker-meta-v0", num_episodes=2, repeat_instance=False, reflection=False)
            >>> obs, info = env.reset(seed=0, options={"instances": [4, 7]})
            >>> info["instance"]
            4
            >>> while info["episode_index"] == 0:
            ...     obs, reward, terminated, truncated, info = env.step(info["legal_actions"][0])
            >>> info["instance"]
            7
        """
        self.tracker.start()
        self._phase = "act"
        first, self._instances = chosen_instances(options, self.repeat_instance, self.num_episodes)
        obs, info = self.env.reset(seed=seed, options=first)
        self._opponent = info.get("opponent")
        self._instance = info.get("instance")
        self._replay_seed = seed
        return self.tracker.act_prompt(obs, self._preamble), self._info(info)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._phase == "reflect":
            return self._step_reflect(action)
        if self._phase == "done":
            raise RuntimeError("the meta-episode is over; call reset() to start a new one")
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.tracker.add_reward(float(reward))
        if not (terminated or truncated):
            return self.tracker.act_prompt(obs, self._preamble), 0.0, False, False, self._info(info)
        return self._end_inner_episode(obs, terminated, truncated, info)

    # ------------------------------------------------------------------ internals
    def _end_inner_episode(self, obs: str, terminated: bool, truncated: bool, info: dict[str, Any]) -> tuple:
        reward = self.tracker.end_episode(info)
        if self.tracker.finished:
            self._phase = "done"
            out_info = self._info(info)
            return self.tracker.act_prompt(obs, self._preamble), reward, terminated, truncated and not terminated, out_info
        if self.reflection:
            self._phase = "reflect"
            out = self.tracker.reflect_prompt(obs, info, self._inner_max)
            return out, reward, False, False, self._info(info)
        next_obs, next_info = self._next_inner_episode()
        next_info["finished_episode_info"] = info
        return next_obs, reward, False, False, next_info

    def _step_reflect(self, action: str) -> tuple:
        self.tracker.add_reflection(action)
        obs, info = self._next_inner_episode()
        return obs, 0.0, False, False, info

    def _next_inner_episode(self) -> tuple[str, dict[str, Any]]:
        self.tracker.next_episode()
        self._phase = "act"
        seed, options = replay_reset(self.repeat_instance, self._instance, self._replay_seed)
        if self._instances is not None:
            options = {"instance": self._instances[self.tracker.episode_index]}
        if self._opponent is not None:
            options = {"opponent": self._opponent, "same_opponent": True, **options}
        obs, info = self.env.reset(seed=seed, options=options)
        return self.tracker.act_prompt(obs, self._preamble), self._info(info)

    def _info(self, inner: dict[str, Any]) -> dict[str, Any]:
        opponent = self._opponent if self._opponent is not None else inner.get("opponent")
        return self.tracker.info(inner, self._phase, opponent=opponent)
