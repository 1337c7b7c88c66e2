"""The clock used while measuring (device synchronize, then perf_counter)."""

from __future__ import annotations

import functools
import timeit
from collections.abc import Callable


@functools.cache
def _device_synchronize() -> Callable[[], None] | None:
    """The synchronize function of the present accelerator, or None on a CPU-only host."""
    import torch

    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "is_available"):
        if accelerator.is_available():
            return accelerator.synchronize
        return None
    if torch.cuda.is_available():
        return torch.cuda.synchronize
    return None


def timer() -> float:
    """The default clock: waits for queued device work, then reads `perf_counter`.

    Without the synchronization a GPU statement would be timed by how long it takes
    to *launch* its kernels, not to run them.
    """
    sync = _device_synchronize()
    if sync is not None:
        sync()
    return timeit.default_timer()
