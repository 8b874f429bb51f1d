"""A round robin among tabular agents on Kuhn or Leduc Poker: payoffs with 95% CIs, ratings.

Every entrant plays every other from both seats over stratified deals: each opening deal
(the private cards) is played ``games`` times per seat, the later chance events and mixed
moves drawn from seeded streams that belong to the seat and the game, not to the entrant,
so a pair's games are the same whichever is listed first and the matrix of a zero-sum game
is antisymmetric. Entrants are first-hand policy tables (:class:`Entrant`): archetypes,
tabulated checkpoints (``mage tournament`` tabulates them with ``mage_agent``), and two
oracles that see their opponent's table: ``best-response`` (the exact best response to each
opponent it meets) and ``bayes`` (the best response to the archetypes of the tournament,
drawn equally likely: the Bayes-optimal agent's first hand). A text agent (an API model,
any ``agent(observation, info)``) enters through :func:`sampled_entrant`: its first hand's
table estimated from answers sampled at every information state's prompt
(:class:`~mage_envs.oracle.sampling.SampledScorer`). ``payoff[a][b]`` is ``a``'s mean
return against ``b`` (stratified mean, ± ``ci95``), ``exact[a][b]`` its expected value;
ratings are OpenSkill's (Plackett-Luce) over duplicate matches: a game and its twin with the
seats swapped (the same deal and streams), won by whoever won more chips over the two.

Example:
    >>> result = round_robin("kuhn_poker", [archetype_entrant("kuhn_poker", "nash"),
    ...     archetype_entrant("kuhn_poker", "aggressive"), Entrant("best-response", kind="best-response")], games=20)
    >>> round(result.payoff["nash"]["aggressive"], 3) == -round(result.payoff["aggressive"]["nash"], 3)
    True
    >>> result.exact["best-response"]["aggressive"] >= result.exact["nash"]["aggressive"]
    True
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspiel

from .eval_protocol import protocol_env_kwargs
from .facts import load_game
from .opponents.base import sample_action
from .opponents.registry import make_opponent
from .opponents.table import TableOpponent
from .oracle import tabular
from .oracle.learner import best_response_opponent, match_value, seat_table, tabulate
from .oracle.prompts import first_hand_prompts
from .oracle.result import seats
from .oracle.sampling import SampledScorer

#: The oracle entrants, whose table depends on the opponent.
ORACLES = ("best-response", "bayes")


@dataclass(frozen=True)
class Entrant:
    """A tournament player: a ``table`` over both seats (``kind="table"``) or an oracle.
    ``in_prior``: a table entrant that is one of the archetypes the ``bayes`` oracle expects
    (a checkpoint is not). ``details``: how the table was made, reported with the results
    (a sampled entrant's answers and invalid answers; its ``note`` is printed)."""

    name: str
    table: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    kind: str = "table"
    in_prior: bool = True
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ("table", *ORACLES):
            raise ValueError(f"an entrant's kind is 'table', 'best-response' or 'bayes', not {self.kind!r}")


def archetype_entrant(game: str, name: str) -> Entrant:
    """Archetype ``name`` of ``game`` as an entrant."""
    return Entrant(name, tabular.archetype_table(load_game(game), make_opponent(game, name)))


def sampled_entrant(env_id: str, agent: Any, samples: int = 8, env_kwargs: Mapping[str, Any] | None = None,
                    name: str | None = None) -> Entrant:
    """A text agent as an entrant: its first-hand policy (empty memory) estimated from
    ``samples`` answers at the prompt of every information state of ``env_id``
    (:class:`~mage_envs.oracle.sampling.SampledScorer`). ``agent``: ``agent(observation,
    info) -> answer``, or an object with ``act_batch`` (all prompts go in one call: an
    :class:`~mage_envs.agents.OpenAIChatAgent` sends them concurrently). ``env_kwargs``:
    the env's options (default: what ``mage eval --agent openai`` shows, the full prompts
    with the rules, no reflection). ``name``: default the agent's ``name``. The entrant's
    ``details`` hold the sampling counts and the agent's ``settings``.

    Example:
        >>> bold = lambda obs, info: "<action>bet</action>" if "bet" in info["legal_actions"] else "<action>call</action>"
        >>> entrant = sampled_entrant("mage/KuhnPoker-meta-v0", bold, samples=2, name="bold")
        >>> entrant.table == archetype_entrant("kuhn_poker", "maniac").table, entrant.details["invalid"]
        (True, 0)
    """
    kwargs = dict(protocol_env_kwargs(env_id, reflection=False, prompt_style="full") if env_kwargs is None
                  else env_kwargs)
    scorer = SampledScorer(agent, samples, accept_bare=bool(kwargs.get("accept_bare", True)))
    table = tabulate(first_hand_prompts(env_id, kwargs), scorer)
    label = name or getattr(agent, "name", None) or type(agent).__name__
    settings = getattr(agent, "settings", None)
    details = {"env_id": env_id, **scorer.report(), **({"settings": dict(settings)} if isinstance(settings, Mapping)
                                                        else {})}
    return Entrant(label, table, in_prior=False, details=details)


@dataclass
class TournamentResult:
    """The matrices (row's return against column, chips per hand), ratings and settings."""

    game: str
    names: list[str]
    payoff: dict[str, dict[str, float]]
    ci95: dict[str, dict[str, float]]
    exact: dict[str, dict[str, float]]
    ratings: dict[str, dict[str, float]]
    games: int
    seed: int
    #: What the entrants that have ``details`` (a sampled text agent) reported, by name.
    entrants: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"game": self.game, "names": self.names, "games_per_deal_and_seat": self.games, "seed": self.seed,
                "payoff": self.payoff, "ci95": self.ci95, "exact": self.exact, "ratings": self.ratings,
                "entrants": self.entrants}

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1))
        return path

    def table(self) -> str:
        """The payoff matrix as text (mean ± 95% CI), then the ratings."""
        width = max(len(n) for n in self.names) + 2
        lines = [" " * width + "".join(f"{n[:15]:>17}" for n in self.names)]
        for a in self.names:
            cells = "".join(f"{'—':>17}" if a == b or math.isnan(self.payoff[a][b]) else
                            f"{self.payoff[a][b]:>+9.3f} ±{self.ci95[a][b]:.3f}" for b in self.names)
            lines.append(f"{a:<{width}}{cells}")
        lines.append("ratings (OpenSkill ordinal = mu - 3 sigma):")
        order = sorted(self.names, key=lambda n: -self.ratings[n]["ordinal"])
        lines += [f"  {n:<{width}} {self.ratings[n]['ordinal']:+7.2f}  (mu {self.ratings[n]['mu']:.2f})" for n in order]
        lines += [f"{n}: {d['note']}" for n, d in self.entrants.items() if "note" in d]
        return "\n".join(lines)


def round_robin(game: str, entrants: Sequence[Entrant], games: int = 100, seed: int = 0) -> TournamentResult:
    """Play every ordered pair of ``entrants`` (see the module doc); ``games`` per opening deal and seat."""
    names = [e.name for e in entrants]
    if len(set(names)) != len(names):
        raise ValueError(f"entrants need distinct names, got {names}")
    if games < 2:
        raise ValueError("games must be >= 2 (a confidence interval needs a spread)")
    g = load_game(game)
    by_name = {e.name: e for e in entrants}
    archetypes = [e for e in entrants if e.kind == "table" and e.in_prior]
    deals = _opening_deals(g)
    payoff: dict[str, dict[str, float]] = {a: {} for a in names}
    ci95: dict[str, dict[str, float]] = {a: {} for a in names}
    exact: dict[str, dict[str, float]] = {a: {} for a in names}
    played: list[tuple[str, str, float]] = []
    for a in names:
        for b in names:
            if a == b or (by_name[a].kind in ORACLES and by_name[b].kind in ORACLES):
                payoff[a][b] = ci95[a][b] = exact[a][b] = float("nan")
                continue
            table_a = _table(game, by_name[a], by_name[b], archetypes)
            table_b = _table(game, by_name[b], by_name[a], archetypes)
            strata = []
            for d, deal in enumerate(deals):
                pair = [[_play(g, deal, [table_a, table_b] if s == 0 else [table_b, table_a], _streams(seed, d, k))[s]
                         for k in range(games)] for s in (0, 1)]
                strata += pair
                if a < b:   # duplicate matches: the same deal and streams from both seats
                    played += [(a, b, first + second) for first, second in zip(*pair)]
            means = [sum(r) / len(r) for r in strata]
            variances = [sum((x - m) ** 2 for x in r) / (len(r) - 1) for r, m in zip(strata, means)]
            payoff[a][b] = sum(means) / len(means)
            ci95[a][b] = 1.96 * math.sqrt(sum(v / games for v in variances)) / len(means)
            exact[a][b] = sum(match_value(game, seat_table(game, table_a, s), seat_table(game, table_b, 1 - s), s)
                              for s in seats("random")) / 2
    details = {e.name: dict(e.details) for e in entrants if e.details}
    return TournamentResult(game, names, payoff, ci95, exact, _ratings(names, played, seed), games, seed, details)


def _table(game: str, entrant: Entrant, opponent: Entrant,
           archetypes: Sequence[Entrant]) -> Mapping[str, Mapping[int, float]]:
    """The entrant's table against ``opponent`` (an oracle's is computed for it)."""
    if entrant.kind == "table":
        return entrant.table
    g = load_game(game)
    if entrant.kind == "best-response":
        return best_response_opponent(game, opponent.table).table
    if not archetypes:
        raise ValueError("the bayes entrant needs archetype entrants: its prior is theirs, equally likely")
    members = [TableOpponent(e.name, e.table) for e in archetypes]
    weights = [1.0 / len(members)] * len(members)
    table: dict[str, dict[int, float]] = {}
    for seat in (0, 1):
        mixed = tabular.mixture_table(g, members, weights, 1 - seat)
        response = tabular.best_response(g, seat, mixed).get_best_response_actions()
        table.update({key: {int(action): 1.0} for key, action in response.items()})
    return table


def _opening_deals(game: pyspiel.Game) -> list[list[int]]:
    """Every sequence of chance outcomes before the first move (the private cards)."""
    out: list[list[int]] = []
    stack: list[tuple[pyspiel.State, list[int]]] = [(game.new_initial_state(), [])]
    while stack:
        state, deal = stack.pop()
        if not state.is_chance_node():
            out.append(deal)
            continue
        stack += [(state.child(a), [*deal, a]) for a, _ in state.chance_outcomes()]
    return sorted(out)


def _streams(seed: int, deal: int, game: int) -> list[random.Random]:
    """Seat 0's, seat 1's and chance's generators for one game."""
    return [random.Random(int.from_bytes(hashlib.blake2b(f"{seed}/{deal}/{game}/{role}".encode(),
                                                         digest_size=8).digest(), "little")) for role in range(3)]


def _play(game: pyspiel.Game, deal: Sequence[int], tables: Sequence[Mapping[str, Mapping[int, float]]],
          rngs: Sequence[random.Random]) -> list[float]:
    state = game.new_initial_state()
    for action in deal:
        state.apply_action(action)
    while not state.is_terminal():
        if state.is_chance_node():
            state.apply_action(sample_action(dict(state.chance_outcomes()), rngs[2]))
            continue
        player = state.current_player()
        probs = {a: p for a, p in tables[player][state.information_state_string()].items() if p > 0}
        state.apply_action(sample_action(probs, rngs[player]))
    return list(state.returns())


def _ratings(names: Sequence[str], matches: Sequence[tuple[str, str, float]],
             seed: int) -> dict[str, dict[str, float]]:
    """OpenSkill (Plackett-Luce) ratings over matches (``a``, ``b``, ``a``'s chips: their sign is
    the result), taken in an order shuffled with ``seed``."""
    try:
        from openskill.models import PlackettLuce
    except ImportError:
        raise ImportError("tournament ratings need openskill: pip install openskill (in the [agent] extra)") from None
    model = PlackettLuce()
    ratings = {name: model.rating(name=name) for name in names}
    order = list(matches)
    random.Random(seed).shuffle(order)   # an online rating weighs late games most: no pair comes last as a block
    for a, b, result in order:
        ranks = [0.0, 0.0] if result == 0 else [0.0, 1.0] if result > 0 else [1.0, 0.0]
        [[ratings[a]], [ratings[b]]] = model.rate([[ratings[a]], [ratings[b]]], ranks=ranks)
    return {name: {"mu": float(r.mu), "sigma": float(r.sigma), "ordinal": float(r.mu - 3 * r.sigma)}
            for name, r in ratings.items()}


def plot_tournament(result: TournamentResult, path: str | Path) -> Path:
    """The payoff matrix as a heat map (mean ± CI in each cell) beside the ratings."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = result.names
    matrix = [[result.payoff[a][b] for b in names] for a in names]
    fig, (ax_matrix, ax_rating) = plt.subplots(1, 2, figsize=(6 + 1.1 * len(names), 0.7 * len(names) + 3))
    bound = max((abs(v) for row in matrix for v in row if not math.isnan(v)), default=1.0) or 1.0
    image = ax_matrix.imshow(matrix, cmap="RdBu", vmin=-bound, vmax=bound)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if not math.isnan(matrix[i][j]):
                ax_matrix.text(j, i, f"{matrix[i][j]:+.2f}\n±{result.ci95[a][b]:.2f}", ha="center", va="center",
                               fontsize=7)
    ax_matrix.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
    ax_matrix.set_yticks(range(len(names)), names, fontsize=8)
    ax_matrix.set_title("row's return against column (chips per hand)")
    fig.colorbar(image, ax=ax_matrix, shrink=0.7)
    order = sorted(names, key=lambda n: result.ratings[n]["ordinal"])
    ax_rating.barh(order, [result.ratings[n]["ordinal"] for n in order])
    ax_rating.set_title("OpenSkill ordinal (mu - 3 sigma)")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
