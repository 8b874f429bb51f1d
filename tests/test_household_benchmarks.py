"""The Household benchmarks: the capacity check's expert turns on a task, and the random
policy's learning signal per setting."""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("textworld", reason="needs the household extra (textworld)")
BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
HOUSEHOLD = Path(__file__).parents[1] / "examples" / "household.yaml"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def listed(prompt: str) -> dict[str, str]:
    """Label -> command, as the prompt's legal actions list them."""
    line = next(x for x in prompt.splitlines() if x.startswith("Legal actions: "))
    return dict(re.findall(r"(\d+): ([^,]+)", line.removeprefix("Legal actions: ")))


def test_capacity_expert_turns_of_a_task_are_the_labels_of_the_experts_commands():
    pytest.importorskip("torch")
    from mage_agent.config import apply_overrides, load_config

    capacity = load("capacity")
    config = apply_overrides(load_config(HOUSEHOLD), {"seed": 0})
    rows = capacity.expert_turns(config, 1, seed=0)
    for prompt, choices, choice, attempt, task_type in rows:
        commands = listed(prompt)
        assert choices == tuple(str(i) for i in range(1, len(choices) + 1)) == tuple(commands)
        assert not commands[choice].startswith(("look", "inventory", "examine"))  # looking_commands: false
        assert task_type.startswith("pick_")
    by_attempt = [[r for r in rows if r[3] == a] for a in range(3)]
    assert len(by_attempt[0]) == len(by_attempt[1]) == len(by_attempt[2]) > 0  # the expert wins every attempt alike
    assert "done in" in by_attempt[1][0][0] and "Memory of earlier episodes" in by_attempt[1][0][0]
    assert "Memory of earlier episodes" not in by_attempt[0][0][0]


def test_random_policy_benchmark_counts_successes_and_keeps_earlier_settings(tmp_path):
    out = tmp_path / "random.json"
    out.write_text(json.dumps({"settings": {"earlier": {"rate": 0.5}}}))
    done = subprocess.run([sys.executable, str(BENCHMARKS / "household_random.py"), "--settings",
                           "no-looking-expert2-20", "--games", "2", "--episodes", "2", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    settings = json.loads(out.read_text())["settings"]
    assert settings["earlier"] == {"rate": 0.5}
    row = settings["no-looking-expert2-20"]
    assert row["episodes"] == 4 and row["rate"] == row["successes"] / 4
    assert row["successes"] == sum(g["wins"] for g in row["games"]) and row["expert_steps_mean"] == 2.0
    assert all(g["task_type"] == "pick_and_place_simple" for g in row["games"])   # 2-command plans: take, put


@pytest.mark.slow
def test_capacity_on_a_task_fits_the_expert_and_evaluates_both_splits(tmp_path):
    output = tmp_path / "capacity.json"
    done = subprocess.run([sys.executable, str(BENCHMARKS / "capacity.py"), "--config", str(HOUSEHOLD),
                           "--meta-episodes", "2", "--steps", "2", "--batch", "4", "--eval-meta-episodes", "1",
                           "--output", str(output)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(output.read_text())
    assert result["eval"]["expert_success_by_attempt"] == result["train"]["expert_success_by_attempt"] == [1.0] * 3
    assert result["eval"]["env_options"]["instance_split"] == "eval"
    assert result["train"]["env_options"]["instance_split"] == "train"
    assert sum(result["fit_by_hand"][f"attempt {a}"]["turns"] for a in (1, 2, 3)) == result["turns"]
