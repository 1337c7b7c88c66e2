"""The CUDA device a GPU measurement runs on, and how long it warms up: what device
time and kernel time share."""

from __future__ import annotations

from typing import Any

WARM_UP_S = 0.025  # as triton's do_bench: long enough for clocks and caches to settle


def require_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("device time needs a CUDA device, and torch.cuda.is_available() is "
                           "False here; use blocked_autorange() for host time")


def indexed_cuda_device(device: Any = None) -> Any:
    """`device` (None or "cuda": the current one) as a torch.device with its index."""
    import torch

    device = torch.device(device or "cuda")
    return device if device.index is not None else \
        torch.device("cuda", torch.cuda.current_device())
