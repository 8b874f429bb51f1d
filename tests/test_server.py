"""`mage serve` against real clients: a uvicorn process on loopback, raw HTTP and WebSocket,
`RemoteEnv`, and OpenEnv's own `GenericEnvClient` (skipped when `openenv` is not installed)."""

import http.client
import json
import subprocess
import sys
import threading

import gymnasium as gym
import pytest
import server_helpers
from server_helpers import running
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from mage_envs.cli import main
from mage_envs.server import RemoteEnv, RemoteEnvError
from mage_envs.server.catalog import accepted_kwargs, text_ids, to_json

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MAX_SESSIONS = 4
IDLE = 3.0
MAX_BODY = 1 << 20


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`mage serve` in a subprocess on a free loopback port; its URL."""
    log = tmp_path_factory.mktemp("server") / "server.log"
    with running(log, "--token", TOKEN, "--max-sessions", MAX_SESSIONS, "--idle-timeout", IDLE,
                 "--http-idle-timeout", IDLE) as served:
        yield served.url


def request(url, method="GET", body=None, headers=AUTH, raw=None):
    """(status, JSON answer) of one HTTP request with the token; 4xx/5xx answers are returned, not raised."""
    return server_helpers.request(url, method, body, headers, raw)


def wait_for_sessions(url, count, timeout=IDLE + 5):
    """Wait until the server has `count` open sessions; the time it took."""
    return server_helpers.wait_for_sessions(url, count, timeout)


def play(env, seed, episodes=2):
    """Transcript of `episodes` episodes; the answers cycle through the legal actions."""
    transcript = []
    for index in range(episodes):
        obs, info = env.reset(seed=seed if index == 0 else None)
        transcript.append((obs, info))
        done = False
        while not done:
            legal = info["legal_actions"] or ["I will bet more."]
            result = env.step(legal[len(transcript) % len(legal)])
            transcript.append(result)
            info, done = result[4], result[2] or result[3]
    return transcript


def ws_call(websocket, kind, data=None):
    websocket.send(json.dumps({"type": kind, "data": data}))
    return json.loads(websocket.recv(timeout=30))


def test_health_is_open_and_everything_else_needs_the_token(server):
    assert request(server + "/health", headers={}) == (200, {"status": "healthy", "active_sessions": 0,
                                                             "max_sessions": MAX_SESSIONS, "ws_sessions": 0,
                                                             "http_sessions": 0})
    status, body = request(server + "/schema", headers={})
    assert (status, body["code"]) == (401, "UNAUTHORIZED") and "Authorization: Bearer" in body["detail"]
    assert request(server + "/schema", headers={"Authorization": "Bearer guess"})[1]["detail"] == "wrong bearer token"
    with pytest.raises(InvalidStatus) as refused, connect(server.replace("http", "ws") + "/ws",
                                                         additional_headers={"Authorization": "Bearer guess"}):
        pass
    assert refused.value.response.status_code == 401
    with pytest.raises(RemoteEnvError, match="UNAUTHORIZED"):
        RemoteEnv(server, "mage/KuhnPoker-v0", token="guess")


def test_schema_gives_spaces_and_info_keys(server):
    status, schema = request(server + "/schema?env_id=mage/TicTacToe-meta-v0")
    assert status == 200
    local = gym.make("mage/TicTacToe-meta-v0")
    assert schema["spaces"]["observation"]["max_length"] == local.observation_space.max_length
    assert schema["spaces"]["action"] == {"type": "Text", "min_length": 0, "max_length": 8192,
                                          "charset": local.action_space.characters}
    assert {"legal_actions", "meta_done", "episode_index"} <= set(schema["info_keys"]["reset"])
    assert {"outcome", "episode_returns"} <= set(schema["info_keys"]["final"])
    assert schema["action"]["required"] == ["message"] and "prompt" in schema["observation"]["properties"]


def test_remote_env_replays_the_local_env(server):
    kwargs = {"opponent": "nash", "num_episodes": 2}
    remote = RemoteEnv(server, "mage/KuhnPoker-meta-v0", token=TOKEN, **kwargs)
    local = gym.make("mage/KuhnPoker-meta-v0", **kwargs)
    assert remote.observation_space == local.observation_space and remote.action_space == local.action_space
    assert play(remote, seed=11) == play(local, seed=11)
    remote.close()


def test_concurrent_clients_get_independent_reproducible_sessions(server):
    start = threading.Barrier(3)
    transcripts = {}

    def client(name, seed):
        env = RemoteEnv(server, "mage/LeducPoker-v0", token=TOKEN, opponent="random")
        start.wait()
        transcripts[name] = play(env, seed, episodes=4)
        env.close()

    threads = [threading.Thread(target=client, args=args) for args in (("a", 5), ("b", 5), ("c", 6))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert transcripts["a"] == transcripts["b"] == play(gym.make("mage/LeducPoker-v0", opponent="random"), 5, 4)
    assert transcripts["c"] != transcripts["a"]


def test_http_session_round_trip(server):
    status, first = request(server + "/reset", "POST", {"env_id": "mage/KuhnPoker-v0", "seed": 3,
                                                          "env_kwargs": {"seat": 0}, "episode_id": "e1"})
    assert status == 200 and first["observation"]["info"]["legal_actions"] == ["check", "bet"]
    session = first["metadata"]["session_id"]
    bet = {"session_id": session, "action": {"message": "<action>bet</action>"}}
    status, step = request(server + "/step", "POST", bet)
    assert status == 200 and step["done"] and step["reward"] in (-2.0, 1.0, 2.0)
    status, state = request(server + f"/state?session_id={session}")
    assert state == {"session_id": session, "env_id": "mage/KuhnPoker-v0", "env_kwargs": {"seat": 0},
                     "episode_id": "e1", "step_count": 1, "done": True}
    status, over = request(server + "/step", "POST", {"session_id": session, "action": {"message": "check"}})
    assert (status, over["code"]) == (409, "EXECUTION_ERROR") and "call reset()" in over["detail"]
    assert request(server + f"/sessions/{session}", "DELETE")[0] == 204
    assert request(server + f"/state?session_id={session}")[0] == 404
    status, stateless = request(server + "/step", "POST", {"action": {"message": "bet"}})  # OpenEnv's own smoke test
    assert (status, stateless["code"]) == (409, "NO_EPISODE") and "session_id that POST /reset" in stateless["detail"]


@pytest.mark.parametrize("body, status, code, words", [
    (b"{not json", 400, "INVALID_JSON", "not valid JSON"),
    (b"[" * 50_000 + b"]" * 50_000, 400, "INVALID_JSON", "not valid JSON"),
    (b'{"seed": ' + b"1" * 5_000 + b"}", 400, "INVALID_JSON", "not valid JSON"),
    ({"env_id": "mage/Nope-v0"}, 404, "UNKNOWN_ENV", "mage/KuhnPoker-v0"),
    ({"env_id": "CartPole-v1"}, 404, "UNKNOWN_ENV", "unknown env id"),
    ({"env_id": "mage/KuhnPoker-tensor-v0"}, 404, "UNKNOWN_ENV", "not a text environment"),
    ({"env_id": "mage/KuhnPoker-meta-v0", "env_kwargs": {"base": "os:system"}}, 422, "VALIDATION_ERROR", "take base"),
    ({"env_kwargs": {"seat": 7}}, 422, "FACTORY_ERROR", "seat must be 0, 1"),
    ({"env_kwargs": {"opponent": "nobody"}}, 422, "FACTORY_ERROR", "no opponent 'nobody'"),
    ({"seed": -1}, 422, "VALIDATION_ERROR", "seed"),
    ({"kwargs": {"seat": 0}}, 422, "VALIDATION_ERROR", "kwargs: Extra inputs"),
    ({"options": {"opponent": "nobody"}}, 422, "VALIDATION_ERROR", "reset failed"),
    ([1, 2], 422, "VALIDATION_ERROR", "body"),
])
def test_bad_http_requests_get_clear_4xx(server, body, status, code, words):
    raw, body = (body, None) if isinstance(body, bytes) else (None, body)
    answer = request(server + "/reset", "POST", body, raw=raw)
    assert answer[0] == status and answer[1]["code"] == code and words in answer[1]["detail"], answer
    assert request(server + "/health", headers={})[1]["active_sessions"] == 0  # failed resets hold no session


def test_oversized_bodies_and_messages_are_refused(server):
    connection = http.client.HTTPConnection(server.removeprefix("http://"), timeout=30)
    connection.putrequest("POST", "/reset")
    for name, value in {**AUTH, "Content-Type": "application/json", "Content-Length": str(MAX_BODY + 1)}.items():
        connection.putheader(name, value)
    connection.endheaders()  # the body is never sent: the declared length is enough
    answer = connection.getresponse()
    assert answer.status == 413 and json.loads(answer.read())["code"] == "PAYLOAD_TOO_LARGE"
    connection.close()
    with connect(server.replace("http", "ws") + "/ws", additional_headers=AUTH, max_size=None) as websocket:
        ws_call(websocket, "reset", {"env_id": "mage/KuhnPoker-v0", "env_kwargs": {"seat": 0}})
        huge = "<action>bet</action>" + "x" * 500_000  # under the cap: the env's own clipping handles it
        answer = ws_call(websocket, "step", {"message": huge})
        assert answer["type"] == "observation" and answer["data"]["observation"]["info"]["invalid_action"] is None
        websocket.send(json.dumps({"type": "step", "data": {"message": "x" * (MAX_BODY + 1)}}))
        with pytest.raises(ConnectionClosed) as closed:
            websocket.recv(timeout=30)
        assert closed.value.rcvd.code == 1009  # message too big
    wait_for_sessions(server, 0)


def test_bad_websocket_messages_get_errors_and_the_session_goes_on(server):
    with connect(server.replace("http", "ws") + "/ws", additional_headers=AUTH) as websocket:
        websocket.send("{not json")
        assert json.loads(websocket.recv(timeout=30))["data"]["code"] == "INVALID_JSON"
        websocket.send("[" * 50_000 + "]" * 50_000)
        assert json.loads(websocket.recv(timeout=30))["data"]["code"] == "INVALID_JSON"
        websocket.send("[1, 2]")
        assert json.loads(websocket.recv(timeout=30))["data"]["code"] == "VALIDATION_ERROR"
        assert ws_call(websocket, "dance")["data"]["code"] == "UNKNOWN_TYPE"
        assert ws_call(websocket, "step", {"message": "bet"})["data"]["code"] == "NO_EPISODE"
        assert ws_call(websocket, "reset", {"env_id": "mage/Nope-v0"})["data"]["code"] == "UNKNOWN_ENV"
        assert ws_call(websocket, "step", {"message": 3})["data"]["code"] == "VALIDATION_ERROR"
        answer = ws_call(websocket, "reset", {"env_id": "mage/TicTacToe-v0", "seed": 0})
        assert answer["type"] == "observation" and answer["data"]["metadata"] == {"env_id": "mage/TicTacToe-v0"}
        assert ws_call(websocket, "state")["data"]["env_id"] == "mage/TicTacToe-v0"
    wait_for_sessions(server, 0)
    assert request(server + "/health", headers={})[1]["status"] == "healthy"


def test_the_session_cap_refuses_clearly_until_a_slot_frees(server):
    wait_for_sessions(server, 0)
    envs = [RemoteEnv(server, "mage/KuhnPoker-v0", token=TOKEN) for _ in range(MAX_SESSIONS)]
    for env in envs:
        env.reset(seed=0)
    with connect(server.replace("http", "ws") + "/ws", additional_headers=AUTH) as websocket:
        refusal = json.loads(websocket.recv(timeout=30))
        assert refusal["data"]["code"] == "CAPACITY_REACHED" and "--max-sessions" in refusal["data"]["message"]
        with pytest.raises(ConnectionClosed) as closed:
            websocket.recv(timeout=30)
        assert closed.value.rcvd.code == 1013
    status, body = request(server + "/reset", "POST", {})
    assert (status, body["code"]) == (503, "CAPACITY_REACHED")
    with pytest.raises(RemoteEnvError, match="CAPACITY_REACHED"):
        RemoteEnv(server, "mage/KuhnPoker-v0", token=TOKEN).reset()
    envs.pop().close()
    wait_for_sessions(server, MAX_SESSIONS - 1)
    spare = RemoteEnv(server, "mage/KuhnPoker-v0", token=TOKEN)
    assert spare.reset(seed=0)[1]["legal_actions"]
    for env in [*envs, spare]:
        env.close()
    wait_for_sessions(server, 0)


HOLDER = """
import json, sys, time, urllib.request
from mage_envs.server import RemoteEnv
url, token = sys.argv[1:]
RemoteEnv(url, "mage/TicTacToe-v0", token=token).reset(seed=0)
body = json.dumps({"env_id": "mage/KuhnPoker-v0"}).encode()
headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
answer = json.load(urllib.request.urlopen(urllib.request.Request(url + "/reset", data=body, headers=headers)))
print(answer["metadata"]["session_id"], flush=True)
time.sleep(600)
"""


def test_killed_and_silent_clients_are_reaped(server):
    wait_for_sessions(server, 0)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, server, TOKEN], stdout=subprocess.PIPE, text=True)
    http_session = holder.stdout.readline().strip()
    with connect(server.replace("http", "ws") + "/ws", additional_headers=AUTH) as silent:
        ws_call(silent, "reset", {"seed": 0})
        assert request(server + "/health", headers={})[1]["active_sessions"] == 3
        holder.kill()
        holder.wait()
        expiry = json.loads(silent.recv(timeout=IDLE + 5))
        assert expiry["data"]["code"] == "SESSION_NOT_FOUND" and "idle" in expiry["data"]["message"]
        with pytest.raises(ConnectionClosed):
            silent.recv(timeout=5)
    wait_for_sessions(server, 0)
    status, body = request(server + "/step", "POST", {"session_id": http_session, "action": {"message": "bet"}})
    assert (status, body["code"]) == (404, "SESSION_NOT_FOUND")


def test_openenv_generic_client_plays_a_served_env(server):
    openenv_core = pytest.importorskip("openenv.core")
    kwargs = {"opponent": "nash", "seat": 1}
    local = gym.make("mage/KuhnPoker-v0", **kwargs)
    obs, info = local.reset(seed=4)
    with openenv_core.GenericEnvClient(base_url=server, headers=AUTH).sync() as client:
        result = client.reset(env_id="mage/KuhnPoker-v0", env_kwargs=kwargs, seed=4, episode_id="trl-0")
        assert result.observation == {"prompt": obs, "terminated": False, "truncated": False, "info": info}
        assert (result.reward, result.done) == (None, False)
        while not result.done:
            action = info["legal_actions"][-1]
            obs, reward, terminated, truncated, info = local.step(action)
            result = client.step({"message": action})
            assert (result.observation["prompt"], result.reward, result.done) == (obs, reward, terminated or truncated)
            assert result.observation["info"] == info
        state = client.state()
        assert state["episode_id"] == "trl-0" and state["done"] and state["step_count"] >= 1
        with pytest.raises(RuntimeError, match="NO_EPISODE|EXECUTION_ERROR"):
            client.step({"message": "bet"})


def test_serve_refuses_a_public_address_without_a_token_and_a_bad_default_env(capsys):
    assert main(["serve", "--host", "0.0.0.0", "--port", "1"]) == 2
    assert "refusing to serve on 0.0.0.0 without a token" in capsys.readouterr().err
    assert main(["serve", "--port", "1", "--env", "mage/KuhnPoker-tensor-v0"]) == 2
    assert "not a text environment" in capsys.readouterr().err


def _env_with_file_arguments(seat=0, catalog_path=None, log_dir=None, base=None):
    return gym.make("mage/KuhnPoker-v0", seat=seat)


def test_no_argument_that_names_code_or_files_is_taken_from_clients():
    gym.register("mage/FileArguments-v0", entry_point=_env_with_file_arguments)
    try:
        assert accepted_kwargs("mage/FileArguments-v0") == {"seat"}
    finally:
        del gym.registry["mage/FileArguments-v0"]
    meta = accepted_kwargs("mage/TicTacToe-meta-v0")
    assert "base" not in meta and {"opponent", "num_episodes", "reward_mode"} <= meta


TEXT_IDS = text_ids()
#: Ids whose env takes seconds to make (a large catalog, generated households): the slow run plays them.
HEAVY = ("mage/Household", "mage/WebShop-OOD")


def seeded_transcript(env, seed, max_steps=60):
    """`env.reset(seed=seed)` and up to `max_steps` steps cycling through the legal actions, as JSON text."""
    obs, info = env.reset(seed=seed)
    transcript, done = [[obs, info]], False
    while not done and len(transcript) <= max_steps:
        legal = info.get("legal_actions") or ["wait"]
        obs, reward, terminated, truncated, info = env.step(f"<action>{legal[len(transcript) % len(legal)]}</action>")
        transcript.append([obs, reward, terminated, truncated, info])
        done = terminated or truncated
    return json.dumps(to_json(transcript))


def test_every_text_id_is_registered_here():
    assert len(TEXT_IDS) >= 14 and {"mage/KuhnPoker-meta-v0", "mage/WebShop-v0", "mage/Household-meta-v0"} <= set(
        TEXT_IDS)


@pytest.mark.parametrize("env_id", [
    pytest.param(env_id, marks=pytest.mark.slow) if env_id.startswith(HEAVY) else env_id for env_id in TEXT_IDS])
def test_a_served_seed_gives_the_local_episode(server, env_id):
    remote = RemoteEnv(server, env_id, token=TOKEN)
    try:
        seeded_transcript(remote, seed=1, max_steps=3)  # the session's stream is elsewhere now: a dropped seed shows
        served = seeded_transcript(remote, seed=20261203)
    finally:
        remote.close()
    assert served == seeded_transcript(gym.make(env_id), seed=20261203)  # byte for byte
