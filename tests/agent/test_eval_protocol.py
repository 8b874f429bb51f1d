"""`mage eval`'s defaults are `mage train`'s final evaluation of a run on the protocol's
population, for every kind of agent (`mage train`'s own default population in Kuhn Poker adds
`random-style`, which its final evaluation plays too)."""

import dataclasses
import json

from mage_agent.build import env_kwargs, eval_env_kwargs
from mage_agent.cli import model_eval_config
from mage_agent.config import TrainConfig, apply_overrides
from mage_envs import InvalidActionPolicy
from mage_envs.cli import DEFAULT_ENV, main, reference_settings
from mage_envs.eval_protocol import EvalSettings
from mage_envs.opponents import list_opponents

SIX = ["conservative", "aggressive", "intermediate", "bluffer", "calling-station", "maniac"]
#: A run trained on the protocol's population (the three training styles).
PROTOCOL = apply_overrides(TrainConfig(), {"population": dict.fromkeys(SIX[:3], 1.0)})


def final_evaluation(config: TrainConfig) -> EvalSettings:
    """What `mage train`'s final evaluation (`evaluate_policy`) plays for ``config``."""
    kwargs = eval_env_kwargs(config)
    return EvalSettings(config.env.env_id, kwargs.pop("opponent"), config.run.eval_meta_episodes,
                        config.run.eval_seed, kwargs)


def with_options(settings: EvalSettings, **options: object) -> EvalSettings:
    return dataclasses.replace(settings, env_kwargs={**settings.env_kwargs, **options})


def test_reference_agents_are_evaluated_as_train_evaluates():
    train = final_evaluation(PROTOCOL)
    assert (train.opponents, train.meta_episodes, train.seed) == (SIX, 300, 1_000_000_000)
    assert train.env_kwargs["reflection"] is False and train.env_kwargs["num_episodes"] == 3
    assert train.env_kwargs["invalid_action"] == InvalidActionPolicy("retry", max_retries=2, penalty=-1.0)
    for agent in ("random", "best-response", "bayes"):
        assert reference_settings(agent, DEFAULT_ENV) == train, agent
    # training plays the population only; the held-out archetypes are the evaluation's additions
    assert env_kwargs(PROTOCOL)["opponent"] == SIX[:3]
    # the default population adds random-style, which the default run's final evaluation plays as well
    default = final_evaluation(TrainConfig())
    assert default == dataclasses.replace(train, opponents=[*SIX[:3], "random-style", *SIX[3:]])
    assert env_kwargs(TrainConfig())["opponent"] == [*SIX[:3], "random-style"]


def test_models_mage_did_not_train_differ_only_in_reading_the_full_prompts():
    full = with_options(final_evaluation(PROTOCOL), prompt_style="full")
    assert reference_settings("openai", DEFAULT_ENV) == full
    assert final_evaluation(model_eval_config("smollm2-135m")) == full
    assert final_evaluation(model_eval_config("smollm2-135m", "react")) == full
    # reflections only when asked, for an API model and a local one alike
    reflecting = with_options(full, reflection=True)
    assert reference_settings("openai", DEFAULT_ENV, prompting="reflexion") == reflecting
    assert final_evaluation(model_eval_config("smollm2-135m", "reflexion")) == reflecting


def test_a_game_without_the_default_styles_meets_its_trainable_then_held_out_ones_from_every_agent():
    ttt = "mage/TicTacToe-meta-v0"
    model = final_evaluation(model_eval_config("smollm2-135m", env_id=ttt))
    assert model == reference_settings("openai", ttt)
    assert model.opponents == [*list_opponents("tic_tac_toe", "trainable"), *list_opponents("tic_tac_toe", "heldout")]
    assert sorted(model.opponents) == sorted(list_opponents("tic_tac_toe"))


def test_flags_given_override_the_protocol():
    settings = reference_settings("random", DEFAULT_ENV, ["nash"], 5, 7, {"num_episodes": 2})
    assert (settings.opponents, settings.meta_episodes, settings.seed) == (["nash"], 5, 7)
    assert settings.env_kwargs == {**reference_settings("random", DEFAULT_ENV).env_kwargs, "num_episodes": 2}
    config = model_eval_config("smollm2-135m", meta_episodes=5, seed=7, env_options={"num_episodes": 2})
    assert final_evaluation(config) == with_options(dataclasses.replace(
        reference_settings("openai", DEFAULT_ENV), meta_episodes=5, seed=7), num_episodes=2)


def test_mage_eval_of_a_reference_agent_writes_and_prints_the_protocol(tmp_path, capsys):
    assert main(["eval", "--agent", "random", "--eval-meta-episodes", "2", "--no-oracle", "--quiet",
                 "--output-dir", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "eval_random.json").read_text())
    train = final_evaluation(PROTOCOL)
    assert list(report["opponents"]) == SIX and report["seed"] == train.seed and report["num_episodes"] == 3
    # the env_kwargs a trained run's eval.json records
    recorded = {k: dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v for k, v in train.env_kwargs.items()}
    assert report["env_kwargs"] == recorded
    assert ("mage: evaluation: mage/KuhnPoker-meta-v0, 6 opponents (conservative, ..., maniac), 2 meta-episodes "
            "each, seeds from 1000000000, 3 episodes, reflection off, compact prompts, invalid answers: 2 retries "
            "at -1 each") in capsys.readouterr().err
