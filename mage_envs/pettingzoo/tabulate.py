"""The first hand's prompt of every information state in a two-learner meta-episode.

The PettingZoo counterpart of :mod:`mage_envs.oracle.prompts`: to compute the exact
exploitability of two learners that play each other through
:class:`~mage_envs.pettingzoo.MetaEpisodeAEC` (learner ``player_i`` in seat ``i``, no seat
swap), each is asked at every information state of its seat with the very prompt that env
shows there. :func:`aec_table_prompts` resets the env on an instance that deals the cards
of one history of the state (:func:`~mage_envs.oracle.prompts.instance_for`) and plays the
history's moves, both seats scripted, until that seat is to act on it.

Example:
    >>> from mage_envs.pettingzoo import MetaEpisodeAEC, kuhn_poker_v0
    >>> prompts = aec_table_prompts(lambda: MetaEpisodeAEC(kuhn_poker_v0.raw_env(), num_episodes=3))
    >>> len(prompts), prompts[0].key, prompts[0].seat, prompts[0].actions
    (12, '0', 0, {'check': 0, 'bet': 1})
    >>> [line for line in prompts[7].observation.splitlines() if line.startswith(("Your card", "- Opp"))]
    ['Your card: Jack.', '- Opponent checks.']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..oracle.prompts import StatePrompt, instance_for, seat_histories
from .meta import MetaEpisodeAEC
from .text_game import AGENTS, TextGameAEC


def aec_prompt(env: MetaEpisodeAEC, seat: int, history: Sequence[int]) -> StatePrompt:
    """The prompt ``env`` shows learner ``player_<seat>`` when the first game has reached
    ``history`` (OpenSpiel actions, chance included) and that seat is to act."""
    if env.swap_seats:
        raise ValueError("tabulating by seat needs swap_seats=False (learner player_i in seat i)")
    inner = env.env.unwrapped
    if not isinstance(inner, TextGameAEC):
        raise TypeError(f"{type(inner).__name__} is not a mage_envs.pettingzoo text game")
    game = inner.game
    env.reset(seed=0, options={"instance": instance_for(game, history, 0)})
    agent = AGENTS[seat]
    while True:
        state = inner.game_state
        played = state.history()
        if played != list(history[: len(played)]):
            raise RuntimeError(f"the game left its script at {played} (scripted {list(history)})")
        mover = env.agent_selection
        info = env.infos[mover]
        names = info["legal_actions"]
        actions = dict(zip(names, state.legal_actions())) if names else {}
        if names and len(names) != len(state.legal_actions()):
            raise RuntimeError(f"{names} do not name the legal actions {state.legal_actions()}")
        if played == list(history) and mover == agent and names:
            return StatePrompt(state.information_state_string(), seat, env.observe(agent)["prompt"], dict(info),
                               actions)
        if info["episode_index"] > 0 or (names and len(played) == len(history)):
            raise RuntimeError(f"the first game did not reach seat {seat}'s turn at {list(history)}")
        if not names:   # the seat not to move passes
            env.step("")
            continue
        by_id = {a: name for name, a in actions.items()}
        env.step(by_id[history[len(played)]])


def aec_table_prompts(make_env: Callable[[], MetaEpisodeAEC]) -> list[StatePrompt]:
    """The first hand's prompt (empty memory) at every information state, seat 0's first,
    each seat in information-state order, as :meth:`~mage_envs.oracle.prompts.PromptWalker.table_prompts`
    orders them."""
    env = make_env()
    game = env.env.unwrapped.game
    try:
        return [aec_prompt(env, seat, history) for seat in (0, 1)
                for _, history in sorted(seat_histories(game, seat).items())]
    finally:
        env.close()
