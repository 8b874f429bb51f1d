"""An equilibrium anchor for the first hand: ``KL(equilibrium ‖ policy)`` at its information states.

The first hand of a meta-episode is played with an empty memory: nothing is known about the
opponent yet, so its safest play is the game's equilibrium, and its exact exploitability
(:mod:`mage_agent.exploitability`) measures how far it is from one. :class:`EquilibriumAnchor`
turns that into a loss term: the mean, over the first hand's information states (the prompts
:class:`~mage_envs.oracle.prompts.PromptWalker` builds from the run's own env, the learner's
seats only), of the KL divergence from the ``nash`` archetype's move distribution (Kuhn: the
exact equilibrium with alpha = 1/6; Leduc: the shipped CFR+ policy) to the policy's
distribution over the legal action tokens at the sampling temperature. The later hands, whose
prompts hold the memory, are left free to probe and exploit. The trainer adds
``algo.equilibrium_coef`` times it to every optimizer step (``equilibrium_kl`` in
metrics.jsonl).

Example (the untrained embedded model on Kuhn Poker: 12 information states, 24 rows):
    >>> import tempfile
    >>> from pathlib import Path
    >>> from mage_agent.build import build_policy
    >>> from mage_agent.config import TrainConfig
    >>> config = TrainConfig()
    >>> anchor = EquilibriumAnchor(build_policy(config, Path(tempfile.mkdtemp())), config)
    >>> len(anchor.prompts), len(anchor.rows), anchor.kl().item() > 0
    (12, 24, True)
"""

from __future__ import annotations

import torch

from mage_envs.facts import load_game
from mage_envs.opponents.registry import make_opponent
from mage_envs.oracle.prompts import PromptWalker, StatePrompt
from mage_envs.oracle.tabular import archetype_table

from .build import env_kwargs, supported
from .config import TrainConfig
from .exploitability import action_rows
from .policy import Policy

#: The archetype whose move distribution the first hand is pulled toward.
EQUILIBRIUM = "nash"


class EquilibriumAnchor:
    """``KL(equilibrium ‖ policy)`` over the first hand's information states (a mean over
    states, each state's divergence over its legal actions). ``prompts`` are those states'
    :class:`StatePrompt`, ``rows`` one (prompt index, action token, legal tokens) per legal action."""

    def __init__(self, policy: Policy, config: TrainConfig) -> None:
        reason = supported(config)
        if reason is not None:
            raise ValueError(f"equilibrium_coef needs a tabular game: {reason}")
        self.policy = policy
        self.temperature = config.rollout.temperature
        walker = PromptWalker(config.env.env_id, env_kwargs(config))
        seat = config.env.seat
        self.prompts: list[StatePrompt] = [p for p in walker.table_prompts() if seat == "random" or str(p.seat) == seat]
        game = load_game(walker.game_string)
        equilibrium = archetype_table(game, make_opponent(walker.game_string, EQUILIBRIUM))
        encoded = policy.encode_prompts([p.observation for p in self.prompts])
        #: (prompt index, action token, the prompt's legal tokens), one per legal action
        self.rows = action_rows(policy, self.prompts)
        actions = [action for prompt in self.prompts for action in prompt.actions.values()]
        self._target = torch.tensor([equilibrium[self.prompts[index].key].get(action, 0.0)
                                     for (index, _, _), action in zip(self.rows, actions)], dtype=torch.float64)
        self._prompt_ids = [encoded[index] for index, _, _ in self.rows]
        self._state = torch.tensor([index for index, _, _ in self.rows])

    def kl(self) -> torch.Tensor:
        """The mean over states of ``sum_a p*(a) (log p*(a) - log pi(a))``, differentiable
        in the policy's trainable weights (a scalar tensor)."""
        logprobs, _, _ = self.policy.completion_logprobs(self._prompt_ids, [[token] for _, token, _ in self.rows],
                                                         temperature=self.temperature,
                                                         allowed_ids=[legal for _, _, legal in self.rows])
        logprob = logprobs[:, 0].double()
        target = self._target.to(logprob.device)
        # 0 log 0 = 0: an action the equilibrium never plays adds nothing
        terms = torch.where(target > 0, target * (target.clamp_min(1e-300).log() - logprob), torch.zeros_like(logprob))
        per_state = torch.zeros(len(self.prompts), dtype=terms.dtype, device=terms.device)
        per_state = per_state.index_add(0, self._state.to(terms.device), terms)
        return per_state.mean()
