"""Memory per call against hand-computed bytes (issue 38), and the gate on a planted
extra allocation.

Twenty CPU ops on float32 tensors whose allocations can be worked out by hand (x, y:
1,000 elements, 4,000 bytes; m: 64 x 64, 16,384 bytes): out-of-place elementwise ops
allocate their output, reductions a 0-d or a row, `cat` and `stack` both inputs, a
matmul its product, in-place ops and views nothing, an expression with a temporary
both. For each, torchmark's peak bytes above the start of a call, bytes allocated and
allocations (Timer.memory) beside the hand figures; every row must match.

Then the gate: the 20 cases measured as a baseline and again with one extra 4 KiB
allocation (`torch.empty(1024)`) planted in one case, 10 times, each time in another
case; the gate must fail that case, and only it, 10/10.

With `--device cuda` (benchmarks/gpu_session.sh), the same statements on the GPU, each
peak beside its anchor: `torch.cuda.max_memory_allocated` after a reset, less the bytes
allocated before the call, read around one call (sizes there are the caching
allocator's, in its 512-byte blocks, on both sides).

    python benchmarks/memory_table.py [--trials 10] [--device cuda]
"""

from __future__ import annotations

import argparse
import random
import sys

SETUP = "x = torch.rand(1000); y = torch.rand(1000); m = torch.rand(64, 64)"
F, X, M = 4, 4000, 64 * 64 * 4  # bytes: a float32, x (and y), m
# statement -> (peak bytes above the start, bytes allocated, allocations), by hand
TABLE = {
    "x + y": (X, X, 1),
    "x * y": (X, X, 1),
    "torch.exp(x)": (X, X, 1),
    "torch.relu(x)": (X, X, 1),
    "x.sum()": (F, F, 1),
    "x.amax()": (F, F, 1),
    "m.sum(0)": (64 * F, 64 * F, 1),
    "torch.cat([x, y])": (2 * X, 2 * X, 1),
    "torch.stack([x, y])": (2 * X, 2 * X, 1),
    "m @ m": (M, M, 1),
    "x.clone()": (X, X, 1),
    "torch.zeros(1000)": (X, X, 1),
    "x.to(torch.float64)": (2 * X, 2 * X, 1),
    "torch.cumsum(x, 0)": (X, X, 1),
    "x.add_(y)": (0, 0, 0),
    "x.mul_(y)": (0, 0, 0),
    "x.view(10, 100)": (0, 0, 0),
    "x[:500]": (0, 0, 0),
    "(x + y) * y": (2 * X, 2 * X, 2),  # the temporary x + y lives until the product exists
    "torch.where(x > y, x, y)": (1000 + X, 1000 + X, 2),  # a bool mask, then the output
}
PLANT = "\nif plant:\n    torch.empty(1024)"  # 4 KiB more where `plant` is true


def measure(stmt: str, plant: bool = False):
    import torchmark

    return torchmark.Timer(stmt + PLANT, SETUP, globals={"plant": plant},
                           label="memory table", sub_label=stmt).memory(samples=3)


def table() -> int:
    wrong = 0
    print(f"{'statement':<28} {'peak':>14} {'allocated':>14} {'allocations':>12}  match")
    for stmt, hand in TABLE.items():
        m = measure(stmt)
        got = (m.peak, m.allocated, m.allocations)
        ok = got == hand and m.agree
        wrong += not ok
        cells = [f"{g:,}" + ("" if g == h else f" (hand {h:,})") for g, h in
                 zip(got, hand, strict=True)]
        print(f"{stmt:<28} {cells[0]:>14} {cells[1]:>14} {cells[2]:>12}  "
              f"{'yes' if ok else 'NO'}")
    print(f"table: {len(TABLE) - wrong}/{len(TABLE)} rows equal the hand-computed bytes")
    return wrong


def gate(trials: int) -> int:
    from torchmark.records import results_of
    from torchmark.regressions.gate import gate as run_gate

    baseline = [r for stmt in TABLE for r in results_of(measure(stmt))]
    found = 0
    for trial, planted in enumerate(random.Random(0).sample(list(TABLE), trials)):
        candidate = [r for stmt in TABLE for r in results_of(measure(stmt, stmt == planted))]
        report = run_gate(baseline, candidate, max_slowdown=0.0)
        failing = {row.title.removeprefix("memory table: ") for row in report.failing}
        right = failing == {planted}
        found += right
        print(f"trial {trial}: planted in {planted!r}: the gate failed "
              f"{sorted(failing) or 'nothing'} [{'right' if right else 'WRONG'}]")
    print(f"gate: found the planted 4 KiB {found}/{trials}")
    return trials - found


def cuda_table() -> int:
    """Each statement's CUDA peak by Timer.memory against max_memory_allocated's delta."""
    import torch

    import torchmark

    if not torch.cuda.is_available():
        print("--device cuda: there is no CUDA device here")
        return 1
    setup = SETUP.replace("torch.rand(1000)", "torch.rand(1000, device='cuda')").replace(
        "torch.rand(64, 64)", "torch.rand(64, 64, device='cuda')")
    wrong = 0
    print(f"{'statement':<28} {'torchmark peak':>15} {'max_memory_allocated':>21}  match")
    for stmt in TABLE:
        stmt_cuda = stmt.replace("torch.zeros(1000)", "torch.zeros(1000, device='cuda')")
        m = torchmark.Timer(stmt_cuda, setup).memory(samples=3, device="cuda")
        namespace = {"torch": torch}
        exec(setup, namespace)
        exec(stmt_cuda, namespace)  # the warm-up call Timer.memory makes too
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        exec(stmt_cuda, namespace)
        torch.cuda.synchronize()
        anchor = torch.cuda.max_memory_allocated() - base
        ok = m.peak == anchor and m.agree
        wrong += not ok
        print(f"{stmt:<28} {m.peak:>15,} {anchor:>21,}  {'yes' if ok else 'NO'}")
    print(f"cuda: {len(TABLE) - wrong}/{len(TABLE)} peaks equal max_memory_allocated's")
    return wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args()
    wrong = cuda_table() if args.device == "cuda" else table() + gate(args.trials)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
