"""How often does an A/B comparison call a difference where there is none (A/A), and
does it find one that exists? Three ways to decide, on the same machine in one run:

- "eyeball": torch.utils.benchmark's workflow: blocked_autorange A, then B, and call
  the medians different when they differ by more than the 1% minimum effect;
- "sequential": the same two measurements, judged by torchmark's `ab_test` (bootstrap
  interval of the median ratio, 1% minimum effect);
- "interleaved": `torchmark.measure_ab`, blocks of A and B alternating, then `ab_test`.

The A/A statement is `x * y` on 128 floats, as two Timers; the real difference is the
same multiply on 128 against 1024 floats. Printed: the share of trials with a verdict
(A/A: false alarms, want about 5% or less; A/B: detections, want 100%), and the median
|change| the A/A trials reported.

    python benchmarks/ab_calibration.py [--trials 10] [--min-run-time 0.5]
"""

from __future__ import annotations

import argparse
import statistics

import torch
from torch.utils import benchmark as torch_benchmark

import torchmark
from torchmark.compare.ab import ab_test

SETUP = "x = torch.ones({n}); y = torch.ones({n})"


def timers(module, n_a: int, n_b: int):
    return (module.Timer("x * y", SETUP.format(n=n_a)), module.Timer("x * y", SETUP.format(n=n_b)))


def trial(n_a: int, n_b: int, min_run_time: float) -> dict[str, tuple[bool, float]]:
    """One trial of each method: (called a difference?, relative change of the median)."""
    out = {}
    ta, tb = timers(torch_benchmark, n_a, n_b)
    a, b = ta.blocked_autorange(min_run_time=min_run_time), tb.blocked_autorange(
        min_run_time=min_run_time)
    change = b.median / a.median - 1
    out["eyeball (torch)"] = (abs(change) > 0.01, change)
    ta, tb = timers(torchmark, n_a, n_b)
    a, b = ta.blocked_autorange(min_run_time=min_run_time), tb.blocked_autorange(
        min_run_time=min_run_time)
    r = ab_test(a, b)
    out["sequential ab_test"] = (r.verdict in ("faster", "slower"), r.change)
    ta, tb = timers(torchmark, n_a, n_b)
    r = torchmark.measure_ab(ta, tb, min_run_time=min_run_time)
    out["interleaved measure_ab"] = (r.verdict in ("faster", "slower"), r.change)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--min-run-time", type=float, default=0.5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}; {args.trials} trials a row; min_run_time "
          f"{args.min_run_time} s a side\n")
    print(f"{'method':<24} {'A/A false alarms':>17} {'A/A median |change|':>20} "
          f"{'A/B detections':>15} {'A/B median change':>18}")
    results = {"A/A": [], "A/B": []}
    for _ in range(args.trials):
        results["A/A"].append(trial(128, 128, args.min_run_time))
        results["A/B"].append(trial(128, 1024, args.min_run_time))
    for method in results["A/A"][0]:
        aa = [t[method] for t in results["A/A"]]
        ab = [t[method] for t in results["A/B"]]
        print(f"{method:<24} {sum(c for c, _ in aa) / len(aa):>17.0%} "
              f"{statistics.median(abs(x) for _, x in aa):>20.2%} "
              f"{sum(c for c, _ in ab) / len(ab):>15.0%} "
              f"{statistics.median(x for _, x in ab):>+18.1%}")


if __name__ == "__main__":
    main()
