"""The TRL adapter: rollouts mask the env's tokens and carry its rewards; GRPOTrainer trains on them."""

import importlib.util
import inspect
import json
import statistics
import subprocess
import sys
from functools import partial
from pathlib import Path

import gymnasium as gym
import pytest

trl = pytest.importorskip("trl")

import mage_envs  # noqa: F401
from mage_agent.tiny import TinyConfig, build_model, build_tokenizer, env_corpus
from mage_envs.integrations.trl import EnvRollout, ToolEnv, reset_dataset, reset_prompt
from mage_envs.integrations.trl import env_reward as env_reward_func

ROOT = Path(__file__).resolve().parents[2]
META = {"opponent": "trainable", "num_episodes": 2, "prompt_style": "compact"}


def make_meta_env():
    return gym.make("mage/KuhnPoker-meta-v0", **META)


def replay(make_env, prompt, answers):
    """The env's total reward, its prompts after each answer and its last info, played afresh."""
    env = make_env()
    spec = json.loads(prompt)
    env.reset(seed=spec["seed"], options=spec.get("options"))
    total, observations = 0.0, []
    for answer in answers:
        observation, reward, terminated, truncated, info = env.step(answer)
        total += reward
        observations.append(observation)
    assert terminated or truncated
    return total, observations, info


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(env_corpus(games_per_env=5))


def scripted_generate(tokenizer, with_logprobs):
    """Answers that cycle through Kuhn's action words, an invalid pair and an empty answer."""
    answers = [["bet"], ["call"], ["check"], ["fold", "bet"], [], ["fold"]]
    calls = []

    def generate(contexts):
        out = []
        for context in contexts:
            words = answers[(len(calls) + len(context)) % len(answers)]
            out.append(tokenizer.convert_tokens_to_ids(words) + [tokenizer.eos_token_id])
        calls.append(out)
        return out, ([[-0.5] * len(ids) for ids in out] if with_logprobs else None)

    return generate, calls


@pytest.mark.parametrize("with_logprobs", [False, True])
def test_rollout_masks_the_env_tokens_and_sums_the_env_rewards(tokenizer, with_logprobs):
    prompts = [reset_prompt(3)] * 2 + [reset_prompt(8, {"opponent": "aggressive"})] * 2
    generate, calls = scripted_generate(tokenizer, with_logprobs)
    rollout = EnvRollout(make_meta_env)
    out = rollout.play(prompts, generate, tokenizer)
    assert len(rollout.envs) == 4 and len(calls) >= 3  # several turns, one batched call each
    for i, prompt in enumerate(prompts):
        spec = json.loads(prompt)
        first, _ = make_meta_env().reset(seed=spec["seed"], options=spec.get("options"))
        assert out["prompt_ids"][i] == tokenizer(first)["input_ids"]
        completion, mask = out["completion_ids"][i], out["env_mask"][i]
        assert len(completion) == len(mask) and mask[-1] == 1  # the transcript ends with the model's answer
        answers = out["env_answers"][i]
        total, observations, info = replay(make_meta_env, prompt, answers)
        # mask 1: exactly the answers' tokens; mask 0: exactly the env's later prompts
        model_tokens = [token for token, keep in zip(completion, mask) if keep]
        env_tokens = [token for token, keep in zip(completion, mask) if not keep]
        eos = tokenizer.eos_token_id
        assert model_tokens == [t for a in answers for t in tokenizer.convert_tokens_to_ids(a.split()) + [eos]]
        assert env_tokens == [t for obs in observations[:-1] for t in rollout.encode(tokenizer, obs, first=False)]
        assert out["env_reward"][i] == pytest.approx(total)
        assert out["env_info"][i]["episode_returns"] == info["episode_returns"]
        if with_logprobs:
            assert out["logprobs"][i] == [-0.5 if keep else 0.0 for keep in mask]
    assert out["logprobs"] is None or with_logprobs
    assert out["env_reward"][0] == out["env_reward"][1]  # copies of one spec replay one game
    assert out["env_info"][2]["opponent"] == "aggressive"
    assert env_reward_func(["..."] * 4, out["env_reward"]) == out["env_reward"]


def load_example():
    spec = importlib.util.spec_from_file_location("trl_grpo_kuhn_poker", ROOT / "examples" / "trl_grpo_kuhn_poker.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_trains_on_the_env_rewards(tmp_path, monkeypatch):
    example = load_example()
    received = []

    def recording_reward(completions, env_reward, prompts, env_answers, **kwargs):
        received.append({"prompts": prompts, "rewards": list(env_reward), "answers": env_answers})
        return env_reward_func(completions, env_reward)

    monkeypatch.setattr(example, "env_reward", recording_reward)
    trainer = example.main(["--steps", "2", "--num-episodes", "2", "--output-dir", str(tmp_path)])

    assert len(received) == 2 and all(len(batch["rewards"]) == 8 for batch in received)
    make_env = example.env_factory(2)
    for batch in received:
        assert len(set(batch["prompts"])) == 2  # two groups of four copies of one reset spec
        for prompt, reward, answers in zip(batch["prompts"], batch["rewards"], batch["answers"]):
            assert reward == pytest.approx(replay(make_env, prompt, answers)[0])
    logged = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert [entry["step"] for entry in logged] == [1, 2]
    for entry, batch in zip(logged, received):
        assert entry["reward"] == pytest.approx(statistics.fmean(batch["rewards"]))
        assert entry["rewards/recording_reward/mean"] == pytest.approx(statistics.fmean(batch["rewards"]))
        # env_mask reached it too: it counts one generated token per answer, none of the env's
        assert entry["completions/mean_length"] == pytest.approx(statistics.fmean(map(len, batch["answers"])))
    assert any(entry["reward_std"] > 0 for entry in logged)  # rewards differ, so GRPO had a signal


def test_tool_env_exposes_act_and_scores_the_episode():
    env = ToolEnv.factory(lambda: gym.make("mage/KuhnPoker-v0", opponent="nash", seat=0))()
    # what GRPOTrainer exposes as tools: public functions of the class but reset and get_reward
    tools = [name for name, _ in inspect.getmembers(ToolEnv, inspect.isfunction)
             if name not in ("reset", "get_reward") and not name.startswith("_")]
    assert tools == ["act"]
    from transformers.utils import get_json_schema

    schema = get_json_schema(env.act)
    assert schema["function"]["name"] == "act"
    assert list(schema["function"]["parameters"]["properties"]) == ["text"]
    first = env.reset(prompt=[{"role": "user", "content": ""}], seed=5)
    assert env.reset(seed=5) == first
    env.act("<action>bet</action>")
    while not env.done:
        env.act(f"<action>{env.info['legal_actions'][0]}</action>")
    assert env.get_reward() == env.total_reward != 0 and (env.total_reward > 0) == (env.info["outcome"] == "win")
    with pytest.raises(ValueError, match="over"):
        env.act("<action>bet</action>")


def test_grpo_trainer_plays_tool_envs_and_scores_them_with_get_reward(tmp_path, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental: the extra pins TRL
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    # the tiny model with a tool-calling chat template TRL ships (Qwen3's); it never calls act
    tokenizer = build_tokenizer(env_corpus(games_per_env=5))
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
    tokenizer.add_tokens(["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>",
                          "</tool_response>", "<think>", "</think>"], special_tokens=True)
    tokenizer.eos_token = "<|im_end|>"
    make_env = partial(gym.make, "mage/KuhnPoker-v0", opponent="nash", prompt_style="compact")
    rows = Dataset.from_dict({"prompt": [[{"role": "user", "content": "Play with the act tool.\n"}]] * 4,
                              "seed": [0, 1, 2, 3]})
    config = GRPOConfig(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=2,
                        max_completion_length=8, bf16=False, report_to="none", save_strategy="no", logging_steps=1)
    trainer = GRPOTrainer(model=build_model(tokenizer, TinyConfig(max_position_embeddings=4096)),
                          processing_class=tokenizer, args=config, train_dataset=rows,
                          environment_factory=ToolEnv.factory(make_env))
    assert trainer.reward_func_names == ["ToolEnv"] and [tool.__name__ for tool in trainer.tools] == ["act"]
    trainer.train()
    envs = trainer.environments
    instances = {make_env().reset(seed=seed)[1]["instance"] for seed in range(4)}
    assert envs[0].info["instance"] == envs[1].info["instance"] != envs[2].info["instance"] == envs[3].info["instance"]
    assert {env.info["instance"] for env in envs} <= instances  # reset with the rows' seeds
    assert all(env.done for env in envs)  # unplayed episodes were played out (forfeited) by get_reward
    logged = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert logged[0]["rewards/ToolEnv/mean"] == pytest.approx(statistics.fmean(env.total_reward for env in envs))


def test_reset_dataset_holds_one_reset_spec_per_seed():
    dataset = reset_dataset(range(3), {"opponent": "nash"})
    assert dataset["prompt"] == [reset_prompt(seed, {"opponent": "nash"}) for seed in range(3)]
    assert json.loads(dataset["prompt"][2]) == {"seed": 2, "options": {"opponent": "nash"}}


@pytest.mark.parametrize("prompt", ["Play Kuhn Poker.", '{"options": {}}', [{"role": "user", "content": "hi"}]])
def test_rollout_refuses_prompts_that_are_not_reset_specs(tokenizer, prompt):
    with pytest.raises(ValueError, match="reset specs"):
        EnvRollout(make_meta_env).play([prompt], scripted_generate(tokenizer, False)[0], tokenizer)


def test_import_mage_envs_does_not_import_the_adapter():
    code = "import sys, mage_envs; raise SystemExit('mage_envs.integrations' in sys.modules or 'trl' in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)
