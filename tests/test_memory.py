"""ReflectionMemory: always within budget, deterministic, newest kept."""

from hypothesis import given, settings
from hypothesis import strategies as st

from mage_envs import TEXT_CHARSET, ReflectionMemory
from mage_envs.core.memory import extract_reflection


@settings(max_examples=200, deadline=None)
@given(
    budget=st.integers(60, 3000),
    entries=st.lists(st.tuples(st.text(max_size=500), st.text(max_size=5000)), max_size=12),
)
def test_render_fits_budget_and_is_deterministic(budget, entries):
    def build():
        memory = ReflectionMemory(budget=budget)
        for summary, reflection in entries:
            memory.add_episode(summary)
            memory.add_reflection(reflection)
        return memory.render()

    text = build()
    assert len(text) <= budget
    assert set(text) <= set(TEXT_CHARSET)
    assert text == build()


def test_oldest_entries_are_dropped_first_and_counted():
    memory = ReflectionMemory(budget=300)
    for i in range(10):
        memory.add_episode(f"Result: episode {i}")
        memory.add_reflection(f"LESSON-{i} " + "z" * 200)
    text = memory.render()
    assert "LESSON-9" in text and "LESSON-0" not in text
    assert "older episode(s) omitted" in text


def test_reflection_tag_extraction():
    assert extract_reflection("junk <REFLECTION>fold the Jack</reflection> tail") == "fold the Jack"
    assert extract_reflection("<reflection>unclosed but kept") == "unclosed but kept"
    assert extract_reflection("no tag at all") == "no tag at all"
    assert len(extract_reflection("<reflection>" + "a" * 10**6)) <= 2000
