"""ALFWorld's own games (Shridhar et al., 2021), for users who have its data.

ALFWorld ships each game as a folder holding ``traj_data.json`` (the ALFRED trajectory,
with its ``task_type``) and ``game.tw-pddl`` (a JSON file: the PDDL domain and problem,
the text grammar, and ``solvable``), under ``$ALFWORLD_DATA/json_2.1.1/<split>/``
(``alfworld-download`` fetches them). :func:`alfworld_games` lists a split's games with
ALFWorld's own filter (``AlfredTWEnv.collect_game_files``: solvable games only, no
``movable`` or ``Sliced`` trajectories), in sorted order. TextWorld plays ``.tw-pddl``
files with its PDDL engine, which needs the ``fast-downward-textworld`` package
(``pip install "textworld[pddl]"``); :func:`names_wrapper` gives objects ALFWorld's names
(``apple 1``, ``sinkbasin 2``), as its ``AlfredDemangler`` does.

Example:
    >>> alfred_names(["apple_bar__minus_01_dot_6", "apple_bar__plus_00_dot_2", "sink_bar__minus_02_bar_sinkbasin"])
    {'apple_bar__minus_01_dot_6': 'apple 2', 'apple_bar__plus_00_dot_2': 'apple 1', 'sink_bar__minus_02_bar_sinkbasin': 'sinkbasin 1'}
    >>> goal_from_intro("-= Welcome to TextWorld, ALFRED! =-\\n\\nYour task is to: put a clean mug in coffeemachine.")
    'put a clean mug in coffeemachine.'
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

#: ALFWorld's splits: ``train``, and its in- and out-of-distribution evaluation splits.
SPLITS = ("train", "valid_seen", "valid_unseen")
_GOAL = re.compile(r"Your task is to:\s*(.+)")


@dataclass(frozen=True)
class AlfworldGame:
    """One ALFWorld game: its ``game.tw-pddl`` file and ALFWorld's task type."""

    path: Path
    task_type: str


def data_dir(path: str | Path | None = None) -> Path:
    """``path``, else ``$ALFWORLD_DATA``; raises ``FileNotFoundError`` when neither is a folder."""
    chosen = path if path is not None else os.environ.get("ALFWORLD_DATA")
    if chosen is None or not Path(chosen).expanduser().is_dir():
        raise FileNotFoundError(
            "ALFWorld's data was not found: set ALFWORLD_DATA (or pass alfworld_data=) to the folder "
            "that `alfworld-download` fills (it holds json_2.1.1/)"
        )
    return Path(chosen).expanduser()


def alfworld_games(split: str = "train", path: str | Path | None = None) -> tuple[AlfworldGame, ...]:
    """The solvable games of ``split`` under ALFWorld's data folder (``path``, else
    ``$ALFWORLD_DATA``), sorted by path; listed once per process."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    return _games(data_dir(path).resolve() / "json_2.1.1" / split)


@lru_cache(maxsize=8)
def _games(root: Path) -> tuple[AlfworldGame, ...]:
    games = []
    for folder, _dirs, files in sorted(os.walk(root)):
        if "traj_data.json" not in files or "game.tw-pddl" not in files:
            continue
        if "movable" in folder or "Sliced" in folder:
            continue
        game = Path(folder) / "game.tw-pddl"
        if not json.loads(game.read_text()).get("solvable", False):
            continue
        task_type = json.loads((Path(folder) / "traj_data.json").read_text())["task_type"]
        games.append(AlfworldGame(game, task_type))
    if not games:
        raise FileNotFoundError(f"no solvable ALFWorld game under {root}")
    return tuple(games)


def alfred_names(entity_ids: Iterable[str]) -> dict[str, str]:
    """ALFWorld's names for the object ids of a PDDL game (lower-case, as TextWorld's PDDL
    engine gives them): the kind and a number counted over the sorted ids, as
    ``Demangler.demangle_alfred_name`` does; ids without ``_bar_`` keep their name."""
    ids = sorted(entity_ids)
    kinds = {}
    for entity in ids:
        if "_bar_" in entity:
            kind = entity.split("_bar_", 1)[0]
            kinds[entity] = kind + "basin" if "basin" in entity else kind
    numbers = {kind: list(range(1, count + 1)) for kind, count in Counter(kinds.values()).items()}
    names = {}
    for entity in ids:
        if entity in kinds:
            names[entity] = f"{kinds[entity]} {numbers[kinds[entity]].pop()}"
        else:
            names[entity] = entity
    return names


def goal_from_intro(text: str) -> str:
    """The task sentence of a game's first feedback (``Your task is to: ...``)."""
    match = _GOAL.search(text)
    return match.group(1).strip() if match else ""


@cache
def names_wrapper() -> Any:
    """A TextWorld wrapper class that renames a PDDL game's objects with :func:`alfred_names`."""
    import textworld

    class AlfredNames(textworld.core.Wrapper):
        def load(self, *args: Any, **kwargs: Any) -> None:
            super().load(*args, **kwargs)
            infos = self._entity_infos.values()
            names = alfred_names(info.id for info in infos)
            for info in infos:
                info.name = names[info.id]

    return AlfredNames
