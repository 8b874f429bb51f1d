"""Exact oracles: what the best possible agent would score, computed with OpenSpiel.

* :func:`best_response_value` — the best response to one opponent (exact, or an
  estimate with its standard error against a search bot);
* :func:`best_nonadaptive_value` — the best fixed policy against a population whose
  archetype is drawn once and hidden (the ceiling of an agent that does not adapt);
* :func:`equilibrium_value`, :func:`exploitability`, :func:`nash_conv`;
* :func:`winnable_fraction`, :func:`instance_optimal_value` — the success and return
  ceilings of repeat-instance meta-episodes (the deal known after earlier episodes);
* :func:`bayes_adaptive_value` — the return ceiling of fresh-deal meta-episodes: the
  Bayes-optimal agent, which learns the archetype from earlier hands (Kuhn Poker);
* :mod:`mage_envs.oracle.learner` — the exact exploitability of a text policy, tabulated at
  every information state from the env's own prompts (:mod:`mage_envs.oracle.prompts`);
* reference agents :class:`RandomLegalAgent`, :class:`BestResponseAgent`,
  :class:`BayesAdaptiveAgent` (plays :func:`bayes_adaptive_value` in the real env) and
  :class:`BayesFinalHand` (another agent's earlier hands, the Bayes agent's final one).

All values are in game units (chips, ±1 per game) before any ``reward_scale``.

Example:
    >>> from mage_envs.oracle import best_response_value, best_nonadaptive_value
    >>> pop = ["conservative", "aggressive", "intermediate"]
    >>> per_archetype = sum(best_response_value("kuhn_poker", o).value for o in pop) / 3
    >>> round(per_archetype, 4), round(best_nonadaptive_value("kuhn_poker", pop).value, 4)
    (0.2778, 0.1111)
"""

from .adaptive import BayesAdaptiveAgent, BayesFinalHand, bayes_adaptive_value
from .agents import BestResponseAgent, RandomLegalAgent
from .result import OracleValue, Seat
from .values import (
    best_nonadaptive_value,
    best_response_policy,
    best_response_value,
    equilibrium_value,
    exploitability,
    nash_conv,
)
from .winnable import instance_optimal_value, winnable_fraction

__all__ = [
    "BayesAdaptiveAgent",
    "BayesFinalHand",
    "BestResponseAgent",
    "OracleValue",
    "RandomLegalAgent",
    "Seat",
    "bayes_adaptive_value",
    "best_nonadaptive_value",
    "best_response_policy",
    "best_response_value",
    "equilibrium_value",
    "exploitability",
    "instance_optimal_value",
    "nash_conv",
    "winnable_fraction",
]
