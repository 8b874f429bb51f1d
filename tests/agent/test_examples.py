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


@pytest.mark.slow
@pytest.mark.parametrize("module", ["train_kuhn_poker", "train_tic_tac_toe"])
def test_trainer_examples_take_the_cli_flags_with_their_meaning(tmp_path, module, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    example = __import__(module)
    out = tmp_path / "run"
    flags = ["--iterations", "1", "--groups-per-iteration", "1", "--group-size", "2", "--tensorboard", "false",
             "--output-dir", str(out), "--quiet"]
    assert example.main([*flags, "--eval-meta-episodes", "0"]) == 0   # 0 skips the evaluation, as in `mage train`
    assert not list(out.glob("eval*.json"))
    with pytest.raises(SystemExit):
        example.main([*flags, "--learning-rte", "1"])
    assert "did you mean '--learning-rate'?" in capsys.readouterr().err


def test_the_tic_tac_toe_pool_leaves_no_room_for_adaptation_across_games():
    # what the example's docstring says: one fixed policy best-responds to every opponent of its pool
    sys.path.insert(0, str(EXAMPLES))
    from train_tic_tac_toe import TRAIN_POPULATION

    from mage_envs.oracle import best_nonadaptive_value, best_response_value

    fixed = best_nonadaptive_value("tic_tac_toe", list(TRAIN_POPULATION)).value
    best = sum(best_response_value("tic_tac_toe", name).value for name in TRAIN_POPULATION) / len(TRAIN_POPULATION)
    assert fixed == pytest.approx(best, abs=1e-9) and round(fixed, 3) == 0.992
    trio = ["random", "greedy", "minimax"]   # of the registered archetypes, the most room (second seat)
    gap = sum(best_response_value("tic_tac_toe", n, seat=1).value for n in trio) / 3 - best_nonadaptive_value(
        "tic_tac_toe", trio, seat=1).value
    assert round(gap, 3) == 0.076
