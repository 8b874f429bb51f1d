"""What ``benchmarks/server_load.py`` runs its phases with: the server, the clients, the checks.

A :class:`Server` is ``mage serve`` in a subprocess on a free loopback port. Clients
(:data:`Spec`: kind, index, game) play in threads of forked processes; :func:`lost` compares
each one's digest with the same meta-episodes played in-process; :func:`row` makes a line of
the table; :func:`honest_check` is what follows every fault, and :func:`served_while_held`
what follows the killed and frozen clients at once, before their sessions are reaped.
"""

from __future__ import annotations

import multiprocessing
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gymnasium as gym
from load_clients import GAMES, HttpEnv, Played, free_port, play

import mage_envs  # noqa: F401  (registers the ids)
from mage_envs.server import RemoteEnv

TOKEN = "load-test-token"
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


#: The honest clients played after (and during) each fault: one WebSocket and one HTTP Kuhn player.
HONEST: list[Spec] = [("ws", 0, "kuhn"), ("http", 0, "kuhn")]


def served_while_held(server: Server, phase: str) -> tuple[dict[str, Any], list[str]]:
    """Honest clients played at once after a fault, while the sessions it left are still open (not yet reaped).

    The figures (the sessions open when they started and when they had been served, which may
    still count an honest WebSocket whose close the server is processing, while the HTTP count
    then is the fault's alone; their steps and latencies) and what went wrong: a client refused or answered differently from the local
    env, or no session left open when they started (the check then tested nothing).
    """
    held = server.health()
    results, seconds = run_clients(server.url, HONEST, 1, processes=0)
    after = server.health()
    problems = [f"while the {phase} held sessions: {problem}" for problem in lost(results, 1)]
    if held["active_sessions"] == 0:
        problems.append(f"the sessions of the {phase} were gone before honest clients could play beside them")
    figures = row("", results, seconds, after["active_sessions"], problems)
    return {"sessions_at_start": held["active_sessions"], "ws_sessions_at_start": held["ws_sessions"],
            "http_sessions_at_start": held["http_sessions"], "sessions_when_served": after["active_sessions"],
            "http_sessions_when_served": after["http_sessions"], "clients": figures["clients"],
            "steps": figures["steps"], "seconds": figures["seconds"], "p50_ms": figures["p50_ms"],
            "p99_ms": figures["p99_ms"]}, problems


def honest_check(server: Server, phase: str, seconds: float, wrong: list[str] | None = None,
                 **extra: Any) -> dict[str, Any]:
    """After a fault (and its ``wrong`` answers): back to the baseline, then honest clients served as locally."""
    count, waited = wait_for_baseline(server)
    health = server.health()
    results, played_for = run_clients(server.url, HONEST, 1, processes=0)
    problems = list(wrong or []) + lost(results, 1)
    if health["status"] != "healthy":
        problems.append(f"unhealthy after {phase}: {health}")
    if count != 0:
        problems.append(f"{count} sessions left {waited:.1f} s after {phase}")
    return row(phase, results, played_for, count, problems, fault_seconds=round(seconds, 3),
               seconds_to_baseline=round(waited, 2), **extra)


