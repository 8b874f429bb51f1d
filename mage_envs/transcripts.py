"""The JSONL transcript of an evaluation: one line per finished meta-episode, for resuming.

:func:`~mage_envs.evaluation.evaluate` with ``transcript=PATH`` appends a record as each
meta-episode finishes (flushed and fsynced), holding the run's settings, the opponent, the
meta-episode index, its seed and instance, every step (phase, prompt, answer, reward,
invalid action, token usage when the agent reports it) and the episode returns, outcomes
and successes. Run again with the same file and the finished meta-episodes are read back
instead of played. A record made under other settings is refused; a last line cut short
by a kill is dropped.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "transcript.jsonl"
    >>> log = Transcript(path, {"env_id": "mage/KuhnPoker-meta-v0", "seed": 0})
    >>> log.append({"opponent": "aggressive", "index": 0, "returns": [1.0]})
    >>> _ = path.write_text(path.read_text() + '{"settings": {"env_id": "mage/Ku')  # killed mid-write
    >>> Transcript(path, {"env_id": "mage/KuhnPoker-meta-v0", "seed": 0}).finished[("aggressive", 0)]["returns"]
    [1.0]
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

#: Per opponent, the meta-episodes whose every step the command-line evaluations keep
#: (``mage eval``'s ``--transcript-steps``, ``mage train``'s evaluations): what ``mage view``
#: replays, at a bounded size; every meta-episode's results are kept regardless.
TRANSCRIPT_STEPS = 20

def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data (dataclasses as dicts, numpy scalars as numbers, else ``repr``)."""
    return json.loads(json.dumps(value, default=_default))


def _default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    return repr(value)


class Transcript:
    """An append-only JSONL file of finished meta-episodes under one set of ``settings``.

    ``finished`` maps ``(opponent, index)`` to the records already in the file; opening
    it drops a partial last line and raises :class:`ValueError` on a record whose
    settings differ from ``settings`` (another env, seed, env arguments or agent).
    """

    def __init__(self, path: str | Path, settings: dict[str, Any]) -> None:
        self.path = Path(path)
        self.settings = jsonable(settings)
        self.finished: dict[tuple[str, int], dict[str, Any]] = {}
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        data = self.path.read_bytes()
        complete = data.rfind(b"\n") + 1  # a kill mid-write leaves a last line without its newline
        for number, line in enumerate(data[:complete].splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                key = (record["opponent"], int(record["index"]))
                theirs = record["settings"]
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(f"{self.path}:{number} is not a transcript record ({error})") from None
            if theirs != self.settings:
                changed = sorted(k for k in {*theirs, *self.settings} if theirs.get(k) != self.settings.get(k))
                raise ValueError(
                    f"{self.path}:{number} was recorded with other settings ({', '.join(changed)}: "
                    f"{ {k: theirs.get(k) for k in changed} } there, { {k: self.settings.get(k) for k in changed} } "
                    "now); use another transcript file or remove this one")
            self.finished[key] = record
        if complete < len(data):
            with self.path.open("r+b") as handle:
                handle.truncate(complete)

    def append(self, record: dict[str, Any]) -> None:
        """Write ``record`` (with the settings) as one line, flushed and fsynced."""
        record = {"settings": self.settings, **jsonable(record)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self.finished[(record["opponent"], int(record["index"]))] = record


def start_transcript(path: str | Path, resume: bool = False, overwrite: bool = False) -> Path:
    """``path`` for a command-line evaluation: an earlier transcript there is continued
    (``resume``), removed (``overwrite``), or refused with :class:`FileExistsError`."""
    path = Path(path)
    if resume and overwrite:
        raise ValueError("--resume continues the transcript and --overwrite removes it: pass one")
    if path.exists() and path.stat().st_size and not resume:
        if not overwrite:
            raise FileExistsError(f"{path} holds an earlier evaluation: pass --resume to continue it "
                                  "(its finished meta-episodes are not replayed) or --overwrite to start over")
        path.unlink()
    return path
