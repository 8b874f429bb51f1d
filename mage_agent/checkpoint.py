"""Checkpoints: weights (safetensors), optimizer, scheduler, RNG states and trainer extras.

Layout of ``<output_dir>/checkpoints/iter-000050/``::

    model/            save_pretrained: the full model, or only the LoRA adapter
    optimizer.pt      optimizer and scheduler state dicts, loaded with weights_only=True
    state.json        iteration, config, RNG states, population, metric history

``<output_dir>/checkpoints/latest`` names the newest complete checkpoint; a checkpoint is
written to a temporary folder and renamed, so a run killed mid-save never leaves a broken
one. Nothing is unpickled: tensors load with ``torch.load(weights_only=True)`` and the rest
is JSON.

Example:
    >>> import tempfile, torch
    >>> folder = Path(tempfile.mkdtemp())
    >>> write_rng_state(folder / "rng.json")
    >>> before = torch.rand(2)
    >>> restore_rng_state(folder / "rng.json")
    >>> torch.equal(before, torch.rand(2))
    True
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:
    from .policy import CausalLM


@dataclass
class CheckpointState:
    """What a resumed run needs besides the weights."""

    iteration: int
    config: dict[str, Any]
    extras: dict[str, Any]


def rng_state() -> dict[str, Any]:
    """Python, NumPy and torch global RNG states as JSON-able data."""
    version, internal, gauss = random.getstate()
    numpy_state = np.random.get_state()
    if not isinstance(numpy_state, tuple):  # the legacy form, which get_state() returns by default
        raise TypeError("expected NumPy's legacy RNG state (a tuple)")
    return {
        "python": [version, list(internal), gauss],
        "numpy": [numpy_state[0], numpy_state[1].tolist(), *numpy_state[2:]],
        "torch": torch.get_rng_state().tolist(),
        "cuda": [s.tolist() for s in torch.cuda.get_rng_state_all()] if torch.cuda.is_available() else [],
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` captured."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, *rest = state["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), *rest))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in state["cuda"]])


def write_rng_state(path: Path) -> None:
    path.write_text(json.dumps(rng_state()))


def restore_rng_state(path: Path) -> None:
    set_rng_state(json.loads(path.read_text()))


def save_checkpoint(
    root: Path,
    iteration: int,
    model: CausalLM,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    config: dict[str, Any],
    extras: dict[str, Any],
) -> Path:
    """Write checkpoint ``iteration`` under ``root`` atomically and point ``latest`` at it."""
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"iter-{iteration:06d}"
    staging = root / f".tmp-iter-{iteration:06d}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    model.save_pretrained(str(staging / "model"), safe_serialization=True)
    tokenizer.save_pretrained(staging / "model")
    torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, staging / "optimizer.pt")
    state = {"iteration": iteration, "config": config, "extras": extras, "rng": rng_state()}
    (staging / "state.json").write_text(json.dumps(state))
    if final.exists():
        shutil.rmtree(final)
    staging.rename(final)
    (root / "latest.tmp").write_text(final.name)
    (root / "latest.tmp").replace(root / "latest")
    return final


def latest_checkpoint(root: Path) -> Path | None:
    """The complete checkpoint under ``root`` that ``latest`` names; without that pointer (lost,
    or checkpoint folders copied without it) the newest complete ``iter-*`` folder; else None.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> for name in ("iter-000010", "iter-000020", "iter-000030"):
        ...     (root / name).mkdir()
        >>> for name in ("iter-000010", "iter-000020"):   # iter-000030: never completed
        ...     _ = (root / name / "state.json").write_text("{}")
        >>> latest_checkpoint(root).name
        'iter-000020'
    """
    pointer = root / "latest"
    if pointer.exists():
        folder = root / pointer.read_text().strip()
        return folder if (folder / "state.json").exists() else None
    complete = sorted(folder for folder in root.glob("iter-*") if (folder / "state.json").exists())
    return complete[-1] if complete else None


def run_folder_of(checkpoint: Path) -> Path:
    """The run folder a checkpoint belongs to: ``RUN`` for ``RUN/checkpoints/iter-N``, the
    checkpoint folder itself for one kept elsewhere (a shipped adapter).

    Example:
        >>> run_folder_of(Path("runs/kuhn/checkpoints/iter-40")).as_posix(), run_folder_of(Path("adapters/s1")).as_posix()
        ('runs/kuhn', 'adapters/s1')
    """
    return checkpoint.parent.parent if checkpoint.parent.name == "checkpoints" else checkpoint


def load_training_state(
    folder: Path, optimizer: torch.optim.Optimizer, scheduler: torch.optim.lr_scheduler.LRScheduler
) -> CheckpointState:
    """Restore optimizer, scheduler and RNG states from ``folder``; return the rest."""
    tensors = torch.load(folder / "optimizer.pt", weights_only=True, map_location="cpu")
    optimizer.load_state_dict(tensors["optimizer"])
    scheduler.load_state_dict(tensors["scheduler"])
    state = json.loads((folder / "state.json").read_text())
    set_rng_state(state["rng"])
    return CheckpointState(iteration=state["iteration"], config=state["config"], extras=state["extras"])
