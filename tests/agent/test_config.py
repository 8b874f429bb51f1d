"""The configuration a person reads: help for every field, Literal choices, errors that
name the closest valid value, all raised when the config is built (before any model)."""

import argparse
import json
import typing

import pytest

from mage_agent import advantage, loss
from mage_agent.build import population_of
from mage_agent.cli import FLAG_NAMES, config_from_args, parse_train_args, train_parser
from mage_agent.config import (
    AGGREGATIONS,
    DTYPES,
    ESTIMATORS,
    GROUP_OPPONENTS,
    KL_ESTIMATORS,
    REWARD_MODES,
    SCOPES,
    SEATS,
    AlgoConfig,
    TrainConfig,
    apply_overrides,
    choices_of,
    field_index,
    help_of,
)
from mage_envs.cli import main
from mage_envs.opponents import list_opponents


def _field_actions():
    parser = train_parser()
    return parser, {action.dest: action for action in parser._actions
                    if action.dest in field_index(TrainConfig()) and action.help != argparse.SUPPRESS}


def test_every_field_has_a_one_line_help_shown_by_train_help(capsys):
    index = field_index(TrainConfig())
    assert all(help_of(f) and "\n" not in help_of(f) for _, f in index.values()), \
        [name for name, (_, f) in index.items() if not help_of(f)]
    _, actions = _field_actions()
    assert set(actions) == set(index)
    for name, (section, f) in index.items():
        assert actions[name].help.startswith(f"[{section}] {help_of(f)} (default: ")
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    shown = "".join(capsys.readouterr().out.split())  # argparse wraps lines, at spaces and hyphens
    for name, (_, f) in index.items():
        flag = FLAG_NAMES.get(name, f"--{name.replace('_', '-')}")
        assert flag in shown and "".join(help_of(f).split()) in shown, name
    assert "(default:0.28)" in shown and "choices:per-archetype,global,group" in shown


def test_enum_like_fields_are_literal_and_their_choices_come_from_the_type():
    assert SCOPES == typing.get_args(advantage.Scope) == ("per-archetype", "global", "group")
    assert ESTIMATORS == typing.get_args(advantage.Estimator) == ("grpo", "gigpo")
    assert AGGREGATIONS == typing.get_args(loss.Aggregation) == ("token", "sequence")
    assert KL_ESTIMATORS == typing.get_args(loss.KlEstimator) == ("k3", "k2")
    assert GROUP_OPPONENTS == ("shared", "mixed") and DTYPES == ("auto", "float32", "bfloat16", "float16")
    assert REWARD_MODES == ("differential", "final", "cumulative") and SEATS == ("random", "0", "1")
    assert choices_of(AlgoConfig, "scope") == SCOPES and choices_of(AlgoConfig, "epochs") is None
    _, actions = _field_actions()
    literal = {name for name, action in actions.items() if action.choices}
    assert literal == {"dtype", "reward_mode", "prompt_style", "seat", "group_opponents", "estimator", "scope",
                       "loss_aggregation", "schedule", "entropy_schedule", "entropy_tokens", "std_of", "league_sampling",
                       "league_members", "kl_estimator"}
    config = TrainConfig()
    for name in literal:
        section = field_index(config)[name][0]
        assert tuple(actions[name].choices) == choices_of(type(getattr(config, section)), name)


def test_flags_equal_to_the_defaults_give_the_default_config():
    parser, _ = _field_actions()
    argv = []
    for name, (section, _) in field_index(TrainConfig()).items():
        value = getattr(getattr(TrainConfig(), section), name)
        text = json.dumps(value) if value is None or isinstance(value, (bool, list, dict)) else str(value)
        argv += ["--" + name.replace("_", "-"), text]
    assert config_from_args(parse_train_args(parser, argv)) == TrainConfig()


@pytest.mark.parametrize("overrides, message", [
    ({"reward_mode": "diferential"}, "reward_mode must be one of .* got 'diferential' .did you mean 'differential'"),
    ({"seat": "2"}, "seat must be one of"),
    ({"seat": 2}, "seat must be one of"),
    ({"scope": "globl"}, "did you mean 'global'"),
    ({"schedule": "cosin"}, "did you mean 'cosine'"),
    ({"learning_rte": 1.0}, "unknown setting 'learning_rte' .did you mean 'learning_rate'"),
    ({"env_id": "mage/KunhPoker-meta-v0"}, "unknown env_id .* .did you mean 'mage/KuhnPoker-meta-v0'"),
    ({"env_options": {"prompt_styl": "compact"}},
     "mage/KuhnPoker-meta-v0 takes no option 'prompt_styl' .did you mean 'prompt_style'..; its options: opponent, "),
    ({"env_id": "mage/Sokoban-meta-v0", "env_options": {"max_step": 30}}, "did you mean 'max_steps'"),
])
def test_bad_settings_are_refused_when_the_config_is_built(overrides, message):
    with pytest.raises(ValueError, match=message):
        apply_overrides(TrainConfig(), overrides)


def test_seat_from_a_config_file_may_be_a_number():
    assert TrainConfig.from_dict({"env": {"seat": 1}}).env.seat == 1
    assert TrainConfig.from_dict({"env": {"seat": "1"}}).env.seat == "1"


def test_unknown_keys_of_a_config_file_suggest_the_closest():
    with pytest.raises(ValueError, match="in section 'algo' .did you mean 'scope'"):
        TrainConfig.from_dict({"algo": {"scopes": "global"}})
    with pytest.raises(ValueError, match="did you mean 'algo'"):
        TrainConfig.from_dict({"algos": {}})


def test_an_empty_population_is_the_games_default_and_a_given_one_is_kept():
    kuhn = population_of(TrainConfig())
    assert TrainConfig().env.population == {}
    assert kuhn == {"conservative": 1.0, "aggressive": 1.0, "intermediate": 1.0, "random-style": 1.0}
    leduc = population_of(apply_overrides(TrainConfig(), {"env_id": "mage/LeducPoker-meta-v0"}))
    assert leduc == {"conservative": 1.0, "aggressive": 1.0, "intermediate": 1.0}   # no random-style in Leduc
    ttt = population_of(apply_overrides(TrainConfig(), {"env_id": "mage/TicTacToe-meta-v0", "heldout": ["mcts-1000"]}))
    assert list(ttt) == list_opponents("tic_tac_toe", "trainable")
    given = {"aggressive": 2.0, "random-style": 1.0}
    assert population_of(apply_overrides(TrainConfig(), {"population": given})) == given
    assert population_of(apply_overrides(TrainConfig(), {"single_opponent": "intermediate"})) == {"intermediate": 1.0}
    assert population_of(apply_overrides(TrainConfig(), {"env_id": "mage/Sokoban-meta-v0"})) == {}


def test_heldout_null_is_the_games_held_out_archetypes_an_empty_list_none_and_a_run_writes_them_out():
    from mage_agent.build import evaluation_opponents, heldout_of, resolved

    assert TrainConfig().env.heldout is None
    assert heldout_of(TrainConfig()) == ["bluffer", "calling-station", "maniac"]
    ttt = apply_overrides(TrainConfig(), {"env_id": "mage/TicTacToe-meta-v0"})
    assert heldout_of(ttt) == list_opponents("tic_tac_toe", "heldout")   # no Kuhn style asked of Tic-Tac-Toe
    assert evaluation_opponents(ttt) == [*list_opponents("tic_tac_toe", "trainable"),
                                         *list_opponents("tic_tac_toe", "heldout")]
    none = apply_overrides(TrainConfig(), {"heldout": []})
    assert heldout_of(none) == [] and evaluation_opponents(none) == list(population_of(none))
    assert heldout_of(apply_overrides(TrainConfig(), {"env_id": "mage/Sokoban-meta-v0"})) == []
    written = resolved(ttt).env
    assert written.heldout == list_opponents("tic_tac_toe", "heldout") and list(written.population) == list(
        population_of(ttt))
    assert resolved(none).env.heldout == []
    for argv, expected in (([], None), (["--heldout", "null"], None), (["--heldout", "[]"], []),
                           (["--heldout", '["maniac"]'], ["maniac"])):
        assert config_from_args(parse_train_args(train_parser(), argv)).env.heldout == expected


@pytest.mark.parametrize("overrides, message", [
    ({"single_opponent": "agressive"}, "unknown archetype 'agressive' .* .did you mean 'aggressive'"),
    ({"population": {"conservatve": 1.0}}, "did you mean 'conservative'"),
    ({"heldout": ["blufer"]}, "did you mean 'bluffer'"),
])
def test_unknown_archetypes_suggest_the_closest(overrides, message):
    with pytest.raises(ValueError, match=message):
        population_of(apply_overrides(TrainConfig(), overrides))


@pytest.mark.parametrize("argv, message", [
    (["--heldout", '"maniac"'], 'heldout must be a list of archetype ids (JSON: ["maniac"]) or null, got \'maniac\''),
    (["--population", '["aggressive"]'], "population must map archetype ids to weights"),
    (["--scope", "globl"], "argument --scope: invalid choice 'globl' (did you mean 'global'?)"),
    (["--learning-rte", "1"], "unrecognized arguments: --learning-rte (did you mean '--learning-rate'?)"),
    (["--env-id", "mage/KunhPoker-meta-v0"], "did you mean 'mage/KuhnPoker-meta-v0'?"),
    (["--single-opponent", "agressive"], "did you mean 'aggressive'?"),
    (["--seat", "2"], "argument --seat: invalid choice '2'"),
])
def test_train_answers_a_misspelling_before_any_work(argv, message, tmp_path, capsys):
    out = tmp_path / "run"
    with pytest.raises(SystemExit):
        main(["train", "--output-dir", str(out), *argv])
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_eval_answers_a_misspelt_env_id_before_loading(tmp_path, capsys):
    assert main(["eval", "--checkpoint", str(tmp_path / "missing"), "--env", "mage/KunhPoker-meta-v0"]) == 2
    assert "did you mean 'mage/KuhnPoker-meta-v0'?" in capsys.readouterr().err
    assert main(["eval", "--checkpoint", str(tmp_path / "missing"), "--env", "mage/KuhnPoker-meta-v0",
                 "--env-kwarg", "num_episode=2"]) == 2
    assert "takes no option 'num_episode' (did you mean 'num_episodes'?)" in capsys.readouterr().err
    assert not (tmp_path / "missing").exists()


def test_every_example_config_loads_and_the_smollm2_one_trains_a_lora_on_action_tokens():
    from pathlib import Path

    from mage_agent.config import load_config

    examples = sorted((Path(__file__).parents[2] / "examples").glob("*.yaml"))
    configs = {path.stem: load_config(path) for path in examples}
    assert {"fresh_deals", "smollm2_kuhn"} <= set(configs)
    smollm2 = configs["smollm2_kuhn"]
    assert smollm2.model.name_or_path == "smollm2-135m" and smollm2.model.lora
    assert smollm2.rollout.action_tokens and smollm2.rollout.max_new_tokens == 1 and not smollm2.env.reflection
    assert smollm2.env.prompt_style == "full" and smollm2.run.checkpoint_every > 0


def test_train_and_eval_share_flag_names_and_keep_the_old_ones_with_a_note(tmp_path, capsys):
    flags = {option for action in train_parser()._actions if action.help != argparse.SUPPRESS
             for option in action.option_strings}
    for shared in ("--model", "--env-id", "--env-options", "--max-new-tokens", "--eval-meta-episodes", "--eval-seed"):
        assert shared in flags
    args = parse_train_args(train_parser(), ["--name-or-path", "tiny", "--env-id", "mage/TicTacToe-meta-v0"])
    assert config_from_args(args).model.name_or_path == "tiny"
    assert "mage: --name-or-path is deprecated: use --model" in capsys.readouterr().err
    old = ["eval", "--agent", "random", "--opponents", "nash", "--env", "mage/KuhnPoker-meta-v0", "--meta-episodes", "2",
           "--seed", "3", "--env-kwarg", "seat=0", "--no-oracle", "--quiet"]
    new = ["eval", "--agent", "random", "--opponents", "nash", "--env-id", "mage/KuhnPoker-meta-v0",
           "--eval-meta-episodes", "2", "--eval-seed", "3", "--env-options", '{"seat": 0}', "--no-oracle", "--quiet"]
    assert main([*old, "--output-dir", str(tmp_path / "old")]) == 0
    err = capsys.readouterr().err
    for before, now in (("--env", "--env-id"), ("--meta-episodes", "--eval-meta-episodes"), ("--seed", "--eval-seed"),
                        ("--env-kwarg", "--env-options")):
        assert f"mage: {before} is deprecated: use {now}" in err
    assert main([*new, "--output-dir", str(tmp_path / "new")]) == 0
    assert "deprecated" not in capsys.readouterr().err
    reports = [json.loads((tmp_path / d / "eval_random.json").read_text()) for d in ("old", "new")]
    assert reports[0] == reports[1] and reports[0]["seed"] == 3 and reports[0]["env_kwargs"]["seat"] == 0


def test_eval_refuses_the_api_only_sampling_flags_for_a_local_model(tmp_path, capsys):
    for flags in (["--temperature", "0.7"], ["--stop", "</action>"]):
        assert main(["eval", "--agent", "policy", "--model", str(tmp_path / "missing"), *flags]) == 2
        assert "--temperature and --stop apply to --agent openai only" in capsys.readouterr().err
