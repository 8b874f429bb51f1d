"""A league: frozen snapshots of the learner join the opponent population during training.

Every ``league_interval`` iterations the learner's first-hand policy is tabulated exactly
(:mod:`mage_agent.exploitability`: its action-token probabilities at every information
state) and frozen as a :class:`~mage_envs.opponents.table.TableOpponent` named
``snapshot-NNNNNN``; the ``league_pool_size`` newest are kept. The groups of an iteration are
drawn from the archetypes (their weights scaled to ``1 - league_share``) and the snapshots
(``league_share``, split equally), then, with ``league_sampling="pfsp"``, every weight is
multiplied by ``(1 - w) ** league_pfsp_power``, ``w`` being the learner's recent win rate
against that member (prioritised fictitious self-play: the opponents it beats least are met
most). ``members`` says what a snapshot adds: the frozen first hand itself (``"snapshots"``),
``best-response-NNNNNN``, the exact best response to it
(:func:`~mage_envs.oracle.learner.best_response_opponent`, a deterministic table: an
opponent that punishes what the learner's first hand gave away, as in exploitability
descent and double oracle; ``"best-responses"``), or both; a snapshot's members leave the
pool together. :class:`League` keeps the members, the win counts (decayed by
:data:`WIN_RATE_DECAY` each iteration), OpenSkill ratings fitted to one match per member
and iteration, the learner's mean final hand against it (a snapshot starts at the learner's
rating when it froze) and the exact payoff matrix
among members' first hands; all of it is in the checkpoint, so a resumed run is the same run.

Example:
    >>> league = League(game="kuhn_poker", population={"aggressive": 1.0, "conservative": 1.0}, interval=2,
    ...                 pool_size=1, share=0.5, sampling="uniform", pfsp_power=2.0)
    >>> league.add_snapshot(2, {"0": {0: 0.5, 1: 0.5}})
    'snapshot-000002'
    >>> league.weights()
    {'aggressive': 0.25, 'conservative': 0.25, 'snapshot-000002': 0.5}
    >>> _ = league.add_snapshot(4, {"0": {1: 1.0}})      # the pool holds one: the oldest leaves
    >>> list(league.snapshots)
    ['snapshot-000004']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from openskill.models import PlackettLuce

from mage_envs.facts import load_game
from mage_envs.opponents.registry import make_opponent
from mage_envs.opponents.table import Table, TableOpponent
from mage_envs.oracle import tabular
from mage_envs.oracle.learner import best_response_opponent, match_value, seat_table

#: Win and game counts are multiplied by this every iteration (a window of about 20 iterations).
WIN_RATE_DECAY = 0.95
#: The learner's name in ratings and the payoff matrix.
LEARNER = "learner"
#: Member name prefixes: the learner's frozen first hand, and the best response to it.
SNAPSHOT, BEST_RESPONSE = "snapshot-", "best-response-"


class League:
    """The snapshots, their sampling weights, win rates, ratings and payoff matrix."""

    def __init__(self, game: str, population: Mapping[str, float], interval: int, pool_size: int, share: float,
                 sampling: str, pfsp_power: float, members: str = "snapshots") -> None:
        self.game = game
        self.population = dict(population)
        self.interval = interval
        self.pool_size = pool_size
        self.share = share
        self.sampling = sampling
        self.pfsp_power = pfsp_power
        self.members = members
        #: the learner's first hands kept, by iteration stamp (``"000100"``)
        self.frozen: dict[str, Table] = {}
        #: the members met in training, by name
        self.snapshots: dict[str, Table] = {}
        self.wins: dict[str, float] = {}
        self.games: dict[str, float] = {}
        self._model = PlackettLuce()
        self.ratings: dict[str, tuple[float, float]] = {LEARNER: self._initial()}

    def _initial(self) -> tuple[float, float]:
        rating = self._model.rating()
        return float(rating.mu), float(rating.sigma)

    # ------------------------------------------------------------------ members
    def due(self, iteration: int) -> bool:
        """Whether a snapshot is taken after ``iteration`` (0-based)."""
        return (iteration + 1) % self.interval == 0

    def add_snapshot(self, iteration: int, table: Mapping[str, Mapping[int, float]]) -> str:
        """Freeze ``table`` (the learner's first hand after ``iteration``): as member
        ``snapshot-<iteration>`` and / or its best response ``best-response-<iteration>``, as
        ``members`` says; drop the oldest snapshots' members beyond the pool size. Returns
        the snapshot's name."""
        stamp = f"{iteration:06d}"
        self.frozen[stamp] = {key: dict(probs) for key, probs in table.items()}
        for name, member in self._members_of(stamp).items():
            self.snapshots[name] = member
            self.ratings[name] = self.ratings[LEARNER]
        for oldest in list(self.frozen)[:max(0, len(self.frozen) - self.pool_size)]:
            del self.frozen[oldest]
            for name in (SNAPSHOT + oldest, BEST_RESPONSE + oldest):
                self.snapshots.pop(name, None)
                for record in (self.wins, self.games, self.ratings):
                    record.pop(name, None)
        return SNAPSHOT + stamp

    def _members_of(self, stamp: str) -> dict[str, Table]:
        """The members the first hand frozen at ``stamp`` brings, as ``members`` says."""
        added: dict[str, Table] = {}
        if self.members in ("snapshots", "both"):
            added[SNAPSHOT + stamp] = self.frozen[stamp]
        if self.members in ("best-responses", "both"):
            name = BEST_RESPONSE + stamp
            added[name] = best_response_opponent(self.game, self.frozen[stamp], name).table
        return added

    def opponents(self) -> list[TableOpponent]:
        """The snapshots as opponents (for the envs' populations)."""
        return [TableOpponent(name, table) for name, table in self.snapshots.items()]

    def win_rate(self, name: str) -> float:
        """The learner's decayed win rate against ``name``, with one win and one loss of prior."""
        return (self.wins.get(name, 0.0) + 1.0) / (self.games.get(name, 0.0) + 2.0)

    def weights(self) -> dict[str, float]:
        """Each member's probability of being drawn for a group."""
        archetype_total = sum(self.population.values())
        archetype_share = 1.0 - self.share if self.snapshots else 1.0
        weights = {name: archetype_share * w / archetype_total for name, w in self.population.items()}
        weights.update({name: self.share / len(self.snapshots) for name in self.snapshots})
        if self.sampling == "pfsp":
            weights = {name: w * (1.0 - self.win_rate(name)) ** self.pfsp_power for name, w in weights.items()}
            total = sum(weights.values())
            weights = {name: w / total for name, w in weights.items()}
        return weights

    # ------------------------------------------------------------------ results
    def record(self, opponents: Sequence[str], outcomes: Sequence[Sequence[bool]],
               final_returns: Sequence[float]) -> None:
        """An iteration's meta-episodes: the opponent, the hands won, the final hand's return.
        Each member met plays one rated match against the learner: the sign of the learner's
        mean final return against it (single hands would rate card luck)."""
        for name in self.wins:
            self.wins[name] *= WIN_RATE_DECAY
            self.games[name] *= WIN_RATE_DECAY
        finals: dict[str, list[float]] = {}
        for name, won, final in zip(opponents, outcomes, final_returns):
            self.wins[name] = self.wins.get(name, 0.0) + sum(won)
            self.games[name] = self.games.get(name, 0.0) + len(won)
            finals.setdefault(name, []).append(final)
        for name, returns in finals.items():   # one match per member met: the mean over its meta-episodes
            self._rate(name, sum(returns) / len(returns))

    def _rate(self, name: str, learner_return: float) -> None:
        learner = self._model.rating(*self.ratings[LEARNER], name=LEARNER)
        opponent = self._model.rating(*self.ratings.get(name, self._initial()), name=name)
        ranks = [0.0, 0.0] if learner_return == 0 else [0.0, 1.0] if learner_return > 0 else [1.0, 0.0]
        [[learner], [opponent]] = self._model.rate([[learner], [opponent]], ranks=ranks)
        self.ratings[LEARNER] = float(learner.mu), float(learner.sigma)
        self.ratings[name] = float(opponent.mu), float(opponent.sigma)

    def payoff_matrix(self, learner: Mapping[str, Mapping[int, float]]) -> dict[str, dict[str, float]]:
        """``matrix[a][b]``: ``a``'s exact expected first-hand return against ``b``, both seats
        averaged, over the learner (its table now), the snapshots and the archetypes."""
        game = load_game(self.game)
        tables: dict[str, Any] = {LEARNER: learner, **self.snapshots}
        tables.update({name: tabular.archetype_table(game, make_opponent(self.game, name)) for name in self.population})
        cut = {(name, s): seat_table(self.game, table, s) for name, table in tables.items() for s in (0, 1)}
        return {a: {b: sum(match_value(self.game, cut[a, s], cut[b, 1 - s], s) for s in (0, 1)) / 2 for b in tables}
                for a in tables}

    def summary(self, learner: Mapping[str, Mapping[int, float]]) -> dict[str, Any]:
        """What ``league.json`` holds: members, weights, win rates, ratings (mu, sigma, ordinal)
        and the payoff matrix."""
        return {
            "members": [*self.population, *self.snapshots],
            "weights": self.weights(),
            "win_rate": {name: self.win_rate(name) for name in [*self.population, *self.snapshots]},
            "ratings": {name: {"mu": mu, "sigma": sigma, "ordinal": mu - 3 * sigma}
                        for name, (mu, sigma) in self.ratings.items()},
            "payoff_matrix": self.payoff_matrix(learner),
        }

    def metrics(self) -> dict[str, float]:
        """Per-iteration scalars: the pool size and every member's rating ordinal."""
        out: dict[str, float] = {"league_size": float(len(self.snapshots))}
        out.update({f"rating/{name}": mu - 3 * sigma for name, (mu, sigma) in self.ratings.items()})
        return out

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """JSON-ready state (action ids as strings): the frozen first hands, from which the
        members are rebuilt, the win counts and the ratings."""
        return {"frozen": {stamp: {k: {str(a): p for a, p in probs.items()} for k, probs in table.items()}
                           for stamp, table in self.frozen.items()},
                "wins": self.wins, "games": self.games, "ratings": {k: list(v) for k, v in self.ratings.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        # checkpoints from before best-response members kept the snapshot members alone
        frozen = state.get("frozen") or {name.removeprefix(SNAPSHOT): table for name, table in state["snapshots"].items()}
        self.frozen = {stamp: {k: {int(a): float(p) for a, p in probs.items()} for k, probs in table.items()}
                       for stamp, table in frozen.items()}
        self.snapshots = {name: member for stamp in self.frozen for name, member in self._members_of(stamp).items()}
        self.wins = dict(state["wins"])
        self.games = dict(state["games"])
        self.ratings = {k: (float(v[0]), float(v[1])) for k, v in state["ratings"].items()}
