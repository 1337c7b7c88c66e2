"""torchmark.Timer against torch.utils.benchmark.Timer, side by side in one process.

For each statement, both timers run `blocked_autorange(min_run_time=0.5)` REPEATS times,
interleaved, with the order alternating from one repeat to the next, so that machine
noise hits both alike.
Printed per statement: the median of the repeated medians for each, their ratio, and the
run-to-run coefficient of variation (CV) of the medians. For `pass` the median is the
per-call overhead of the timing loop itself.

Targets (issue #2): medians agree within 5%; `pass` overhead ratio <= 1.05; run-to-run
CV no worse than torch's.

    python benchmarks/timer_vs_torch.py [--repeats 12] [--min-run-time 0.5]
"""

from __future__ import annotations

import argparse
import statistics

import torch
from torch.utils import benchmark as torch_benchmark

import torchmark
from torchmark.core.stats import coefficient_of_variation


def batched_dot_mul_sum(a, b):
    return a.mul(b).sum(-1)


CASES = [
    ("pass", "pass", {}),
    ("x * y (128)", "x * y", {"x": torch.ones(128), "y": torch.ones(128)}),
    ("batched dot 10000x64", "f(x, x)", {"x": torch.randn(10000, 64), "f": batched_dot_mul_sum}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--min-run-time", type=float, default=0.5)
    args = parser.parse_args()

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads available, "
          f"{args.repeats} x blocked_autorange(min_run_time={args.min_run_time}) each\n")
    header = (f"{'statement':<22} {'torchmark':>12} {'torch':>12} {'ratio':>7} "
              f"{'CV torchmark':>13} {'CV torch':>9}")
    print(header)
    print("-" * len(header))
    for name, stmt, globals_ in CASES:
        ours, theirs = [], []
        for i in range(args.repeats):
            runs = [(ours, torchmark.Timer), (theirs, torch_benchmark.Timer)]
            for results, timer_cls in (runs if i % 2 == 0 else runs[::-1]):  # alternate
                results.append(timer_cls(stmt, globals=globals_)
                               .blocked_autorange(min_run_time=args.min_run_time).median)
        m_ours, m_theirs = statistics.median(ours), statistics.median(theirs)
        unit, scale = torchmark.select_unit(min(m_ours, m_theirs))
        print(f"{name:<22} {m_ours / scale:>9.3f} {unit:<2} {m_theirs / scale:>9.3f} {unit:<2} "
              f"{m_ours / m_theirs:>7.3f} {coefficient_of_variation(ours):>12.1%} "
              f"{coefficient_of_variation(theirs):>9.1%}")
    print("\nratio = torchmark median / torch median; CV = stdev / mean of the repeated medians")


if __name__ == "__main__":
    main()
