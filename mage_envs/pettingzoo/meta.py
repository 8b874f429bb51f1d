"""``MetaEpisodeAEC``: N games between the same two learners, with reflection for both.

The multi-agent counterpart of :class:`~mage_envs.MetaEpisodeWrapper`, built on the same
:class:`~mage_envs.core.meta_tracker.MetaEpisodeTracker`, one per learner: each learner
has its own memory, its own episode returns and its own meta-rewards, paid at the end of
every inner game (``"differential"``: R(n) - R(n-1), summing to the last game's return;
``"final"``; ``"cumulative"``).

Phases (``info["phase"]``): ``"act"`` during a game (prompts carry ``[Episode n of N]``
and the learner's memory); ``"reflect"`` after every game but the last when
``reflection=True``: one cycle in which both learners, in turn, answer a request for a
reflection (no legal moves). Every phase change falls on a cycle boundary, so the env
stays parallelizable.

``repeat_instance`` replays the same deal in every game; ``swap_seats`` makes the
learners change seats after every game (learner ``player_i`` plays seat ``(i + n) % 2``
in game ``n``; ``info["seat"]`` says which), so a repeated deal is played from both sides.

Example:
    >>> from mage_envs.pettingzoo import MetaEpisodeAEC, kuhn_poker_v0
    >>> env = MetaEpisodeAEC(kuhn_poker_v0.raw_env(), num_episodes=2)
    >>> env.reset(seed=0)
    >>> prompt = env.observe("player_0")["prompt"]     # the rules, then the episode
    >>> print(prompt.splitlines()[0]); print(prompt[prompt.index("[Episode"):].splitlines()[0])
    You are playing Kuhn Poker, a two-player card game.
    [Episode 1 of 2]
    >>> for answer in ("bet", "", "", "call"):       # player_0 bets, player_1 calls
    ...     env.step(answer)
    >>> env.infos["player_0"]["phase"], [env.infos[a]["episode_returns"] for a in env.agents]
    ('reflect', [[2.0], [-2.0]])
    >>> env.observe("player_1")["prompt"].splitlines()[-2]
    'Episode 1 of 2 is over. loss, return -2.'

"""

from __future__ import annotations

import copy
from typing import Any

from gymnasium import spaces
from gymnasium.utils import EzPickle
from pettingzoo import AECEnv

from ..core.contract import text_space
from ..core.meta_tracker import MetaEpisodeTracker, MetaOptions, Phase, replay_reset
from .text_game import render_prompt


class MetaEpisodeAEC(AECEnv, EzPickle):
    """Turn a text AEC env (a game module's ``raw_env`` or ``env``) into meta-episodes.

    Args:
        env: an AEC env whose observations are dicts with a ``"prompt"`` text field and
            whose infos carry ``instance`` (every ``mage_envs.pettingzoo`` game).
        swap_seats: the learners change seats after every game.
        **options: the fields of :class:`~mage_envs.core.meta_tracker.MetaOptions`, per
            learner and game (``num_episodes`` games, ``reward_mode``, ``reflection`` from
            both learners, ``memory_budget`` per learner, ``repeat_instance`` the same
            deal, ``include_summaries``), kept in ``self.options``.
    """

    def __init__(self, env: AECEnv, swap_seats: bool = False, **options: Any) -> None:
        meta = MetaOptions.of("MetaEpisodeAEC", options)
        EzPickle.__init__(self, env, **meta.as_kwargs(), swap_seats=swap_seats)
        super().__init__()
        self.options = meta
        self.possible_agents = list(env.possible_agents)
        self.trackers = {agent: meta.tracker() for agent in self.possible_agents}
        inner_spaces = [env.observation_space(agent) for agent in self.possible_agents]
        if not all(isinstance(space, spaces.Dict) and isinstance(space.get("prompt"), spaces.Text) for space in inner_spaces):
            raise TypeError(f"MetaEpisodeAEC needs observations with a 'prompt' text field, got {inner_spaces[0]}")
        self.env = env
        # set for each game by _begin_game: learner -> seat agent, seat agent -> learner
        self._seat: dict[str, str]
        self._learner: dict[str, str]
        self._phase: Phase
        self.agent_selection: str
        self.num_episodes = meta.num_episodes
        self.reflection = meta.reflection
        self.repeat_instance = meta.repeat_instance
        self.swap_seats = swap_seats
        self._inner_max = inner_spaces[0]["prompt"].max_length
        self._preamble: str = getattr(env.unwrapped, "prompt_preamble", "")
        prompt_length = MetaEpisodeTracker.prompt_length(self._inner_max, meta.memory_budget)
        self.observation_spaces = {
            agent: spaces.Dict({**copy.deepcopy(space.spaces), "prompt": text_space(prompt_length)})
            for agent, space in zip(self.possible_agents, inner_spaces)
        }
        self.metadata = {**env.metadata, "name": f"meta_{env.metadata.get('name', 'text_game')}"}
        self.render_mode = env.render_mode

    def observation_space(self, agent: str) -> spaces.Dict:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self.env.action_space(agent)

    # ------------------------------------------------------------------ AEC API
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start a meta-episode; ``options`` are passed to the first game's reset."""
        for tracker in self.trackers.values():
            tracker.start()
        self._replay_seed = seed
        self.env.reset(seed=seed, options=options)
        self._instance = self.env.infos[self.env.agent_selection].get("instance")
        self._begin_game()
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self._update_infos()

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        if self._phase == "reflect":
            self.trackers[agent].add_reflection(action)
            position = self.agents.index(agent)
            if position == len(self.agents) - 1:
                self._next_game()
            else:
                self.agent_selection = self.agents[position + 1]
        else:
            self.env.step(action)
            for seat_agent, reward in self.env.rewards.items():
                self.trackers[self._learner[seat_agent]].add_reward(reward)
            if all(self.env.terminations[a] or self.env.truncations[a] for a in self.env.agents):
                self._end_game()
            else:
                self.agent_selection = self._learner[self.env.agent_selection]
        self._accumulate_rewards()
        self._update_infos()

    def observe(self, agent: str) -> dict[str, Any]:
        seat_agent = self._seat[agent]
        obs = self.env.observe(seat_agent)
        tracker = self.trackers[agent]
        if self._phase == "reflect":  # the game is over: its legal moves are all zeros
            prompt = tracker.reflect_prompt(obs["prompt"], self.env.infos[seat_agent], self._inner_max)
        else:
            prompt = tracker.act_prompt(obs["prompt"], self._preamble)
        return {**obs, "prompt": prompt}

    def render(self) -> str | None:
        return render_prompt(self)

    def close(self) -> None:
        self.env.close()

    # ------------------------------------------------------------------ internals
    def _begin_game(self) -> None:
        """Seat the learners for the game the inner env has just reset."""
        episode = self.trackers[self.possible_agents[0]].episode_index
        shift = episode % len(self.possible_agents) if self.swap_seats else 0
        seats = self.possible_agents[shift:] + self.possible_agents[:shift]
        self._seat = dict(zip(self.possible_agents, seats))
        self._learner = {seat: learner for learner, seat in self._seat.items()}
        self.agents = [self._learner[seat] for seat in self.env.agents]  # in turn order
        self._phase = "act"
        self.agent_selection = self._learner[self.env.agent_selection]

    def _end_game(self) -> None:
        for learner in self.agents:
            info = self.env.infos[self._seat[learner]]
            self.rewards[learner] += self.trackers[learner].end_episode(info)
        if self.trackers[self.possible_agents[0]].finished:
            self._phase = "done"
            if any(self.env.terminations.values()):
                self.terminations = dict.fromkeys(self.agents, True)
            else:
                self.truncations = dict.fromkeys(self.agents, True)
        elif self.reflection:
            self._phase = "reflect"
        else:
            self._next_game()
            return
        self.agent_selection = self.agents[0]

    def _next_game(self) -> None:
        for tracker in self.trackers.values():
            tracker.next_episode()
        seed, options = replay_reset(self.repeat_instance, self._instance, self._replay_seed)
        self.env.reset(seed=seed, options=options)
        self._begin_game()

    def _update_infos(self) -> None:
        self.infos = {
            learner: self.trackers[learner].info(self.env.infos[self._seat[learner]], self._phase)
            for learner in self.agents
        }
