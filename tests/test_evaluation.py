"""The evaluation harness and the `mage` command line."""

import json
from dataclasses import asdict

import gymnasium as gym
import pytest

from mage_envs.cli import main, reference_settings
from mage_envs.eval_protocol import protocol_env_kwargs
from mage_envs.evaluation import FRESH_STRIDE, _shuffled_cells, evaluate
from mage_envs.oracle import best_response_value
from mage_envs.oracle.agents import REFLECTION, BestResponseAgent, RandomLegalAgent
from mage_envs.oracle.winnable import instance_deal, stratified_instances


def aggressive_agent(obs, info):
    """Bets, or calls when facing a bet; never invalid."""
    if info.get("phase") == "reflect":
        return REFLECTION
    return "<action>bet</action>" if "bet" in info["legal_actions"] else "<action>call</action>"


def direct_returns(env_id, opponent, agent, meta_episodes, seed, **kwargs):
    """The same games played by hand: per meta-episode, the list of inner returns."""
    env = gym.make(env_id, opponent=opponent, **kwargs)
    out = []
    for j in range(meta_episodes):
        obs, info = env.reset(seed=seed + j)
        while True:
            obs, reward, terminated, truncated, info = env.step(agent(obs, info))
            if terminated or truncated:
                out.append(info["episode_returns"])
                break
    return out


def test_harness_matches_a_hand_written_loop():
    agent = aggressive_agent
    report = evaluate(agent, "mage/KuhnPoker-meta-v0", opponents=["maniac", "conservative"], meta_episodes=40,
                      seed=3, env_kwargs={"repeat_instance": False}, oracle=False, progress=False, stratify=False)
    for opponent in ("maniac", "conservative"):
        rows = direct_returns("mage/KuhnPoker-meta-v0", opponent, agent, 40, 3, repeat_instance=False)
        result = report.opponents[opponent]
        for i in range(3):
            column = [row[i] for row in rows]
            assert result.mean_return_by_episode[i] == pytest.approx(sum(column) / 40)
            assert result.win_rate_by_episode[i] == pytest.approx(sum(r > 0 for r in column) / 40)
            assert result.win_rate_by_episode[i] + result.draw_rate_by_episode[i] + result.loss_rate_by_episode[i] == pytest.approx(1)
        assert result.invalid_action_rate == 0.0


def test_stratified_harness_plays_the_stratified_instances_and_their_ceiling():
    from mage_envs.oracle import instance_optimal_value
    from mage_envs.oracle.winnable import instance_value, stratified_instances

    report = evaluate(aggressive_agent, "mage/KuhnPoker-meta-v0", opponents=["conservative"], meta_episodes=24,
                      seed=7, progress=False)
    assert report.stratified
    env = gym.make("mage/KuhnPoker-meta-v0", opponent="conservative")
    finals, ceilings = [], []
    for j, instance in enumerate(stratified_instances("kuhn_poker", 24, 7)):
        obs, info = env.reset(seed=7 + j, options={"instance": instance})
        ceilings.append(instance_value("kuhn_poker", "conservative", instance, info["seat"]))
        while True:
            obs, reward, terminated, truncated, info = env.step(aggressive_agent(obs, info))
            if terminated or truncated:
                finals.append(info["episode_returns"][-1])
                break
    result = report.opponents["conservative"]
    assert result.mean_return_by_episode[-1] == pytest.approx(sum(finals) / 24)
    # two full rounds of the 12 (deal, seat) cells: the on-sample ceiling is the expectation exactly
    assert result.instance_optimal_value == pytest.approx(sum(ceilings) / 24)
    assert result.instance_optimal_value == pytest.approx(instance_optimal_value("kuhn_poker", "conservative"))


def test_unstratified_ceiling_is_averaged_over_the_instances_played():
    from mage_envs.oracle.winnable import instance_value

    report = evaluate(aggressive_agent, "mage/KuhnPoker-meta-v0", opponents=["aggressive"], meta_episodes=7,
                      seed=11, progress=False, stratify=False)
    env = gym.make("mage/KuhnPoker-meta-v0", opponent="aggressive")
    ceilings = []
    for j in range(7):
        _, info = env.reset(seed=11 + j)
        ceilings.append(instance_value("kuhn_poker", "aggressive", info["instance"], info["seat"]))
    assert not report.stratified
    assert report.opponents["aggressive"].instance_optimal_value == pytest.approx(sum(ceilings) / 7)


@pytest.mark.parametrize("reflection", [False, True])
def test_fresh_deal_ceilings_are_the_best_response_on_each_hands_deals(reflection):
    from mage_envs.oracle.winnable import best_response_instance_value

    kwargs = {"repeat_instance": False, "reflection": reflection}
    report = evaluate(aggressive_agent, "mage/KuhnPoker-meta-v0", opponents=["conservative"], meta_episodes=9,
                      seed=4, env_kwargs=kwargs, progress=False)
    env = gym.make("mage/KuhnPoker-meta-v0", opponent="conservative", **kwargs)
    hands = []   # by hand: the (instance, seat) each hand of each meta-episode is dealt
    by_hand = [stratified_instances("kuhn_poker", 9, seed=4)]
    by_hand += [_shuffled_cells("kuhn_poker", 9, 4 + FRESH_STRIDE * k, True) for k in (1, 2)]
    for j in range(9):   # as the harness resets: every hand index stratified in its own order
        chosen = [hand[j] for hand in by_hand]
        obs, info = env.reset(seed=4 + j, options={"instances": chosen})
        played = [(info["instance"], info["seat"])]
        while True:
            obs, _, terminated, truncated, info = env.step(aggressive_agent(obs, info))
            if terminated or truncated:
                break
            if info["phase"] == "act" and len(info["episode_returns"]) == len(played):
                played.append((info["instance"], info["seat"]))
        assert [k for k, _ in played] == chosen
        hands.append(played)
    expected = [sum(best_response_instance_value("kuhn_poker", "conservative", *h[i]) for h in hands) / 9
                for i in range(3)]
    result = report.opponents["conservative"]
    assert result.instance_optimal_value is None
    assert result.best_response_by_episode == pytest.approx(expected)
    assert "conservative: " + " ".join(f"{v:+.3f}" for v in expected) in report.table()
    assert len({h[1] for h in hands}) > 1   # later hands are dealt afresh


def test_fresh_deals_weigh_every_cell_equally_in_every_hand():
    """With fresh deals every episode index is stratified: over a multiple of Kuhn Poker's 12
    (deal, seat) cells each hand's on-sample best response is its expectation exactly."""
    report = evaluate(aggressive_agent, "mage/KuhnPoker-meta-v0", opponents=["conservative", "aggressive"],
                      meta_episodes=24, seed=7, env_kwargs={"repeat_instance": False, "num_episodes": 4},
                      progress=False)
    for name, result in report.opponents.items():
        value = best_response_value("kuhn_poker", name).value
        assert result.best_response_by_episode == pytest.approx([value] * 4, abs=1e-12)
    # and the hands' cells pair up at random, not in one pattern repeated every round of 12
    firsts = stratified_instances("kuhn_poker", 120, seed=7)
    thirds = _shuffled_cells("kuhn_poker", 120, 7 + 2 * FRESH_STRIDE, True)
    cells = {(instance_deal("kuhn_poker", a), a & 1, instance_deal("kuhn_poker", b), b & 1)
             for a, b in zip(firsts, thirds)}
    assert len(cells) > 60   # of 144 pairs; a fixed pattern would give 12


def test_the_best_response_scores_its_on_sample_value_hand_by_hand():
    """Against deterministic opponents the best response's return on the deals played is its
    value there: with fresh deals, equal hand by hand, though far from the expectation."""
    report = evaluate(None, "mage/KuhnPoker-meta-v0", opponents=["conservative", "aggressive", "bluffer"],
                      meta_episodes=30, seed=5, env_kwargs={"repeat_instance": False}, make_agent=BestResponseAgent,
                      progress=False)
    for result in report.opponents.values():
        assert result.mean_return_by_episode == pytest.approx(result.best_response_by_episode, abs=1e-12)
    repeated = evaluate(aggressive_agent, "mage/KuhnPoker-meta-v0", opponents=["aggressive"], meta_episodes=4,
                        progress=False)
    assert repeated.opponents["aggressive"].best_response_by_episode is None


def test_invalid_action_rate_counts_acting_steps():
    answers = iter(["garbage", "<action>bet</action>"] * 1000)
    agent = lambda obs, info: REFLECTION if info.get("phase") == "reflect" else next(answers)  # noqa: E731
    report = evaluate(agent, "mage/KuhnPoker-v0", opponents=["maniac"], meta_episodes=20, env_kwargs={"seat": 0},
                      oracle=False, progress=False)
    assert report.opponents["maniac"].invalid_action_rate == pytest.approx(0.5)


def test_best_response_agent_reaches_the_oracle_through_the_harness():
    report = evaluate(None, "mage/KuhnPoker-v0", opponents=["aggressive"], meta_episodes=3000, seed=0,
                      env_kwargs={"seat": 1}, make_agent=BestResponseAgent, progress=False)
    result = report.opponents["aggressive"]
    exact = best_response_value("kuhn_poker", "aggressive", 1).value
    assert result.best_response_value == pytest.approx(exact) and result.best_response_exact
    assert abs(result.mean_return_by_episode[0] - exact) < 3 * result.stderr_return_by_episode[0]
    assert result.equilibrium_value == pytest.approx(1 / 18)


def test_reward_scale_reaches_the_oracle_columns():
    report = evaluate(RandomLegalAgent(0), "mage/KuhnPoker-v0", opponents=["nash"], meta_episodes=5,
                      env_kwargs={"seat": 0, "reward_scale": 5.0}, progress=False)
    assert report.opponents["nash"].equilibrium_value == pytest.approx(-5 / 18)


def test_report_json_round_trip(tmp_path):
    report = evaluate(RandomLegalAgent(0), "mage/TicTacToe-meta-v0", opponents="heldout", meta_episodes=3,
                      oracle=False, progress=False)
    path = report.save(tmp_path / "sub" / "eval.json")
    data = json.loads(path.read_text())
    assert set(data["opponents"]) == {"preferred-cell-anti-diagonal", "preferred-cell-spiral", "mcts-1000"}
    entry = data["opponents"]["mcts-1000"]
    for key in ("mean_return_by_episode", "success_by_episode", "best_response_value", "equilibrium_value"):
        assert key in entry
    assert len(entry["mean_return_by_episode"]) == data["num_episodes"] == 3
    assert "mcts-1000" in report.table()


def test_harness_argument_errors():
    with pytest.raises(ValueError, match="exactly one"):
        evaluate(None, "mage/KuhnPoker-v0", meta_episodes=1)
    with pytest.raises(ValueError, match="meta_episodes"):
        evaluate(RandomLegalAgent(0), "mage/KuhnPoker-v0", meta_episodes=0)


def test_cli_eval_writes_reports(tmp_path, capsys):
    code = main(["eval", "--opponents", "aggressive,nash", "--meta-episodes", "10", "--quiet",
                 "--output-dir", str(tmp_path), "--env-kwarg", "seat=0", "--env-kwarg", "num_episodes=2"])
    assert code == 0
    out = capsys.readouterr().out
    assert "best-response on mage/KuhnPoker-meta-v0" in out and "random on" in out
    data = json.loads((tmp_path / "eval_best-response.json").read_text())
    # the flags given, over the protocol of `mage train`'s final evaluation
    protocol = json.loads(json.dumps(protocol_env_kwargs("mage/KuhnPoker-meta-v0"), default=asdict))
    assert data["env_kwargs"] == {**protocol, "seat": 0, "num_episodes": 2}
    assert data["opponents"]["aggressive"]["best_response_value"] == pytest.approx(1 / 3)


def test_cli_lists_and_reports_errors(capsys):
    assert main(["envs"]) == 0
    assert "mage/TicTacToe-meta-v0" in capsys.readouterr().out
    assert main(["opponents", "kuhn_poker"]) == 0
    assert "cfr-argmax" in capsys.readouterr().out
    assert main(["eval", "--opponents", "ghost", "--meta-episodes", "1", "--quiet", "--no-oracle"]) == 2
    assert "no opponent 'ghost'" in capsys.readouterr().err
    assert main(["eval", "--env", "mage/KunhPoker-meta-v0", "--meta-episodes", "1", "--quiet"]) == 2
    assert "did you mean 'mage/KuhnPoker-meta-v0'?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["eval", "--env-kwarg", "novalue"])


def test_cli_says_what_trainable_and_the_population_mean(tmp_path, capsys):
    assert main(["opponents", "kuhn_poker"]) == 0
    out = capsys.readouterr().out
    splits = dict(line.split()[:2] for line in out.splitlines() if line and not line.startswith(("trainable:", "mage")))
    assert [name for name, split in splits.items() if split == "trainable"] == [
        "conservative", "aggressive", "intermediate", "random", "nash", "random-style", "cfr-argmax"]
    assert ("mage train's default population (what it trains against): conservative, aggressive, intermediate, "
            "random-style; its evaluations add bluffer, calling-station, maniac.") in out
    assert main(["opponents", "leduc_poker"]) == 0
    assert ("mage train's default population (what it trains against): conservative, aggressive, intermediate; "
            "its evaluations add") in capsys.readouterr().out
    # the split's name before still works, with a note
    assert main(["eval", "--agent", "random", "--opponents", "train", "--eval-meta-episodes", "1", "--no-oracle",
                 "--quiet", "--output-dir", str(tmp_path)]) == 0
    assert "--opponents train is deprecated: use trainable" in capsys.readouterr().err
    report = json.loads((tmp_path / "eval_random.json").read_text())
    assert [name for name, split in splits.items() if split == "trainable"] == list(report["opponents"])


class BatchedAggressive:
    """The same policy as ``aggressive_agent``, answering a whole batch per call."""

    def __init__(self):
        self.calls = 0

    def act_batch(self, observations, infos):
        self.calls += 1
        return [aggressive_agent(o, i) for o, i in zip(observations, infos)]


def test_batched_agents_get_the_same_results_in_fewer_calls():
    kwargs = dict(opponents=["random", "conservative"], meta_episodes=30, seed=4, oracle=False, progress=False)
    sequential = evaluate(aggressive_agent, "mage/KuhnPoker-meta-v0", **kwargs)
    batched_agent = BatchedAggressive()
    batched = evaluate(batched_agent, "mage/KuhnPoker-meta-v0", batch_size=8, **kwargs)
    assert batched.to_dict()["opponents"] == sequential.to_dict()["opponents"]
    assert batched_agent.calls < 2 * 30 * 3  # lockstep: a call per turn, not per prompt


def test_mage_eval_plays_the_bayes_optimal_agent_with_the_opponents_as_its_prior(tmp_path):
    from mage_envs.oracle import BayesAdaptiveAgent

    styles = ["conservative", "aggressive", "intermediate"]
    assert main(["eval", "--agent", "bayes", "--opponents", ",".join(styles), "--env-kwarg", "repeat_instance=false",
                 "--meta-episodes", "12", "--quiet", "--output-dir", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "eval_bayes.json").read_text())
    settings = reference_settings("bayes", "mage/KuhnPoker-meta-v0", styles, 12, env_options={"repeat_instance": False})
    assert saved["seed"] == settings.seed
    direct = evaluate(None, settings.env_id, opponents=styles, meta_episodes=12, seed=settings.seed,
                      env_kwargs=settings.env_kwargs, progress=False,
                      make_agent=lambda env: BayesAdaptiveAgent(env, population=styles))
    for name in styles:
        assert saved["opponents"][name]["mean_return_by_episode"] == direct.opponents[name].mean_return_by_episode
    assert main(["eval", "--agent", "bayes", "--env", "mage/LeducPoker-meta-v0", "--meta-episodes", "1", "--quiet",
                 "--output-dir", str(tmp_path / "leduc")]) == 2   # solved for Kuhn Poker only: a clear error


def test_the_progress_bar_says_when_the_oracles_run(capsys):
    evaluate(RandomLegalAgent(seed=0), "mage/KuhnPoker-meta-v0", opponents=["aggressive", "nash"], meta_episodes=2,
             progress=True)
    shown = capsys.readouterr().err
    for name in ("aggressive", "nash"):
        assert f"oracle values against {name} (best response, equilibrium, deal-known)" in shown


def test_mage_eval_keeps_the_steps_of_the_first_meta_episodes_by_default(tmp_path, capsys):
    from mage_envs.transcripts import TRANSCRIPT_STEPS

    flags = ["eval", "--agent", "random", "--opponents", "aggressive,nash", "--meta-episodes", str(TRANSCRIPT_STEPS + 2),
             "--no-oracle", "--quiet"]
    assert main([*flags, "--output-dir", str(tmp_path / "default")]) == 0
    records = [json.loads(line) for line in (tmp_path / "default" / "transcript_random.jsonl").read_text().splitlines()]
    assert len(records) == 2 * (TRANSCRIPT_STEPS + 2)
    assert sorted(r["index"] for r in records if r["steps"]) == sorted(2 * list(range(TRANSCRIPT_STEPS)))
    assert main([*flags, "--output-dir", str(tmp_path / "all"), "--transcript-steps", "-1"]) == 0
    everything = (tmp_path / "all" / "transcript_random.jsonl").read_text().splitlines()
    assert all(json.loads(line)["steps"] for line in everything)


def test_the_table_shows_the_deal_known_ceiling_and_the_share_of_it():
    report = evaluate(None, "mage/KuhnPoker-meta-v0", opponents=["aggressive"], meta_episodes=12, progress=False,
                      make_agent=BestResponseAgent)
    result = report.opponents["aggressive"]
    header, _, row = report.table().splitlines()[1:4]
    assert header.split()[-2:] == ["deal-known", "share"]
    assert row.split()[-2:] == [f"{result.instance_optimal_value:+.3f}",
                                f"{result.mean_return_by_episode[-1] / result.instance_optimal_value:.2f}"]
    fresh = evaluate(None, "mage/KuhnPoker-meta-v0", opponents=["aggressive"], meta_episodes=12, progress=False,
                     make_agent=BestResponseAgent, env_kwargs={"repeat_instance": False})
    assert "deal-known" not in fresh.table()   # fresh deals: no such ceiling
