"""benchmarks/league.py and benchmarks/two_learners.py tabulate their per-run JSON exactly:
means over seeds, the league paired with the default seed by seed, the ratings' means."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))

import league  # noqa: E402
import two_learners  # noqa: E402


def _run(variant, seed, exploitability, final, ratings=None):
    against = {name: {"return_by_hand": [0.0, 0.1, final], "win_rate_by_hand": [0.5, 0.5, 0.5 + final],
                      "loss_rate_by_hand": [0.5, 0.5, 0.5 - final], "first_hand_exact": -0.1,
                      "best_response_value": 0.2, "deal_known_ceiling": 0.25, "winnable_fraction": None}
               for name in league.OPPONENTS}
    return {"variant": variant, "seed": seed, "against": against, "ratings": ratings or [],
            "exploitability": [{"iteration": 100, "exploitability": 0.5}, {"iteration": 200, "exploitability": exploitability}]}


def test_the_league_is_paired_with_the_default_by_seed():
    ratings = [{"iteration": 10, "learner": 20.0, "conservative": 18.0}]
    results = [_run("default", 1, 0.4, 0.10), _run("default", 2, 0.5, 0.20), _run("default", 3, 0.45, 0.30),
               _run("league", 1, 0.1, 0.15, ratings), _run("league", 2, 0.3, 0.15, ratings)]
    table = league.summarise(results)
    assert table["variants"]["default"]["seeds"] == [1, 2, 3]
    assert table["variants"]["default"]["exploitability"][0] == pytest.approx(0.45)
    paired = table["paired"]
    assert paired["seeds"] == [1, 2]
    assert paired["exploitability"][0] == pytest.approx(-0.25)        # (0.1 - 0.4 + 0.3 - 0.5) / 2
    assert paired["nash"]["return_by_hand"][0] == pytest.approx(0.0)  # (+0.05 - 0.05) / 2
    assert table["variants"]["league"]["ratings"]["learner"] == [(20.0, 0.0)]
    assert "ratings" not in table["variants"]["default"]
    assert table["variants"]["league"]["exploitability_track"]["iteration"] == [100, 200]


def test_two_learners_summary_pairs_first_and_last_measurement():
    results = [{"seed": s, "iterations": 20, "seconds": 10.0,
                "exploitability": [{"iteration": 1, "exploitability": 0.4 + d}, {"iteration": 20, "exploitability": 0.2}]}
               for s, d in ((0, 0.0), (1, 0.1))]
    summary = two_learners.summarise(results)
    assert summary["first"][0] == pytest.approx(0.45) and summary["last"] == (pytest.approx(0.2), 0.0)
    assert summary["last_minus_first"][0] == pytest.approx(-0.25)
    assert summary["seconds_per_iteration"][0] == pytest.approx(0.5)
