"""The household vocabulary: rooms, receptacles, objects and what each can undergo.

It follows ALFWorld's (Shridhar et al., 2021) AI2-THOR scenes, cut down to what a
text game needs. A receptacle is a *container* (``in``; openable ones start closed) or a
*supporter* (``on``); three receptacles do something to a carried object: a sink basin
cleans it, a microwave heats it, a fridge cools it (ALFWorld's ``clean``, ``heat`` and
``cool`` actions). No module here imports TextWorld.

Example:
    >>> KITCHEN.name, RECEPTACLES["fridge"].tw_type, "apple" in OBJECTS_BY_USE["heat"]
    ('kitchen', 'fridge', True)
    >>> RECEPTACLES["countertop"].preposition, RECEPTACLES["drawer"].preposition
    ('on', 'in')
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Receptacle:
    """A kind of receptacle.

    ``tw_type`` is its TextWorld type: ``"c"`` (container), ``"s"`` (supporter), or one
    of the household types ``"sink"`` (a supporter), ``"microwave"`` and ``"fridge"``
    (containers) defined in :mod:`~mage_envs.tasks.household.logic`.
    """

    name: str
    tw_type: str
    openable: bool = False

    @property
    def container(self) -> bool:
        return self.tw_type in ("c", "microwave", "fridge")

    @property
    def preposition(self) -> str:
        """``"in"`` for containers, ``"on"`` for supporters."""
        return "in" if self.container else "on"


_RECEPTACLES = (
    Receptacle("cabinet", "c", openable=True),
    Receptacle("drawer", "c", openable=True),
    Receptacle("safe", "c", openable=True),
    Receptacle("laundryhamper", "c", openable=True),
    Receptacle("fridge", "fridge", openable=True),
    Receptacle("microwave", "microwave", openable=True),
    Receptacle("garbagecan", "c"),
    Receptacle("sinkbasin", "sink"),
    Receptacle("countertop", "s"),
    Receptacle("diningtable", "s"),
    Receptacle("shelf", "s"),
    Receptacle("stoveburner", "s"),
    Receptacle("toilet", "s"),
    Receptacle("bathtubbasin", "s"),
    Receptacle("towelholder", "s"),
    Receptacle("sofa", "s"),
    Receptacle("armchair", "s"),
    Receptacle("coffeetable", "s"),
    Receptacle("sidetable", "s"),
    Receptacle("tvstand", "s"),
    Receptacle("bed", "s"),
    Receptacle("desk", "s"),
    Receptacle("dresser", "s"),
)
#: Every receptacle kind by name.
RECEPTACLES: dict[str, Receptacle] = {r.name: r for r in _RECEPTACLES}

#: The receptacle that performs each operation on a carried object.
TOOLS: dict[str, str] = {"clean": "sinkbasin", "heat": "microwave", "cool": "fridge"}

#: Objects each operation applies to (ALFWorld's lists, restricted to the objects used here).
OBJECTS_BY_USE: dict[str, frozenset[str]] = {
    "clean": frozenset({"apple", "bowl", "butterknife", "cloth", "cup", "dishsponge", "egg", "fork", "knife",
                        "lettuce", "mug", "pan", "plate", "pot", "potato", "soapbar", "spatula", "spoon", "tomato"}),
    "heat": frozenset({"apple", "bread", "cup", "egg", "mug", "plate", "potato", "tomato"}),
    "cool": frozenset({"apple", "bowl", "bread", "cup", "lettuce", "mug", "pan", "plate", "pot", "potato", "tomato"}),
}


@dataclass(frozen=True)
class Scene:
    """A kind of room: its receptacles (name, fewest, most) and the objects found in it."""

    name: str
    receptacles: tuple[tuple[str, int, int], ...]
    objects: tuple[str, ...]

    def has(self, receptacle: str) -> bool:
        return any(name == receptacle and most > 0 for name, _, most in self.receptacles)


KITCHEN = Scene(
    "kitchen",
    (("cabinet", 2, 4), ("drawer", 1, 3), ("countertop", 1, 2), ("fridge", 1, 1), ("microwave", 1, 1),
     ("sinkbasin", 1, 1), ("stoveburner", 1, 2), ("diningtable", 0, 1), ("shelf", 0, 2), ("garbagecan", 1, 1)),
    ("apple", "bread", "egg", "lettuce", "potato", "tomato", "mug", "cup", "bowl", "plate", "pan", "pot", "knife",
     "fork", "spoon", "spatula", "butterknife", "dishsponge", "saltshaker", "peppershaker", "soapbottle"),
)
BATHROOM = Scene(
    "bathroom",
    (("cabinet", 2, 4), ("drawer", 0, 2), ("countertop", 1, 1), ("sinkbasin", 1, 2), ("toilet", 1, 1),
     ("bathtubbasin", 0, 1), ("towelholder", 0, 1), ("shelf", 0, 2), ("garbagecan", 1, 1)),
    ("soapbar", "cloth", "soapbottle", "spraybottle", "toiletpaper", "candle", "tissuebox", "dishsponge", "towel"),
)
LIVING_ROOM = Scene(
    "living room",
    (("sofa", 1, 1), ("armchair", 0, 1), ("coffeetable", 1, 1), ("sidetable", 1, 2), ("tvstand", 0, 1),
     ("drawer", 1, 3), ("cabinet", 0, 2), ("shelf", 0, 2), ("safe", 0, 1), ("garbagecan", 1, 1)),
    ("remotecontrol", "keychain", "newspaper", "pillow", "box", "laptop", "statue", "vase", "creditcard", "watch"),
)
BEDROOM = Scene(
    "bedroom",
    (("bed", 1, 1), ("desk", 1, 1), ("dresser", 0, 1), ("drawer", 2, 4), ("shelf", 1, 2), ("sidetable", 0, 1),
     ("safe", 0, 1), ("laundryhamper", 0, 1), ("garbagecan", 1, 1)),
    ("alarmclock", "book", "cd", "cellphone", "pen", "pencil", "pillow", "laptop", "keychain", "creditcard", "mug"),
)
#: Every scene, in the order instances draw them.
SCENES: tuple[Scene, ...] = (KITCHEN, BATHROOM, LIVING_ROOM, BEDROOM)
