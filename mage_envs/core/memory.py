"""Reflection memory carried across the episodes of a meta-episode.

The memory holds one reflection per finished episode and, optionally, a one-line summary
of each episode's result. :meth:`ReflectionMemory.render` turns it into a prompt block of
at most ``budget`` characters, deterministically: every reflection is first clipped to
its share, and when even that does not fit, the oldest entries are dropped (and counted).

Example:
    >>> memory = ReflectionMemory(budget=200)
    >>> memory.add_episode("Result: you lost 1 chip.")
    >>> memory.add_reflection("The opponent always bets; call with the Queen.")
    >>> print(memory.render())
    Memory of earlier episodes:
    [Episode 1] Result: you lost 1 chip.
    Reflection: The opponent always bets; call with the Queen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .contract import clip_text, sanitize_text

_REFLECTION_TAG = re.compile(r"<\s*reflection\s*>(.*?)(?:<\s*/\s*reflection\s*>|$)", re.IGNORECASE | re.DOTALL)
_HEADER = "Memory of earlier episodes:"
#: Reflections longer than this are clipped when stored (before any budget applies).
MAX_REFLECTION_CHARS = 2000


def extract_reflection(text: str) -> str:
    """The content of the first ``<reflection>`` tag, else the whole answer; clean ASCII.

    Example:
        >>> extract_reflection("thinking... <reflection> Bluff less. </reflection>")
        'Bluff less.'
    """
    head = text[: MAX_REFLECTION_CHARS * 4] if isinstance(text, str) else ""
    match = _REFLECTION_TAG.search(head)
    content = match.group(1) if match else head
    return clip_text(sanitize_text(content).strip(), MAX_REFLECTION_CHARS)


@dataclass
class ReflectionMemory:
    """Per-episode summaries and reflections, rendered within ``budget`` characters."""

    budget: int = 1500
    include_summaries: bool = True
    summaries: list[str] = field(default_factory=list)
    reflections: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.budget < len(_HEADER) + 20:
            raise ValueError(f"memory_budget must be at least {len(_HEADER) + 20} characters, got {self.budget}")

    def clear(self) -> None:
        self.summaries.clear()
        self.reflections.clear()

    def add_episode(self, summary: str) -> None:
        self.summaries.append(clip_text(sanitize_text(summary), MAX_REFLECTION_CHARS))

    def add_reflection(self, reflection: str) -> None:
        self.reflections.append(extract_reflection(reflection))

    def _entries(self) -> list[tuple[str, str]]:
        count = max(len(self.summaries), len(self.reflections))
        entries = []
        for i in range(count):
            summary = self.summaries[i] if self.include_summaries and i < len(self.summaries) else ""
            reflection = self.reflections[i] if i < len(self.reflections) else ""
            entries.append((summary, reflection))
        return entries

    def render(self) -> str:
        """The memory block (empty string when there is nothing to remember)."""
        entries = [e for e in self._entries() if e[0] or e[1]]
        if not entries:
            return ""
        # each entry gets an equal share; drop the oldest until the fixed parts fit
        for start in range(len(entries)):
            kept = entries[start:]
            dropped = start
            preface = _HEADER + (f"\n({dropped} older episode(s) omitted)" if dropped else "")
            labels = [f"[Episode {start + i + 1}] " for i in range(len(kept))]
            fixed = len(preface) + sum(len(label) + 2 + len("Reflection: ") for label in labels)
            share = max(0, (self.budget - fixed) // len(kept))
            if share >= 40:
                break
        lines = [preface]
        for label, (summary, reflection) in zip(labels, kept):
            room = share
            summary_text = clip_text(summary, min(len(summary), room // 2 if reflection else room))
            room -= len(summary_text)
            body = label + summary_text
            if reflection:
                body += "\nReflection: " + clip_text(reflection, max(room, 0))
            lines.append(body)
        return clip_text("\n".join(lines), self.budget)
