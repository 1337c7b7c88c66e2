"""Where a kernel's tensors land in device memory, and what that does to its figure and to
the comparison with Nsight Compute, on a CUDA GPU (issue 28).

gpu_kernel_time.py found one kernel (layer_norm 8192x4096, cold) reading 130.7 us in its
own process and 125.4 in three fresh ones, and softmax the other way (114.7 and 116.6):
a process's figure depends on more than the kernel and the L2's state. This script
prepares each case several times in one process, each copy's tensors placed after a
buffer of a different size (PADS, MiB), all alive together, and takes for every copy:

- torchmark's kernel time, cold (flushed clean) and hot, and the call's launch order;
- Nsight Compute's gpu__time_duration.sum with `--cache-control all` and `none`, in a
  child that prepares the same copies in the same order (gpu_kernel_time.py's child).

It prints each copy's figures, then per case and kernel the range over placements on
each side and the ratio of the medians over placements (the first kernel of a call cold
against `all`, later ones hot against `none`, as gpu_kernel_time.py's kernel_checks).

    python benchmarks/gpu_placement.py [--max-run-time S] [--ncu-log DIR] [--no-ncu]

Exits 2 without CUDA.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpu_kernel_time import CASES, NcuCase, kernel_base, ncu_figures  # noqa: E402

PADS = (0, 2, 6, 14, 30, 62, 126, 254)  # MiB allocated before a copy's tensors
NAMES = ("softmax 8192x4096", "layer_norm 8192x4096", "conv2d 32x64x56x56 3x3 (+bias)")


def copies() -> list[tuple[str, str, str, int]]:
    """Every case at every padding: (label, stmt, setup, pad MiB), in preparation order."""
    return [(f"{name} @{pad}", *CASES[name], pad) for name in NAMES for pad in PADS]


def ours(prepared: list[tuple[str, str, str, int]], limit: float
         ) -> dict[str, tuple[list[tuple[str, float]], list[tuple[str, float]]]]:
    """{label: (cold launch order, hot launch order)}: each position's (name, seconds),
    scaled so that a call's positions sum to its median."""
    import torch

    from torchmark import Timer

    spaces = []
    for label, stmt, setup, pad in prepared:  # as the ncu child prepares them
        space = {"torch": torch,
                 "_pad": torch.empty(pad << 20, dtype=torch.uint8, device="cuda")}
        exec(setup, space)
        spaces.append((label, stmt, space))
    out = {}
    for label, stmt, space in spaces:
        timer = Timer(stmt, globals=space)
        pair = []
        for l2 in ("cold", "hot"):
            m = timer.kernel_time(l2=l2, min_run_time=0.01, max_run_time=limit)
            steps = [(k["name"], k["seconds"]) for k in m.metadata["sequence"]["kernels"]]
            total = sum(s for _, s in steps)
            pair.append([(n, s * m.median / total) for n, s in steps])
        out[label] = (pair[0], pair[1])
        cold, hot = pair
        print(f"  {label:<38} cold {sum(s for _, s in cold) * 1e6:8.2f}  hot "
              f"{sum(s for _, s in hot) * 1e6:8.2f} us", flush=True)
    return out


def position_figures(name: str, mine: dict, clean: dict[str, NcuCase],
                     warm: dict[str, NcuCase]) -> list[tuple[str, list[float], list[float]]]:
    """For each kernel position of `name`'s calls: (kernel, torchmark's figures over the
    placements, ncu's over the same placements), where both sides name the same kernels."""
    rows: list[tuple[str, list[float], list[float]]] = []
    for pad in PADS:
        label = f"{name} @{pad}"
        if label not in mine or label not in clean or label not in warm:
            continue
        cold, hot = mine[label]
        a, n = clean[label].steps, warm[label].steps
        if not (a and n) or [kernel_base(k) for k, _ in cold] != [kernel_base(k[0]) for k in a] \
                or len(n) != len(a):
            print(f"  {label}: launch orders differ (torchmark {len(cold)} kernels, ncu "
                  f"{len(a) if a else '?'}): left out")
            continue
        if not rows:
            rows = [(kernel_base(k), [], []) for k, _ in cold]
        for i in range(len(cold)):
            rows[i][1].append(cold[i][1] if i == 0 else hot[i][1])
            rows[i][2].append(a[0][1] if i == 0 else n[i][1])
    return rows


def _range(values: list[float]) -> str:
    return (f"{min(values) * 1e6:7.2f} {statistics.median(values) * 1e6:7.2f} "
            f"{max(values) * 1e6:7.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-run-time", type=float, default=0.5,
                        help="seconds at most a measurement (default 0.5)")
    parser.add_argument("--ncu-log", default=None, metavar="DIR",
                        help="keep ncu's raw output there (ncu_placement_all.csv, ...)")
    parser.add_argument("--no-ncu", action="store_true", help="skip Nsight Compute")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("gpu_placement.py: no CUDA device here (torch.cuda.is_available() is False); "
              "this script runs on a GPU machine", file=sys.stderr)
        return 2
    prepared = copies()
    print(f"{torch.cuda.get_device_name()}: {len(NAMES)} cases x {len(PADS)} placements "
          f"(pads {', '.join(map(str, PADS))} MiB); torchmark's kernel time:", flush=True)
    mine = ours(prepared, args.max_run_time)
    clean: dict[str, NcuCase] = {}
    warm: dict[str, NcuCase] = {}
    if not args.no_ncu:
        for control, into in (("all", clean), ("none", warm)):
            figures, note = ncu_figures([], control, args.ncu_log, cases=prepared,
                                        log_name="placement_")
            into.update(figures)
            print(f"note: {note}", flush=True)
    print("per copy, us (torchmark cold / hot; ncu all / none, the call's sum):")
    for label, *_ in prepared:
        cold, hot = mine.get(label, ([], []))
        c, w = clean.get(label), warm.get(label)
        print(f"  {label:<38} {sum(s for _, s in cold) * 1e6:8.2f} "
              f"{sum(s for _, s in hot) * 1e6:8.2f}   "
              f"{c.duration * 1e6 if c else float('nan'):8.2f} "
              f"{w.duration * 1e6 if w else float('nan'):8.2f}")
    print("over the placements, us (min median max), and median / median "
          "(first kernel cold vs ncu all, later ones hot vs ncu none):")
    for name in NAMES:
        for i, (kernel, ours_fig, ncu_fig) in enumerate(
                position_figures(name, mine, clean, warm)):
            ratio = statistics.median(ours_fig) / statistics.median(ncu_fig)
            pairs = [o / n for o, n in zip(ours_fig, ncu_fig, strict=True)]
            print(f"  {name[:24]:<24} #{i + 1} {kernel[:28]:<28} torchmark "
                  f"{_range(ours_fig)} | ncu {_range(ncu_fig)} | medians {ratio:.3f} "
                  f"(copy by copy {min(pairs):.3f}..{max(pairs):.3f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
