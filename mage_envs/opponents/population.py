"""A weighted population of opponent archetypes, sampled once per (meta-)episode.

Example:
    >>> import random
    >>> pop = Population({"aggressive": 3.0, "conservative": 1.0})
    >>> pop.ids, pop.weights
    (('aggressive', 'conservative'), (0.75, 0.25))
    >>> pop.sample(random.Random(0)) in pop.ids
    True
    >>> Population.named("kuhn_poker", "heldout").ids
    ('bluffer', 'calling-station', 'maniac')
"""

from __future__ import annotations

import bisect
import itertools
import random
from typing import Mapping, Sequence, Union

from .base import Opponent
from .registry import RESERVED_POPULATION_NAMES, archetype, list_opponents, make_opponent, split_of


class Population:
    """Archetype ids with sampling weights (normalised to sum to one).

    ``members`` is a sequence of ids (equal weights), a mapping id -> weight, or
    :class:`Opponent` instances (custom opponents that need no registration).
    """

    def __init__(
        self,
        members: Mapping[str, float] | Sequence[str | Opponent],
        name: str = "custom",
    ) -> None:
        if isinstance(members, Mapping):
            items = [(str(k), float(v)) for k, v in members.items()]
            instances: dict[str, Opponent] = {}
        else:
            instances = {m.name: m for m in members if isinstance(m, Opponent)}
            items = [(m.name if isinstance(m, Opponent) else str(m), 1.0) for m in members]
        if not items:
            raise ValueError("a Population needs at least one member")
        ids = [k for k, _ in items]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate archetype ids in population: {ids}")
        weights = [w for _, w in items]
        if any(w < 0 for w in weights) or sum(weights) <= 0:
            raise ValueError(f"weights must be >= 0 with a positive sum, got {weights}")
        total = sum(weights)
        self.name = name
        self.ids: tuple[str, ...] = tuple(ids)
        self.weights: tuple[float, ...] = tuple(w / total for w in weights)
        self._cumulative = list(itertools.accumulate(self.weights))
        self._instances = instances

    @classmethod
    def named(cls, game: str, name: str) -> Population:
        """A split of the registry: ``"trainable"``, ``"heldout"`` or ``"all"`` (``"train"``:
        the deprecated name of ``"trainable"``)."""
        if name not in RESERVED_POPULATION_NAMES:
            raise KeyError(f"unknown population {name!r}; use one of {RESERVED_POPULATION_NAMES}")
        split = None if name == "all" else split_of(name)
        ids = list_opponents(game, split)
        if not ids:
            raise KeyError(f"no {name!r} opponents registered for {game!r}")
        return cls(ids, name=split or name)

    def sample(self, rng: random.Random) -> str:
        """Draw one archetype id (one uniform number from ``rng``)."""
        if len(self.ids) == 1:
            return self.ids[0]
        index = bisect.bisect_right(self._cumulative, rng.random() * self._cumulative[-1])
        return self.ids[min(index, len(self.ids) - 1)]

    def given(self, opponent_id: str) -> Opponent | None:
        """The instance given for member ``opponent_id``, or ``None`` for a registered archetype
        (built by name)."""
        return self._instances.get(opponent_id)

    def build(self, game: str, opponent_id: str) -> Opponent:
        """An opponent instance for member ``opponent_id``."""
        if opponent_id in self._instances:
            return self._instances[opponent_id]
        if opponent_id not in self.ids:
            raise KeyError(f"{opponent_id!r} is not in population {self.name!r}: {self.ids}")
        return make_opponent(game, opponent_id)

    def validate(self, game: str) -> None:
        """Raise ``KeyError`` naming any member that is neither registered nor an instance."""
        for opponent_id in self.ids:
            if opponent_id not in self._instances:
                archetype(game, opponent_id)

    def __repr__(self) -> str:
        members = ", ".join(f"{i}: {w:.3g}" for i, w in zip(self.ids, self.weights))
        return f"Population({self.name!r}, {{{members}}})"


OpponentSpec = Union[str, Opponent, Population, Sequence[Union[str, Opponent]], Mapping[str, float]]


def as_population(game: str, spec: OpponentSpec) -> Population:
    """Resolve what a user passed as ``opponent=`` into a validated :class:`Population`.

    Example:
        >>> as_population("kuhn_poker", "aggressive").ids
        ('aggressive',)
    """
    if isinstance(spec, Population):
        population = spec
    elif isinstance(spec, Opponent):
        population = Population([spec], name=spec.name)
    elif isinstance(spec, str):
        if spec in RESERVED_POPULATION_NAMES:
            population = Population.named(game, spec)
        else:
            population = Population([spec], name=spec)
    elif isinstance(spec, (Mapping, list, tuple)):
        population = Population(spec)
    else:
        raise TypeError(
            "opponent must be an archetype id, 'trainable'/'heldout'/'all', a list or dict of ids, "
            f"a Population or an Opponent; got {type(spec).__name__}"
        )
    population.validate(game)
    return population


def hidden_draws(game: str, population: OpponentSpec) -> list[str]:
    """The archetypes of ``population`` with weight that draw a hidden policy for each
    meta-episode and keep it (:meth:`~mage_envs.opponents.Opponent.meta_episode_draws`): what
    an analysis of fixed move distributions per archetype must treat apart.

    Example:
        >>> hidden_draws("kuhn_poker", ["conservative", "random-style"])
        ['random-style']
        >>> hidden_draws("kuhn_poker", {"conservative": 1.0, "random-style": 0.0})   # not met: no weight
        []
    """
    members = as_population(game, population)
    return [name for name, weight in zip(members.ids, members.weights)
            if weight > 0 and (members.given(name) or make_opponent(game, name)).meta_episode_draws()]
