"""One trainer per run folder: an exclusive lock held for the life of the process.

Two trainers writing into the same output folder interleave their ``metrics.jsonl`` lines and
their checkpoints, and neither notices (a benchmark whose parent was killed while its pool
worker kept training did exactly that). :func:`lock_run_folder` takes an exclusive
``flock`` on ``<folder>/.lock`` and keeps it until the process ends, so a second process that
trains into the same folder stops at once with a message naming the first. Within one
process the folder may be claimed again (a resumed ``Trainer`` after an earlier one).
Where ``fcntl`` is missing (Windows) nothing is locked.

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> lock_run_folder(folder) is lock_run_folder(folder)   # the same process claims it again
    True
    >>> (folder / LOCK_FILE).read_text().startswith("pid ")
    True
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:   # Windows: no flock
    fcntl = None  # type: ignore[assignment]

#: The lock file in a run folder.
LOCK_FILE = ".lock"
#: The folders this process holds, and their open lock files (closing one would release it).
_HELD: dict[Path, IO[str]] = {}


class RunFolderBusy(RuntimeError):
    """Another process is training into the folder."""


def lock_run_folder(folder: Path) -> IO[str] | None:
    """Hold ``folder``'s lock until this process ends (the open lock file; ``None`` without
    ``fcntl``); :class:`RunFolderBusy` when another process holds it."""
    if fcntl is None:
        return None
    key = folder.resolve()
    if key in _HELD:
        return _HELD[key]
    handle = open(key / LOCK_FILE, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        owner = handle.read().strip() or "a process"
        handle.close()
        raise RunFolderBusy(f"{folder} is being trained by another process ({owner}): wait for it to end or stop "
                            "it, or train into another output folder") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}\n")
    handle.flush()
    _HELD[key] = handle
    return handle
