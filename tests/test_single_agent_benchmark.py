"""benchmarks/single_agent.py: resumable per-seed runs, the oracle, the paired summary."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "single_agent.py"


def load_benchmark():
    spec = importlib.util.spec_from_file_location("single_agent", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_summary_pairs_cumulative_with_differential_seed_by_seed():
    bench = load_benchmark()
    rows = [{"variant": v, "seed": s, "evaluations": {"eval": {"trained": [first, final]}}}
            for v, s, first, final in [("sokoban", 0, 0.2, 0.8), ("sokoban", 1, 0.4, 0.9),
                                       ("sokoban-cumulative", 0, 0.5, 0.6), ("sokoban-cumulative", 1, 0.5, 0.7),
                                       ("sokoban-cumulative", 2, 0.0, 0.0)]]
    table = bench.summarise(rows)
    assert table["sokoban"]["eval"]["trained"]["by_attempt"][0][0] == pytest.approx(0.3)
    assert table["sokoban"]["eval"]["trained"]["gain"][0] == pytest.approx(0.55)
    paired = table["sokoban-cumulative"]["paired_with"]
    assert paired["seeds"] == [0, 1]  # seed 2 has no partner
    assert paired["first_minus_reference"][0] == pytest.approx(0.2)
    assert paired["final_minus_reference"][0] == pytest.approx(-0.2)


def test_summary_only_re_derives_the_table_and_plot_from_the_kept_runs_and_trains_nothing(tmp_path):
    out, results, plot = tmp_path / "runs", tmp_path / "single-agent.json", tmp_path / "single_agent.png"
    command = [sys.executable, str(SCRIPT), "--variants", "sokoban", "--seeds", "0", "1", "--output-dir", str(out),
               "--out", str(results), "--plot", str(plot), "--summary-only"]
    nothing = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert nothing.returncode != 0 and "no run under" in nothing.stderr
    kept = {"variant": "sokoban", "seed": 0, "evaluations": {"eval": {
        "untrained": [0.3, 0.3, 0.3], "trained": [0.5, 0.6, 0.7], "oracle": [1.0, 1.0, 1.0]}}}
    (out / "sokoban-s0").mkdir(parents=True)
    (out / "sokoban-s0" / "single_agent.json").write_text(json.dumps(kept))
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(results.read_text())["summary"]
    assert summary["sokoban"]["seeds"] == [0] and summary["sokoban"]["eval"]["trained"]["per_seed"] == [[0.5, 0.6, 0.7]]
    assert plot.stat().st_size > 0 and not (out / "sokoban-s1").exists()
    assert "| sokoban | 1 | 77.3% | 30% → 30% | 50% → 70% | +20% | 100% |" in done.stdout
    # a committed copy is found without the run folder, and a run folder's result is copied there
    committed = tmp_path / "committed"
    (committed).mkdir()
    (committed / "sokoban-s1.json").write_text(json.dumps({**kept, "seed": 1}))
    again = subprocess.run(command + ["--kept-dir", str(committed)], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(results.read_text())["summary"]["sokoban"]["seeds"] == [0, 1]
    assert json.loads((committed / "sokoban-s0.json").read_text()) == kept


@pytest.mark.slow
def test_single_agent_trains_evaluates_with_the_oracle_and_resumes(tmp_path):
    out, results = tmp_path / "runs", tmp_path / "single-agent.json"
    command = [sys.executable, str(SCRIPT), "--variants", "sokoban", "sokoban-cumulative", "--seeds", "0", "1",
               "--iterations", "1", "--eval-meta-episodes", "2", "--output-dir", str(out), "--out", str(results),
               "--plot", str(tmp_path / "single_agent.png")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    raw = json.loads((out / "sokoban-s1" / "single_agent.json").read_text())
    assert raw["evaluations"]["eval"]["oracle"] == [1.0, 1.0, 1.0]
    assert raw["oracle_lengths"]["eval"]["all_within_budget"] and raw["oracle_lengths"]["eval"]["max_steps"] == 15
    summary = json.loads(results.read_text())["summary"]
    assert summary["sokoban-cumulative"]["paired_with"]["seeds"] == [0, 1]
    assert len(summary["sokoban"]["eval"]["untrained"]["by_attempt"]) == 3
    assert (tmp_path / "single_agent.png").stat().st_size > 0
    checkpoint = next((out / "sokoban-s0" / "checkpoints").iterdir())
    stamp = checkpoint.stat().st_mtime
    again = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0 and checkpoint.stat().st_mtime == stamp  # kept, not re-run
    assert json.loads(results.read_text())["summary"] == summary
