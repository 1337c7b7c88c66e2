"""Bounds on tensors described by files from others (op configs, traces): checked before
anything is allocated, so a shape cannot hang the run or exhaust memory."""

from __future__ import annotations

import os
from collections.abc import Sequence

from torchmark.core.bounded_input import brief, human_bytes
from torchmark.core.errors import LimitError

MAX_DIMS = 64  # torch's own limit for most kernels is 25 (CUDA) to 64


def memory_bytes(device: str = "cpu") -> int:
    """The memory of the machine (cpu) or of the GPU a tensor would live on."""
    if str(device).startswith("cuda"):
        import torch

        return int(torch.cuda.get_device_properties(torch.device(device)).total_memory)
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_dims(shape: Sequence[int], what: str) -> None:
    """A LimitError when `shape` has more than MAX_DIMS dimensions."""
    if len(shape) > MAX_DIMS:
        raise LimitError(f"{what}: a tensor of {len(shape)} dimensions (at most {MAX_DIMS}): "
                         f"{brief(list(shape[:8]))}")


def check_tensor(shape: Sequence[int], itemsize: int, device: str, what: str) -> None:
    """A LimitError when a tensor of `shape` has too many dimensions, or needs more bytes
    than the device has in all."""
    check_dims(shape, what)
    numel = 1
    for size in shape:
        numel *= max(int(size), 0)
    need, have = numel * itemsize, memory_bytes(device)
    if need > have:
        raise LimitError(f"{what}: a tensor of shape {brief(list(shape))} needs "
                         f"{human_bytes(need)}, more than the {human_bytes(have)} of "
                         f"{'this machine' if device == 'cpu' else device}")
