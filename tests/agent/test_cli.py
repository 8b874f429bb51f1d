"""`mage train` and `mage eval --agent policy|react|reflexion` end to end with a tiny budget."""

import json
from pathlib import Path

from mage_envs.cli import main
from mage_envs.oracle.values import best_nonadaptive_value


def test_train_then_eval_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["train", "--iterations", "2", "--groups-per-iteration", "2", "--group-size", "2",
                 "--eval-meta-episodes", "4", "--output-dir", str(out), "--quiet", "--tensorboard", "false",
                 "--checkpoint-every", "1"])
    assert code == 0
    for name in ("eval.json", "eval_untrained.json", "eval.png", "eval_untrained.png", "training.png",
                 "metrics.jsonl", "config.json"):
        assert (out / name).exists(), name
    report = json.loads((out / "eval.json").read_text())
    # the default population (random-style with the three styles), then the held-out styles
    assert list(report["opponents"]) == ["conservative", "aggressive", "intermediate", "random-style", "bluffer",
                                         "calling-station", "maniac"]
    assert report["training_population"] == dict.fromkeys(list(report["opponents"])[:4], 1.0)
    # what the run saves says what it trained against, whatever a later release's default is
    assert json.loads((out / "config.json").read_text())["env"]["population"] == report["training_population"]
    entry = report["opponents"]["aggressive"]
    assert len(entry["mean_return_by_episode"]) == 3 and entry["best_response_value"] is not None
    expected = best_nonadaptive_value("kuhn_poker", report["training_population"], "random").value
    assert abs(report["best_nonadaptive_value"] - expected) < 1e-9 and expected > 1 / 9 + 0.05
    assert report["bayes_adaptive_value"] is None   # repeated deals: the deal-known ceiling applies
    printed = capsys.readouterr().out
    assert "gap to best response" in printed and "adaptation gain" in printed
    for stage in ("untrained", "trained"):   # every run can be replayed: its evaluations keep transcripts
        records = [json.loads(line) for line in (out / f"transcript_{stage}.jsonl").read_text().splitlines()]
        assert sorted((r["opponent"], r["index"]) for r in records) == sorted(
            (o, j) for o in report["opponents"] for j in range(4))
        assert all(r["steps"] and r["settings"]["agent"] == stage for r in records)

    checkpoint = out / "checkpoints" / "iter-000002"
    assert main(["eval", "--checkpoint", str(checkpoint), "--meta-episodes", "3", "--quiet"]) == 0
    again = json.loads((out / "eval_policy.json").read_text())
    # the run folder stands for its newest checkpoint
    assert main(["eval", "--model", str(out), "--meta-episodes", "3", "--quiet", "--output-dir", str(tmp_path / "x")]) == 0
    assert json.loads((tmp_path / "x" / "eval_policy.json").read_text()) == again
    assert "mage: evaluating iter-000002, the newest checkpoint of" in capsys.readouterr().err
    # by default a run's own settings: its final checkpoint gives its eval.json again, every number equal
    assert main(["eval", "--model", str(out), "--quiet", "--output-dir", str(tmp_path / "again")]) == 0
    assert json.loads((tmp_path / "again" / "eval_policy.json").read_text()) == {**report, "agent": "policy"}
    documented = (Path(__file__).parents[2] / "docs" / "evaluation.md").read_text()
    for key in [*report, *report["opponents"]["aggressive"]]:   # docs/evaluation.md lists every key
        assert f"`{key}`" in documented, key
    assert again["opponents"]["maniac"]["meta_episodes"] == 3
    assert len((out / "transcript_policy.jsonl").read_text().splitlines()) == 3 * 7
    # the transcript is continued only when asked; resumed, nothing is replayed and the report is the same
    assert main(["eval", "--agent", "policy", "--model", str(checkpoint), "--meta-episodes", "3", "--quiet"]) == 2
    assert "--resume" in capsys.readouterr().err
    assert main(["eval", "--agent", "policy", "--model", str(checkpoint), "--meta-episodes", "3", "--quiet",
                 "--resume"]) == 0
    assert json.loads((out / "eval_policy.json").read_text()) == again


def test_a_fresh_deal_evaluation_against_random_style_reports_the_bayes_agent_of_its_styles(tmp_path):
    from mage_envs.oracle import bayes_adaptive_value

    assert main(["train", "--iterations", "1", "--groups-per-iteration", "1", "--group-size", "2",
                 "--eval-meta-episodes", "1", "--quiet", "--tensorboard", "false", "--repeat-instance", "false",
                 "--heldout", "[]", "--output-dir", str(tmp_path / "run")]) == 0   # the default population
    report = json.loads((tmp_path / "run" / "eval.json").read_text())
    population = list(report["training_population"])
    assert "random-style" in population and report["best_nonadaptive_value"] is not None
    assert report["bayes_adaptive_value"] == bayes_adaptive_value("kuhn_poker", population, 3).value
    assert list(report["bayes_by_episode"]) == population   # random-style too: its drawn style is read


def test_a_fresh_deal_evaluation_reports_the_bayes_optimal_agent(tmp_path, capsys):
    from mage_envs.oracle import bayes_adaptive_value

    common = ["--iterations", "1", "--groups-per-iteration", "2", "--group-size", "2", "--eval-meta-episodes", "2",
              "--quiet", "--tensorboard", "false", "--repeat-instance", "false", "--reward-scale", "2",
              "--heldout", "[]", "--population", '{"conservative": 1, "aggressive": 1, "intermediate": 1}']
    assert main(["train", *common, "--output-dir", str(tmp_path / "run")]) == 0
    report = json.loads((tmp_path / "run" / "eval.json").read_text())
    expected = bayes_adaptive_value("kuhn_poker", ["conservative", "aggressive", "intermediate"], 3).value
    assert report["bayes_adaptive_value"] == 2 * expected
    assert report["opponents"]["aggressive"]["instance_optimal_value"] is None
    assert capsys.readouterr().out.count("Bayes-optimal adaptive agent") == 2   # untrained and trained
    # and what that agent scores on the very meta-episodes evaluated (the same seeds, so the same deals)
    from mage_envs.evaluation import evaluate
    from mage_envs.oracle import BayesAdaptiveAgent

    styles = ["conservative", "aggressive", "intermediate"]
    direct = evaluate(None, report["env_id"], opponents=styles, meta_episodes=2, seed=report["seed"],
                      env_kwargs=report["env_kwargs"], oracle=False, progress=False,
                      make_agent=lambda env: BayesAdaptiveAgent(env, population=styles))
    assert report["bayes_by_episode"] == {name: r.mean_return_by_episode for name, r in direct.opponents.items()}
    # without the memory of earlier hands nothing can be learnt: the non-adaptive value is the ceiling
    assert main(["train", *common, "--memory", "false", "--output-dir", str(tmp_path / "blind")]) == 0
    assert json.loads((tmp_path / "blind" / "eval.json").read_text())["bayes_adaptive_value"] is None


def test_train_rejects_bad_settings(capsys):
    import pytest

    with pytest.raises(SystemExit):
        main(["train", "--scope", "batch", "--iterations", "0"])
    with pytest.raises(SystemExit):
        main(["train", "--no-such-flag", "1"])


def test_prompting_baselines_run_on_any_model(tmp_path):
    from mage_agent.tiny import TinyConfig, create_tiny

    model = create_tiny(tmp_path / "model", TinyConfig(corpus_games=2))
    for agent in ("react", "reflexion"):
        assert main(["eval", "--model", str(model), "--agent", agent, "--meta-episodes", "1", "--max-tokens", "4",
                     "--quiet", "--output-dir", str(tmp_path)]) == 0
        report = json.loads((tmp_path / f"eval_{agent}.json").read_text())
        assert report["agent"] == agent
        # a random tiny model rarely writes a legal action: the harness must say so
        assert all(0.0 <= r["invalid_action_rate"] <= 1.0 for r in report["opponents"].values())


def test_a_new_run_refuses_an_earlier_one_unless_told(tmp_path, capsys):
    import pytest

    out = tmp_path / "run"
    flags = ["--groups-per-iteration", "2", "--group-size", "2", "--eval-meta-episodes", "0", "--output-dir", str(out),
             "--quiet", "--tensorboard", "false", "--checkpoint-every", "1"]
    assert main(["train", "--iterations", "2"] + flags) == 0
    (out / "notes.txt").write_text("mine")
    weights = (out / "checkpoints" / "iter-000002" / "model" / "model.safetensors").read_bytes()
    with pytest.raises(SystemExit) as stop:
        main(["train", "--iterations", "1"] + flags)
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert "holds an earlier run" in error and "--resume" in error and "--overwrite" in error
    # nothing was touched
    assert (out / "checkpoints" / "iter-000002" / "model" / "model.safetensors").read_bytes() == weights
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2
    with pytest.raises(SystemExit):
        main(["train", "--resume", "--overwrite"] + flags)

    assert main(["train", "--iterations", "1", "--overwrite"] + flags) == 0
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in lines] == [1]  # the new run's log only
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["iter-000001", "latest"]
    assert (out / "notes.txt").read_text() == "mine"  # only the run's own files are removed


def test_resume_without_a_checkpoint_starts_a_clean_log(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"iteration": 1}\n')  # killed before its first checkpoint
    assert main(["train", "--iterations", "1", "--groups-per-iteration", "2", "--group-size", "2",
                 "--eval-meta-episodes", "0", "--output-dir", str(out), "--quiet", "--tensorboard", "false",
                 "--resume"]) == 0
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 1 and "return_ep1" in lines[0]


def test_train_says_when_the_packed_forward_does_not_apply(tmp_path, capsys):
    code = main(["train", "--iterations", "1", "--groups-per-iteration", "1", "--group-size", "2",
                 "--eval-meta-episodes", "0", "--output-dir", str(tmp_path / "run"), "--quiet",
                 "--tensorboard", "false", "--activation-checkpointing", "true"])
    assert code == 0
    assert "mage: packed_forward: off (activation checkpointing is on); the plain forward runs" in capsys.readouterr().err


def test_eval_of_a_checkpoint_shows_the_notes_train_shows_and_quiet_is_quiet(tmp_path, capfd):
    out = tmp_path / "run"
    assert main(["train", "--iterations", "1", "--groups-per-iteration", "1", "--group-size", "2",
                 "--eval-meta-episodes", "2", "--output-dir", str(out), "--quiet", "--tensorboard", "false",
                 "--activation-checkpointing", "true", "--heldout", "[]", "--checkpoint-every", "1"]) == 0
    written = capfd.readouterr().err
    # --quiet: no progress bar, transformers' own ones (writing the checkpoint's shards) included
    assert "\r" not in written and "it/s" not in written and "Writing model shards" not in written, written
    from transformers.utils import logging as hf_logging

    assert hf_logging.is_progress_bar_enabled()   # restored after the command
    trained = [line for line in written.splitlines() if line.startswith("mage: ")]
    assert "mage: packed_forward: off (activation checkpointing is on); the plain forward runs" in trained
    assert ("mage: oracle: the best non-adaptive value against the training population (conservative, aggressive, "
            "intermediate, random-style)") in trained
    assert main(["eval", "--model", str(out / "checkpoints" / "iter-000001"), "--quiet"]) == 0
    evaluated = [line for line in capfd.readouterr().err.splitlines() if line.startswith("mage: ")]
    assert sorted(set(evaluated)) == sorted(set(trained))
