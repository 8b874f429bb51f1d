"""Agents for the harness that need no torch: API models and the prompting baselines' text.

* :class:`~mage_envs.agents.openai_chat.OpenAIChatAgent`: any OpenAI-compatible chat
  endpoint (OpenAI, vLLM, ``transformers serve``), many requests in flight (``[api]`` extra);
* :mod:`~mage_envs.agents.prompting`: the plain / ReAct / Reflexion instructions.

The reference agents (random, exact best response) are in :mod:`mage_envs.oracle.agents`.
"""

from .openai_chat import APIError, OpenAIChatAgent
from .prompting import INSTRUCTIONS, with_instructions

__all__ = ["APIError", "INSTRUCTIONS", "OpenAIChatAgent", "with_instructions"]
