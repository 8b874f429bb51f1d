"""`mage_envs` stands alone: importing it (and making its envs) pulls no heavy optional stack."""

import subprocess
import sys

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
