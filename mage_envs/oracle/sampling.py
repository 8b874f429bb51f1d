"""A text agent's move distribution at each information state, estimated from sampled answers.

A model behind an API shows no action probabilities we can rely on (servers differ in
whether and how they return log-probabilities, and an answer such as
``<action>bet</action>`` spans several tokens whose split differs by tokenizer), so
:class:`SampledScorer` asks it ``samples`` times at every prompt and takes the empirical
frequencies of the legal actions its answers name, read as the env reads them
(:func:`~mage_envs.core.parsing.parse_action`). An answer that names no legal action is
counted (``invalid``, by reason) and left out; a prompt with no valid answer at all gets the
uniform distribution over its legal actions and is listed (``uniform_states``). The agent
answers all prompts in one ``act_batch`` call when it has one (an
:class:`~mage_envs.agents.OpenAIChatAgent` sends them concurrently), else one call each.

Example (an agent that bets when it may and calls otherwise, and one that answers junk):
    >>> from mage_envs.oracle.prompts import first_hand_prompts
    >>> from mage_envs.oracle.learner import tabulate
    >>> prompts = first_hand_prompts("mage/KuhnPoker-meta-v0", {"reflection": False})
    >>> bold = lambda obs, info: "<action>bet</action>" if "bet" in info["legal_actions"] else "<action>call</action>"
    >>> scorer = SampledScorer(bold, samples=2)
    >>> table = tabulate(prompts, scorer)
    >>> table["0"], table["0b"], scorer.answers, scorer.invalid
    ({0: 0.0, 1: 1.0}, {0: 0.0, 1: 1.0}, 24, 0)
    >>> junk = SampledScorer(lambda obs, info: "raise!", samples=2)
    >>> tabulate(prompts, junk)["0"], junk.invalid, junk.reasons, len(junk.uniform_states)
    ({0: 0.5, 1: 0.5}, 24, {'no_action_tag': 24}, 12)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ..core.parsing import parse_action
from .prompts import StatePrompt


class SampledScorer:
    """A :data:`~mage_envs.oracle.prompts.Scorer` that samples ``agent``'s answers (see the
    module doc). ``accept_bare``: whether a bare action name counts, as the env's option of
    that name. After a call, ``answers``, ``invalid``, ``reasons`` (invalid answers by
    :class:`~mage_envs.core.parsing.ParsedAction` reason) and ``uniform_states`` (the
    information states played uniformly) describe it; they add up over calls."""

    def __init__(self, agent: Any, samples: int = 8, accept_bare: bool = True) -> None:
        if samples < 1:
            raise ValueError(f"samples must be >= 1, got {samples}")
        if not callable(agent) and not hasattr(agent, "act_batch"):
            raise TypeError("the agent must be callable as agent(observation, info) or have act_batch")
        self.agent = agent
        self.samples = samples
        self.accept_bare = accept_bare
        self.answers = 0
        self.invalid = 0
        self.reasons: dict[str, int] = {}
        self.uniform_states: list[str] = []

    def __call__(self, prompts: Sequence[StatePrompt]) -> list[dict[int, float]]:
        observations = [p.observation for p in prompts for _ in range(self.samples)]
        infos = [dict(p.info) for p in prompts for _ in range(self.samples)]
        if hasattr(self.agent, "act_batch"):
            answers = list(self.agent.act_batch(observations, infos))
        else:
            answers = [self.agent(o, i) for o, i in zip(observations, infos)]
        if len(answers) != len(observations):
            raise RuntimeError(f"the agent gave {len(answers)} answers to {len(observations)} prompts")
        reasons: Counter[str] = Counter(self.reasons)
        out = []
        for k, prompt in enumerate(prompts):
            counts = dict.fromkeys(prompt.actions.values(), 0)
            for answer in answers[k * self.samples:(k + 1) * self.samples]:
                parsed = parse_action(answer, list(prompt.actions), accept_bare=self.accept_bare)
                if parsed.action is None:
                    reasons[parsed.reason or "invalid"] += 1
                else:
                    counts[prompt.actions[parsed.action]] += 1
            valid = sum(counts.values())
            self.answers += self.samples
            self.invalid += self.samples - valid
            if valid == 0:
                self.uniform_states.append(prompt.key)
                out.append({a: 1.0 / len(counts) for a in counts})
            else:
                out.append({a: c / valid for a, c in counts.items()})
        self.reasons = dict(sorted(reasons.items()))
        return out

    def report(self) -> dict[str, Any]:
        """``samples``, ``answers``, ``invalid``, ``invalid_reasons``, ``uniform_states`` and a
        one-line ``note`` saying them."""
        return {"samples": self.samples, "answers": self.answers, "invalid": self.invalid,
                "invalid_reasons": dict(self.reasons), "uniform_states": list(self.uniform_states),
                "note": self.note()}

    def note(self) -> str:
        """E.g. ``96 answers (8 per information state), 3 invalid (no_action_tag 3); every
        information state had a valid answer``."""
        reasons = ", ".join(f"{r} {n}" for r, n in self.reasons.items())
        text = (f"{self.answers} answers ({self.samples} per information state), {self.invalid} invalid"
                + (f" ({reasons})" if reasons else ""))
        if not self.uniform_states:
            return text + "; every information state had a valid answer"
        shown = ", ".join(self.uniform_states[:8]) + (", ..." if len(self.uniform_states) > 8 else "")
        return (text + f"; {len(self.uniform_states)} information state(s) without a valid answer, played "
                f"uniformly: {shown}")
