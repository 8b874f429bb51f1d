"""Action parsing: the documented rules, and clipping of huge answers."""

import random

import pytest

from mage_envs.core.contract import MAX_ACTION_CHARS, clip_text, sanitize_text, text_space
from mage_envs.core.parsing import describe_invalid, parse_action, tag_suffix

LEGAL = ["check", "bet"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<action>bet</action>", "bet"),
        ("<ACTION> Bet </Action>", "bet"),
        ("I hold the King, so <action>bet</action> is best.", "bet"),
        ("<action>check</action> no wait <action>bet</action>", "check"),
        ("< action >check</ action >", "check"),
        ("bet", "bet"),
        ("  Check.  ", "check"),
        ('"bet"', "bet"),
    ],
)
def test_accepted_answers(text, expected):
    assert parse_action(text, LEGAL).action == expected


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "empty"),
        ("   \n ", "empty"),
        ("I will bet", "no_action_tag"),
        ("I will not bet, I check", "no_action_tag"),
        ("<action>raise</action>", "illegal_action"),
        ("<action>bet", "unclosed_action_tag"),
        ("<action></action>", "illegal_action"),
        ("<action>bet</action>"[::-1], "no_action_tag"),
    ],
)
def test_rejected_answers(text, reason):
    parsed = parse_action(text, LEGAL)
    assert parsed.action is None and parsed.reason == reason
    assert describe_invalid(parsed, LEGAL).endswith("Legal actions: check, bet.")


def test_bare_answers_can_be_refused():
    assert parse_action("bet", LEGAL, accept_bare=False).reason == "no_action_tag"
    assert parse_action("<action>bet</action>", LEGAL, accept_bare=False).action == "bet"


def test_non_string_answer_is_reported():
    assert parse_action(None, LEGAL).reason == "not_a_string"  # type: ignore[arg-type]


def test_huge_answer_is_clipped_before_parsing():
    padding = "x" * (1 << 20)
    assert parse_action("<action>bet</action>" + padding, LEGAL).action == "bet"
    # a tag beyond the clipping point is never seen: deterministic, and cheap
    late = parse_action(padding + "<action>bet</action>", LEGAL)
    assert late.action is None and late.reason == "no_action_tag"
    edge = "y" * (MAX_ACTION_CHARS - len("<action>bet</action>")) + "<action>bet</action>"
    assert parse_action(edge, LEGAL).action == "bet"
    assert parse_action("z" + edge, LEGAL).action is None


def test_clip_and_sanitize():
    assert clip_text("abc", 3) == "abc"
    assert len(clip_text("a" * 100, 10)) == 10
    assert clip_text("a" * 100, 3) == "aaa"
    with pytest.raises(ValueError):
        clip_text("a", -1)
    cleaned = sanitize_text("d\u00e9j\u00e0 vu \U0001F600\r\n\x00")
    assert cleaned == "deja vu ?\n?"
    assert text_space(50).contains(cleaned)


def test_tag_suffix_lookup_agrees_with_parsing():
    """The env's fast path (the suffix from the first ``<``, looked up among the canonical
    tags) accepts exactly what parse_action reads from the same answer."""
    canonical = {f"<action>{name}</action>": name for name in LEGAL}
    pieces = ["<action>", "</action>", "<", ">", "bet", "check", "Bet", " ", "\n", "I think ", "/", "x" * 3000]
    rng = random.Random(0)
    hits = 0
    for _ in range(20000):
        head, tail = ("".join(rng.choice(pieces) for _ in range(rng.randrange(3))) for _ in range(2))
        text = head + rng.choice([*canonical, "<action>Bet</action>", "<ACTION>bet</action>"]) + tail
        looked_up = canonical.get(tag_suffix(text))
        if looked_up is not None:
            hits += 1
            assert parse_action(text, LEGAL).action == looked_up, text
    assert hits > 1000
    assert tag_suffix("x" * MAX_ACTION_CHARS + "<action>bet</action>") is None
