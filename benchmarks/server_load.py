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
