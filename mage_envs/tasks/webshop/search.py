"""The store's search engine: BM25 over the product documents, with ``bm25s``.

WebShop searches a Lucene index (pyserini, BM25 with k1 = 0.9, b = 0.4) of each product's
title, description, first feature and options, and shows the top 50 hits. Here the same
documents are indexed with ``bm25s`` (``method="lucene"``, the same k1 and b). The
analyzer stands in for Lucene's English one: lower case, ``[a-z0-9]+`` tokens, Lucene's 33
English stop words dropped, then the Porter stemmer (PyStemmer's ``"porter"``, the
algorithm of Lucene's ``PorterStemFilter``). Ties in score keep catalog order, so a
query always returns the same list. A query with no indexed word finds nothing.

``bm25s`` and PyStemmer (the ``webshop`` extra) are imported when the first index is
built, not when ``mage_envs`` is imported.

Example:
    >>> index = SearchIndex(["red running shoes", "blue hoodie", "red hoodies with pockets"])
    >>> index.search("Red Hoodie")
    (2, 1, 0)
    >>> index.search("purple"), tokenize("The batteries of running shoes")
    ((), ['batteri', 'run', 'shoe'])
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

#: Hits a search returns (WebShop's ``SEARCH_RETURN_N``).
SEARCH_RETURN_N = 50
#: Lucene's ``EnglishAnalyzer`` stop words.
STOP_WORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not", "of",
    "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was", "will", "with",
))
_TOKEN = re.compile(r"[a-z0-9]+")


@cache
def _stemmer() -> Any:
    try:
        import Stemmer  # PyStemmer
    except ImportError as error:
        raise ImportError('WebShop\'s search stems with PyStemmer: pip install "mage-rl[webshop]"') from error
    return Stemmer.Stemmer("porter")


def tokenize(text: str) -> list[str]:
    """The index terms of ``text``: its words, stop words dropped, Porter-stemmed."""
    return _stemmer().stemWords([token for token in _TOKEN.findall(text.lower()) if token not in STOP_WORDS])


class SearchIndex:
    """A BM25 index over ``documents``; :meth:`search` returns document numbers, best first."""

    def __init__(self, documents: Sequence[str], k1: float = 0.9, b: float = 0.4) -> None:
        try:
            import bm25s  # the optional dependency: only a store that searches needs it
        except ImportError as error:
            raise ImportError('WebShop searches with bm25s: pip install "mage-rl[webshop]" (or bm25s)') from error

        self.size = len(documents)
        self._bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        self._bm25.index([tokenize(document) for document in documents], show_progress=False)

    def search(self, query: str, limit: int = SEARCH_RETURN_N) -> tuple[int, ...]:
        """Up to ``limit`` documents that contain a query term, by descending BM25 score."""
        terms = self._bm25.get_tokens_ids(tokenize(query))
        if not terms:
            return ()
        scores = self._bm25.get_scores_from_ids(terms)
        order = np.argsort(-scores, kind="stable")[:limit]
        return tuple(int(i) for i in order if scores[i] > 0)
