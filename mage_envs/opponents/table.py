"""Opponents backed by a saved tabular policy: ``{information state: {action: probability}}``.

A :class:`TableOpponent` plays a table it was given, sampling with the generator the env
hands it at every episode, so the same env seed gives the same games. Tables come from
:func:`mage_envs.oracle.learner` (a learner's policy tabulated at every information state),
a solver, or a JSON file written by ``mage exploitability`` (:func:`load_table`).

Example:
    >>> import random, pyspiel
    >>> game = pyspiel.load_game("kuhn_poker")
    >>> always_bet = TableOpponent("always-bet", {key: {1: 1.0} for key in ("0", "1", "2")})
    >>> always_bet.reset(random.Random(0))
    >>> state = game.new_initial_state(); state.apply_action(2); state.apply_action(0)
    >>> always_bet.act(state), always_bet.action_probabilities(state)
    (1, {1: 1.0})
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pyspiel

from .base import PolicyOpponent

#: ``{information state: {action id: probability}}``.
Table = dict[str, dict[int, float]]


class TableOpponent(PolicyOpponent):
    """A :class:`~mage_envs.opponents.base.PolicyOpponent` that looks its move distribution
    up in ``table`` by the information state string (a ``KeyError`` names a missing state).

    Actions of probability 0 are dropped; the rest must sum to 1 over legal actions (checked
    when first played, as every ``PolicyOpponent``)."""

    def __init__(self, name: str, table: Mapping[str, Mapping[int, float]]) -> None:
        self.table: Table = {key: {int(a): float(p) for a, p in probs.items()} for key, probs in table.items()}
        super().__init__(name, self._lookup)

    def _lookup(self, state: pyspiel.State) -> dict[int, float]:
        key = state.information_state_string()
        try:
            return self.table[key]
        except KeyError:
            raise KeyError(f"the table of opponent {self.name!r} has no information state {key!r}") from None


def save_table(table: Mapping[str, Mapping[int, float]], path: str | Path) -> Path:
    """Write ``table`` as JSON: ``{information state: {action id: probability}}``.

    Example:
        >>> import tempfile
        >>> path = save_table({"0": {0: 0.25, 1: 0.75}}, Path(tempfile.mkdtemp()) / "policy.json")
        >>> load_table(path)
        {'0': {0: 0.25, 1: 0.75}}
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {key: {str(a): p for a, p in sorted(probs.items())} for key, probs in table.items()}
    path.write_text(json.dumps(data, indent=1, sort_keys=True))
    return path


def load_table(path: str | Path) -> Table:
    """Read a table written by :func:`save_table` (action ids back to ints)."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a policy table is a JSON object of information state -> action probabilities")
    return {key: {int(a): float(p) for a, p in probs.items()} for key, probs in data.items()}
