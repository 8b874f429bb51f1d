"""The benchmarks run end to end on a tiny budget (their numbers live in docs)."""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "env_throughput.py"


def test_env_throughput_prints_a_ratio_for_every_game_and_view():
    done = subprocess.run([sys.executable, str(SCRIPT), "--games", "40", "--aec-games", "4", "--repeats", "1",
                           "--mcts-moves", "1"], capture_output=True, text=True, timeout=300, check=True)
    ratios = [line for line in done.stdout.splitlines() if "ratio to raw" in line]
    assert len(ratios) == 9  # 3 games x (text, numeric, pettingzoo)
    assert all(float(line.split("ratio to raw:")[1].strip().rstrip("x")) > 0 for line in ratios)
    assert "MCTS-100: C++" in done.stdout


def test_scoring_memory_compares_both_variants_on_the_same_log_probs():
    script = SCRIPT.parent / "scoring_memory.py"
    done = subprocess.run([sys.executable, str(script), "--rows", "4", "--prompt", "24", "--completion", "3",
                           "--vocab", "2000", "--duplicates", "2"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr  # it exits non-zero when the two disagree on the log-probs
    sums = [float(line.rsplit("log-prob sum", 1)[1]) for line in done.stdout.splitlines() if "log-prob sum" in line]
    assert len(sums) == 2 and sums[0] == pytest.approx(sums[1], rel=1e-4) and sums[0] < 0
    assert "memory ratio plain/policy:" in done.stdout
