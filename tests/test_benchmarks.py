"""The benchmarks run end to end on a tiny budget (their numbers live in docs)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "env_throughput.py"


def test_env_throughput_prints_a_ratio_for_every_game_and_view():
    done = subprocess.run([sys.executable, str(SCRIPT), "--games", "40", "--aec-games", "4", "--repeats", "1",
                           "--mcts-moves", "1"], capture_output=True, text=True, timeout=300, check=True)
    ratios = [line for line in done.stdout.splitlines() if "ratio to raw" in line]
    assert len(ratios) == 9  # 3 games x (text, numeric, pettingzoo)
    assert all(float(line.split("ratio to raw:")[1].strip().rstrip("x")) > 0 for line in ratios)
    assert "MCTS-100: C++" in done.stdout


def test_scoring_memory_compares_both_variants_on_the_same_log_probs():
    script = SCRIPT.parent / "scoring_memory.py"
    done = subprocess.run([sys.executable, str(script), "--rows", "4", "--prompt", "24", "--completion", "3",
                           "--vocab", "2000", "--duplicates", "2"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr  # it exits non-zero when the two disagree on the log-probs
    sums = [float(line.rsplit("log-prob sum", 1)[1]) for line in done.stdout.splitlines() if "log-prob sum" in line]
    assert len(sums) == 2 and sums[0] == pytest.approx(sums[1], rel=1e-4) and sums[0] < 0
    assert "memory ratio plain/policy:" in done.stdout


def test_ttt_speed_times_both_forwards_and_checks_their_metrics_agree():
    pytest.importorskip("torch")
    script = SCRIPT.parent / "ttt_speed.py"
    done = subprocess.run([sys.executable, str(script), "--iterations", "1", "--warmup", "0", "--groups", "2"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]   # non-zero: the metrics disagree
    assert "metrics agree: yes" in done.stdout
    assert float(done.stdout.split("speed-up baseline/candidate:")[1].split("x")[0]) > 0
    assert [line.split()[:2] for line in done.stdout.splitlines() if "update" in line] == [
        ["baseline", "(packed_forward=false)"], ["candidate", "(packed_forward=true)"]]


def test_free_text_speed_draws_the_same_tokens_packed_as_padded(tmp_path):
    pytest.importorskip("torch")
    from mage_agent import pretrained

    try:
        pretrained.embedded_file("smollm2-135m")
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    out = tmp_path / "speed.json"
    done = subprocess.run([sys.executable, str(SCRIPT.parent / "free_text_speed.py"), "--prompts", "1",
                           "--max-new-tokens", "3", "--threads", "1", "--output", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]   # non-zero: other tokens drawn
    result = json.loads(out.read_text())
    assert [(b["rows"], b["distinct_prompts"]) for b in result["batches"].values()] == [(8, 1), (8, 8)]
    for batch in result["batches"].values():
        assert batch["packed_float32_same_tokens"] == 1 and batch["packed_float32_logprob_gap_max"] < 1e-3
        assert 0 < batch["bfloat16_logprob_gap"]["max"] < 1.0 and 1 <= batch["tokens_per_answer"] <= 3
        assert set(batch["paths"]) == {"padded float32 (before)", "packed float32", "packed bfloat16"}


def test_ttt_speed_refuses_the_settings_it_sets_itself():
    sys.path.insert(0, str(SCRIPT.parent))
    import ttt_speed

    config = ttt_speed.config_of("kuhn", 3, 4, {"threads": 2, "groups_per_iteration": 6}, "/tmp/x")
    assert (config.run.threads, config.run.iterations, config.rollout.groups_per_iteration) == (2, 3, 6)
    with pytest.raises(SystemExit, match="iterations"):
        ttt_speed.config_of("kuhn", 3, 0, {"iterations": 5}, "/tmp/x")


def test_learning_trains_evaluates_and_tabulates_paired_variants(tmp_path):
    pytest.importorskip("torch")
    script = SCRIPT.parent / "learning.py"
    results = tmp_path / "learning.json"
    command = [sys.executable, str(script), "--seeds", "0", "--iterations", "2", "--variants", "iterations-600", "cumulative",
               "--jobs", "1", "--output-dir", str(tmp_path / "runs"), "--results", str(results)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    table = json.loads(results.read_text())["table"]
    assert set(table) >= {"iterations-600", "cumulative"}
    for variant in ("iterations-600", "cumulative"):
        report = json.loads((tmp_path / "runs" / f"{variant}-s0" / "eval.json").read_text())
        for style in ("conservative", "aggressive", "intermediate", "bluffer", "calling-station", "maniac"):
            result = report["opponents"][style]
            assert result["meta_episodes"] == 300 and len(result["mean_return_by_episode"]) == 3
            assert result["instance_optimal_value"] is not None  # the ceiling on the very instances played
    assert table["cumulative"]["paired"]["reference"] == "iterations-600"   # one seed: the difference itself
    assert table["cumulative"]["paired"]["difference"][0] == pytest.approx(
        table["cumulative"]["final_by_seed"][0] - table["iterations-600"]["final_by_seed"][0])
    again = subprocess.run(command + ["--summarise-only"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and json.loads(results.read_text())["table"] == table  # nothing retrained


def _report(final_returns):
    """An evaluation report whose final hand returns ``final_returns[style]`` on every style."""
    styles = ["conservative", "aggressive", "intermediate", "bluffer", "calling-station", "maniac"]
    return {"opponents": {style: {"mean_return_by_episode": [0.0, 0.0, final_returns.get(style, 0.1)],
                                  "instance_optimal_value": 0.5, "best_response_value": 0.25} for style in styles}}


def test_each_variant_is_paired_seed_by_seed_with_its_reference():
    sys.path.insert(0, str(SCRIPT.parent))
    import learning

    results = [{"variant": variant, "seed": seed, "report": _report({"aggressive": value + 0.01 * seed})}
               for variant, value in (("iterations-600", 0.4), ("stakes", 0.1), ("stakes-std", 0.4))
               for seed in (0, 1, 2)]
    results.append({"variant": "stakes-global", "seed": 0, "report": _report({"aggressive": 0.1})})
    table = learning.summarise(results)
    assert "paired" not in table["iterations-600"]   # its reference, the default, did not run
    # each paired difference is in the mean over the three training styles: 0.3 / 3 = 0.1 per seed
    assert table["stakes-std"]["paired"] == {"reference": "stakes", "difference": (pytest.approx(0.1), 0.0)}
    assert table["stakes"]["paired"]["reference"] == "iterations-600"
    assert table["stakes-global"]["paired"]["difference"][0] == pytest.approx(0.0)   # seed 0 only
    assert table["stakes"]["style_share_by_seed"]["aggressive"] == [0.2, 0.22, 0.24]


def test_variants_measured_before_900_iterations_keep_their_length_and_pair_with_that_default():
    sys.path.insert(0, str(SCRIPT.parent))
    import learning

    from mage_agent.config import TrainConfig, apply_overrides

    assert TrainConfig().run.iterations == 900 and learning.VARIANTS["mage"] == {}
    lengths = {name: apply_overrides(TrainConfig(), overrides).run.iterations
               for name, overrides in learning.VARIANTS.items()}
    at_default = {"cumulative-900", "global-norm-900", "stakes-900", "stakes-global-900", "stakes-return-std-900",
                  "no-memory-900",
                  "single-conservative-900", "single-aggressive-900", "single-intermediate-900", "stabilisers-off-900"}
    assert {name for name, length in lengths.items() if length == 900} == {
        "mage", "fresh-deals-900", "mage-other-seeds", "random-style-other-seeds", "random-style-league-other-seeds",
        "equilibrium-other-seeds", *at_default}
    assert learning.PAIRED_WITH["random-style-league-other-seeds"] == "random-style-other-seeds"
    assert learning.PAIRED_WITH["equilibrium-other-seeds"] == "random-style-other-seeds"
    # every variant was measured without the first-hand anchor (today's Kuhn default) unless it sets it
    coefs = {name: learning.run_config((name, 20, 900, "runs", overrides)).algo.equilibrium_coef
             for name, overrides in learning.VARIANTS.items()}
    assert {name for name, coef in coefs.items() if coef} == {"equilibrium-other-seeds",
                                                              "fresh-deals-equilibrium-other-seeds"}
    assert coefs["equilibrium-other-seeds"] == coefs["fresh-deals-equilibrium-other-seeds"] == 1.0
    assert learning.PAIRED_WITH["fresh-deals-equilibrium-other-seeds"] == "fresh-deals-config-other-seeds"
    assert learning.VARIANTS["fresh-deals-config-other-seeds"] == learning.VARIANTS["fresh-deals-entropy-hold-1200"]
    # the defaults of this release and the one before, on seeds they were not chosen on: unpaired
    assert lengths["iterations-600-other-seeds"] == 600
    assert not {"mage-other-seeds", "iterations-600-other-seeds"} & set(learning.PAIRED_WITH)
    assert lengths["iterations-600"] == lengths["cumulative"] == lengths["entropy-hold-0.3"] == 600
    assert lengths["previous-default"] == 200 and lengths["mage-plain"] == 400   # a variant's own length is kept
    assert learning.PAIRED_WITH["cumulative"] == learning.PAIRED_WITH["single-aggressive"] == "iterations-600"
    assert "iterations-600" not in learning.PAIRED_WITH   # compared with the default
    assert learning.PAIRED_WITH["stakes-std"] == "stakes"
    # the method's claims rerun at the default's length, against the default
    assert learning.PAIRED_WITH["cumulative-900"] == learning.PAIRED_WITH["global-norm-900"] == "mage"
    assert learning.PAIRED_WITH["stakes-900"] == "mage" and learning.PAIRED_WITH["stakes-global-900"] == "stakes-900"
    assert learning.PAIRED_WITH["stakes-return-std-900"] == "stakes-900"
    assert learning.VARIANTS["cumulative-900"] == {"iterations": 900, "reward_mode": "cumulative"}
    assert learning.PAIRED_WITH["no-memory-900"] == learning.PAIRED_WITH["single-aggressive-900"] == "mage"
    assert learning.VARIANTS["stabilisers-off-900"] == {"iterations": 900, "clip_high": 0.2, "schedule": "constant",
                                                        "entropy_schedule": "constant"}   # 900, not its own 200


def test_runs_before_the_packed_default_are_paired_among_themselves():
    sys.path.insert(0, str(SCRIPT.parent))
    import learning

    assert learning.VARIANTS["mage-plain"] == {"iterations": 400, "packed_forward": False}
    assert learning.VARIANTS["stabilisers-off-plain"]["iterations"] == 200
    assert learning.PAIRED_WITH["mage-plain"] == "iterations-400"
    assert learning.PAIRED_WITH["constant-entropy-plain"] == "mage-plain"
    assert learning.PAIRED_WITH["stakes-std-plain"] == "stakes-plain"
    assert learning.PAIRED_WITH["cumulative-constant-entropy-plain"] == "constant-entropy-plain"
    assert "cumulative-constant-entropy" not in learning.VARIANTS   # run only before the packed default


def test_fresh_deal_shares_are_of_the_final_hands_own_ceiling():
    sys.path.insert(0, str(SCRIPT.parent))
    import learning

    report = _report({})
    for result in report["opponents"].values():
        result["instance_optimal_value"] = None
    assert learning.per_style(report, ["aggressive"])["aggressive"]["ceiling"] == 0.25   # an older report
    for result in report["opponents"].values():
        result["best_response_by_episode"] = [0.25, 0.3, 0.2]
    assert learning.per_style(report, ["aggressive"])["aggressive"] == {
        "first": 0.0, "final": 0.1, "ceiling": 0.2, "share": pytest.approx(0.5)}
    # fresh-deal variants are paired among themselves, never with repeated deals (another ceiling),
    # and the share is the final hand over the styles' mean ceiling (not the mean of their shares)
    def fresh(aggressive):
        report = _report({"aggressive": aggressive})
        for style, result in report["opponents"].items():
            result["instance_optimal_value"] = None
            result["best_response_by_episode"] = [0.3, 0.3, 0.4 if style == "aggressive" else 0.2]
        return report

    runs = [{"variant": variant, "seed": seed, "report": fresh(value + 0.01 * seed)}
            for variant, value in (("fresh-deals", 0.1), ("fresh-deals-900", 0.4)) for seed in (0, 1)]
    runs += [{"variant": "mage", "seed": seed, "report": _report({})} for seed in (0, 1)]
    table = learning.summarise(runs)
    assert table["fresh-deals-900"]["paired"] == {"reference": "fresh-deals", "difference": (pytest.approx(0.1), 0.0)}
    assert "paired" not in table["fresh-deals"]
    assert table["fresh-deals"]["share_of_mean_ceiling"][0] == pytest.approx((0.3 / 0.8 + 0.31 / 0.8) / 2)


def test_ttt_learning_trains_and_reports_every_game_index(tmp_path):
    pytest.importorskip("torch")
    script = SCRIPT.parent / "ttt_learning.py"
    # the pool with mcts-100 (the example's pool is the same code with five members)
    command = [sys.executable, str(script), "--pool", "mcts", "--iterations", "1", "--meta-episodes", "2",
               "--strong-meta-episodes", "1", "--output-dir", str(tmp_path / "runs"), "--results", str(tmp_path / "ttt.json")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "runs" / "ttt-mcts-s0" / "checkpoints").is_dir()
    results = json.loads((tmp_path / "ttt.json").read_text())["results"]["0"]
    assert set(results) == {"untrained/pool", "trained/pool", "untrained/strong", "trained/strong"}
    assert set(results["trained/strong"]) == {"mcts-1000"} and len(results["trained/pool"]) == 8
    assert "mcts-100" in results["trained/pool"]
    for result in results["trained/pool"].values():
        for w, d, loss in zip(result["win_rate_by_episode"], result["draw_rate_by_episode"],
                              result["loss_rate_by_episode"]):
            assert len(result["win_rate_by_episode"]) == 3 and w + d + loss == pytest.approx(1.0)
    assert "mcts-1000" in done.stdout
    # the finished run evaluated again at another temperature: new files beside the first ones
    again = subprocess.run(command[:-1] + [str(tmp_path / "ttt-t.json"), "--eval-temperature", "0.5"],
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    folder = tmp_path / "runs" / "ttt-mcts-s0"
    assert {path.name for path in folder.glob("eval-*-t0.5.json")} == {
        f"eval-{stage}-{pool}-t0.5.json" for stage in ("untrained", "iter-000001") for pool in ("pool-2", "strong-1")}
    for path in folder.glob("eval-*.json"):   # the temperature reached the sampler of each evaluation
        expected = 0.5 if path.stem.endswith("-t0.5") else 1.0
        assert json.loads(path.read_text())["sampling"]["temperature"] == expected, path.name
    assert json.loads((tmp_path / "ttt-t.json").read_text())["args"]["eval_temperature"] == "0.5"


def test_ttt_learning_summarises_opponents_over_seeds():
    sys.path.insert(0, str(SCRIPT.parent))
    import ttt_learning

    def result(final, win, draw, best):
        return {"mean_return_by_episode": [0.1, 0.2, final], "win_rate_by_episode": [0.5, 0.5, win],
                "draw_rate_by_episode": [0.0, 0.0, draw], "loss_rate_by_episode": [0.5, 0.5, 1 - win - draw],
                "best_response_value": best}

    def reports(final, draw):
        return {f"{stage}/pool": {"opponents": {"random": result(final if stage == "trained" else -0.5, final, 0.0, 0.9),
                                                "preferred-cell-spiral": result(1.0, 1.0, 0.0, 1.0)}}
                for stage in ("untrained", "trained")} | {
                f"{stage}/strong": {"opponents": {"mcts-1000": result(-1.0 + draw, 0.0, draw, None)}}
                for stage in ("untrained", "trained")}

    rows = ttt_learning.over_seeds({0: reports(0.5, 0.1), 1: reports(0.7, 0.3)})
    # the mean of two seeds and t(0.975, 1) * sd / sqrt(2) = 12.706 * 0.1414 / 1.414
    assert rows == ["| random | training | -0.500 ± 0.000 | +0.100 ± 0.000 | +0.600 ± 1.271 | 60/0/40 | +0.900 |",
                    "| preferred-cell-spiral | held out | +1.000 ± 0.000 | +0.100 ± 0.000 | +1.000 ± 0.000 | 100/0/0 "
                    "| +1.000 |",
                    "| mcts-1000 | strong | -0.800 ± 1.271 | +0.100 ± 0.000 | -0.800 ± 1.271 | 0/20/80 | 0 (a draw) |"]


@pytest.mark.parametrize("fresh", [False, True])
def test_capacity_fits_the_oracle_and_reports_each_style(tmp_path, fresh):
    pytest.importorskip("torch")
    output = tmp_path / "capacity.json"
    done = subprocess.run([sys.executable, str(SCRIPT.parent / "capacity.py"), "--steps", "3", "--batch", "8",
                           "--meta-episodes", "12", "--output", str(output)] + (["--fresh-deals"] if fresh else []),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(output.read_text())
    assert result["turns"] > 0 and result["prompts"] <= result["turns"]
    assert set(result["styles"]) == {"conservative", "aggressive", "intermediate"}
    for style in result["styles"].values():
        assert style["ceiling"] > 0 and style["share"] == pytest.approx(style["final"] / style["ceiling"])
    if fresh:   # the teacher's own final hand on the evaluated meta-episodes, and the share of it
        assert set(result["bayes_final"]) == set(result["styles"])
        assert result["share_of_bayes"] == pytest.approx(
            sum(s["final"] for s in result["styles"].values()) / sum(result["bayes_final"].values()))


def test_capacity_with_an_adapter_on_the_top_layer_scores_through_the_frozen_trunk(tmp_path):
    """The frozen-trunk path (states below the adapted layers computed once) gives the
    scorer's own log-probs, and the fit is reported per hand and per final-hand style."""
    pytest.importorskip("torch")
    output = tmp_path / "capacity.json"
    done = subprocess.run([sys.executable, str(SCRIPT.parent / "capacity.py"), "--steps", "3", "--batch", "8",
                           "--meta-episodes", "12", "--eval-meta-episodes", "12", "--set", "lora=true",
                           "--set", "lora_top_layers=1", "--set", 'dtype="float32"', "--cosine", "--output", str(output)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    gap = float(done.stdout.split("max |log-prob - scorer's| ")[1].split()[0])
    assert gap < 1e-4
    fit = json.loads(output.read_text())["fit_by_hand"]
    assert {"hand 1", "hand 2", "hand 3", "hand 3 vs aggressive"} <= set(fit)
    assert sum(fit[f"hand {h}"]["turns"] for h in (1, 2, 3)) == json.loads(output.read_text())["turns"]
    assert all(f["nll"] > 0 and 0 <= f["above_half"] <= 1 for f in fit.values())


def test_capacity_only_hands_fits_the_final_hand_alone(tmp_path):
    pytest.importorskip("torch")
    output = tmp_path / "capacity.json"
    done = subprocess.run([sys.executable, str(SCRIPT.parent / "capacity.py"), "--steps", "2", "--batch", "8",
                           "--meta-episodes", "6", "--eval-meta-episodes", "12", "--only-hands", "3",
                           "--output", str(output)], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(output.read_text())
    fit = result["fit_by_hand"]
    assert {key.split(" vs ")[0] for key in fit} == {"hand 3"} and fit["hand 3"]["turns"] == result["turns"] > 0


def test_capacity_text_chooser_fits_commands_by_their_words_and_answers_a_legal_one():
    pytest.importorskip("torch")
    import torch

    sys.path.insert(0, str(SCRIPT.parent))
    from capacity import TextChooser, train_supervised

    from mage_agent.policy import Policy
    from mage_agent.tiny import build_model, build_tokenizer

    torch.manual_seed(0)
    tok = build_tokenizer(["goal apple fridge take open put in 1 2"])
    chooser = TextChooser(Policy(build_model(tok), tok), seed=0)
    commands = ("take apple 1", "take apple 2", "open fridge 1", "put apple 1 in fridge 1")
    # the same first two words in two commands: the choice must read past them
    rows = [("goal apple 2", commands, "take apple 2", 0, ""), ("goal fridge", commands, "open fridge 1", 0, ""),
            ("goal put", commands, "put apple 1 in fridge 1", 0, "")]
    losses, last = train_supervised(chooser.policy, rows, steps=60, batch=3, lr=1e-2, seed=0, chooser=chooser)
    assert losses[0] > 1.0 > 0.1 > losses[-1]
    assert all(logprob > np.log(0.9) for logprob in last.values())
    infos = [{"phase": "act", "legal_actions": list(commands)}, {"phase": "reflect"}]
    answers = chooser.act_batch(["goal fridge", "what happened?"], infos)
    assert answers == ["<action>open fridge 1</action>", "<reflection></reflection>"]


def test_a_killed_learning_run_continues_from_its_last_checkpoint(tmp_path, monkeypatch, capsys):
    sys.path.insert(0, str(SCRIPT.parent))
    import learning

    monkeypatch.setattr(learning, "CHECKPOINT_EVERY", 2)
    monkeypatch.setattr(learning, "evaluate_run", lambda folder: (folder / "eval.json").write_text("{}"))
    job = ("mage", 0, 4, str(tmp_path / "runs"), {})
    learning.run_one(job)
    folder = learning.run_dir(str(tmp_path / "runs"), "mage", 0)
    whole = (folder / "metrics.jsonl").read_text().splitlines()
    # killed after iteration 3: the checkpoint of iteration 2 is its last, and no evaluation
    (folder / "eval.json").unlink()
    (folder / "checkpoints" / "latest").write_text("iter-000002")
    (folder / "metrics.jsonl").write_text("\n".join(whole[:3]) + "\n")
    saved = (folder / "checkpoints" / "iter-000002" / "state.json").stat().st_mtime_ns
    learning.run_one(job)
    assert (folder / "checkpoints" / "iter-000002" / "state.json").stat().st_mtime_ns == saved  # not retrained
    resumed = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert [m["iteration"] for m in resumed] == [1, 2, 3, 4]
    keys = [key for key in resumed[0] if key.startswith(("return_", "final_return/", "policy_loss", "entropy/"))]
    assert keys and all(resumed[i][key] == json.loads(whole[i])[key] for i in range(4) for key in keys)
    # the same run asked for more iterations has other settings (its schedules): it starts over
    assert learning._stored(folder, learning.run_config(job)) == (4, [])
    longer = learning.run_config(("mage", 0, 6, str(tmp_path / "runs"), {}))
    assert learning._stored(folder, longer) == (4, ["iterations 4 -> 6"])
    # an evaluated run is kept, and one of other settings says so
    capsys.readouterr()
    learning.warn_if_other_settings(folder, longer)
    assert "mage-s0: kept, but trained with other settings (iterations 4 -> 6)" in capsys.readouterr().err
    learning.warn_if_other_settings(folder, learning.run_config(job))
    assert capsys.readouterr().err == ""


def test_variants_without_runs_keep_their_stored_rows_and_pairing():
    sys.path.insert(0, str(SCRIPT.parent))
    import learning

    earlier = learning.summarise([{"variant": variant, "seed": seed, "report": _report({"aggressive": value})}
                                  for variant, value in (("iterations-600", 0.4), ("cumulative", 0.1))
                                  for seed in (0, 1)])
    stored = json.loads(json.dumps(earlier))   # as read back from learning.json
    rerun = [{"variant": "cumulative", "seed": seed, "report": _report({"aggressive": 0.25})} for seed in (0, 1)]
    table = learning.summarise(rerun, stored)
    assert table["iterations-600"] == stored["iterations-600"]          # kept as it was (its reference did not run)
    assert list(table) == ["iterations-600", "cumulative"]               # in the variants' order
    # the rerun is paired with the stored reference: (0.25 - 0.4) / 3 styles on each seed
    assert table["cumulative"]["paired"]["difference"][0] == pytest.approx(-0.05)
    assert learning.summarise(rerun)["cumulative"].get("paired") is None            # nothing stored: no reference


def test_fresh_deal_runs_are_measured_against_the_bayes_agent_on_their_own_meta_episodes():
    sys.path.insert(0, str(SCRIPT.parent))
    import learning

    def fresh(aggressive, bayes):
        report = _report({"aggressive": aggressive})
        for result in report["opponents"].values():
            result["instance_optimal_value"] = None
            result["best_response_by_episode"] = [0.3, 0.3, 0.4]
        report["bayes_by_episode"] = {style: [-0.5, -0.4, bayes] for style in learning.TRAINING}
        return report

    runs = [{"variant": "fresh-deals", "seed": seed, "report": fresh(0.1 + 0.3 * seed, 0.2)} for seed in (0, 1)]
    row = learning.summarise(runs)["fresh-deals"]
    # the final hand over the three styles: (0.1 + 0.1 + a) / 3 against the Bayes agent's 0.2
    assert row["share_of_bayes"][0] == pytest.approx(np.mean([(0.2 + 0.1) / 3 / 0.2, (0.2 + 0.4) / 3 / 0.2]))
    runs[0]["report"].pop("bayes_by_episode")   # a report written before it was recorded
    assert "share_of_bayes" not in learning.summarise(runs)["fresh-deals"]


def test_fresh_deal_rows_of_another_protocol_are_not_paired_with_todays():
    sys.path.insert(0, str(SCRIPT.parent))
    import learning

    def fresh(value):
        report = _report({"aggressive": value})
        for result in report["opponents"].values():
            result["instance_optimal_value"] = None
            result["best_response_by_episode"] = [0.3, 0.3, 0.3]
        return report

    earlier = learning.summarise([{"variant": "fresh-deals-900", "seed": 0, "report": fresh(0.2)}])
    stored = json.loads(json.dumps(earlier))
    stored["fresh-deals-900"].pop("fresh_protocol")   # measured before fresh deals followed the seed
    table = learning.summarise([{"variant": "fresh-deals", "seed": 0, "report": fresh(0.1)}], stored)
    assert table["fresh-deals"]["fresh_protocol"] == learning.FRESH_PROTOCOL
    assert "paired" not in table["fresh-deals-900"]
    assert "paired" in learning.summarise([{"variant": "fresh-deals", "seed": 0, "report": fresh(0.1)}],
                                          earlier)["fresh-deals-900"]


def test_reading_splits_the_final_hands_shortfall_of_a_fresh_deal_run(tmp_path):
    pytest.importorskip("torch")
    from mage_agent.cli import evaluate_policy
    from mage_agent.config import TrainConfig, apply_overrides
    from mage_agent.trainer import Trainer

    run = tmp_path / "fresh-deals-s0"
    config = apply_overrides(TrainConfig(), {"repeat_instance": False, "iterations": 1, "eval_meta_episodes": 12,
                                             "checkpoint_every": 1, "tensorboard": False, "output_dir": str(run),
                                             "population": {"conservative": 1, "aggressive": 1, "intermediate": 1}})
    trainer = Trainer(config, progress=False)
    trainer.train()
    styles = ["conservative", "aggressive", "intermediate"]
    evaluate_policy(trainer.policy, config, run / "eval.json", "trained", progress=False, verbose=False,
                    opponents=styles)
    results = tmp_path / "reading.json"
    command = [sys.executable, str(SCRIPT.parent / "reading.py"), str(run), "--results", str(results)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    row = json.loads(results.read_text())["fresh-deals-s0"]
    report = json.loads((run / "eval.json").read_text())
    assert row["bayes"] == pytest.approx(np.mean([report["bayes_by_episode"][s][-1] for s in styles]))
    assert row["model_first"] == row["watcher_first"]   # the same early hands, alone and watched
    assert -2 <= row["watcher"] <= 2 and "unread" in done.stdout
    shutil.rmtree(run / "checkpoints")   # read back, not played again (which would need the model)
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(results.read_text())["fresh-deals-s0"] == row


def test_the_fresh_deal_config_file_is_the_benchmarked_variant():
    sys.path.insert(0, str(SCRIPT.parent))
    import learning

    from mage_agent.config import TrainConfig, apply_overrides, load_config

    shipped = load_config(SCRIPT.parent.parent / "examples" / "fresh_deals.yaml")
    # what every learning.py variant trains on: the three styles, no first-hand anchor
    measured = {"population": dict.fromkeys(learning.TRAINING, 1.0), "equilibrium_coef": 0.0}
    assert shipped == apply_overrides(TrainConfig(), {**measured, **learning.VARIANTS["fresh-deals-entropy-hold-1200"]})
    assert shipped != TrainConfig() and not shipped.env.repeat_instance


def test_server_load_short_version_loses_nothing_and_leaves_no_session(tmp_path):
    script = SCRIPT.parent / "server_load.py"
    output = tmp_path / "server_load.json"
    done = subprocess.run([sys.executable, str(script), "--ws-clients", "3", "--http-clients", "3",
                           "--meta-episodes", "1", "--rounds", "1", "--processes", "1", "--flood", "40", "--killed", "2", "--slow", "1",
                           "--bad", "1", "--tokens", "2", "--games", "kuhn,tictactoe,webshop", "--output", str(output)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]  # non-zero: something was lost
    report = json.loads(output.read_text())
    rows = {row["phase"].split(":")[0]: row for row in report["rows"]}
    assert list(rows) == ["load", "clients SIGKILLed mid-episode", "frozen clients (SIGSTOP)", "slow clients",
                          "malformed + oversized frames", "wrong tokens", "server SIGKILLed + restarted mid-episode"]
    assert all(row["lost"] == 0 and row["sessions_after"] == 0 and row["steps"] > 0 for row in rows.values())
    assert rows["load"]["clients"] == 6 and rows["load"]["served_to_local"] > 0  # WebShop, Tic-Tac-Toe, Kuhn x WS, HTTP
    assert rows["clients SIGKILLed mid-episode"]["sessions_held"] == 2  # they held sessions, which were freed
    for phase in ("clients SIGKILLed mid-episode", "frozen clients (SIGSTOP)"):  # honest clients served beside them
        during = rows[phase]["while_held"]
        assert during["clients"] == 2 and during["steps"] > 0 and during["sessions_at_start"] >= 1
    assert rows["slow clients"]["flood_statuses"] == {"200": 40}  # no bare reset refused
    memory = report["server_rss_mib"]
    assert set(memory) == {"before_load", "after_each_load_round", "after_faults", "growth", "bound", "within_bound"}
    assert memory["within_bound"] and memory["bound"] >= 32
    assert 0 < rows["slow clients"]["peak_http_sessions"] <= 6 + 8 + 1  # the flood kept to its cap (clients + 8)
    assert "lost" in done.stdout and len([line for line in done.stdout.splitlines() if line.endswith(" 0")]) >= 7


def test_server_load_fails_when_the_servers_memory_grows_past_its_bound():
    sys.path.insert(0, str(SCRIPT.parent))
    import server_load

    assert server_load.rss_bound_mib(100.0) == 32.0  # small servers: 32 MiB
    assert server_load.rss_bound_mib(500.0) == pytest.approx(50.0)  # large ones: 10%
    assert server_load.rss_problem(367.0, [383.0, 385.0, 388.0]) is None  # the warm-up of a first round
    assert server_load.rss_problem(100.0, [132.0]) is None  # exactly at the bound
    assert server_load.rss_problem(100.0, []) is None
    problem = server_load.rss_problem(100.0, [120.0, 132.5, 110.0])  # the largest reading counts, not the last
    assert problem is not None and "grew 32.5 MiB (100.0 -> 132.5 MiB)" in problem and "bound of 32.0 MiB" in problem
    assert server_load.rss_problem(500.0, [551.0]) is not None and server_load.rss_problem(500.0, [549.0]) is None


def test_smollm2_gpu_tables_come_from_the_stored_runs():
    sys.path.insert(0, str(SCRIPT.parent))
    import smollm2_gpu

    table = smollm2_gpu.evaluated_table(smollm2_gpu.RESULTS)
    assert table.startswith("3 seeds (s0, s1, s2)")
    # seed 0's aggressive row, re-derived by hand from its eval.json: the mean of three seeds' final hands
    finals = [json.loads((smollm2_gpu.RESULTS / s / "eval.json").read_text())["opponents"]["aggressive"]
              ["mean_return_by_episode"][-1] for s in ("s0", "s1", "s2")]
    row = next(line for line in table.splitlines() if line.startswith("| aggressive |"))
    assert f"{sum(finals) / 3:+.3f}" in row
    windows = smollm2_gpu.training_windows(smollm2_gpu.RESULTS)
    assert "long-ent10: 50 iterations, 64 meta-episodes each" in windows


def test_the_default_population_is_the_benchmarked_random_style_one_and_the_other_variants_keep_three_styles():
    sys.path.insert(0, str(SCRIPT.parent))
    import learning

    from mage_agent.build import population_of
    from mage_agent.config import TrainConfig

    variant = learning.VARIANTS["random-style-other-seeds"]
    assert variant == {"iterations": TrainConfig().run.iterations, "population": population_of(TrainConfig())}
    three = dict.fromkeys(learning.TRAINING, 1.0)
    for name in ("mage", "mage-other-seeds", "cumulative", "fresh-deals"):
        assert population_of(learning.run_config((name, 0, 900, "runs/x", learning.VARIANTS[name]))) == three
    single = learning.run_config(("single-aggressive", 0, 900, "runs/x", learning.VARIANTS["single-aggressive"]))
    assert population_of(single) == {"aggressive": 1.0}


def test_ttt_mcts_ceiling_plays_both_best_responses_in_both_seats(tmp_path):
    out = tmp_path / "ceiling.json"
    subprocess.run([sys.executable, str(SCRIPT.parent / "ttt_mcts_ceiling.py"), "--simulations", "10", "--samples", "2",
                    "--games", "6", "--out", str(out)], capture_output=True, text=True, timeout=300, check=True)
    result = json.loads(out.read_text())
    for seat in ("0", "1"):
        for objective in ("max_return", "max_win"):
            row = result["seats"][seat][objective]
            assert row["wins"] + row["draws"] + row["losses"] == 6
            assert row["win_rate_ci95"][0] <= row["win_rate"] <= row["win_rate_ci95"][1]
        # the win-maximising value is a probability; the return's lies in [-1, 1]
        assert 0.0 <= result["seats"][seat]["max_win"]["model_value"] <= 1.0
    assert result["win_rate_both_seats"]["max_win"] == pytest.approx(
        (result["seats"]["0"]["max_win"]["win_rate"] + result["seats"]["1"]["max_win"]["win_rate"]) / 2)


def test_a_kept_adapter_evaluates_exactly_as_its_checkpoint(tmp_path):
    """smollm2_learning.py keeps each trained run's final checkpoint without its optimizer:
    `mage eval --model KEPT` must give the checkpoint's own report, number for number."""
    sys.path.insert(0, str(SCRIPT.parent))
    import smollm2_learning

    from mage_envs.cli import main

    out = tmp_path / "run"
    assert main(["train", "--iterations", "1", "--groups-per-iteration", "2", "--group-size", "2",
                 "--eval-meta-episodes", "0", "--output-dir", str(out), "--quiet", "--tensorboard", "false"]) == 0
    checkpoint = out / "checkpoints" / "iter-000001"
    kept = tmp_path / "results" / "adapters" / "run-s0"
    smollm2_learning.keep_adapter(checkpoint, kept)
    assert not (kept / "optimizer.pt").exists() and (kept / "state.json").exists()
    reports = []
    for model, where in ((checkpoint, "from-checkpoint"), (kept, "from-kept")):
        assert main(["eval", "--model", str(model), "--meta-episodes", "3", "--quiet",
                     "--output-dir", str(tmp_path / where)]) == 0
        reports.append(json.loads((tmp_path / where / "eval_policy.json").read_text()))
    assert reports[0] == reports[1]
    # without --output-dir a kept checkpoint's report goes into its own folder, not two levels up
    assert main(["eval", "--model", str(kept), "--meta-episodes", "3", "--quiet"]) == 0
    assert json.loads((kept / "eval_policy.json").read_text()) == reports[0]
    assert not (tmp_path / "eval_policy.json").exists()


def test_a_parked_run_resumes_on_a_fresh_folder_as_it_would_have_in_its_own(tmp_path):
    """smollm2_learning.py --park keeps a stopped run's newest checkpoint (optimizer state, no
    tokenizer) and its untrained evaluation; unparked into an empty folder, the run's next
    iteration is the one it would have trained in its own folder."""
    sys.path.insert(0, str(SCRIPT.parent))
    import smollm2_learning

    from mage_envs.cli import main

    def train(folder: Path, iterations: int, *resume: str) -> list[dict]:
        assert main(["train", "--iterations", str(iterations), "--groups-per-iteration", "2", "--group-size", "2",
                     "--eval-meta-episodes", "0", "--checkpoint-every", "1", "--output-dir", str(folder), "--quiet",
                     "--tensorboard", "false", *resume]) == 0
        return [{k: v for k, v in json.loads(line).items() if "second" not in k}
                for line in (folder / "metrics.jsonl").read_text().splitlines()]

    own, parked, fresh = tmp_path / "own", tmp_path / "parked", tmp_path / "fresh"
    train(own, 1)
    (own / "bench_untrained.json").write_text("{}")
    smollm2_learning.park(own, parked)
    kept = parked / "checkpoints" / "iter-000001"
    assert (kept / "optimizer.pt").exists() and (parked / "bench_untrained.json").exists()
    assert not list(kept.glob("model/tokenizer*"))
    smollm2_learning.unpark(parked, fresh)
    assert train(fresh, 2, "--resume") == train(own, 2, "--resume")
    # iteration 1 was resumed, not trained again (that would have rewritten it with a tokenizer)
    assert not list((fresh / "checkpoints" / "iter-000001").glob("model/tokenizer*"))
    smollm2_learning.unpark(parked, own)   # a folder with a checkpoint of its own is left alone
    assert (own / "checkpoints" / "latest").read_text().strip() == "iter-000002"


def test_the_readme_smollm2_table_is_the_one_the_stored_runs_give():
    sys.path.insert(0, str(SCRIPT.parent))
    import smollm2_learning

    stored = json.loads((SCRIPT.parent / "results" / "smollm2-learning.json").read_text())
    rows = [r for r in stored["rows"] if r["variant"] == "smollm2"]
    table = smollm2_learning.markdown_table(smollm2_learning.summarise(rows)["smollm2"])
    assert table in (SCRIPT.parents[1] / "README.md").read_text()
    # the aggressive final-hand cell, re-derived by hand from the per-seed rows
    finals = [r["trained"]["aggressive"]["final"] for r in rows]
    row = next(line for line in table.splitlines() if line.startswith("| trained, final hand |"))
    assert row.split(" | ")[2].startswith(f"{np.mean(finals):+.2f}".replace("-", "−"))
    per_seed = smollm2_learning.per_seed_table(stored["rows"], "smollm2")
    assert per_seed in (SCRIPT.parents[1] / "docs" / "training-results.md").read_text()
    seed_1 = next(r for r in rows if r["seed"] == 1)["trained"]["aggressive"]["final"]
    assert f"| aggressive | 1 | −0.442 | +0.117 | {seed_1:+.3f} |" in per_seed


def test_the_smollm2_final_hand_error_is_stratified_by_the_final_hands_deal_and_seat(tmp_path):
    sys.path.insert(0, str(SCRIPT.parent))
    import smollm2_learning

    from mage_envs.oracle.winnable import instance_deal, stratified_instances

    first, second = stratified_instances("kuhn_poker", 2)
    assert (instance_deal("kuhn_poker", first), first & 1) != (instance_deal("kuhn_poker", second), second & 1)
    # two meta-episodes per final-hand cell; their first hands differ, only the final one counts
    records = [{"opponent": "aggressive", "episode_instances": [[second, 0], [first, 0], [final, final & 1]],
                "returns": [0.0, 0.0, value]}
               for final, value in ((first, 1.0), (first, 1.0), (second, -1.0), (second, 1.0))]
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("\n".join(json.dumps(r) for r in [{"settings": {}}] + records))
    strata = smollm2_learning.final_hand_strata(transcript)["aggressive"]
    assert sorted(strata.values()) == [[-1.0, 1.0], [1.0, 1.0]]
    # within-cell spread only: var 2 in one cell of weight 1/2, none in the other
    assert smollm2_learning.stratified_stderr(list(strata.values())) == pytest.approx(np.sqrt(0.25 * 2 / 2))


def test_free_text_replay_repeats_a_run_from_its_checkpoint(tmp_path):
    """Replayed from iteration 2's checkpoint with the run's own settings (format_coef 0), in a
    process of its own, iterations 3 and 4 give the run's metrics exactly. format_coef acts on
    free-text answers only, and the tiny model answers with action tokens, so with 1 they are
    the same too. A folder that is no checkpoint is refused."""
    from mage_agent.config import TrainConfig, apply_overrides
    from mage_agent.trainer import Trainer

    run = tmp_path / "run"
    history = Trainer(apply_overrides(TrainConfig(), {
        "iterations": 4, "groups_per_iteration": 4, "group_size": 2, "checkpoint_every": 2, "eval_meta_episodes": 0,
        "tensorboard": False, "minibatch_size": 8, "warmup_iterations": 1, "output_dir": str(run)}),
        progress=False).train()
    out = tmp_path / "replay.json"
    done = subprocess.run([sys.executable, str(SCRIPT.parent / "free_text_replay.py"), "--checkpoint",
                           str(run / "checkpoints" / "iter-000002"), "--format-coef", "0", "1", "--iterations", "2",
                           "--threads", "1", "--scratch", str(tmp_path / "scratch"), "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    replayed = json.loads(out.read_text())["format_coef"]
    for rows in replayed.values():
        assert [row["iteration"] for row in rows] == [3, 4]
        for row, logged in zip(rows, history[2:]):
            assert row == {key: logged[key] for key in row}
    missing = subprocess.run([sys.executable, str(SCRIPT.parent / "free_text_replay.py"), "--checkpoint",
                              str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "no checkpoint folder" in missing.stderr
