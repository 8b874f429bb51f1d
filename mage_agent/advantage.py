"""Credit assignment and group-relative advantages for meta-episodes.

Stage 1, :func:`discounted_returns`: every turn of a meta-episode gets the discounted sum
of the rewards that follow it, with ``gamma_step`` between turns of the same inner episode
and ``gamma_traj`` across an episode boundary (the paper: 0.95 and 0.6). The rewards are
the wrapper's (differential by default), so the return of an early turn is dominated by
what its episode changed about later episodes.

Stage 2, :func:`group_advantages`: a turn's return minus the mean return of its group
(the G copies of one seed and opponent, at the same episode index and phase: the GRPO
baseline), optionally divided by a standard deviation pooled over the *scope* (of the
centred values, as GRPO, or of the raw returns, ``std_of="returns"``: the scope's reward
scale, which groups without spread do not shrink):

* ``"group"`` — the group itself (plain GRPO);
* ``"per-archetype"`` — every group against the same opponent archetype (MAGE: reward
  scales differ by opponent, so statistics are kept apart per archetype);
* ``"global"`` — the whole batch.

The baseline is the mean of the group's copies that met the same archetype, except under
``"global"``, where it pools the group's copies whatever archetype they met. When every
copy of a group meets one archetype (the default rollout) the two baselines coincide; when
copies meet different archetypes (``group_opponents: mixed``) ``"global"`` pools
archetypes in both the baseline and the deviation: the paper's global normalisation.

``estimator="gigpo"`` adds a step-level term: the return centred on the turns whose prompt
(anchor observation) is identical within the scope, as in GiGPO.

Example:
    >>> import numpy as np
    >>> turns = TurnTable(traj=np.array([0, 0, 1]), episode=np.array([0, 1, 0]),
    ...                   reward=np.array([1.0, 2.0, 0.0]))
    >>> discounted_returns(turns, gamma_step=0.9, gamma_traj=0.5).tolist()
    [2.0, 2.0, 0.0]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast, get_args

import numpy as np

Scope = Literal["per-archetype", "global", "group"]
Estimator = Literal["grpo", "gigpo"]
#: What the standard deviation is taken of: the centred advantages, or the raw returns.
StdOf = Literal["advantages", "returns"]
SCOPES: tuple[str, ...] = get_args(Scope)
ESTIMATORS: tuple[str, ...] = get_args(Estimator)
STD_OF: tuple[str, ...] = get_args(StdOf)


@dataclass
class TurnTable:
    """One row per turn, in time order within each trajectory.

    ``traj`` identifies the meta-episode, ``group`` its (seed, opponent) group, ``episode``
    the inner-episode index, ``phase`` 0 for acting and 1 for reflecting, ``archetype``
    the opponent id, ``anchor`` a hash of the prompt (for GiGPO's step groups).
    """

    traj: np.ndarray
    episode: np.ndarray
    reward: np.ndarray
    # None by default, typed as the array that __post_init__ puts in its place
    group: np.ndarray = cast(np.ndarray, None)
    archetype: np.ndarray = cast(np.ndarray, None)
    phase: np.ndarray = cast(np.ndarray, None)
    anchor: np.ndarray = cast(np.ndarray, None)

    def __post_init__(self) -> None:
        n = len(self.traj)
        self.group = self.traj if self.group is None else self.group
        self.archetype = np.zeros(n, dtype=object) if self.archetype is None else self.archetype
        self.phase = np.zeros(n, dtype=int) if self.phase is None else self.phase
        self.anchor = np.arange(n).astype(object) if self.anchor is None else self.anchor
        for name in ("episode", "reward", "group", "archetype", "phase", "anchor"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"TurnTable column {name!r} has {len(getattr(self, name))} rows, expected {n}")


def discounted_returns(turns: TurnTable, gamma_step: float, gamma_traj: float) -> np.ndarray:
    """Return-to-go per turn: ``G_t = r_t + gamma * G_{t+1}`` within a trajectory, where
    ``gamma`` is ``gamma_step`` if turn t+1 is in the same episode, ``gamma_traj`` if not.

    Example (one trajectory, episodes 0, 0, 1 with rewards 0, 1, 2):
        >>> t = TurnTable(traj=np.zeros(3, int), episode=np.array([0, 0, 1]), reward=np.array([0., 1., 2.]))
        >>> discounted_returns(t, gamma_step=0.5, gamma_traj=0.1).round(3).tolist()
        [0.6, 1.2, 2.0]
    """
    for name, value in (("gamma_step", gamma_step), ("gamma_traj", gamma_traj)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value}")
    returns = np.zeros(len(turns.reward), dtype=np.float64)
    following = 0.0
    for i in range(len(turns.reward) - 1, -1, -1):
        last_of_traj = i == len(turns.reward) - 1 or turns.traj[i + 1] != turns.traj[i]
        if last_of_traj:
            following = 0.0
            gamma = 0.0
        else:
            gamma = gamma_step if turns.episode[i + 1] == turns.episode[i] else gamma_traj
        following = turns.reward[i] + gamma * following
        returns[i] = following
    return returns


def _keys(turns: TurnTable, i: int, scope: Scope) -> tuple[tuple, tuple]:
    """(centring key, scaling key) of turn ``i``: the group always centres; ``scope`` scales."""
    slot = (turns.episode[i], turns.phase[i])
    centre = (*slot, turns.group[i], turns.archetype[i])
    if scope == "group":
        return centre, centre
    if scope == "per-archetype":
        return centre, (*slot, turns.archetype[i])
    if scope == "global":
        return (*slot, turns.group[i]), slot
    raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")


def _members(keys: list[tuple]) -> list[list[int]]:
    members: dict[tuple, list[int]] = {}
    for i, key in enumerate(keys):
        members.setdefault(key, []).append(i)
    return list(members.values())


def centre(values: np.ndarray, keys: list[tuple]) -> np.ndarray:
    """``values`` minus the mean of the values sharing their key.

    Example:
        >>> centre(np.array([1.0, 3.0, 10.0]), [("a",), ("a",), ("b",)]).tolist()
        [-1.0, 1.0, 0.0]
    """
    out = np.zeros(len(values), dtype=np.float64)
    for index in _members(keys):
        out[index] = values[index] - values[index].mean()
    return out


def scale(centred: np.ndarray, keys: list[tuple], eps: float = 1e-6,
          spread_of: np.ndarray | None = None) -> np.ndarray:
    """Divide centred values by the root mean square of the values sharing their key
    (the pooled standard deviation around the group means), or by the standard deviation
    of ``spread_of`` (e.g. the raw returns) over the rows sharing their key.

    Example:
        >>> keys = [(0,), (0,), (1,), (1,)]
        >>> scale(np.array([-1.0, 1.0, -4.0, 4.0]), keys).round(4).tolist()
        [-1.0, 1.0, -1.0, 1.0]
        >>> scale(np.array([-1.0, 1.0, 0.0, 0.0]), keys, spread_of=np.array([0.0, 2.0, 5.0, 5.0])).round(4).tolist()
        [-1.0, 1.0, 0.0, 0.0]
    """
    out = np.zeros(len(centred), dtype=np.float64)
    for index in _members(keys):
        chunk = centred[index]
        spread = np.sqrt(np.mean(chunk**2)) if spread_of is None else spread_of[index].std()
        out[index] = chunk / (spread + eps)
    return out


def group_advantages(
    turns: TurnTable,
    returns: np.ndarray,
    scope: Scope = "per-archetype",
    estimator: Estimator = "grpo",
    std: bool = True,
    step_weight: float = 1.0,
    std_of: StdOf = "advantages",
) -> np.ndarray:
    """Group-relative advantages.

    Each turn's return is centred on the mean of its group (same seed and opponent, same
    episode index and phase: the GRPO baseline). With ``std=True`` the centred values are
    divided by their pooled standard deviation within the ``scope``: the group itself,
    every group against the same archetype (``"per-archetype"``), or the whole batch
    (``"global"``); ``std_of="returns"`` divides by the standard deviation of the returns
    themselves within the scope instead (between groups as well as within them). ``estimator="gigpo"`` adds ``step_weight`` times a step-level term:
    the return centred on the turns with the same anchor prompt in the same scope,
    scaled like the episode-level term.

    Example (two archetypes whose rewards differ a hundredfold):
        >>> t = TurnTable(traj=np.arange(4), episode=np.zeros(4, int), reward=np.zeros(4),
        ...               group=np.array([0, 0, 1, 1]), archetype=np.array(["a", "a", "b", "b"], dtype=object))
        >>> group_advantages(t, np.array([1.0, 3.0, 100.0, 300.0])).round(4).tolist()
        [-1.0, 1.0, -1.0, 1.0]
        >>> group_advantages(t, np.array([1.0, 3.0, 100.0, 300.0]), scope="global").round(4).tolist()
        [-0.0141, 0.0141, -1.4141, 1.4141]
        >>> group_advantages(t, np.array([1.0, 3.0, 100.0, 300.0]), std_of="returns").round(4).tolist()
        [-1.0, 1.0, -1.0, 1.0]
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    if std_of not in STD_OF:
        raise ValueError(f"std_of must be one of {STD_OF}, got {std_of!r}")
    pairs = [_keys(turns, i, scope) for i in range(len(returns))]
    centre_keys = [c for c, _ in pairs]
    scale_keys = [s for _, s in pairs]
    advantages = centre(returns, centre_keys)
    if estimator == "gigpo":
        anchor_keys = [(*s, turns.anchor[i]) for i, s in enumerate(scale_keys)]
        advantages = advantages + step_weight * centre(returns, anchor_keys)
    if not std:
        return advantages
    return scale(advantages, scale_keys, spread_of=returns if std_of == "returns" else None)


def advantage_diagnostics(turns: TurnTable, returns: np.ndarray, advantages: np.ndarray,
                          logprobs: np.ndarray) -> dict[str, float]:
    """Per-archetype health of one batch's credit, for the logs (acting turns only):

    * ``return_spread/<a>`` — the mean standard deviation of returns within a group and slot;
    * ``advantage_scale/<a>`` — the mean absolute advantage;
    * ``zero_advantage_groups/<a>`` — the share of groups whose advantages are all zero
      (nothing to learn from them);
    * ``entropy/<a>`` — the sampling entropy, estimated by minus the mean log-probability
      of the sampled completions.

    Example:
        >>> t = TurnTable(traj=np.arange(4), episode=np.zeros(4, int), reward=np.zeros(4),
        ...               group=np.array([0, 0, 1, 1]), archetype=np.array(["a", "a", "a", "a"], dtype=object))
        >>> d = advantage_diagnostics(t, np.array([1.0, 3.0, 2.0, 2.0]), np.array([-1.0, 1.0, 0.0, 0.0]),
        ...                           np.log(np.full(4, 0.5)))
        >>> d["return_spread/a"], d["advantage_scale/a"], d["zero_advantage_groups/a"], round(d["entropy/a"], 3)
        (0.5, 0.5, 0.5, 0.693)
    """
    acting = turns.phase == 0
    out: dict[str, float] = {}
    for name in sorted(set(turns.archetype[acting].tolist())):
        rows = np.flatnonzero(acting & (turns.archetype == name))
        slots = _members([(turns.group[i], turns.episode[i]) for i in rows])
        out[f"return_spread/{name}"] = float(np.mean([returns[rows[s]].std() for s in slots]))
        out[f"advantage_scale/{name}"] = float(np.abs(advantages[rows]).mean())
        groups = _members([(turns.group[i],) for i in rows])
        out[f"zero_advantage_groups/{name}"] = float(np.mean([np.all(np.abs(advantages[rows[g]]) < 1e-9) for g in groups]))
        out[f"entropy/{name}"] = float(-logprobs[rows].mean())
    return out
