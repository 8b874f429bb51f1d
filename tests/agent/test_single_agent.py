"""Training on the single-agent tasks: the tiny model's vocabulary (the default run's stays
bit-identical), one-token answers among numbered actions, and the example configs' split
of training and evaluation instances."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

import mage_envs  # noqa: F401  (registers the task ids)
from mage_agent.agents import action_token_ids
from mage_agent.build import base_model_path, env_kwargs, eval_env_kwargs
from mage_agent.cli import evaluations
from mage_agent.config import TrainConfig, apply_overrides, load_config
from mage_agent.policy import Policy
from mage_agent.tiny import build_model, build_tokenizer
from mage_envs.tasks.webshop.shop import product_half

EXAMPLES = Path(__file__).parents[2] / "examples"
TASKS = ("sokoban", "household", "webshop")
#: The default run's embedded model as the code before single-agent tasks built it: its
#: vocabulary size, the SHA-256 of its (word, id) pairs and of its initial weights.
DEFAULT_VOCABULARY = (318, "3ab6fa570524e3304e5e16d94ec7434ee000f926664b5fe96d7a31fc4b699b13")
DEFAULT_WEIGHTS = "cb5eb38e6db5441bfc6b63f501caea56f9e7470da9c29e2ea7e5d8c4359be441"


def vocabulary_digest(tokenizer) -> tuple[int, str]:
    vocab = tokenizer.get_vocab()
    return len(vocab), hashlib.sha256(json.dumps(sorted(vocab.items())).encode()).hexdigest()


def weights_digest(model) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().numpy().tobytes())
    return digest.hexdigest()


def test_the_default_runs_model_is_bit_identical(tmp_path: Path) -> None:
    path = base_model_path(TrainConfig(), tmp_path)
    assert vocabulary_digest(AutoTokenizer.from_pretrained(path)) == DEFAULT_VOCABULARY
    assert weights_digest(AutoModelForCausalLM.from_pretrained(path)) == DEFAULT_WEIGHTS


def test_a_task_run_appends_its_words_after_the_games_ids(tmp_path: Path) -> None:
    games = AutoTokenizer.from_pretrained(base_model_path(TrainConfig(), tmp_path / "kuhn")).get_vocab()
    config = load_config(EXAMPLES / "sokoban.yaml")
    config = apply_overrides(config, {"env_options": {**config.env.env_options, "action_labels": "numbers"}})
    tokenizer = AutoTokenizer.from_pretrained(base_model_path(config, tmp_path / "sokoban"))
    vocab = tokenizer.get_vocab()
    assert all(vocab[word] == i for word, i in games.items()) and len(vocab) > len(games) + 20
    for word in ("up", "down", "left", "right", "1", "2", "3", "4", "boxes", "goals", "column", "77", "300"):
        assert len(tokenizer(word, add_special_tokens=False)["input_ids"]) == 1
        assert tokenizer.convert_tokens_to_ids(word) != tokenizer.unk_token_id


def tiny_policy(words: str) -> Policy:
    tokenizer = build_tokenizer([words])
    return Policy(build_model(tokenizer), tokenizer)


def test_one_token_answers_pick_among_labels_when_names_are_longer() -> None:
    policy = tiny_policy("1 2 open fridge")
    info = {"phase": "act", "legal_actions": ["open fridge 1", "open fridge 2"], "action_labels": ["1", "2"]}
    assert policy.tokenizer.convert_ids_to_tokens(action_token_ids(policy, info)) == ["1", "2"]
    assert action_token_ids(policy, {"phase": "act", "legal_actions": ["open", "fridge"]}) == \
        policy.tokenizer.convert_tokens_to_ids(["open", "fridge"])
    assert action_token_ids(policy, {"phase": "reflect", "legal_actions": ["open"], "action_labels": ["1"]}) is None


def test_labels_the_tokenizer_does_not_know_are_refused() -> None:
    policy = tiny_policy("1 2")
    info = {"phase": "act", "legal_actions": ["a b", "c d", "e f"], "action_labels": ["1", "2", "3"]}
    with pytest.raises(ValueError, match="the action label '3' is not one token"):
        action_token_ids(policy, info)


def test_extra_evals_must_map_names_to_env_options() -> None:
    with pytest.raises(ValueError, match="extra_evals maps a name to env options"):
        apply_overrides(TrainConfig(), {"extra_evals": {"ood": "ood"}})


@pytest.mark.parametrize("task", TASKS)
def test_each_example_trains_on_the_train_split_and_evaluates_on_the_rest(task: str) -> None:
    config = load_config(EXAMPLES / f"{task}.yaml")
    assert config.env.env_id == f"mage/{ {'sokoban': 'Sokoban', 'household': 'Household', 'webshop': 'WebShop'}[task] }-meta-v0"
    assert env_kwargs(config)["instance_split"] == "train" and eval_env_kwargs(config)["instance_split"] == "eval"
    assert config.rollout.action_tokens and config.model.name_or_path == "tiny"
    for evaluated in evaluations(config).values():
        kwargs = eval_env_kwargs(evaluated)
        assert kwargs["instance_split"] == "eval" or kwargs.get("split") == "ood"
    if task != "sokoban":
        assert env_kwargs(config)["action_labels"] == "numbers"


def trainer_seeds(config: TrainConfig, iterations: int) -> list[int]:
    """The reset seeds of the first groups of a run's iterations (as Trainer.collect draws them)."""
    groups = config.rollout.groups_per_iteration
    return [(config.run.seed * 100_003 + i) * groups + b for i in range(iterations) for b in range(groups)]


def test_sokoban_rooms_of_training_and_evaluation_never_meet() -> None:
    config = load_config(EXAMPLES / "sokoban.yaml")
    train_env = gym.make(config.env.env_id, **env_kwargs(config))
    eval_env = gym.make(config.env.env_id, **eval_env_kwargs(config))

    def room(env: gym.Env, seed: int) -> str:
        env.reset(seed=seed)
        return env.unwrapped.level.to_xsb()

    trained = {room(train_env, s) for s in trainer_seeds(config, 8)}
    evaluated = {room(eval_env, config.run.eval_seed + j) for j in range(config.run.eval_meta_episodes)}
    assert len(evaluated) > 50 and not trained & evaluated  # by content, not only by instance number


def test_webshop_goals_of_training_evaluation_and_ood_never_meet() -> None:
    config = apply_overrides(load_config(EXAMPLES / "webshop.yaml"), {"env_options": {
        **load_config(EXAMPLES / "webshop.yaml").env.env_options, "num_products": 300}})

    def goals(kwargs: dict, seeds: list[int]) -> set[str]:
        env = gym.make(config.env.env_id, **kwargs)
        found = set()
        for seed in seeds:
            env.reset(seed=seed)
            found.add(env.unwrapped.goal.asin)
        return found

    trained = goals(env_kwargs(config), trainer_seeds(config, 4))
    runs = evaluations(config)
    evaluated = goals(eval_env_kwargs(runs[""]), [config.run.eval_seed + j for j in range(40)])
    ood = goals(eval_env_kwargs(runs["_ood"]), [config.run.eval_seed + j for j in range(40)])
    assert not trained & evaluated and not (trained | evaluated) & ood
    assert {product_half(a) for a in trained} == {"train"} and {product_half(a) for a in evaluated} == {"eval"}


@pytest.mark.slow
@pytest.mark.parametrize("task, files", [("sokoban", ["eval.json"]), ("webshop", ["eval.json", "eval_ood.json"])])
def test_an_example_config_trains_and_evaluates(tmp_path: Path, task: str, files: list[str]) -> None:
    out = tmp_path / "run"
    command = [sys.executable, "-m", "mage_envs.cli", "train", "--config", str(EXAMPLES / f"{task}.yaml"),
               "--output-dir", str(out), "--iterations", "1", "--groups-per-iteration", "2", "--group-size", "2",
               "--eval-meta-episodes", "2", "--quiet", "--tensorboard", "false"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    for name in files:
        report = json.loads((out / name).read_text())
        assert report["env_kwargs"]["instance_split"] in ("eval", "all")
        assert len(report["opponents"]["default"]["mean_return_by_episode"]) == 3
    assert json.loads((out / "metrics.jsonl").read_text().splitlines()[0])["invalid_rate"] == 0.0


def test_gigpo_anchors_a_sokoban_position_however_it_was_reached():
    from mage_agent.rollout import anchor_of

    env = gym.make("mage/Sokoban-meta-v0", levels=["######\n#@$ .#\n######"], reflection=False, max_steps=6)
    start_obs, start_info = env.reset(seed=0)
    blocked_obs, _, _, _, blocked_info = env.step("<action>left</action>")   # into the wall: nothing moves
    assert blocked_obs != start_obs and blocked_info["state_key"] == start_info["state_key"]
    assert anchor_of(blocked_obs, blocked_info) == anchor_of(start_obs, start_info)
    assert anchor_of(blocked_obs) != anchor_of(start_obs)        # the prompts alone differ
    pushed_obs, _, _, _, pushed_info = env.step("<action>right</action>")
    assert anchor_of(pushed_obs, pushed_info) != anchor_of(start_obs, start_info)
    # the same position in a later episode, after a different first one, is another anchor
    later_obs, _, _, _, later_info = env.step("<action>right</action>")   # solved: episode 2 starts over
    assert later_info["episode_index"] == 1 and later_info["state_key"] == start_info["state_key"]
    assert anchor_of(later_obs, later_info) != anchor_of(start_obs, start_info)
