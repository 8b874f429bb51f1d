"""The throughput benchmark runs end to end on a tiny budget (its numbers live in docs)."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "env_throughput.py"


def test_env_throughput_prints_a_ratio_for_every_game_and_view():
    done = subprocess.run([sys.executable, str(SCRIPT), "--games", "40", "--aec-games", "4", "--repeats", "1",
                           "--mcts-moves", "1"], capture_output=True, text=True, timeout=300, check=True)
    ratios = [line for line in done.stdout.splitlines() if "ratio to raw" in line]
    assert len(ratios) == 9  # 3 games x (text, numeric, pettingzoo)
    assert all(float(line.split("ratio to raw:")[1].strip().rstrip("x")) > 0 for line in ratios)
    assert "MCTS-100: C++" in done.stdout
