"""The bundled trainer examples run top to bottom on a tiny budget."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.mark.parametrize("script, archetype", [("train_kuhn_poker.py", "aggressive"),
                                               ("train_tic_tac_toe.py", "random")])
def test_trainer_example_trains_evaluates_and_guards_its_output(tmp_path, script, archetype):
    out = tmp_path / "run"
    command = [sys.executable, str(EXAMPLES / script), "--iterations", "2", "--eval-meta-episodes", "2",
               "--output-dir", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((out / "eval.json").read_text())
    assert len(report["opponents"][archetype]["mean_return_by_episode"]) == 3
    assert "gap to best response" in done.stdout
    before = (out / "eval.json").read_bytes()
    again = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert again.returncode != 0 and "--overwrite" in again.stderr
    assert (out / "eval.json").read_bytes() == before  # the first run is kept
