"""`RemoteEnv` across a real server restart (SIGKILL, then `mage serve` again on the same port):
it reconnects with backoff and replays the episode where that is safe, and says so where not."""

import os
import signal
import threading
import time

import gymnasium as gym
import pytest
from server_helpers import Server, health

from mage_envs.server import RemoteEnv, RemoteEnvError

ENV_ID, KWARGS = "mage/TicTacToe-meta-v0", {"opponent": "random", "num_episodes": 2}


def answers(info, count):
    """The answer of turn `count`: cycle through the legal moves (a reflection when there is none)."""
    legal = info["legal_actions"]
    return f"<action>{legal[count % len(legal)]}</action>" if legal else "<reflection>Take the centre.</reflection>"


def play(env, seed, until=None, on_step=None):
    """A whole meta-episode from `reset(seed=seed)`: the list of what reset and each step returned."""
    obs, info = env.reset(seed=seed)
    transcript, done = [(obs, info)], False
    while not done:
        if on_step is not None and len(transcript) == until:
            on_step()
        result = env.step(answers(info, len(transcript)))
        transcript.append(result)
        info, done = result[4], result[2] or result[3]
    return transcript


def restart_later(server, delay):
    """SIGKILL `server` now and start it again on its port after `delay` s, in a thread."""
    server.stop(signal.SIGKILL)
    thread = threading.Thread(target=lambda: (time.sleep(delay), server.start()))
    thread.start()
    return thread


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    server = Server(tmp_path_factory.mktemp("server") / "server.log")
    yield server
    server.stop()


@pytest.fixture
def server(served):
    """The module's server, started again if the test before left it killed."""
    if served.process is None or served.process.poll() is not None:
        served.start()
    return served


def test_a_seeded_episode_survives_a_server_restart(server):
    env = RemoteEnv(server.url, ENV_ID, retries=8, backoff=0.1, **KWARGS)
    restarted = []
    transcript = play(env, seed=7, until=6, on_step=lambda: restarted.append(restart_later(server, 0.5)))
    restarted[0].join()
    assert transcript == play(gym.make(ENV_ID, **KWARGS), seed=7)  # nothing lost, nothing applied twice
    assert health(server.url)["ws_sessions"] == 1  # the new server holds the replayed session only
    assert play(env, seed=8) == play(gym.make(ENV_ID, **KWARGS), seed=8)
    env.close()


def test_an_unseeded_episode_is_not_replayed_and_says_why(server):
    env = RemoteEnv(server.url, ENV_ID, retries=8, backoff=0.1, **KWARGS)
    obs, info = env.reset()
    env.step(answers(info, 1))
    restart_later(server, 0).join()
    with pytest.raises(RemoteEnvError, match="cannot be replayed safely: it was started by reset") as lost:
        env.step(answers(info, 2))
    assert lost.value.code == "CONNECTION_LOST"
    assert env.reset(seed=3)[0] == gym.make(ENV_ID, **KWARGS).reset(seed=3)[0]  # the next reset reconnects
    env.close()


def test_reconnection_gives_up_after_its_retries(server):
    env = RemoteEnv(server.url, ENV_ID, retries=2, backoff=0.05, **KWARGS)
    env.reset(seed=0)
    server.stop(signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(RemoteEnvError, match="dropped and 2 reconnections failed") as lost:
        env.step("<action>5</action>")
    assert lost.value.code == "CONNECTION_LOST" and time.monotonic() - start >= 0.05 + 0.1
    with pytest.raises(RemoteEnvError, match="could not reach .* after 2 retries"):
        RemoteEnv(server.url, ENV_ID, retries=2, backoff=0.05)


def test_a_late_answer_is_not_retried(server):
    env = RemoteEnv(server.url, ENV_ID, timeout=0.5, retries=3, backoff=0.05, **KWARGS)
    env.reset(seed=0)
    os.kill(server.process.pid, signal.SIGSTOP)  # the server stops answering, the socket stays up
    try:
        with pytest.raises(TimeoutError):
            env.step("<action>5</action>")
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
    with pytest.raises(RemoteEnvError, match="this RemoteEnv is closed"):  # its next answer would be misread
        env.step("<action>5</action>")
