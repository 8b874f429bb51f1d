"""The report page: the run's data as JSON inside one HTML file with its script and style.

Example:
    >>> page = render({"run": "demo", "config": None, "metrics": [], "evaluations": {}, "transcripts": {}})
    >>> page.startswith("<!DOCTYPE html>"), 'id="mage-data"' in page
    (True, True)
"""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path
from typing import Any

from .data import REPLAYS_PER_OPPONENT, collect

#: The page: no external resource, so it opens offline and from any folder.
TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>MAGE report: {title}</title>
<style>
{style}
</style>
</head>
<body>
<header><h1>MAGE report: <span id="run-name">{title}</span></h1><p id="run-summary"></p></header>
<nav id="sections"></nav>
<main id="report"></main>
<script type="application/json" id="mage-data">{data}</script>
<script>
{script}
</script>
</body>
</html>
"""


def _static(name: str) -> str:
    return resources.files("mage_envs.view").joinpath("static").joinpath(name).read_text(encoding="utf-8")


def render(data: dict[str, Any]) -> str:
    """The HTML page of :func:`~mage_envs.view.data.collect`'s ``data``."""
    # "<" escaped inside the JSON strings: no "</script>" or "<!--" can end the block early
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    return TEMPLATE.format(title=html.escape(str(data.get("run", ""))), style=_static("report.css"),
                           script=_static("report.js"), data=payload)


def write_report(run_dir: str | Path, output: str | Path | None = None,
                 replays_per_opponent: int = REPLAYS_PER_OPPONENT) -> Path:
    """Write ``run_dir``'s report to ``output`` (default ``run_dir/report.html``); its path."""
    path = Path(output) if output is not None else Path(run_dir) / "report.html"
    path.write_text(render(collect(run_dir, replays_per_opponent)), encoding="utf-8")
    return path
