"""The session model of `mage serve`, at its boundaries, against a real uvicorn server on loopback:
bare HTTP resets cannot lock the server out, HTTP leases expire on their own clock, a frozen
WebSocket peer is dropped by the ping timeout, and the session caps allow N, refuse N+1 with
their documented error and allow again once one closes."""

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from server_helpers import health, request, running, wait_for_sessions
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

KUHN = {"env_id": "mage/KuhnPoker-v0", "env_kwargs": {"seat": 0}}


def bare_reset(url, source="127.0.0.1"):
    """`POST /reset` with no session id from the loopback address `source`: (status, answer)."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30, source_address=(source, 0))
    try:
        connection.request("POST", "/reset", json.dumps({**KUHN, "seed": 0}), {"Content-Type": "application/json"})
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


def step(url, session_id):
    return request(url + "/step", "POST", {"session_id": session_id, "action": {"message": "<action>bet</action>"}})


def ws_from(url, source="127.0.0.1"):
    """A WebSocket to `url` opened from the loopback address `source`."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30, source_address=(source, 0))
    return connect(url.replace("http", "ws") + "/ws", sock=sock)


def ws_reset(websocket):
    websocket.send(json.dumps({"type": "reset", "data": {**KUHN, "seed": 0}}))
    return json.loads(websocket.recv(timeout=30))


def refusal(websocket):
    """The error a refused WebSocket gets, and the close code that follows it."""
    error = json.loads(websocket.recv(timeout=30))["data"]
    with pytest.raises(ConnectionClosed) as closed:
        websocket.recv(timeout=30)
    return error, closed.value.rcvd.code


def test_bare_resets_cannot_lock_the_server_out(tmp_path):
    # Reported: with --max-sessions 8, eight bare resets gave 200 and the ninth 503 for 600 s.
    with running(tmp_path / "log", "--max-sessions", 8) as server:
        sessions = []
        for _ in range(10):
            status, answer = bare_reset(server.url)
            assert status == 200, answer
            sessions.append(answer["metadata"]["session_id"])
        assert health(server.url)["http_sessions"] == 8
        for evicted in sessions[:2]:  # the two least recently used made room, and are told so
            status, answer = step(server.url, evicted)
            assert (status, answer["code"]) == (404, "SESSION_NOT_FOUND")
            assert "evicted: the server was full and it was the least recently used" in answer["detail"]
        status, answer = step(server.url, sessions[2])  # a held session is untouched (and now the most recent)
        assert status == 200 and answer["done"]
        with ws_from(server.url) as websocket:  # a WebSocket client is not refused either: the LRU lease yields
            assert ws_reset(websocket)["type"] == "observation"
            assert health(server.url) == {"status": "healthy", "active_sessions": 8, "max_sessions": 8,
                                          "ws_sessions": 1, "http_sessions": 7}
            assert step(server.url, sessions[3])[1]["code"] == "SESSION_NOT_FOUND"
            assert step(server.url, sessions[2])[1]["code"] == "EXECUTION_ERROR"  # still held: its episode is over
        assert request(server.url + f"/sessions/{sessions[2]}", "DELETE")[0] == 204
        assert "was closed" in step(server.url, sessions[2])[1]["detail"]


def test_http_leases_expire_on_their_own_clock(tmp_path):
    with running(tmp_path / "log", "--idle-timeout", 60, "--http-idle-timeout", 1) as server:
        with ws_from(server.url) as websocket:
            ws_reset(websocket)
            status, answer = bare_reset(server.url)
            waited = wait_for_sessions(server.url, 1)  # the lease expires, the WebSocket stays
            assert 0.5 < waited < 5
            assert "expired after 1 s without a request" in step(server.url, answer["metadata"]["session_id"])[1][
                "detail"]
            websocket.send(json.dumps({"type": "step", "data": {"message": "<action>bet</action>"}}))
            assert json.loads(websocket.recv(timeout=30))["data"]["done"]


FROZEN = """
import sys
from mage_envs.server import RemoteEnv
env = RemoteEnv(sys.argv[1], "mage/KuhnPoker-v0", seat=0)
env.reset(seed=0)
print("ready", flush=True)
sys.stdin.read()
"""


def test_a_frozen_websocket_peer_is_dropped_by_the_ping_timeout(tmp_path):
    flags = ("--idle-timeout", 600, "--ws-ping-interval", 0.5, "--ws-ping-timeout", 1)
    with running(tmp_path / "log", *flags) as server:
        client = subprocess.Popen([sys.executable, "-c", FROZEN, server.url], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert client.stdout.readline() == "ready\n"
            time.sleep(1.2)  # a live peer answers the pings (one each 0.5 s): its session stays
            assert health(server.url)["ws_sessions"] == 1
            os.kill(client.pid, signal.SIGSTOP)  # the socket stays open, but nobody answers: a half-open peer
            assert wait_for_sessions(server.url, 0) < 5
        finally:
            client.kill()
            client.wait()


def test_max_sessions_and_the_per_client_cap_at_the_boundary(tmp_path):
    with running(tmp_path / "log", "--max-sessions", 3, "--max-sessions-per-client", 2) as server:
        with contextlib.ExitStack() as sockets:
            first, second = (sockets.enter_context(ws_from(server.url, "127.0.0.2")) for _ in range(2))
            assert ws_reset(first)["type"] == ws_reset(second)["type"] == "observation"  # N = 2 allowed
            with ws_from(server.url, "127.0.0.2") as third:  # N + 1 refused, for this client only
                error, code = refusal(third)
            assert error["code"] == "CLIENT_LIMIT" and "--max-sessions-per-client 2" in error["message"]
            assert code == 1013
            status, answer = bare_reset(server.url, "127.0.0.2")
            assert (status, answer["code"]) == (429, "CLIENT_LIMIT")
            other = sockets.enter_context(ws_from(server.url, "127.0.0.3"))
            assert ws_reset(other)["type"] == "observation"  # 3 of 3 in use
            with ws_from(server.url, "127.0.0.4") as fourth:
                error, code = refusal(fourth)
            assert error["code"] == "CAPACITY_REACHED" and "--max-sessions" in error["message"] and code == 1013
            assert bare_reset(server.url, "127.0.0.4")[0] == 503  # no HTTP lease to evict: refused too
            second.close()
            wait_for_sessions(server.url, 2)
            again = sockets.enter_context(ws_from(server.url, "127.0.0.2"))  # allowed again once one closed
            assert ws_reset(again)["type"] == "observation"
        wait_for_sessions(server.url, 0)
        leases = [bare_reset(server.url, "127.0.0.5")[1]["metadata"]["session_id"] for _ in range(3)]
        assert health(server.url)["http_sessions"] == 2  # at its cap, a client's new lease evicts its own oldest
        assert "its client opened more than 2 sessions" in step(server.url, leases[0])[1]["detail"]
        assert step(server.url, leases[1])[0] == step(server.url, leases[2])[0] == 200
        with ws_from(server.url, "127.0.0.5") as websocket:  # a WebSocket at the cap: its oldest lease yields
            assert ws_reset(websocket)["type"] == "observation"
            assert "its client opened more than 2" in step(server.url, leases[1])[1]["detail"]
            assert step(server.url, leases[2])[1]["code"] == "EXECUTION_ERROR"  # held: its episode is over


def test_the_websocket_idle_timeout_at_the_boundary(tmp_path):
    with running(tmp_path / "log", "--idle-timeout", 2) as server:
        with ws_from(server.url) as websocket:
            ws_reset(websocket)
            time.sleep(1)  # under the timeout: answered
            websocket.send(json.dumps({"type": "state"}))
            assert json.loads(websocket.recv(timeout=30))["data"]["step_count"] == 0
            start = time.monotonic()
            expiry, code = refusal(websocket)  # then silent for longer: closed with 1001
            assert 1.5 < time.monotonic() - start < 6
            assert expiry["code"] == "SESSION_NOT_FOUND" and "after 2 s idle" in expiry["message"] and code == 1001
        wait_for_sessions(server.url, 0)
