"""The prompting baselines' instructions, shared by local models and API models.

ReAct (think, then act) and Reflexion (consult the reflection memory) differ from plain
zero-shot prompting only by what is appended to an acting prompt; reflection prompts
(``info["phase"] == "reflect"``) are sent as the env wrote them.

Example:
    >>> with_instructions("Legal actions: check, bet", {"phase": "act"}, "react").endswith("<action>NAME</action>.")
    True
    >>> with_instructions("Reflect on the episode.", {"phase": "reflect"}, "react")
    'Reflect on the episode.'
"""

from __future__ import annotations

from typing import Any, Literal

Prompting = Literal["plain", "react", "reflexion"]

REACT_INSTRUCTIONS = (
    "\n\nFirst think step by step about the situation in at most three sentences, "
    "starting with 'Thought:'. Then give your move as <action>NAME</action>."
)
REFLEXION_INSTRUCTIONS = (
    "\n\nUse the memory of earlier episodes above: what does it tell you about this opponent? "
    "Think briefly, then give your move as <action>NAME</action>."
)
#: What each prompting style appends to an acting prompt.
INSTRUCTIONS: dict[str, str] = {"plain": "", "react": REACT_INSTRUCTIONS, "reflexion": REFLEXION_INSTRUCTIONS}


def with_instructions(observation: str, info: dict[str, Any], prompting: str) -> str:
    """``observation`` followed by the ``prompting`` style's instructions (acting prompts only)."""
    if prompting not in INSTRUCTIONS:
        raise ValueError(f"unknown prompting {prompting!r}; choose from {', '.join(INSTRUCTIONS)}")
    return observation + (INSTRUCTIONS[prompting] if info.get("phase", "act") == "act" else "")
