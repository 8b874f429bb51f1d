"""``MetaEpisodeWrapper``: N episodes against one opponent, with reflection and meta-rewards.

A meta-episode is ``num_episodes`` inner episodes of a contract env against the same
opponent. Between episodes (when ``reflection=True``) the agent is asked to reflect
(``info["phase"] == "reflect"``); its answer goes into a :class:`ReflectionMemory` shown
at the top of every later prompt. Rewards are paid at the end of each inner episode:

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

from typing import Any, Literal

import gymnasium as gym

from .contract import sanitize_text, text_space
from .memory import ReflectionMemory

RewardMode = Literal["differential", "final", "cumulative"]

REFLECT_PROMPT = (
    "Episode {n} of {total} is over. {result}\n"
    "Before the next episode against the same opponent, reflect: what did the opponent do, "
    "what worked, what will you do differently? Answer inside <reflection>...</reflection> "
    "in a few sentences."
)


class MetaEpisodeWrapper(gym.Wrapper[str, str, str, str], gym.utils.RecordConstructorArgs):
    """Turn a contract text env into a meta-episode of ``num_episodes`` episodes.

    Args:
        env: any env following the text contract (docs/text_contract.md).
        num_episodes: inner episodes per meta-episode (>= 1).
        reward_mode: ``"differential"`` (MAGE), ``"final"`` or ``"cumulative"``.
        reflection: ask for a reflection after every episode but the last.
        memory_budget: characters the memory block may take in a prompt.
        repeat_instance: replay the same deal / start position in every episode
            (``options["instance"]``); ``False`` deals afresh against the same opponent.
        include_summaries: put a one-line result of each earlier episode in the memory.
    """

    def __init__(
        self,
        env: gym.Env[str, str],
        num_episodes: int = 3,
        reward_mode: RewardMode = "differential",
        reflection: bool = True,
        memory_budget: int = 1500,
        repeat_instance: bool = True,
        include_summaries: bool = True,
    ) -> None:
        if not isinstance(num_episodes, int) or num_episodes < 1:
            raise ValueError(f"num_episodes must be a positive integer, got {num_episodes!r}")
        if reward_mode not in ("differential", "final", "cumulative"):
            raise ValueError(
                f"reward_mode must be 'differential', 'final' or 'cumulative', got {reward_mode!r}"
            )
        if not isinstance(env.observation_space, gym.spaces.Text):
            raise TypeError(
                f"MetaEpisodeWrapper needs a text env (observation space Text), got {env.observation_space}"
            )
        gym.utils.RecordConstructorArgs.__init__(
            self,
            num_episodes=num_episodes,
            reward_mode=reward_mode,
            reflection=reflection,
            memory_budget=memory_budget,
            repeat_instance=repeat_instance,
            include_summaries=include_summaries,
        )
        gym.Wrapper.__init__(self, env)
        self.num_episodes = num_episodes
        self.reward_mode = reward_mode
        self.reflection = reflection
        self.repeat_instance = repeat_instance
        self.memory = ReflectionMemory(budget=memory_budget, include_summaries=include_summaries)
        self._inner_max = env.observation_space.max_length
        act_room = self._inner_max + 40
        reflect_room = self._inner_max // 2 + 2 + len(REFLECT_PROMPT) + 120
        self.observation_space = text_space(memory_budget + 2 + max(act_room, reflect_room))
        self._phase = "act"

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start a meta-episode; ``options`` are passed to the first inner reset."""
        self.memory.clear()
        self._returns: list[float] = []
        self._successes: list[bool] = []
        self._outcomes: list[str | None] = []
        self._episode_index = 0
        self._current_return = 0.0
        self._phase = "act"
        obs, info = self.env.reset(seed=seed, options=options)
        self._opponent = info.get("opponent")
        self._instance = info.get("instance")
        self._replay_seed = seed
        self._last_inner_obs = obs
        return self._act_observation(obs), self._info(info)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._phase == "reflect":
            return self._step_reflect(action)
        if self._phase == "done":
            raise RuntimeError("the meta-episode is over; call reset() to start a new one")
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._current_return += float(reward)
        self._last_inner_obs = obs
        if not (terminated or truncated):
            return self._act_observation(obs), 0.0, False, False, self._info(info)
        return self._end_inner_episode(obs, terminated, truncated, info)

    # ------------------------------------------------------------------ internals
    def _end_inner_episode(self, obs: str, terminated: bool, truncated: bool, info: dict[str, Any]) -> tuple:
        episode_return = self._current_return
        self._returns.append(episode_return)
        self._successes.append(bool(info.get("success", False)))
        self._outcomes.append(info.get("outcome"))
        self.memory.add_episode(f"Result: {self._result_line(episode_return, info)}")
        reward = self._meta_reward()
        last = len(self._returns) == self.num_episodes
        if last:
            self._phase = "done"
            out_info = self._info(info)
            return self._act_observation(obs), reward, terminated, truncated and not terminated, out_info
        if self.reflection:
            self._phase = "reflect"
            prompt = REFLECT_PROMPT.format(
                n=len(self._returns), total=self.num_episodes, result=self._result_line(episode_return, info)
            )
            body = sanitize_text(obs)[-(self._inner_max // 2):]
            out = self._with_memory(f"{body}\n\n{prompt}")
            return out, reward, False, False, self._info(info)
        next_obs, next_info = self._next_inner_episode()
        next_info["finished_episode_info"] = info
        return next_obs, reward, False, False, next_info

    def _step_reflect(self, action: str) -> tuple:
        self.memory.add_reflection(action if isinstance(action, str) else "")
        obs, info = self._next_inner_episode()
        return obs, 0.0, False, False, info

    def _next_inner_episode(self) -> tuple[str, dict[str, Any]]:
        self._episode_index += 1
        self._current_return = 0.0
        self._phase = "act"
        options: dict[str, Any] = {}
        if self._opponent is not None:
            options["opponent"] = self._opponent
        seed = None
        if self.repeat_instance:
            if self._instance is not None:
                options["instance"] = self._instance
            else:  # an env without instances: replay by re-seeding (only if it was seeded)
                seed = self._replay_seed
        obs, info = self.env.reset(seed=seed, options=options)
        return self._act_observation(obs), self._info(info)

    def _meta_reward(self) -> float:
        current = self._returns[-1]
        if self.reward_mode == "cumulative":
            return current
        if self.reward_mode == "final":
            return current if len(self._returns) == self.num_episodes else 0.0
        previous = self._returns[-2] if len(self._returns) > 1 else 0.0
        return current - previous

    @staticmethod
    def _result_line(episode_return: float, info: dict[str, Any]) -> str:
        outcome = info.get("outcome")
        prefix = f"{outcome}, " if outcome else ""
        return f"{prefix}return {episode_return:+g}."

    def _with_memory(self, text: str) -> str:
        memory = self.memory.render()
        return f"{memory}\n\n{text}" if memory else text

    def _act_observation(self, obs: str) -> str:
        header = f"[Episode {min(self._episode_index, self.num_episodes - 1) + 1} of {self.num_episodes}]"
        return self._with_memory(f"{header}\n{sanitize_text(obs)}")

    def _info(self, inner: dict[str, Any]) -> dict[str, Any]:
        info = dict(inner)
        info.update(
            phase="reflect" if self._phase == "reflect" else "act",
            episode_index=self._episode_index,
            num_episodes=self.num_episodes,
            episode_returns=list(self._returns),
            episode_successes=list(self._successes),
            episode_outcomes=list(self._outcomes),
            opponent=self._opponent if self._opponent is not None else inner.get("opponent"),
        )
        if self._phase == "reflect":
            info["legal_actions"] = []
        info["meta_done"] = self._phase == "done"
        return info
