"""Clocks and thread control used while measuring."""

from __future__ import annotations

import contextlib
import functools
import timeit
from collections.abc import Callable, Iterator


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


MAX_THREADS = 1024  # torch.set_num_threads(100000) crashes the process (a segfault)


@contextlib.contextmanager
def set_torch_threads(n: int) -> Iterator[None]:
    """Run the body with `torch.set_num_threads(n)`, restoring the old count after."""
    import torch

    prior = torch.get_num_threads()
    try:
        torch.set_num_threads(n)
        yield
    finally:
        torch.set_num_threads(prior)
