"""Every ```python block in README.md and docs/ runs as written."""

import re
from pathlib import Path

import pytest

from mage_envs.opponents import registry

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
SNIPPETS = [(path, i, code) for path in DOCS if path.exists() for i, code in enumerate(BLOCK.findall(path.read_text()))]


def test_docs_have_snippets():
    assert len(SNIPPETS) >= 3


@pytest.mark.parametrize("path, index, code", SNIPPETS, ids=[f"{p.name}#{i}" for p, i, _ in SNIPPETS])
def test_snippet_runs(path, index, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # snippets may register opponents: give them a private copy of the (loaded) registry
    registry.list_opponents("kuhn_poker")
    monkeypatch.setattr(registry, "_REGISTRY", {game: dict(specs) for game, specs in registry._REGISTRY.items()})
    exec(compile(code, f"{path.name}#{index}", "exec"), {"__name__": "__docs__"})


LINK = re.compile(r"\]\(([^)\s:]+?\.md)(?:#([^)\s]+))?\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings (lower case, punctuation dropped)."""
    headings = re.findall(r"^#+ (.+)$", path.read_text(), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_relative_links_name_files_and_headings_that_exist():
    broken = []
    for path in DOCS:
        for target, anchor in LINK.findall(path.read_text()):
            linked = (path.parent / target).resolve()
            if not linked.exists() or (anchor and anchor not in _anchors(linked)):
                broken.append(f"{path.name}: {target}#{anchor}")
    assert not broken, broken
    assert "free-text-answers-from-a-small-instruct-model" in _anchors(ROOT / "docs" / "training-results.md")
