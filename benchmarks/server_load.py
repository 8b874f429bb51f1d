"""`mage serve` under load and faults, on loopback only, bounded in clients, episodes and time.

1. **Load**: ``--ws-clients`` WebSocket clients (``RemoteEnv``) and ``--http-clients`` HTTP
   clients (``POST /reset`` + ``POST /step`` on a session) at once, each playing
   ``--meta-episodes`` whole meta-episodes of Kuhn Poker, Tic-Tac-Toe or WebShop (client i
   plays game i mod 3, ``--games``) with its own seeds. Steps/s, p50/p99 latency per kind, the server's
   resident memory before and after, and the ratio to the same episodes played in-process
   (one process, one after the other). Every client's transcript (observations, rewards,
   flags, infos as JSON text) must equal the local one: a SHA-256 each, compared.
2. **Faults**, each followed by: the server healthy, its session count back to the
   baseline (0), and one honest WebSocket and one honest HTTP client served and equal to
   local: clients SIGKILLed mid-episode; a frozen client (SIGSTOP: its socket stays open, it
   answers no ping); slow clients (a pause before every step) next to a flood of
   ``--flood`` bare resets from another address (``--max-sessions-per-client`` keeps the
   flood to its share); malformed and oversized frames and bodies; wrong tokens; the server
   SIGKILLed and restarted mid-episode under a ``RemoteEnv`` that replays.

Prints a table (phase, clients, steps, steps/s, p50, p99, sessions after, lost) and writes
the figures to ``--output`` (default ``benchmarks/results/server_load.json``). Exits 1 if
anything was lost, misrouted, answered wrongly or left a session behind.

Run: ``python benchmarks/server_load.py [--ws-clients 64] [--http-clients 64] [--meta-episodes 2]``
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gymnasium as gym
from load_clients import GAMES, HttpEnv, Played, free_port, play
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

import mage_envs  # noqa: F401  (registers the ids)
from mage_envs.server import RemoteEnv, RemoteEnvError

TOKEN = "load-test-token"
FLOOD_SOURCE = "127.0.0.2"  # the flood's own loopback address: the per-client cap counts by address
MAX_BODY = 1 << 16
FORK = multiprocessing.get_context("fork")


class Server:
    """`mage serve` on a free loopback port in a subprocess."""

    def __init__(self, flags: list[str], log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [sys.executable, "-m", "mage_envs.cli", "serve", "--port", str(self.port), "--token", TOKEN,
                        *flags]
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        """Start it; the seconds until it answers."""
        start = time.monotonic()
        with open(self.log, "a") as out:
            self.process = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT)
        while True:
            try:
                self.health()
                return time.monotonic() - start
            except OSError:
                if self.process.poll() is not None or time.monotonic() - start > 120:
                    raise RuntimeError(f"the server did not start; see {self.log}") from None
                time.sleep(0.05)

    def health(self) -> dict[str, Any]:
        return HttpEnv(self.url, "", {}).call("GET", "/health")[1]

    def rss_mib(self) -> float:
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


def seeds_of(index: int, meta_episodes: int) -> list[int]:
    return [1000 * index + k for k in range(meta_episodes)]


#: A client: its kind ("ws" or "http"), its index (which picks its seeds) and its game (a key of GAMES).
Spec = tuple[str, int, str]


def specs_of(kind: str, count: int, games: list[str], first: int = 0) -> list[Spec]:
    """``count`` clients of ``kind``; client i plays ``games[i % len(games)]``."""
    return [(kind, first + i, games[i % len(games)]) for i in range(count)]


def make_player(kind: str, url: str, game: str, **extra: Any) -> Any:
    env_id, kwargs = GAMES[game]
    if kind == "ws":
        return RemoteEnv(url, env_id, token=TOKEN, **kwargs)
    return HttpEnv(url, env_id, kwargs, token=TOKEN, **extra)


def client(spec: Spec, url: str, meta_episodes: int, pause: float = 0.0,
           barrier: threading.Barrier | None = None) -> dict[str, Any]:
    """One client: what it played, or the error that stopped it."""
    kind, index, game = spec
    try:
        env = make_player(kind, url, game)
        if barrier is not None:
            barrier.wait()
        played = play(env, seeds_of(index, meta_episodes), pause)
        env.close()
        return {"kind": kind, "index": index, "game": game, "digest": played.digest, "steps": played.steps,
                "latencies": played.latencies, "error": None}
    except Exception as error:  # reported as lost
        if barrier is not None:
            barrier.abort()
        return {"kind": kind, "index": index, "game": game, "digest": None, "steps": 0, "latencies": [],
                "error": f"{type(error).__name__}: {error}"}


def client_group(url: str, specs: list[Spec], meta_episodes: int, pause: float) -> list[dict[str, Any]]:
    """The clients ``specs`` in threads of this process, started together."""
    barrier = threading.Barrier(len(specs))
    with ThreadPoolExecutor(len(specs)) as pool:
        futures = [pool.submit(client, spec, url, meta_episodes, pause, barrier) for spec in specs]
        return [future.result() for future in futures]


def run_clients(url: str, specs: list[Spec], meta_episodes: int, processes: int,
                pause: float = 0.0) -> tuple[list[dict[str, Any]], float]:
    """All clients of ``specs`` spread over ``processes`` processes (0: threads of this one); results, wall time."""
    start = time.perf_counter()
    if processes == 0:
        return client_group(url, specs, meta_episodes, pause), time.perf_counter() - start
    groups = [specs[p::processes] for p in range(processes) if specs[p::processes]]
    with ProcessPoolExecutor(len(groups), mp_context=FORK) as pool:
        results = [r for group in pool.map(client_group, [url] * len(groups), groups,
                                           [meta_episodes] * len(groups), [pause] * len(groups)) for r in group]
    return results, time.perf_counter() - start


def local_reference(specs: list[Spec], meta_episodes: int) -> tuple[dict[tuple[int, str], Played], float]:
    """The same meta-episodes in-process, one after the other: each (index, game)'s result and the seconds."""
    expected: dict[tuple[int, str], Played] = {}
    envs = {game: gym.make(GAMES[game][0], **GAMES[game][1]) for game in {game for _, _, game in specs}}
    start = time.perf_counter()
    for _, index, game in specs:
        if (index, game) not in expected:
            expected[index, game] = play(envs[game], seeds_of(index, meta_episodes))
    return expected, time.perf_counter() - start


def lost(results: list[dict[str, Any]], meta_episodes: int,
         expected: dict[tuple[int, str], Played] | None = None) -> list[str]:
    """What went wrong for each client: an error, or a transcript that differs from the local one."""
    if expected is None:
        expected, _ = local_reference([(r["kind"], r["index"], r["game"]) for r in results], meta_episodes)
    problems = []
    for r in results:
        if r["error"] is not None:
            problems.append(f"{r['kind']} client {r['index']}: {r['error']}")
        elif Played(r["digest"], r["steps"]) != expected[r["index"], r["game"]]:
            problems.append(f"{r['kind']} client {r['index']} ({r['game']}): transcript differs from the local one")
    return problems


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def wait_for_baseline(server: Server, baseline: int = 0, timeout: float = 30.0) -> tuple[int, float]:
    """Wait for the session count to fall back to ``baseline``: (count then, seconds waited)."""
    start = time.monotonic()
    while (count := server.health()["active_sessions"]) != baseline and time.monotonic() - start < timeout:
        time.sleep(0.05)
    return count, time.monotonic() - start


def row(phase: str, results: list[dict[str, Any]], seconds: float, sessions_after: int, problems: list[str],
        **extra: Any) -> dict[str, Any]:
    latencies = [x for r in results for x in r["latencies"]]
    steps = sum(r["steps"] for r in results)
    return {"phase": phase, "clients": len(results), "steps": steps, "seconds": round(seconds, 3),
            "steps_per_s": round(steps / seconds, 1) if seconds else None,
            "p50_ms": round(1000 * percentile(latencies, 50), 2) if latencies else None,
            "p99_ms": round(1000 * percentile(latencies, 99), 2) if latencies else None,
            "sessions_after": sessions_after, "lost": len(problems), "problems": problems, **extra}


def honest_check(server: Server, phase: str, seconds: float, wrong: list[str] | None = None,
                 **extra: Any) -> dict[str, Any]:
    """After a fault (and its ``wrong`` answers): back to the baseline, then honest clients served as locally."""
    count, waited = wait_for_baseline(server)
    health = server.health()
    results, played_for = run_clients(server.url, [("ws", 0, "kuhn"), ("http", 0, "kuhn")], 1, processes=0)
    problems = list(wrong or []) + lost(results, 1)
    if health["status"] != "healthy":
        problems.append(f"unhealthy after {phase}: {health}")
    if count != 0:
        problems.append(f"{count} sessions left {waited:.1f} s after {phase}")
    return row(phase, results, played_for, count, problems, fault_seconds=round(seconds, 3),
               seconds_to_baseline=round(waited, 2), **extra)


# -- faults -----------------------------------------------------------------------------------------------


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
    phase = f"frozen clients (SIGSTOP): {count}" if freeze else f"clients SIGKILLed mid-episode: {count}"
    result = honest_check(server, phase, time.monotonic() - start, sessions_held=held)
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


# -- the run ----------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ws-clients", type=int, default=64)
    parser.add_argument("--http-clients", type=int, default=64)
    parser.add_argument("--meta-episodes", type=int, default=2, help="per client, whole meta-episodes")
    parser.add_argument("--games", default=",".join(GAMES), help=f"comma-separated, of {', '.join(GAMES)}")
    parser.add_argument("--rounds", type=int, default=2, help="times the load is played (memory after each)")
    parser.add_argument("--processes", type=int, default=4, help="client processes (threads share them)")
    parser.add_argument("--flood", type=int, default=1000, help="bare POST /reset in the flood")
    parser.add_argument("--killed", type=int, default=8, help="clients SIGKILLed (and frozen) mid-episode")
    parser.add_argument("--slow", type=int, default=4, help="slow WebSocket and HTTP clients during the flood")
    parser.add_argument("--bad", type=int, default=20, help="rounds of malformed and oversized frames")
    parser.add_argument("--tokens", type=int, default=50, help="requests with a wrong token")
    parser.add_argument("--output", type=Path, default=Path(__file__).parent / "results" / "server_load.json")
    args = parser.parse_args(argv)
    games = args.games.split(",")
    if not games or set(games) - set(GAMES):
        parser.error(f"--games takes names of {', '.join(GAMES)}, got {args.games!r}")
    clients = args.ws_clients + args.http_clients
    max_sessions = clients + 32
    flags = ["--max-sessions", str(max_sessions), "--max-sessions-per-client", str(clients + 8),
             "--idle-timeout", "60", "--http-idle-timeout", "1", "--ws-ping-interval", "1", "--ws-ping-timeout", "1",
             "--max-body-bytes", str(MAX_BODY)]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    server = Server(flags, Path(tempfile.mkdtemp(prefix="server_load-")) / "server.log")
    startup = server.start()
    rows = []
    try:
        warm, _ = run_clients(server.url, specs_of("ws", len(games), games), 1, 1)  # envs imported, caches full
        rss_before = server.rss_mib()
        specs = specs_of("ws", args.ws_clients, games) + specs_of("http", args.http_clients, games)
        expected, local_seconds = local_reference(specs, args.meta_episodes)
        rss_after_load = []
        for round_ in range(1, args.rounds + 1):  # the same load again: memory must not grow with it
            results, seconds = run_clients(server.url, specs, args.meta_episodes, args.processes)
            count, waited = wait_for_baseline(server)
            rss_after_load.append(round(server.rss_mib(), 1))
            problems = lost(results, args.meta_episodes, expected) + (lost(warm, 1) if round_ == 1 else [])
            load = row(f"load: {args.ws_clients} WS + {args.http_clients} HTTP, round {round_}", results, seconds,
                       count, problems, seconds_to_baseline=round(waited, 2))
            local_steps_per_s = load["steps"] / local_seconds
            load["local_steps_per_s"] = round(local_steps_per_s, 1)
            load["served_to_local"] = round(load["steps_per_s"] / local_steps_per_s, 3)
            for kind in ("ws", "http"):
                latencies = [x for r in results if r["kind"] == kind for x in r["latencies"]]
                if latencies:
                    load[f"{kind}_p50_ms"] = round(1000 * percentile(latencies, 50), 2)
                    load[f"{kind}_p99_ms"] = round(1000 * percentile(latencies, 99), 2)
            rows.append(load)
        rows.append(killed_clients(server, args.killed))
        rows.append(killed_clients(server, max(1, args.killed // 2), freeze=True))
        rows.append(flood_with_slow_clients(server, args.flood, args.slow, games))
        rows.append(bad_frames(server, args.bad))
        rows.append(wrong_tokens(server, args.tokens))
        rss_after_faults = server.rss_mib()
        rows.append(restart_mid_episode(server))
    finally:
        server.stop()
    report = {
        "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(), "server_flags": flags, "server_start_s": round(startup, 2),
        "clients": {"ws": args.ws_clients, "http": args.http_clients, "meta_episodes": args.meta_episodes, "games": games,
                    "processes": args.processes},
        "server_rss_mib": {"before_load": round(rss_before, 1), "after_each_load_round": rss_after_load,
                           "after_faults": round(rss_after_faults, 1)},
        "rows": rows,
    }
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print("fault rows: the honest clients served after the fault; 'back in': seconds until the session count "
          "was back to 0")
    print(f"{'phase':44s} {'clients':>7s} {'steps':>6s} {'steps/s':>8s} {'p50 ms':>7s} {'p99 ms':>7s} "
          f"{'sessions after':>14s} {'back in':>7s} {'lost':>4s}")
    for r in rows:
        rate = "" if r["steps_per_s"] is None else f"{r['steps_per_s']:.0f}"
        p50 = "" if r["p50_ms"] is None else f"{r['p50_ms']:.1f}"
        p99 = "" if r["p99_ms"] is None else f"{r['p99_ms']:.1f}"
        back = f"{r['seconds_to_baseline']:.1f}" if "seconds_to_baseline" in r else ""
        print(f"{r['phase']:44s} {r['clients']:7d} {r['steps']:6d} {rate:>8s} {p50:>7s} {p99:>7s} "
              f"{r['sessions_after']:14d} {back:>7s} {r['lost']:4d}")
    print(f"load: served {load['steps_per_s']:.0f} steps/s, in-process {load['local_steps_per_s']:.0f} steps/s, "
          f"ratio {load['served_to_local']:.2f}; WS p99 {load.get('ws_p99_ms')} ms, HTTP p99 {load.get('http_p99_ms')} ms")
    print(f"server memory (MiB): {rss_before:.0f} before load, {rss_after_load} after each round, "
          f"{rss_after_faults:.0f} after the faults")
    for r in rows:
        for problem in r["problems"]:
            print(f"  {r['phase']}: {problem}")
    print(f"saved {args.output} (the server's log: {server.log})")
    return 1 if any(r["lost"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
