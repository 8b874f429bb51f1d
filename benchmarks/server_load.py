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
   SIGKILLed and restarted mid-episode under a ``RemoteEnv`` that replays. Honest clients
   also play *while* the faulty sessions are held: the slow ones during the flood, and one
   WebSocket and one HTTP client at once after the SIGKILL and the SIGSTOP, before the server
   has reaped the sessions those left (the phase fails if none was left open when they
   started).

Prints a table (phase, clients, steps, steps/s, p50, p99, sessions after, lost) and writes
the figures to ``--output`` (default ``benchmarks/results/server_load.json``). Exits 1 if
anything was lost, misrouted, answered wrongly or left a session behind, or if the server's
resident memory grew by more than :func:`rss_bound_mib` over the run.

**The memory bound.** The server's resident memory is read after one warm-up client per
game (envs imported, WebShop's catalogue and index built), after each load round and after
the faults (before the restart, which starts a new process); the largest reading may exceed
the first by at most the larger of 10% of it and 32 MiB. Flat is not zero: the first round
of 128 concurrent clients grows the worker-thread pool, the allocator's arenas and the envs'
per-history caches, which Python keeps rather than returns: 16 to 17 MiB of 367 MiB in the
first round, 21 to 23 MiB (6%) over the whole run, the faults included, in five runs of
the defaults. The bound is about twice that first round and 1.5 times the whole run's
growth, or 10% of a larger server. What it catches is memory that grows with traffic: the
default run serves about 9,600 steps in its two rounds, so keeping about 1.5 KiB for every
step served breaks it on top of that growth (4 KiB a step alone would).
A leaked *session* costs only 1 to 20 KiB (100 held HTTP sessions: Kuhn 2.0 MiB,
Tic-Tac-Toe 1.3 MiB, WebShop 0.1 MiB, its catalogue being shared), far under any RSS
bound: the session count returning to 0 after every phase is what catches those.

Its parts: ``load_clients.py`` (the policy, the WebSocket and HTTP players, digests),
``load_harness.py`` (the server, the clients, the checks), ``load_faults.py`` (the faults).

Run: ``python benchmarks/server_load.py [--ws-clients 64] [--http-clients 64] [--meta-episodes 2]``
"""


from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from load_clients import GAMES
from load_faults import bad_frames, flood_with_slow_clients, killed_clients, restart_mid_episode, wrong_tokens
from load_harness import (
    MAX_BODY,
    Server,
    local_reference,
    lost,
    percentile,
    row,
    run_clients,
    specs_of,
    wait_for_baseline,
)

#: The memory bound: growth allowed over the run, the larger of this share of the first reading ...
RSS_GROWTH_SHARE = 0.10
#: ... and this many MiB.
RSS_GROWTH_MIB = 32.0


def rss_bound_mib(before: float) -> float:
    """The most the server's resident memory may grow over the run, in MiB, from ``before``.

    >>> rss_bound_mib(100.0), rss_bound_mib(367.0), rss_bound_mib(1000.0)
    (32.0, 36.7, 100.0)
    """
    return max(RSS_GROWTH_SHARE * before, RSS_GROWTH_MIB)


def rss_problem(before: float, after: list[float]) -> str | None:
    """Why the readings ``after`` (MiB) break the memory bound from ``before``; ``None`` when they do not.

    >>> rss_problem(367.0, [383.0, 385.0, 388.0]) is None
    True
    >>> rss_problem(367.0, [383.0, 410.0, 388.0])
    'server memory grew 43.0 MiB (367.0 -> 410.0 MiB), over the bound of 36.7 MiB (the larger of 10% and 32 MiB)'
    """
    peak = max(after, default=before)
    bound = rss_bound_mib(before)
    if peak - before <= bound:
        return None
    return (f"server memory grew {peak - before:.1f} MiB ({before:.1f} -> {peak:.1f} MiB), over the bound of "
            f"{bound:.1f} MiB (the larger of {RSS_GROWTH_SHARE:.0%} and {RSS_GROWTH_MIB:g} MiB)")


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
    load_average = {"start": [round(x, 2) for x in os.getloadavg()]}  # 1, 5, 15 min: the machine's other work
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
    load_average["end"] = [round(x, 2) for x in os.getloadavg()]
    memory_problem = rss_problem(rss_before, [*rss_after_load, rss_after_faults])
    growth = max([*rss_after_load, rss_after_faults]) - rss_before
    report = {
        "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(), "load_average": load_average,
        "server_flags": flags, "server_start_s": round(startup, 2),
        "clients": {"ws": args.ws_clients, "http": args.http_clients, "meta_episodes": args.meta_episodes, "games": games,
                    "processes": args.processes},
        "server_rss_mib": {"before_load": round(rss_before, 1), "after_each_load_round": rss_after_load,
                           "after_faults": round(rss_after_faults, 1),
                           "growth": round(growth, 1),
                           "bound": round(rss_bound_mib(rss_before), 1), "within_bound": memory_problem is None},
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
    for r in rows:
        if "while_held" in r:
            w = r["while_held"]
            print(f"{r['phase']}: {w['clients']} honest clients served while the faulty sessions were held "
                  f"({w['sessions_at_start']} open when they started, {w['sessions_when_served']} when served), "
                  f"{w['steps']} steps, p99 {w['p99_ms']} ms")
    print(f"load: served {load['steps_per_s']:.0f} steps/s, in-process {load['local_steps_per_s']:.0f} steps/s, "
          f"ratio {load['served_to_local']:.2f}; WS p99 {load.get('ws_p99_ms')} ms, HTTP p99 {load.get('http_p99_ms')} ms")
    print(f"server memory (MiB): {rss_before:.0f} before load, {rss_after_load} after each round, "
          f"{rss_after_faults:.0f} after the faults; grew {growth:.1f}, bound "
          f"{rss_bound_mib(rss_before):.1f}")
    for r in rows:
        for problem in r["problems"]:
            print(f"  {r['phase']}: {problem}")
    if memory_problem is not None:
        print(f"FAILED: {memory_problem}")
    print(f"load average (1, 5, 15 min): {load_average['start']} at the start, {load_average['end']} at the end")
    print(f"saved {args.output} (the server's log: {server.log})")
    return 1 if any(r["lost"] for r in rows) or memory_problem is not None else 0


if __name__ == "__main__":
    sys.exit(main())
