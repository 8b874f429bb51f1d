"""``TensorMetaWrapper``: N episodes against one opponent, with a fixed-size memory tensor.

The numeric counterpart of :class:`~mage_envs.MetaEpisodeWrapper` (no reflection): the
opponent is drawn once per meta-episode, and each observation is

``[slot 1, ..., slot N-1 | episode index one-hot (N) | current tensor]``

where slot k (zeros until episode k has been played) encodes what episode k revealed:
the agent's tensor at its end (in poker: its card and every action of both players), the
opponent's card one-hot if it was shown down, and the episode's return divided by
``max |payoff| x reward_scale`` (clipped to [-1, 1]). A recurrent or feed-forward policy
can therefore learn across the meta-episode (an RL^2 baseline). Rewards are paid at the
end of each inner episode by the same bookkeeping as ``MetaEpisodeWrapper``
(:class:`~mage_envs.core.meta_tracker.MetaEpisodeTracker`), with the same ``info`` keys.

Example:
    >>> import gymnasium as gym, mage_envs
    >>> env = gym.make("mage/KuhnPoker-tensor-meta-v0", num_episodes=2, opponent="aggressive", seat=0)
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, info["episode_index"]    # one slot of 11 + 3 + 1, index one-hot 2, tensor 11
    ((28,), 0)
"""

from __future__ import annotations

from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from ..core.meta_tracker import MetaEpisodeTracker, MetaOptions, Phase, chosen_instances, replay_reset
from ..registration import load_entry_point
from .env import OpenSpielTensorEnv

#: The :class:`~mage_envs.core.meta_tracker.MetaOptions` fields a tensor meta-episode takes.
TENSOR_OPTIONS = ("num_episodes", "reward_mode", "repeat_instance")


class TensorMetaWrapper(gym.Wrapper[np.ndarray, int, np.ndarray, int], gym.utils.RecordConstructorArgs):
    """Turn an :class:`~mage_envs.numeric.OpenSpielTensorEnv` into a meta-episode.

    Args:
        env: a tensor env (possibly wrapped).
        **options: the fields of :class:`~mage_envs.core.meta_tracker.MetaOptions` a tensor
            meta-episode uses, :data:`TENSOR_OPTIONS` (``num_episodes``, ``reward_mode``,
            ``repeat_instance``: the same deal and seat in every episode); it has no
            reflection or memory.
    """

    def __init__(self, env: gym.Env, **options: Any) -> None:
        meta = MetaOptions.of("TensorMetaWrapper", options, TENSOR_OPTIONS)
        tracker = MetaEpisodeTracker(meta.num_episodes, meta.reward_mode)
        if not isinstance(env.unwrapped, OpenSpielTensorEnv):
            raise TypeError(f"TensorMetaWrapper needs a tensor env, got {type(env.unwrapped).__name__}")
        gym.utils.RecordConstructorArgs.__init__(self, **meta.as_kwargs(TENSOR_OPTIONS))
        gym.Wrapper.__init__(self, env)
        self.options = meta
        self.tracker = tracker
        num_episodes = self.num_episodes = meta.num_episodes
        self.reward_mode = meta.reward_mode
        self.repeat_instance = meta.repeat_instance
        base: OpenSpielTensorEnv = env.unwrapped
        tensor = base.observation_space.shape[0]
        self.slot_size = tensor + base.revealed_size + 1
        game = base.game
        self._return_unit = max(abs(game.min_utility()), abs(game.max_utility())) * base.reward_scale
        low = np.zeros(self.slot_size, np.float32)
        low[-1] = -1.0
        slots_low = np.tile(low, num_episodes - 1)
        size = slots_low.size + num_episodes + tensor
        self.observation_space = spaces.Box(
            np.concatenate([slots_low, np.zeros(num_episodes + tensor, np.float32)]),
            np.ones(size, np.float32),
            dtype=np.float32,
        )
        self._phase: Phase = "act"
        self._instances: list[int] | None = None

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a meta-episode; ``options`` are passed to the first inner reset, except
        ``instances`` (fresh deals: the instance of every episode in turn)."""
        self.tracker.start()
        self._slots = np.zeros((self.num_episodes - 1, self.slot_size), np.float32)
        self._phase = "act"
        first, self._instances = chosen_instances(options, self.repeat_instance, self.num_episodes)
        obs, info = self.env.reset(seed=seed, options=first)
        self._opponent = info["opponent"]
        self._instance = info["instance"]
        return self._encode(obs), self._info(info)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._phase == "done":
            raise RuntimeError("the meta-episode is over; call reset() to start a new one")
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.tracker.add_reward(float(reward))
        if not (terminated or truncated):
            return self._encode(obs), 0.0, False, False, self._info(info)
        reward = self.tracker.end_episode(info)
        if self.tracker.finished:
            self._phase = "done"
            return self._encode(obs), reward, terminated, truncated and not terminated, self._info(info)
        self._remember()
        next_obs, next_info = self._next_inner_episode()
        next_info["finished_episode_info"] = info
        return next_obs, reward, False, False, next_info

    def action_masks(self) -> np.ndarray:
        """The inner env's legal actions (``bool``), for sb3-contrib's maskable algorithms."""
        return cast(OpenSpielTensorEnv, self.env.unwrapped).action_masks()

    # ------------------------------------------------------------------ internals
    def _remember(self) -> None:
        """Fill the slot of the episode that just ended."""
        returns = self.tracker.returns
        slot = self._slots[len(returns) - 1]
        slot[:-1] = cast(OpenSpielTensorEnv, self.env.unwrapped).episode_summary()
        slot[-1] = np.clip(returns[-1] / self._return_unit, -1.0, 1.0)

    def _next_inner_episode(self) -> tuple[np.ndarray, dict[str, Any]]:
        self.tracker.next_episode()
        _, options = replay_reset(self.repeat_instance, self._instance, None)
        if self._instances is not None:
            options = {"instance": self._instances[self.tracker.episode_index]}
        obs, info = self.env.reset(options={"opponent": self._opponent, **options})
        return self._encode(obs), self._info(info)

    def _encode(self, obs: np.ndarray) -> np.ndarray:
        index = np.zeros(self.num_episodes, np.float32)
        index[self.tracker.episode_index] = 1.0
        return np.concatenate([self._slots.ravel(), index, obs])

    def _info(self, inner: dict[str, Any]) -> dict[str, Any]:
        return self.tracker.info(inner, self._phase, opponent=self._opponent)


def make_tensor_meta_env(base: str, **kwargs: Any) -> TensorMetaWrapper:
    """Build the tensor env ``base`` (an entry point) with its options, wrapped with the
    meta options (``num_episodes``, ``reward_mode``, ``repeat_instance``)."""
    meta = {name: kwargs.pop(name) for name in TENSOR_OPTIONS if name in kwargs}
    return TensorMetaWrapper(load_entry_point(base)(**kwargs), **meta)
