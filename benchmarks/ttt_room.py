"""How much room a Tic-Tac-Toe pool leaves for adaptation across games, seat by seat.

A meta-episode can only gain over a fixed policy where the best fixed policy against the
pool (the archetype drawn once and never revealed: ``best_nonadaptive_value``, expectimax
carrying the posterior over archetypes, so it already reads the opponent's moves within a
game) is below the mean over the pool of each archetype's best response
(``best_response_value``). Their difference is the room. Exact for archetypes with a move
table; with a search bot (``mcts-100``) both are estimates (an empirical model of the bot,
then seeded games against it), as the oracle says.

    python benchmarks/ttt_room.py            # the pools below, about a minute

Results: ``benchmarks/results/ttt-room.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mage_envs.oracle import Seat

#: The seats each pool is measured in: drawn per meta-episode, first, second.
SEATS: tuple[Seat, ...] = ("random", 0, 1)
OUT = Path(__file__).parent / "results" / "ttt-room.json"
ORDERS = ["preferred-cell-center-first", "preferred-cell-corners-first", "preferred-cell-edges-first",
          "preferred-cell-row-major", "preferred-cell-column-major", "preferred-cell-diagonal"]
#: name -> archetypes; :func:`main` adds ``mage train``'s Tic-Tac-Toe population (``default``)
#: and ``examples/tic_tac_toe_mcts.yaml``'s.
POOLS: dict[str, list[str]] = {
    "orders": ORDERS,
    "orders+greedy+minimax": [*ORDERS, "greedy", "minimax"],
}
MCTS_EXAMPLE = Path(__file__).parents[1] / "examples" / "tic_tac_toe_mcts.yaml"


def room(pool: list[str], seat: Seat) -> dict[str, Any]:
    """The pool's mean best response, best non-adaptive value and their difference in ``seat``.

    Example (six preferred-cell orders: one fixed policy beats them all, no room):
        >>> row = room(ORDERS, 0)
        >>> row["mean_best_response"], row["best_nonadaptive"], row["room"], row["exact"]
        (1.0, 1.0, 0.0, True)
    """
    from mage_envs.oracle.values import best_nonadaptive_value, best_response_value

    responses = [best_response_value("tic_tac_toe", name, seat) for name in pool]
    fixed = best_nonadaptive_value("tic_tac_toe", pool, seat)
    mean = sum(r.value for r in responses) / len(responses)
    return {"mean_best_response": mean, "best_nonadaptive": fixed.value, "room": mean - fixed.value,
            "nonadaptive_stderr": fixed.stderr, "exact": fixed.exact and all(r.exact for r in responses),
            "best_response": {name: r.value for name, r in zip(pool, responses)}}


def main() -> None:
    from mage_agent.config import load_config
    from mage_envs.eval_protocol import training_population

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    pools = {"default": list(training_population("tic_tac_toe")), **POOLS,
             MCTS_EXAMPLE.name: list(load_config(MCTS_EXAMPLE).env.population)}
    table: dict[str, Any] = {}
    for name, pool in pools.items():
        table[name] = {"pool": pool, **{f"seat {seat}": room(pool, seat) for seat in SEATS}}
        for seat in SEATS:
            row = table[name][f"seat {seat}"]
            print(f"{name:24s} seat {seat!s:6s} mean best response {row['mean_best_response']:+.4f}  "
                  f"best non-adaptive {row['best_nonadaptive']:+.4f}  room {row['room']:+.4f}"
                  f"{'' if row['exact'] else '  (estimate)'}", flush=True)
    args.out.write_text(json.dumps(table, indent=1))
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
