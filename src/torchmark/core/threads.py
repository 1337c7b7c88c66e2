"""torch's intra-op thread count, set for a measurement and restored after: the one place
torchmark changes it (a process-wide setting the caller's code relies on)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

MAX_THREADS = 1024  # torch.set_num_threads(100000) crashes the process (a segfault)


@contextlib.contextmanager
def set_torch_threads(n: int | None) -> Iterator[None]:
    """Run the body with `torch.set_num_threads(n)`, restoring the old count after;
    None leaves torch's count as it is."""
    import torch

    if n is None:
        yield
        return
    prior = torch.get_num_threads()
    try:
        use_torch_threads(n)
        yield
    finally:
        use_torch_threads(prior)


def use_torch_threads(n: int) -> None:
    """`torch.set_num_threads(n)` for good: in a process of its own (a measurement's
    fork), where nothing is left to restore."""
    import torch

    torch.set_num_threads(n)
