"""Expectimax best responses in perfect-information games (Tic-Tac-Toe).

The opponent is one of several move models (functions ``state -> {action: probability}``),
drawn once with the given weights and never revealed. The agent sees every move, so it
carries a *belief* (the posterior over models given the opponent's moves so far). With a
single model this is the plain best response; with several it is the best fixed
(non-adaptive) policy against the mixture. Values are memoised per (position, belief):
models must depend on the position only, which holds for every Tic-Tac-Toe archetype.

Example:
    >>> import pyspiel
    >>> game = pyspiel.load_game("tic_tac_toe")
    >>> first_free = lambda state: {min(state.legal_actions()): 1.0}
    >>> solver = Expectimax(seat=0, models=[first_free], weights=[1.0])
    >>> solver.value(game.new_initial_state())
    1.0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pyspiel

#: An opponent's move distribution in a position.
Model = Callable[[pyspiel.State], Mapping[int, float]]
Belief = tuple[float, ...]
#: What a terminal position is worth to a seat (default: its return).
Payoff = Callable[[pyspiel.State, int], float]


def game_return(state: pyspiel.State, seat: int) -> float:
    """The seat's return: the default objective."""
    return float(state.returns()[seat])


def win(state: pyspiel.State, seat: int) -> float:
    """1 for a won game, else 0: the objective of a win-rate ceiling.

    Example:
        >>> import pyspiel
        >>> state = pyspiel.load_game("tic_tac_toe").new_initial_state()
        >>> for cell in (0, 3, 1, 4, 2):
        ...     state.apply_action(cell)
        >>> win(state, 0), win(state, 1)
        (1.0, 0.0)
    """
    return 1.0 if state.returns()[seat] > 0 else 0.0


class Expectimax:
    """Best fixed policy of ``seat`` against ``models`` mixed with ``weights`` (memoised).

    Ties between equally good actions go to the lowest action id. The search stops
    scanning an agent's moves once one reaches ``max_value`` (the game's best outcome).
    ``payoff`` is what a terminal position is worth (the return; :func:`win` maximises the
    probability of winning instead, with ``max_value=1``).
    """

    def __init__(
        self,
        seat: int,
        models: Sequence[Model],
        weights: Sequence[float],
        max_value: float = 1.0,
        payoff: Payoff = game_return,
    ) -> None:
        total = float(sum(weights))
        if len(models) != len(weights) or total <= 0:
            raise ValueError("models and weights must have the same length and a positive sum")
        self.seat = seat
        self.models = tuple(models)
        self.prior: Belief = tuple(w / total for w in weights)
        self.max_value = max_value
        self.payoff = payoff
        self._memo: dict[tuple[str, Belief], float] = {}

    def value(self, state: pyspiel.State, belief: Belief | None = None) -> float:
        """Expected payoff of the best policy from ``state`` (``belief`` defaults to the prior)."""
        belief = self.prior if belief is None else belief
        if state.is_terminal():
            return self.payoff(state, self.seat)
        key = (str(state), tuple(round(b, 12) for b in belief))
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        if state.is_chance_node():
            result = sum(p * self.value(state.child(a), belief) for a, p in state.chance_outcomes())
        elif state.current_player() == self.seat:
            result = -float("inf")
            for action in state.legal_actions():
                result = max(result, self.value(state.child(action), belief))
                if result >= self.max_value:
                    break
        else:
            result = sum(
                p * self.value(state.child(a), post) for a, p, post in self.branches(state, belief)
            )
        self._memo[key] = result
        return result

    def best_action(self, state: pyspiel.State, belief: Belief | None = None) -> int:
        """The agent's move in ``state``: the lowest action id of highest value."""
        belief = self.prior if belief is None else belief
        best, best_value = -1, -float("inf")
        for action in state.legal_actions():
            value = self.value(state.child(action), belief)
            if value > best_value:
                best, best_value = action, value
        return best

    def branches(self, state: pyspiel.State, belief: Belief) -> list[tuple[int, float, Belief]]:
        """The opponent's moves with positive probability: ``(action, probability, posterior)``."""
        dists = [model(state) if b > 0 else {} for model, b in zip(self.models, belief)]
        out = []
        for action in state.legal_actions():
            joint = [b * d.get(action, 0.0) for b, d in zip(belief, dists)]
            prob = sum(joint)
            if prob > 0:
                out.append((action, prob, tuple(j / prob for j in joint)))
        return out

    def update(self, state: pyspiel.State, action: int, belief: Belief) -> Belief:
        """The belief after the opponent plays ``action`` in ``state``; unchanged when no
        model predicted that move (possible with sampled models of a search bot)."""
        for candidate, _, posterior in self.branches(state, belief):
            if candidate == action:
                return posterior
        return belief

    def policy_value(self, state: pyspiel.State, opponent: Model, belief: Belief | None = None) -> float:
        """Exact expected payoff of this solver's policy when the opponent really plays
        ``opponent`` (one of the models, or any other known distribution)."""
        belief = self.prior if belief is None else belief
        if state.is_terminal():
            return self.payoff(state, self.seat)
        if state.is_chance_node():
            return sum(
                p * self.policy_value(state.child(a), opponent, belief)
                for a, p in state.chance_outcomes()
            )
        if state.current_player() == self.seat:
            return self.policy_value(state.child(self.best_action(state, belief)), opponent, belief)
        return sum(
            p * self.policy_value(state.child(a), opponent, self.update(state, a, belief))
            for a, p in opponent(state).items()
            if p > 0
        )
