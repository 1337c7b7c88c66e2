"""GPU L2 cache control for "cold" measurements: a flush that evicts whatever the timed
operator left in the device's L2, in one of two ways (see L2Flusher)."""

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
    """`flush()` evicts the timed call's data from the L2 of `device` (call it outside the
    timed region). The two ways leave the L2 in different states, and a memory-bound call
    of 100 us reads 4 to 5% apart after them (an H100, docs/gpu.md):

    - default, as triton's do_bench: a buffer the size of the L2 zeroed, so the L2 ends
      full of that buffer's dirty lines and the timed call pays their write-back as it
      evicts them (as it would after an operator that wrote as much);
    - `clean=True`, as Nsight Compute's `--cache-control all`: a buffer twice the size of
      the L2 read through (a sum), so dirty lines are written back during the flush and
      the L2 ends holding clean lines the call does not use."""

    def __init__(self, device, clean: bool = False) -> None:
        import torch

        device = torch.device(device)
        if device.type != "cuda":
            raise ValueError(f"an L2 flush is for CUDA devices, not {device}")
        if not torch.cuda.is_available():
            raise RuntimeError("an L2 flush needs CUDA, which is not available here")
        self.size = l2_size_bytes(device)
        self.clean = clean
        if clean:
            self.buffer = torch.zeros(2 * self.size // 4, dtype=torch.float32, device=device)
            self.sink = torch.empty((), dtype=torch.float32, device=device)
        else:
            self.buffer = torch.empty(self.size // 4, dtype=torch.int32, device=device)

    def flush(self) -> None:
        if self.clean:
            import torch

            torch.sum(self.buffer, dim=0, out=self.sink)
        else:
            self.buffer.zero_()
