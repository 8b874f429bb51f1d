"""ALFWorld-style household tasks, one per instance number, as plain data.

:func:`make_task` draws, from ``random.Random("mage-household/<instance>")``, a task type
(ALFWorld's, without ``look_at_obj_in_light``), a scene that can host it, its receptacles
(numbered as ALFWorld numbers them: ``cabinet 1``, ``cabinet 2``), the objects and where
they lie, and the goal. The scene holds exactly as many objects of the goal's kind as the
goal needs, so "put a mug in desk 1" means that mug. The walkthrough is the
straightforward plan: open the source if closed, take, clean / heat / cool, open the
destination if closed, put. No TextWorld here: :mod:`~mage_envs.tasks.household.builder`
turns a task into a TextWorld game.

Example:
    >>> task = make_task(0)
    >>> task.task_type, task.goal
    ('pick_two_obj_and_place', 'put two dishsponges in cabinet 1.')
    >>> task.walkthrough[:3]
    ('take dishsponge 1 from bathtubbasin 1', 'open cabinet 1', 'insert dishsponge 1 into cabinet 1')
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from functools import lru_cache

from .scenes import OBJECTS_BY_USE, RECEPTACLES, SCENES, TOOLS, Scene

#: ALFWorld's task types that this generator makes, and the operation each asks for.
TASK_TYPES: dict[str, str | None] = {
    "pick_and_place_simple": None,
    "pick_two_obj_and_place": None,
    "pick_clean_then_place_in_recep": "clean",
    "pick_heat_then_place_in_recep": "heat",
    "pick_cool_then_place_in_recep": "cool",
}
#: The adjective an operation leaves on an object, as ALFWorld's goals say it.
ADJECTIVES = {"clean": "clean", "heat": "hot", "cool": "cool"}
#: Receptacles never used as a destination (they transform, or throw away).
NOT_DESTINATIONS = frozenset({"sinkbasin", "microwave", "fridge", "garbagecan", "stoveburner"})
#: Distractor objects per scene: at least, at most (each kind once or twice).
DISTRACTORS = (3, 6)


@dataclass(frozen=True)
class Item:
    """An object of the scene: its name (``"apple 1"``), kind (``"apple"``) and receptacle."""

    name: str
    kind: str
    location: str


@dataclass(frozen=True)
class HouseholdTask:
    """One generated task: the scene, the objects, the goal and a walkthrough.

    ``targets`` are the objects the goal is about, ``destination`` where they must end,
    ``operation`` (``"clean"``, ``"heat"``, ``"cool"`` or None) what must be done to them first.
    """

    instance: int
    task_type: str
    scene: str
    receptacles: tuple[str, ...]
    items: tuple[Item, ...]
    targets: tuple[str, ...]
    destination: str
    operation: str | None
    goal: str
    walkthrough: tuple[str, ...]

    @property
    def tool(self) -> str | None:
        """The receptacle that performs ``operation`` (the first of its kind)."""
        if self.operation is None:
            return None
        return next(r for r in self.receptacles if kind_of(r) == TOOLS[self.operation])


def kind_of(name: str) -> str:
    """``"cabinet 2"`` -> ``"cabinet"``.

    Example:
        >>> kind_of("sinkbasin 1")
        'sinkbasin'
    """
    return name.rsplit(" ", 1)[0]


def with_article(word: str) -> str:
    """``"an apple"``, ``"a mug"``."""
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


def plural(word: str) -> str:
    """A kind's plural, as the goal of a two-object task writes it.

    Example:
        >>> plural("knife"), plural("tomato"), plural("box"), plural("mug")
        ('knives', 'tomatoes', 'boxes', 'mugs')
    """
    if word.endswith("knife"):
        return word[:-2] + "ves"
    if word.endswith(("o", "x", "ch", "sh")) and word not in ("cd",):
        return word + "es"
    return word + "s"


def goal_sentence(task_type: str, kind: str, destination: str) -> str:
    """The goal as ALFWorld words it, with the destination's number.

    Example:
        >>> goal_sentence("pick_heat_then_place_in_recep", "apple", "countertop 1")
        'put a hot apple on countertop 1.'
    """
    preposition = RECEPTACLES[kind_of(destination)].preposition
    operation = TASK_TYPES[task_type]
    if task_type == "pick_two_obj_and_place":
        return f"put two {plural(kind)} {preposition} {destination}."
    thing = with_article(f"{ADJECTIVES[operation]} {kind}" if operation else kind)
    return f"put {thing} {preposition} {destination}."


@lru_cache(maxsize=4096)
def make_task(instance: int) -> HouseholdTask:
    """The task of ``instance`` (any integer >= 0), the same on every platform."""
    if instance < 0:
        raise ValueError(f"instance must be >= 0, got {instance}")
    rng = random.Random(f"mage-household/{instance}")
    task_type = rng.choice(sorted(TASK_TYPES))
    operation = TASK_TYPES[task_type]
    scene = rng.choice([s for s in SCENES if _goal_kinds(s, operation)])
    receptacles = _receptacles(scene, rng)
    kind = rng.choice(_goal_kinds(scene, operation))
    destination = rng.choice([r for r in receptacles if kind_of(r) not in NOT_DESTINATIONS])
    count = 2 if task_type == "pick_two_obj_and_place" else 1
    elsewhere = [r for r in receptacles if r != destination]
    items = [Item(f"{kind} {i}", kind, rng.choice(elsewhere)) for i in range(1, count + 1)]
    others = [k for k in scene.objects if k != kind]
    for other in rng.sample(others, min(len(others), rng.randint(*DISTRACTORS))):
        items += [Item(f"{other} {i}", other, rng.choice(receptacles)) for i in range(1, rng.randint(1, 2) + 1)]
    targets = tuple(item.name for item in items[:count])
    task = HouseholdTask(
        instance=instance,
        task_type=task_type,
        scene=scene.name,
        receptacles=tuple(receptacles),
        items=tuple(items),
        targets=targets,
        destination=destination,
        operation=operation,
        goal=goal_sentence(task_type, kind, destination),
        walkthrough=(),
    )
    return _with_walkthrough(task)


def _goal_kinds(scene: Scene, operation: str | None) -> list[str]:
    """The kinds a goal may name in ``scene``: those ``operation`` applies to, if its tool is there."""
    if operation is None:
        return list(scene.objects)
    if not scene.has(TOOLS[operation]):
        return []
    return [k for k in scene.objects if k in OBJECTS_BY_USE[operation]]


def _receptacles(scene: Scene, rng: random.Random) -> list[str]:
    names = []
    for kind, fewest, most in scene.receptacles:
        names += [f"{kind} {i}" for i in range(1, rng.randint(fewest, most) + 1)]
    return names


def _with_walkthrough(task: HouseholdTask) -> HouseholdTask:
    """``task`` with the plan: open, take, transform, open, put, for each target."""
    where = {item.name: item.location for item in task.items}
    opened: set[str] = set()
    commands: list[str] = []

    def open_if_closed(receptacle: str) -> None:
        if RECEPTACLES[kind_of(receptacle)].openable and receptacle not in opened:
            commands.append(f"open {receptacle}")
            opened.add(receptacle)

    for target in task.targets:
        source = where[target]
        open_if_closed(source)
        commands.append(f"take {target} from {source}")
        if task.operation:
            commands.append(f"{task.operation} {target} with {task.tool}")
        open_if_closed(task.destination)
        if RECEPTACLES[kind_of(task.destination)].container:
            commands.append(f"insert {target} into {task.destination}")
        else:
            commands.append(f"put {target} on {task.destination}")
    return replace(task, walkthrough=tuple(commands))
