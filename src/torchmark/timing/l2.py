"""GPU L2 cache control: a device buffer exactly the size of the device's L2, zeroed to
evict whatever the timed operator left there ("cold" measurements)."""

from __future__ import annotations


def l2_size_bytes(device) -> int:
    """The L2 size of a CUDA device, from its properties."""
    import torch

    props = torch.cuda.get_device_properties(torch.device(device))
    size = int(getattr(props, "L2_cache_size", 0) or 0)
    if size <= 0:
        raise RuntimeError(f"cannot read the L2 size of {props.name}")
    return size


class L2Flusher:
    """`flush()` overwrites the whole L2 of `device` (call it outside the timed region)."""

    def __init__(self, device) -> None:
        import torch

        device = torch.device(device)
        if device.type != "cuda":
            raise ValueError(f"an L2 flush is for CUDA devices, not {device}")
        if not torch.cuda.is_available():
            raise RuntimeError("an L2 flush needs CUDA, which is not available here")
        self.size = l2_size_bytes(device)
        self.buffer = torch.empty(self.size // 4, dtype=torch.int32, device=device)

    def flush(self) -> None:
        self.buffer.zero_()
