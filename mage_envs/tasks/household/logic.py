'''TextWorld's knowledge base extended with ALFWorld's clean, heat and cool.

TextWorld describes a game's world in a logic (``.twl``: types, predicates, rules and
their Inform 7 translation) and its text in grammars (``.twg``). :data:`HOUSEHOLD_LOGIC`
adds three receptacle types to TextWorld's built-in logic, each with one rule that
changes a carried object, and :data:`HOUSEHOLD_GRAMMAR` the instruction text for them:

* ``sink`` (a supporter): ``clean {o} with {sink}`` -> ``clean(o)``;
* ``microwave`` (a container): ``heat {o} with {microwave}`` -> ``hot(o)``;
* ``fridge`` (a container): ``cool {o} with {fridge}`` -> ``cool(o)``.

As in ALFWorld, the object must be carried and the receptacle need not be open. The Inform
7 code defines the matching actions (``cleaning it with``...), so compiled games track them
like TextWorld's own. :func:`knowledge_base` needs TextWorld; the texts do not.

Example:
    >>> "heat/microwave ::" in HOUSEHOLD_LOGIC, HOUSEHOLD_GRAMMAR.splitlines()[0]
    (True, 'clean:clean the #obj_types# with the (sink).')
'''

from __future__ import annotations

import glob
import os
from functools import cache
from pathlib import Path
from typing import Any

_TYPE = '''
# {kind}: a {parent_word} that {verb}s a carried object
type {kind} : {parent} {{
    predicates {{
        {fact}(o);
    }}

    rules {{
        {verb}/{kind} :: $at(P, r) & $at({kind}, r) & $in(o, I) -> {fact}(o);
    }}

    inform7 {{
        type {{
            kind :: "{kind}-like";
            definition :: "{kind}-like is fixed in place.";
        }}

        predicates {{
            {fact}(o) :: "The {{o}} is {i7_property}";
        }}

        commands {{
            {verb}/{kind} :: "{verb} {{o}} with {{{kind}}}" :: "{verb}ing the {{o}} with the {{{kind}}}";
        }}

        code :: """
            A thing can be {i7_property}. A thing is usually not {i7_property}.
            Understand the command "{verb}" as something new.
            {Verb}ing it with is an action applying to one carried thing and one thing.
            Understand "{verb} [something] with [something]" as {verb}ing it with.
            Check {verb}ing something with something when the second noun is not a {kind}-like:
                say "You cannot {verb} anything with [the second noun].";
                rule fails.
            Carry out {verb}ing something with something:
                now the noun is {i7_property}.
            Report {verb}ing something with something:
                say "You {verb} [the noun] using [the second noun]."
        """;
    }}
}}
'''


def _household_type(kind: str, parent: str, verb: str, fact: str, i7_property: str) -> str:
    parent_word = "container" if parent == "c" else "supporter"
    return _TYPE.format(kind=kind, parent=parent, parent_word=parent_word, verb=verb, Verb=verb.capitalize(),
                        fact=fact, i7_property=i7_property)


#: The logic added to TextWorld's: the sink, microwave and fridge types.
HOUSEHOLD_LOGIC = "".join([
    _household_type("sink", "s", "clean", "clean", "washed"),
    _household_type("microwave", "c", "heat", "hot", "heated"),
    _household_type("fridge", "c", "cool", "cool", "chilled"),
])

#: Instruction text for the three new actions (TextWorld describes every quest).
HOUSEHOLD_GRAMMAR = """clean:clean the #obj_types# with the (sink).
heat:heat the #obj_types# with the (microwave).
cool:cool the #obj_types# with the (fridge).
"""


@cache
def knowledge_base(data_dir: str) -> Any:
    """TextWorld's knowledge base plus the household types (a ``KnowledgeBase``).

    TextWorld reads grammars from files: :data:`HOUSEHOLD_GRAMMAR` is written to
    ``data_dir/text_grammars/house_mage.twg`` first.
    """
    from textworld.generator.data import LOGIC_DATA_PATH, KnowledgeBase
    from textworld.logic import GameLogic

    grammar_dir = Path(data_dir) / "text_grammars"
    grammar_dir.mkdir(parents=True, exist_ok=True)
    grammar_file = grammar_dir / "house_mage.twg"
    if not grammar_file.is_file() or grammar_file.read_text() != HOUSEHOLD_GRAMMAR:
        partial = grammar_dir / f".house_mage.{os.getpid()}.tmp"
        partial.write_text(HOUSEHOLD_GRAMMAR)
        partial.replace(grammar_file)
    builtin = [Path(p).read_text() for p in sorted(glob.glob(os.path.join(LOGIC_DATA_PATH, "*.twl")))]
    logic = GameLogic.parse("\n".join(builtin) + HOUSEHOLD_LOGIC)
    return KnowledgeBase(logic, str(grammar_dir))
