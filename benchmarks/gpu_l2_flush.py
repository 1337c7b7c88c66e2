"""What a flush leaves in the L2, and what it does to a cold figure, on a CUDA GPU.

docs/gpu.md ("Two cold L2s") explains why kernel time flushes clean (as Nsight Compute's
--cache-control all) and device time zeroes a buffer (as triton's do_bench). This script
is the measurement behind it: for each case, kernel time (CUPTI) with no flush (hot, back
to back) and after each way of flushing, then device time (blocking) after the zero fill
and after the read, all in one process:

- zero L2 / zero 2xL2: a buffer of 1x / 2x the L2's size zeroed (dirty lines left);
- read 2xL2: a buffer of twice the L2's size read through (written back, clean);
- zero+read: both, in that order; idle 2ms: no flush, the device synchronized, then
  2 ms of sleep; zero+idle: the zero fill, then that.

    python benchmarks/gpu_l2_flush.py [--max-run-time S]

Each measurement swaps the flush of torchmark's L2Flusher for the one named (the API
offers each quantity its reference's flush only). Exits 2 without CUDA.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Iterator

CASES = {
    "softmax 8192x4096": ("torch.softmax(s, dim=-1)",
                          "s = torch.randn(8192, 4096, device='cuda')"),
    "layer_norm 8192x4096": ("torch.nn.functional.layer_norm(s, (4096,), w, b)",
                             "s = torch.randn(8192, 4096, device='cuda'); "
                             "w = torch.ones(4096, device='cuda'); "
                             "b = torch.zeros(4096, device='cuda')"),
    "conv2d 32x64x56x56 3x3": ("torch.nn.functional.conv2d(i, k, c, padding=1)",
                               "i = torch.randn(32, 64, 56, 56, device='cuda'); "
                               "k = torch.randn(64, 64, 3, 3, device='cuda'); "
                               "c = torch.randn(64, device='cuda')"),
    "mm 512^3 fp32": ("torch.mm(a, b)", "a = torch.randn(512, 512, device='cuda'); "
                                        "b = torch.randn_like(a)"),
    "relu 1M": ("torch.relu(x)", "x = torch.randn(1 << 20, device='cuda')"),
    "add 128K": ("torch.add(x, y)", "x = torch.randn(1 << 17, device='cuda'); "
                                    "y = torch.randn_like(x)"),
}


def flushes(torch) -> dict[str, Callable[[], None]]:
    """The ways of flushing, by name (buffers allocated once, before any case)."""
    from torchmark.timing.l2 import l2_size_bytes

    size = l2_size_bytes("cuda")
    zero1 = torch.empty(size // 4, dtype=torch.int32, device="cuda")
    zero2 = torch.empty(2 * size // 4, dtype=torch.int32, device="cuda")
    read2 = torch.zeros(2 * size // 4, dtype=torch.float32, device="cuda")
    sink = torch.empty((), device="cuda")

    def read() -> None:
        torch.sum(read2, dim=0, out=sink)

    def idle() -> None:
        torch.cuda.synchronize()
        time.sleep(0.002)

    return {"zero L2": zero1.zero_, "zero 2xL2": zero2.zero_, "read 2xL2": read,
            "zero+read": lambda: (zero1.zero_(), read()), "idle 2ms": idle,
            "zero+idle": lambda: (zero1.zero_(), idle())}


@contextlib.contextmanager
def flushing_with(flush: Callable[[], None]) -> Iterator[None]:
    """torchmark's L2Flusher flushing with `flush` inside the block."""
    from torchmark.timing import l2

    saved = l2.L2Flusher.flush
    l2.L2Flusher.flush = lambda self: flush()
    try:
        yield
    finally:
        l2.L2Flusher.flush = saved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-run-time", type=float, default=0.6,
                        help="seconds at most a measurement (default 0.6)")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("gpu_l2_flush.py: no CUDA device here (torch.cuda.is_available() is False); "
              "this script runs on a GPU machine", file=sys.stderr)
        return 2
    from torchmark import Timer

    ways = flushes(torch)
    limit = args.max_run_time
    print(f"{torch.cuda.get_device_name()}: kernel time (CUPTI) and device time "
          "(blocking), us a call")
    print(f"{'case':<24}{'hot':>9}" + "".join(f"{w:>11}" for w in ways)
          + f"{'dev zero':>11}{'dev read':>11}", flush=True)
    for name, (stmt, setup) in CASES.items():
        timer = Timer(stmt, setup)
        figures = [timer.kernel_time(l2="hot", max_run_time=limit).median]
        for flush in ways.values():
            with flushing_with(flush):
                figures.append(timer.kernel_time(l2="cold", max_run_time=limit).median)
        for way in ("zero L2", "read 2xL2"):
            with flushing_with(ways[way]):
                figures.append(timer.device_time(mode="blocking", l2="cold",
                                                 max_run_time=limit).median)
        print(f"{name:<24}{figures[0] * 1e6:9.2f}"
              + "".join(f"{f * 1e6:11.2f}" for f in figures[1:]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
