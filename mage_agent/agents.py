"""Agents built on a :class:`~mage_agent.policy.Policy`, for the ``mage_envs`` harness.

* :class:`PolicyAgent` — the trained (or untrained) model, answering a whole batch of
  prompts with one ``generate`` call (the harness plays meta-episodes in lockstep);
* :func:`react_agent`, :func:`reflexion_agent` — the paper's prompting baselines for any
  model with frozen weights: ReAct (think, then act) and Reflexion (reflection memory).

Example:
    >>> from mage_agent.tiny import build_model, build_tokenizer
    >>> from mage_agent.policy import Policy, Sampling
    >>> tok = build_tokenizer(["check bet"])
    >>> agent = PolicyAgent(Policy(build_model(tok), tok), Sampling(max_new_tokens=1), action_tokens=True)
    >>> agent.act_batch(["check or bet?"], [{"legal_actions": ["check", "bet"], "phase": "act"}])[0] in ("check", "bet")
    True
"""

from __future__ import annotations

import itertools
from typing import Any

from mage_envs.agents.prompting import REACT_INSTRUCTIONS, REFLEXION_INSTRUCTIONS

from .policy import Policy, Sampling


class PolicyAgent:
    """Answers prompts with a policy; ``act_batch`` makes one batched generate call."""

    def __init__(
        self,
        policy: Policy,
        sampling: Sampling,
        action_tokens: bool = False,
        instructions: str = "",
        seed: int = 0,
        name: str = "policy",
    ) -> None:
        self.policy = policy
        self.sampling = sampling
        self.action_tokens = action_tokens
        self.instructions = instructions
        self.name = name
        self._seeds = itertools.count(seed * 1_000_003)

    def act_batch(self, observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
        prompts = [
            obs + (self.instructions if info.get("phase", "act") == "act" else "")
            for obs, info in zip(observations, infos)
        ]
        allowed = None
        if self.action_tokens:
            allowed = [
                self.policy.single_token_ids(info["legal_actions"])
                if info.get("phase", "act") == "act" and info.get("legal_actions") else None
                for info in infos
            ]
        generations = self.policy.generate(prompts, self.sampling, allowed_ids=allowed, seed=next(self._seeds))
        return [g.text for g in generations]

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        return self.act_batch([observation], [info])[0]


def react_agent(policy: Policy, sampling: Sampling, seed: int = 0) -> PolicyAgent:
    """ReAct-style prompting: reason first, then act; no memory beyond the env's."""
    return PolicyAgent(policy, sampling, instructions=REACT_INSTRUCTIONS, seed=seed, name="react")


def reflexion_agent(policy: Policy, sampling: Sampling, seed: int = 0) -> PolicyAgent:
    """Reflexion-style prompting: frozen weights, reflections kept in the meta-episode's
    memory (use it on a ``-meta-v0`` id with ``reflection=True``) and consulted each move."""
    return PolicyAgent(policy, sampling, instructions=REFLEXION_INSTRUCTIONS, seed=seed, name="reflexion")
