"""The round robin: antisymmetric in a zero-sum game, CIs that cover the exact values, the CLI."""

import json
import math

import pytest

from mage_envs.cli import main
from mage_envs.tournament import Entrant, archetype_entrant, round_robin

KUHN = ["nash", "aggressive", "conservative", "random"]


@pytest.fixture(scope="module")
def result():
    entrants = [archetype_entrant("kuhn_poker", n) for n in KUHN]
    return round_robin("kuhn_poker", [*entrants, Entrant("best-response", kind="best-response"),
                                      Entrant("bayes", kind="bayes")], games=40, seed=1)


def test_zero_sum_matrix_is_antisymmetric(result):
    for a in result.names:
        for b in result.names:
            if not math.isnan(result.payoff[a][b]):
                assert result.payoff[a][b] == pytest.approx(-result.payoff[b][a], abs=1e-12)
                assert result.ci95[a][b] == pytest.approx(result.ci95[b][a], abs=1e-12)
                assert result.exact[a][b] == pytest.approx(-result.exact[b][a], abs=1e-12)


def test_means_sit_in_their_confidence_intervals_around_the_exact_values(result):
    misses = [(a, b) for a in result.names for b in result.names if a < b and not math.isnan(result.payoff[a][b])
              and abs(result.payoff[a][b] - result.exact[a][b]) > result.ci95[a][b] + 1e-12]
    assert len(misses) <= 1, misses   # 13 pairs at 95%: one miss is chance, more is a bug


def test_hand_solved_values(result):
    assert result.exact["best-response"]["aggressive"] == pytest.approx(1 / 3)   # docs/oracles.md's table
    assert result.exact["nash"]["best-response"] == pytest.approx(0.0, abs=1e-12)   # the game value, seat averaged
    assert result.exact["bayes"]["random"] <= result.exact["best-response"]["random"] + 1e-12
    # a pure pair over stratified deals has no spread
    assert result.ci95["aggressive"]["conservative"] == 0.0
    assert result.ratings["best-response"]["mu"] > result.ratings["random"]["mu"]


def test_cli_writes_json_and_plot(tmp_path, capsys):
    assert main(["tournament", "--agents", "nash,aggressive,best-response", "--games", "5",
                 "--output-dir", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "tournament.json").read_text())
    assert data["names"] == ["nash", "aggressive", "best-response"]
    assert (tmp_path / "tournament.png").stat().st_size > 0
    assert "ratings" in capsys.readouterr().out
    assert main(["tournament", "--agents", "nash,nobody", "--output-dir", str(tmp_path)]) == 2


def test_bayes_best_responds_to_the_archetypes_in_its_prior_only():
    nash, aggressive = archetype_entrant("kuhn_poker", "nash"), archetype_entrant("kuhn_poker", "aggressive")
    outsider = Entrant("checkpoint", aggressive.table, in_prior=False)   # plays as aggressive, not in the prior
    result = round_robin("kuhn_poker", [nash, outsider, Entrant("bayes", kind="bayes")], games=2)
    # the prior is nash alone: bayes best-responds to nash, which earns the game value (0) against it
    assert result.exact["bayes"]["nash"] == pytest.approx(0.0, abs=1e-12)
    with_prior = round_robin("kuhn_poker", [nash, aggressive, Entrant("bayes", kind="bayes")], games=2)
    assert with_prior.exact["bayes"]["aggressive"] != pytest.approx(result.exact["bayes"]["checkpoint"])
