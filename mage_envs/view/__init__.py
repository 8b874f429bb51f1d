"""``mage view``: one self-contained HTML report of a training run or an evaluation folder.

:func:`collect` reads what a run left (``metrics.jsonl``, ``eval*.json``, the replayable
records of ``transcript*.jsonl``, ``config.json``); :func:`render` writes it into one HTML
page whose script and style are inlined from this package (nothing is fetched when it is
opened); :func:`serve` serves that page on the loopback interface.

Example:
    >>> import tempfile, pathlib
    >>> run = pathlib.Path(tempfile.mkdtemp())
    >>> path = write_report(run)
    >>> path.name, "<script src" in path.read_text()
    ('report.html', False)
"""

from .data import collect
from .report import render, write_report
from .serve import serve

__all__ = ["collect", "render", "serve", "write_report"]
