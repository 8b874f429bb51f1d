"""The faults of ``benchmarks/server_load.py``; each ends with :func:`~load_harness.honest_check`.

Killed and frozen clients (forked processes, SIGKILL or SIGSTOP mid-episode), slow clients
beside a flood of bare resets from another loopback address, malformed and oversized frames,
wrong tokens, and the server killed and restarted under a replaying ``RemoteEnv``.

Killed and frozen clients are also followed at once, before the server has reaped their
sessions, by honest clients (:func:`~load_harness.served_while_held`), as the slow clients
play during the flood.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
from load_clients import GAMES, HttpEnv, Played, play
from load_harness import (
    FORK,
    MAX_BODY,
    TOKEN,
    Server,
    honest_check,
    lost,
    make_player,
    row,
    run_clients,
    seeds_of,
    served_while_held,
    specs_of,
    wait_for_baseline,
)
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from mage_envs.server import RemoteEnv, RemoteEnvError

FLOOD_SOURCE = "127.0.0.2"  # the flood's own loopback address: the per-client cap counts by address


def _hold(url: str, kind: str, index: int, ready: Any) -> None:
    """A client that plays Tic-Tac-Toe slowly until it is killed (in a forked process)."""
    env = make_player(kind, url, "tictactoe")
    env.reset(seed=index)
    ready.set()
    play(env, seeds_of(index, 1000), pause=0.05)


def killed_clients(server: Server, count: int, freeze: bool = False) -> dict[str, Any]:
    """``count`` clients (half WebSocket, half HTTP; WebSocket only when frozen) SIGKILLed or SIGSTOPped mid-episode."""
    kinds = ["ws"] * count if freeze else ["ws", "http"] * (count // 2) + ["ws"] * (count % 2)
    events = [FORK.Event() for _ in kinds]
    processes = [FORK.Process(target=_hold, args=(server.url, kind, i, event), daemon=True)
                 for i, (kind, event) in enumerate(zip(kinds, events))]
    for process in processes:
        process.start()
    for event in events:
        event.wait(60)
    held = server.health()["active_sessions"]
    start = time.monotonic()
    pids = [process.pid for process in processes if process.pid is not None]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP if freeze else signal.SIGKILL)
    fault_seconds = time.monotonic() - start
    phase = f"frozen clients (SIGSTOP): {count}" if freeze else f"clients SIGKILLed mid-episode: {count}"
    during, wrong = served_while_held(server, "frozen clients" if freeze else "killed clients")
    result = honest_check(server, phase, fault_seconds, wrong, sessions_held=held, while_held=during)
    for pid in pids if freeze else []:
        os.kill(pid, signal.SIGKILL)
    for process in processes:
        process.join()
    return result


def _bare_resets(url: str, count: int) -> dict[int, int]:
    statuses: dict[int, int] = {}
    connection = HttpEnv(url, "mage/KuhnPoker-meta-v0", {}, token=TOKEN, source=FLOOD_SOURCE)
    for _ in range(count):
        status, _ = connection.call("POST", "/reset", {"env_id": "mage/KuhnPoker-meta-v0", "seed": 0})
        statuses[status] = statuses.get(status, 0) + 1
    connection.close()  # it deletes nothing: every reset opened a new session, none is kept
    return statuses


def flood_with_slow_clients(server: Server, flood: int, slow: int, games: list[str]) -> dict[str, Any]:
    """``flood`` bare resets (8 connections) while ``slow`` clients of each kind pause 0.1 s before each step."""
    specs, meta_episodes = specs_of("ws", slow, games, 100) + specs_of("http", slow, games, 100), 1
    peak, flooding = [0], threading.Event()

    def sample() -> None:  # the most sessions the flood's address held at once
        while not flooding.wait(0.05):
            peak[0] = max(peak[0], server.health()["http_sessions"])

    with ThreadPoolExecutor(10) as pool:
        sampler = pool.submit(sample)
        honest = pool.submit(run_clients, server.url, specs, meta_episodes, 0, 0.1)
        start = time.monotonic()
        floods = [pool.submit(_bare_resets, server.url, flood // 8 + (i < flood % 8)) for i in range(8)]
        statuses: dict[str, int] = {}
        for future in floods:
            for status, n in future.result().items():
                statuses[str(status)] = statuses.get(str(status), 0) + n
        flood_seconds = time.monotonic() - start
        flooding.set()
        sampler.result()
        results, seconds = honest.result()
    problems = lost(results, meta_episodes)
    if statuses != {"200": flood}:
        problems.append(f"the flood's bare resets were answered {statuses}, not all 200")
    slow_row = row(f"slow clients: {len(specs)}, bare resets: {flood}", results, seconds, 0, problems,
                   flood_statuses=statuses, flood_resets_per_s=round(flood / flood_seconds, 1),
                   peak_http_sessions=peak[0])
    after = honest_check(server, f"after {flood} bare resets", 0.0)
    slow_row["sessions_after"], slow_row["seconds_to_baseline"] = after["sessions_after"], after["seconds_to_baseline"]
    slow_row["problems"] += after["problems"]
    slow_row["lost"] = len(slow_row["problems"])
    return slow_row


def bad_frames(server: Server, count: int) -> dict[str, Any]:
    """Malformed and oversized WebSocket frames and HTTP bodies: each answered as documented."""
    ws_url = server.url.replace("http", "ws") + "/ws"
    headers = {"Authorization": f"Bearer {TOKEN}"}
    wrong = []
    start = time.monotonic()
    for i in range(count):
        with connect(ws_url, additional_headers=headers, max_size=None) as websocket:
            for frame, code in (("{not json", "INVALID_JSON"), ("[" * 10_000 + "]" * 10_000, "INVALID_JSON"),
                                ('{"type": "step", "data": {"message": 3}}', "VALIDATION_ERROR"),
                                (b"\xff\xfe binary junk", "INVALID_JSON"), ('{"type": "dance"}', "UNKNOWN_TYPE")):
                websocket.send(frame)
                got = json.loads(websocket.recv(timeout=30))["data"].get("code")
                if got != code:
                    wrong.append(f"ws frame {str(frame)[:20]!r}: {got}, expected {code}")
            websocket.send("x" * (MAX_BODY + 1))
            try:
                websocket.recv(timeout=30)
                wrong.append("an oversized ws frame was answered")
            except ConnectionClosed as closed:
                if closed.rcvd is None or closed.rcvd.code != 1009:
                    wrong.append(f"an oversized ws frame closed the socket with {closed.rcvd}")
        http = HttpEnv(server.url, "", {}, token=TOKEN)
        for body, status in ((b"{not json", 400), (b"x" * (MAX_BODY + 1), 413), (b'{"seed": -1}', 422),
                             (b'{"env_id": "mage/Nope-v0"}', 404)):
            http._connection.request("POST", "/reset", body, http._headers)
            response = http._connection.getresponse()
            response.read()
            if response.status != status:
                wrong.append(f"http body {body[:20]!r}: {response.status}, expected {status}")
            if response.will_close:
                http = HttpEnv(server.url, "", {}, token=TOKEN)
        http._connection.close()
    return honest_check(server, f"malformed + oversized frames: {count} rounds", time.monotonic() - start, wrong)


def wrong_tokens(server: Server, count: int) -> dict[str, Any]:
    """HTTP requests and WebSocket handshakes with a wrong token: 401 each, no session."""
    wrong = []
    start = time.monotonic()
    for _ in range(count):
        status, _ = HttpEnv(server.url, "", {}, token="guess").call("POST", "/reset", {"seed": 0})
        if status != 401:
            wrong.append(f"http with a wrong token: {status}")
        try:
            with connect(server.url.replace("http", "ws") + "/ws", additional_headers={"Authorization": "Bearer x"}):
                wrong.append("a websocket with a wrong token was accepted")
        except InvalidStatus as error:
            if error.response.status_code != 401:
                wrong.append(f"websocket with a wrong token: {error}")
    return honest_check(server, f"wrong tokens: {count} HTTP + {count} WS", time.monotonic() - start, wrong)


def restart_mid_episode(server: Server) -> dict[str, Any]:
    """The server SIGKILLed and restarted (same port) while a ``RemoteEnv`` plays: it replays."""
    env_id, kwargs = GAMES["tictactoe"]
    env = RemoteEnv(server.url, env_id, token=TOKEN, retries=8, backoff=0.2, **kwargs)
    expected = play(gym.make(env_id, **kwargs), [77])

    class Restarting:
        """The env, with the server killed before step 5 and started again in the background."""

        def __init__(self) -> None:
            self.steps = 0
            self.restart: threading.Thread | None = None

        def reset(self, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
            return env.reset(seed=seed)

        def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
            self.steps += 1
            if self.steps == 5:
                server.kill()
                self.restart = threading.Thread(target=server.start)
                self.restart.start()
            return env.step(action)

    wrapper = Restarting()
    start = time.monotonic()
    problems = []
    try:
        played = play(wrapper, [77])
        if played != expected:
            problems.append("the replayed episode differs from the local one")
    except RemoteEnvError as error:
        played, problems = Played("", 0), [f"RemoteEnv: {error}"]
    seconds = time.monotonic() - start
    if wrapper.restart is not None:
        wrapper.restart.join()
    env.close()
    results = [{"steps": played.steps, "latencies": played.latencies}]
    count, waited = wait_for_baseline(server)
    return row("server SIGKILLed + restarted mid-episode", results, seconds, count, problems,
               seconds_to_baseline=round(waited, 2),
               slowest_step_s=round(max(played.latencies, default=0.0), 2))
