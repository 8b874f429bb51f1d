"""Data-parallel training over several processes (``torchrun``), with ``torch.distributed``.

Every process (rank) holds a full copy of the policy, plays its share of the iteration's
groups, and takes part in three collectives per iteration:

* the per-turn credit table is gathered, so advantage statistics (per archetype, global
  or per group) are computed over the whole batch, exactly as in a single process;
* the gradients are summed with ``all_reduce``; each rank divides its token sums by the
  step's token count over all ranks, so a step's gradient is the one of the whole batch;
* episode results and loss diagnostics are gathered so rank 0 logs the whole batch.

Ranks may hold different numbers of turns, so the gradients are reduced by hand after
``backward`` rather than through ``DistributedDataParallel`` (which needs the same number
of forward passes on every rank). Rank 0 alone writes logs, checkpoints and evaluations.

Launch with ``torchrun --nproc-per-node N --no-python mage train ...``; without the
``torchrun`` environment variables a run is a single process and nothing changes.

Example (a single process):
    >>> world = World.single()
    >>> world.size, world.is_main, world.gather({"x": 1}), world.shard_bounds(8)
    (1, True, [{'x': 1}], (0, 8))
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Iterable

import torch

#: How long a rank waits for the others in a collective (rank 0 evaluates alone meanwhile).
TIMEOUT = timedelta(hours=3)


@dataclass(frozen=True)
class World:
    """This process's place among the training processes."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @classmethod
    def single(cls) -> World:
        return cls()

    @classmethod
    def from_environment(cls, device: str) -> World:
        """The world ``torchrun`` describes (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``); the
        process group is started here: NCCL on CUDA devices, gloo on CPU."""
        size = int(os.environ.get("WORLD_SIZE", "1"))
        if size == 1:
            return cls.single()
        import torch.distributed as dist

        world = cls(rank=int(os.environ["RANK"]), size=size, local_rank=int(os.environ.get("LOCAL_RANK", "0")))
        if not dist.is_initialized():
            backend = "nccl" if device.startswith("cuda") else "gloo"
            dist.init_process_group(backend=backend, timeout=TIMEOUT)
        return world

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def device(self, device: str) -> str:
        """``cuda`` becomes this process's own GPU (``cuda:LOCAL_RANK``)."""
        if self.size > 1 and device == "cuda":
            torch.cuda.set_device(self.local_rank)
            return f"cuda:{self.local_rank}"
        return device

    def shard_bounds(self, count: int) -> tuple[int, int]:
        """This rank's contiguous slice ``[start, stop)`` of ``count`` items (equal shares)."""
        if count % self.size:
            raise ValueError(f"{count} groups per iteration cannot be split evenly over {self.size} processes")
        share = count // self.size
        return self.rank * share, (self.rank + 1) * share

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order (picklable Python objects)."""
        if self.size == 1:
            return [obj]
        import torch.distributed as dist

        gathered: list[Any] = [None] * self.size
        dist.all_gather_object(gathered, obj)
        return gathered

    def sum(self, value: float) -> float:
        """The sum of ``value`` over ranks."""
        return float(value) if self.size == 1 else float(sum(self.gather(value)))

    def maximum(self, value: int) -> int:
        """The largest ``value`` over ranks."""
        return int(value) if self.size == 1 else int(max(self.gather(value)))

    def sum_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        """Replace each gradient by its sum over ranks (a missing gradient counts as zero)."""
        if self.size == 1:
            return
        import torch.distributed as dist

        grads: list[torch.Tensor] = []
        for param in parameters:
            if param.grad is None:
                param.grad = torch.zeros_like(param)
            grads.append(param.grad)
        by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
        for grad in grads:
            by_dtype.setdefault(grad.dtype, []).append(grad)
        for group in by_dtype.values():  # one collective per dtype (bf16 base, fp32 adapter)
            flat = torch.cat([grad.reshape(-1) for grad in group])
            dist.all_reduce(flat)
            offset = 0
            for grad in group:
                count = grad.numel()
                grad.copy_(flat[offset:offset + count].view_as(grad))
                offset += count

    def broadcast_parameters(self, module: torch.nn.Module) -> None:
        """Copy rank 0's parameters and buffers to every rank (identical starting points)."""
        if self.size == 1:
            return
        import torch.distributed as dist

        with torch.no_grad():
            for tensor in list(module.parameters()) + list(module.buffers()):
                dist.broadcast(tensor.data, src=0)

    def barrier(self) -> None:
        if self.size > 1:
            import torch.distributed as dist

            dist.barrier()

    def close(self) -> None:
        if self.size > 1:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
