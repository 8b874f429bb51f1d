"""`mage_envs` stands alone: importing it (and making its envs) pulls no heavy optional stack."""

import ast
import subprocess
import sys
from pathlib import Path

HEAVY = (
    "torch", "transformers", "peft", "pettingzoo", "bm25s", "Stemmer", "rapidfuzz", "spacy", "textworld", "trl", "fastapi",
    "stable_baselines3",
)


def test_import_and_make_without_optional_stacks():
    code = (
        "import sys, gymnasium as gym, mage_envs\n"
        "env = gym.make('mage/KuhnPoker-meta-v0'); env.reset(seed=0)\n"
        f"loaded = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "raise SystemExit(', '.join(loaded) or 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, f"imported: {result.stderr or result.stdout}"



ROOT = Path(__file__).resolve().parent.parent


def _imports(path: Path) -> set[str]:
    """The ``mage_envs`` modules that the module at ``path`` imports (absolute names)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    package = parts[:-1]  # relative imports start from the module's package
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            names.add(".".join([*base, node.module] if node.module else base))
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name.startswith("mage_envs")}


def test_dependencies_point_one_way():
    """Layers, each importing only the ones before it: game facts (nothing of MAGE), the
    opponents (facts and core only), the envs in games/ (the Opponent protocol and
    Population they run, never an archetype module or the registry); archetype modules
    never import the registry, which loads their tables by name."""
    envs = ROOT / "mage_envs"
    assert _imports(envs / "games/engine.py") >= {"mage_envs.facts", "mage_envs.opponents.base"}
    assert _imports(envs / "opponents/registry.py") >= {"mage_envs.facts"}
    facts = list((envs / "facts").glob("*.py"))
    assert len(facts) == 4 and not (envs / "games" / "facts").exists()
    for path in facts:
        assert _imports(path) == set(), path
    for path in (envs / "opponents").glob("*.py"):
        bad = {m for m in _imports(path) if not m.startswith(("mage_envs.core", "mage_envs.facts", "mage_envs.opponents"))}
        assert not bad, f"opponents/{path.name} imports {bad}"
    allowed = {"mage_envs.opponents.base", "mage_envs.opponents.population"}
    for path in (envs / "games").glob("*.py"):
        bad = {m for m in _imports(path) if m.startswith("mage_envs.opponents") and m not in allowed}
        assert not bad, f"{path.name} imports {bad}"
    for game in ("kuhn_poker", "leduc_poker", "tic_tac_toe"):
        assert "mage_envs.opponents.registry" not in _imports(envs / f"opponents/{game}.py")
