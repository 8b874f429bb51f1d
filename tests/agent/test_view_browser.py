"""The `mage view` report of a real (tiny) training run, opened in headless Chromium.

Skipped, with the reason, where playwright or a Chromium is missing (.ci/run installs
Debian's chromium). The screenshot goes to ``$MAGE_TEST_ARTIFACTS`` (default: the test's
temporary folder) as ``report.png``."""

import importlib.util
import json
import os
from pathlib import Path

import pytest

from mage_envs.cli import main

pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra has it)")
_SPEC = importlib.util.spec_from_file_location("report_screenshot",
                                               Path(__file__).parents[2] / "scripts" / "report_screenshot.py")
assert _SPEC is not None and _SPEC.loader is not None
shots = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(shots)
pytestmark = [pytest.mark.slow,   # a training run and a browser: ~25 s
              pytest.mark.skipif(shots.find_chromium() is None,
                                 reason="no Chromium on this machine: apt-get install chromium (.ci/run does)")]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("view") / "run"
    assert main(["train", "--iterations", "3", "--groups-per-iteration", "2", "--group-size", "2",
                 "--eval-meta-episodes", "4", "--output-dir", str(out), "--quiet", "--tensorboard", "false",
                 "--heldout", "[]"]) == 0
    assert main(["view", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def browser():
    with shots.chromium() as opened:
        yield opened


@pytest.fixture(scope="module")
def page(run, browser):
    with shots.report_page(run / "report.html", browser) as opened:
        yield opened


def _records(path):
    return {(r["opponent"], r["index"]): r for r in map(json.loads, path.read_text().splitlines())}


def test_the_report_renders_offline_without_errors_and_shows_eval_json(run, page, tmp_path):
    page, errors, requests = page
    assert errors == []
    assert all(url.startswith(("file:", "data:")) for url in requests), requests
    for stage, name in (("trained", "eval.json"), ("untrained", "eval_untrained.json")):
        report = json.loads((run / name).read_text())
        table = page.locator(f'table.eval[data-agent="{stage}"]')
        assert table.locator("tbody tr").count() == len(report["opponents"])
        for opponent, result in report["opponents"].items():
            row = table.locator(f'tr[data-opponent="{opponent}"]')
            cells = row.locator("td.ret")
            assert cells.count() == report["num_episodes"]
            for k, mean in enumerate(result["mean_return_by_episode"]):
                cell = cells.nth(k)
                assert float(cell.get_attribute("data-mean")) == mean
                half = 1.96 * result["stderr_return_by_episode"][k]
                assert cell.inner_text() == f"{mean:+.3f} \u00b1 {half:.3f}"
            for key in ("best_response_value", "equilibrium_value", "instance_optimal_value"):
                shown = row.locator(f'td.oracle[data-key="{key}"]').inner_text()
                assert shown == ("-" if result[key] is None else f"{result[key]:+.3f}")
    assert page.locator("#training figure[data-metric-group]").count() >= 3   # returns, entropy, KL
    assert page.locator("#evaluation figure[data-opponent]").count() == len(report["opponents"])
    out = Path(os.environ.get("MAGE_TEST_ARTIFACTS", tmp_path)) / "report.png"
    assert shots.screenshot(page, out).stat().st_size > 20_000


def test_stepping_through_a_replay_shows_the_transcripts_moves_in_order(run, page):
    page, errors, _ = page
    page.select_option("#replay-agent", "trained")
    page.select_option("#filter-opponent", "aggressive")
    records = _records(run / "transcript_trained.jsonl")
    kept = sorted(j for (o, j), r in records.items() if o == "aggressive" and r["steps"])
    assert page.locator("#replay-list .meta-episode").count() == len(kept) == 4
    page.locator('#replay-list .meta-episode[data-index="2"]').click()
    steps = records["aggressive", 2]["steps"]
    shown, prompts = [], []
    for k in range(len(steps)):
        assert page.inner_text("#frame-counter") == f"step {k + 1} / {len(steps) + 1}"
        shown.append(page.inner_text("#frame-answer"))
        prompts.append(page.inner_text("#player .prompt"))
        page.click("#step-next")
    assert shown == [step["answer"] for step in steps]
    assert [p.split("\n")[0] for p in prompts] == [s["prompt"].split("\n")[0] for s in steps]
    assert page.inner_text("#frame-phase") == "meta-episode over"   # the last frame: how it ended
    page.keyboard.press("Home")
    assert page.inner_text("#frame-counter").startswith("step 1 /")
    page.keyboard.press("ArrowRight")
    assert page.inner_text("#frame-answer") == steps[1]["answer"]
    page.keyboard.press("End")
    assert page.inner_text("#frame-counter") == f"step {len(steps) + 1} / {len(steps) + 1}"
    outcome = records["aggressive", 2]["outcomes"][-1]
    page.select_option("#filter-outcome", outcome)
    same = [j for j in kept if records["aggressive", j]["outcomes"][-1] == outcome]
    assert page.locator("#replay-list .meta-episode").count() == len(same)
    assert errors == []


def test_side_by_side_shows_both_agents_on_the_same_deal(run, page):
    page, errors, _ = page
    assert page.input_value("#compare-left") == "untrained" and page.input_value("#compare-right") == "trained"
    page.select_option("#compare-key", "intermediate#1")
    left, right = page.locator("#compare-left-pane .prompt"), page.locator("#compare-right-pane .prompt")
    assert left.inner_text() == right.inner_text()   # the same seed and instance: the same first prompt
    untrained = _records(run / "transcript_untrained.jsonl")["intermediate", 1]["steps"]
    trained = _records(run / "transcript_trained.jsonl")["intermediate", 1]["steps"]
    assert page.inner_text("#left-answer") == untrained[0]["answer"]
    assert page.inner_text("#right-answer") == trained[0]["answer"]
    page.click("#compare-next")
    assert page.inner_text("#left-counter").startswith("step 2 /") and page.inner_text("#right-counter").startswith("step 2 /")
    assert errors == []


def test_a_sokoban_replay_draws_the_room_as_the_agent_saw_it(tmp_path, browser):
    assert main(["eval", "--env", "mage/Sokoban-meta-v0", "--agent", "random", "--meta-episodes", "1",
                 "--output-dir", str(tmp_path), "--quiet"]) == 0
    assert main(["view", str(tmp_path)]) == 0
    first = json.loads((tmp_path / "transcript_random.jsonl").read_text().splitlines()[0])["steps"][0]["prompt"]
    board = [line for line in first.splitlines() if line and set(line) <= set("#@+$*. ") and "#" in line]
    with shots.report_page(tmp_path / "report.html", browser) as (page, errors, _):
        rows = page.locator("#player .grid-board .grid-row")
        assert rows.count() == len(board) >= 3
        assert [rows.nth(k).inner_text().replace("\n", "").replace("\u00a0", " ") for k in range(rows.count())] == board
        assert page.locator("#player .grid-board .cell.c1, #player .grid-board .cell.c2").count() == 1   # the keeper
        assert errors == []
