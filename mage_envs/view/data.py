"""What a run folder holds, read into one JSON-able dict for the report.

Example:
    >>> import json, tempfile, pathlib
    >>> run = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (run / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "entropy": 0.5, "note": "x"}) + "\\n")
    >>> collect(run)["metrics"]
    [{'iteration': 1, 'entropy': 0.5}]
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

#: Per transcript and opponent, the meta-episodes with steps that a report replays at most.
REPLAYS_PER_OPPONENT = 20


def collect(run_dir: str | Path, replays_per_opponent: int = REPLAYS_PER_OPPONENT) -> dict[str, Any]:
    """``run_dir``'s training metrics (numeric values only), evaluations (by agent name),
    replayable transcript records (those with steps, the first ``replays_per_opponent`` per
    opponent and agent) and config, as plain data."""
    run = Path(run_dir)
    if not run.is_dir():
        raise FileNotFoundError(f"{run} is not a folder: give a training run's --output-dir or an evaluation's")
    config = run / "config.json"
    return {
        "run": run.resolve().name,
        "config": json.loads(config.read_text()) if config.exists() else None,
        "metrics": _metrics(run / "metrics.jsonl"),
        "evaluations": _evaluations(run),
        "transcripts": _transcripts(run, replays_per_opponent),
    }


def _metrics(path: Path) -> list[dict[str, float]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            rows.append({k: v for k, v in row.items() if _number(v)})
    return rows


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _evaluations(run: Path) -> dict[str, Any]:
    """``eval*.json`` by the agent each names (the file's stem where two name the same)."""
    found: dict[str, Any] = {}
    for path in sorted(run.glob("eval*.json")):
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or "opponents" not in data:
            continue
        name = str(data.get("agent") or path.stem)
        found[path.stem if name in found else name] = {**data, "file": path.name}
    return found


def _transcripts(run: Path, per_opponent: int) -> dict[str, list[dict[str, Any]]]:
    """Replayable records of ``transcript*.jsonl`` by agent, in (opponent, index) order."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(run.glob("transcript*.jsonl")):
        kept: dict[str, list[dict[str, Any]]] = {}
        agent = path.stem.removeprefix("transcript").lstrip("_") or "transcript"
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:   # a line cut short by a kill
                continue
            agent = record.get("settings", {}).get("agent", agent)
            if record.get("steps") and len(kept.setdefault(record["opponent"], [])) < per_opponent:
                kept[record["opponent"]].append(_replay(record))
        records = [r for opponent in kept.values() for r in sorted(opponent, key=lambda r: r["index"])]
        if records:
            found[path.stem if agent in found else agent] = records
    return found


def _replay(record: dict[str, Any]) -> dict[str, Any]:
    """What the replay shows of one record (the settings and token counts left out)."""
    instance = record.get("instance")
    return {
        "opponent": record["opponent"], "index": record["index"], "seed": record.get("seed"),
        # the instance as text: a JSON number past 2**53 would lose digits in the page
        "instance": None if instance is None else str(instance[0]), "seat": None if instance is None else instance[1],
        "returns": record["returns"], "outcomes": record["outcomes"],
        "steps": [{key: step.get(key) for key in ("phase", "episode", "prompt", "answer", "reward", "invalid_action")}
                  for step in record["steps"]],
        "final_observation": record.get("final_observation"),
    }
