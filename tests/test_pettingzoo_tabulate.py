"""The two-learner env shows, at every first-hand information state, the prompt the
single-agent env shows there (same prompt style)."""

import pytest

pytest.importorskip("pettingzoo")

from mage_envs.oracle.prompts import first_hand_prompts  # noqa: E402
from mage_envs.pettingzoo import MetaEpisodeAEC, kuhn_poker_v0, leduc_poker_v0  # noqa: E402
from mage_envs.pettingzoo.tabulate import aec_prompt, aec_table_prompts  # noqa: E402


@pytest.mark.parametrize("style", ["compact", "full"])
def test_aec_prompts_are_the_single_agent_envs(style):
    aec = aec_table_prompts(lambda: MetaEpisodeAEC(kuhn_poker_v0.raw_env(prompt_style=style), num_episodes=3,
                                                   reflection=False))
    gym = first_hand_prompts("mage/KuhnPoker-meta-v0", {"reflection": False, "prompt_style": style})
    assert [(p.key, p.seat, p.actions, p.observation) for p in aec] == \
        [(p.key, p.seat, p.actions, p.observation) for p in gym]
    assert len({p.observation for p in aec}) == 12


def test_leduc_has_every_information_state():
    prompts = aec_table_prompts(lambda: MetaEpisodeAEC(leduc_poker_v0.raw_env(prompt_style="compact"), reflection=False))
    assert len(prompts) == 936 and len({p.key for p in prompts}) == 936


def test_a_swapping_env_is_refused():
    with pytest.raises(ValueError, match="swap_seats=False"):
        aec_prompt(MetaEpisodeAEC(kuhn_poker_v0.raw_env(), swap_seats=True), 0, [0, 1])
