"""The examples in the benchmarks' docstrings run (pytest collects only the packages' own)."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
WITH_EXAMPLES = sorted(path.name for path in BENCHMARKS.glob("*.py") if ">>>" in path.read_text())


def test_the_benchmarks_with_examples_are_found():
    assert {"single_agent.py", "household_random.py", "learning.py"} <= set(WITH_EXAMPLES)


@pytest.mark.parametrize("script", WITH_EXAMPLES)
def test_docstring_examples_run(script):
    done = subprocess.run([sys.executable, "-m", "doctest", script], cwd=BENCHMARKS, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
