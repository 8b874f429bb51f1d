"""Turn a :class:`~mage_envs.tasks.household.tasks.HouseholdTask` into a compiled TextWorld
game, once per instance, cached on disk and in the process.

:func:`build_game` lays the scene out with TextWorld's ``GameMaker`` (a room, receptacles
as containers and supporters, objects in and on them), records the walkthrough as the
quest's actions by applying each command to the world's logic state, sets the goal (the
targets in or on the destination, cleaned, heated or cooled) and compiles the game with
the Inform 7 compilers that TextWorld's wheel ships (``game.z8`` and ``game.json``;
nothing is downloaded). :func:`game_file` finds or builds the game of an instance under
the cache folder (:func:`default_cache_dir`, ``$MAGE_CACHE_DIR/household``), and
:func:`generate_games` builds many with a progress bar. A game is built in a private
folder and moved into place whole, so concurrent processes never see half a game.

Example (``game_file`` needs ``textworld`` and compiles for a second or two the first time):
    >>> default_cache_dir().name
    'household'
    >>> game_file(3).name, game_file(3).with_suffix(".json").is_file()
    ('game.z8', True)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from .logic import knowledge_base
from .scenes import RECEPTACLES
from .tasks import HouseholdTask, kind_of, make_task

#: Bump when generated games change, so that old caches are not reused.
GENERATOR_VERSION = 1
#: The operation's fact on a target, per operation.
_FACTS = {"clean": "clean", "heat": "hot", "cool": "cool"}
_BUILT: dict[tuple[str, int], Path] = {}


def default_cache_dir() -> Path:
    """``$MAGE_CACHE_DIR/household``, else ``$XDG_CACHE_HOME/mage/household``, else
    ``~/.cache/mage/household``."""
    root = os.environ.get("MAGE_CACHE_DIR") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "mage")
    return Path(root).expanduser() / "household"


def games_dir(cache_dir: str | Path | None = None) -> Path:
    """The folder of this generator's games for the installed TextWorld version."""
    base = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return base / f"games-v{GENERATOR_VERSION}-textworld{version('textworld')}"


def game_file(instance: int, cache_dir: str | Path | None = None) -> Path:
    """The compiled game (``.z8``, with its ``.json`` beside it) of ``instance``, built
    the first time it is asked for."""
    folder = games_dir(cache_dir)
    key = (str(folder), instance)
    if key not in _BUILT:
        path = folder / str(instance) / "game.z8"
        if not (path.is_file() and path.with_suffix(".json").is_file()):
            _build_into(make_task(instance), folder)
        _BUILT[key] = path
    return _BUILT[key]


def generate_games(
    instances: Iterable[int], cache_dir: str | Path | None = None, progress: bool = True
) -> list[Path]:
    """Build (or find) the games of ``instances``; a tqdm bar counts those being built."""
    from tqdm.auto import tqdm

    instances = list(instances)
    folder = games_dir(cache_dir)
    missing = [k for k in instances if not (folder / str(k) / "game.z8").is_file()]
    for instance in tqdm(missing, desc="household games", unit="game", disable=not progress or len(missing) < 2):
        game_file(instance, cache_dir)
    return [game_file(k, cache_dir) for k in instances]


def _build_into(task: HouseholdTask, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{task.instance}-", dir=folder))
    target = folder / str(task.instance)
    try:
        build_game(task, staging / "game.z8", folder)
        if not (target / "game.json").is_file():  # an incomplete game left by an interrupted run
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(staging, target)
        except OSError:  # another process got there first: its game is the same
            pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def build_game(task: HouseholdTask, path: Path, data_dir: Path) -> Path:
    """Compile ``task`` into ``path`` (a ``.z8`` file; the ``.json`` goes beside it).
    ``data_dir`` receives the household grammar TextWorld reads from a file."""
    import textworld
    from textworld.generator import compile_game
    from textworld.generator.game import Event, Quest

    kb = knowledge_base(str(data_dir))
    options = textworld.GameOptions()
    options.kb = kb
    options.seeds = task.instance % (2**31)
    maker = textworld.GameMaker(options)
    room = maker.new_room(task.scene)
    maker.set_player(room)
    entities = {}
    for name in task.receptacles:
        kind = RECEPTACLES[kind_of(name)]
        entity = maker.new(type=kind.tw_type, name=name)
        if kind.container:
            entity.add_property("closed" if kind.openable else "open")
        room.add(entity)
        entities[name] = entity
    for item in task.items:
        entities[item.name] = maker.new(type="o", name=item.name)
        entities[item.location].add(entities[item.name])
    goal = []
    for target in task.targets:
        relation = "in" if RECEPTACLES[kind_of(task.destination)].container else "on"
        goal.append(maker.new_fact(relation, entities[target], entities[task.destination]))
        if task.operation:
            goal.append(maker.new_fact(_FACTS[task.operation], entities[target]))
    actions = _walkthrough_actions(maker, kb, task.walkthrough)
    maker.quests = [Quest(win_events=[Event(actions=actions, conditions=goal)], desc=task.goal)]
    game = maker.build()
    game.objective = f"Your task is to: {task.goal}"
    options.path = str(path)
    options.force_recompile = True
    return Path(compile_game(game, options))


def _walkthrough_actions(maker: Any, kb: Any, commands: Iterable[str]) -> list[Any]:
    """The logic actions of ``commands`` played from the maker's initial state."""
    from textworld.generator.inform7 import Inform7Game

    game = maker.build()
    inform7 = Inform7Game(game)
    state = game.world.state.copy()
    actions = []
    for command in commands:
        valid = list(state.all_applicable_actions(kb.rules.values(), kb.types.constants_mapping))
        texts = inform7.gen_commands_from_actions(valid)
        if command not in texts:
            raise RuntimeError(f"walkthrough command {command!r} is not admissible; admissible: {sorted(texts)}")
        action = valid[texts.index(command)]
        state.apply(action)
        actions.append(action)
    return actions
