"""The checked warm-up (issue 38): a planted lazy initialisation, and what the check
costs a stationary statement.

1. A statement whose first 300 calls take 3x its steady time (a busy loop: 3 x STEADY,
   then STEADY) is measured by torchmark's and torch.utils.benchmark's
   blocked_autorange (0.2 s) and adaptive_autorange, each a fresh statement; the error
   against the steady state (the statement without its slow calls, measured after
   them), the seconds taken and torchmark's warm-up report. Target:
   within 3% of the steady state. The floor: a warm-up that lasts longer than the whole
   measurement cannot be told from a slower statement (no blocks of the steady state
   were timed), so it is printed as such.
2. The standard suite's Python cases (wall time, blocked_autorange at 0.05 s), each
   measured with the check and with it turned off, interleaved, ROUNDS times: the
   seconds each took (medians, their ratio) and how often a stationary case had
   blocks dropped (a false alarm costs time, never accuracy).

    python benchmarks/warm_up.py [--cases 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from unittest import mock

STEADY = (20e-6, 200e-6, 1e-3)
SLOW_CALLS = 300


def planted(steady: float, slow_calls: int = SLOW_CALLS):
    calls = [0]

    def work() -> None:
        calls[0] += 1
        end = time.perf_counter() + (3 * steady if calls[0] <= slow_calls else steady)
        while time.perf_counter() < end:
            pass

    return work


def lazy_init() -> int:
    import torch.utils.benchmark as torch_benchmark

    import torchmark

    misses = 0
    print(f"{'steady':>8} {'method':<9} {'torchmark':>10} {'torch':>10} {'s (tm/torch)':>13}  "
          "torchmark's warm-up")
    for steady in STEADY:
        slow_phase = SLOW_CALLS * 3 * steady
        for method in ("blocked", "adaptive"):
            errors, seconds, warm = [], [], None
            for timer_class in (torchmark.Timer, torch_benchmark.Timer):
                timer = timer_class("work()", globals={"work": planted(steady)})
                started = time.perf_counter()
                m = timer.blocked_autorange(min_run_time=0.2) if method == "blocked" \
                    else timer.adaptive_autorange()
                seconds.append(time.perf_counter() - started)
                errors.append(m.median)
                warm = warm or getattr(m, "warm_up", None)
            # the steady state as measured here (a call's own cost is above STEADY): the
            # same statement without its slow calls, measured right after
            truth = torchmark.Timer("work()", globals={"work": planted(steady, 0)}) \
                .blocked_autorange(min_run_time=0.2).median
            errors = [median / truth - 1 for median in errors]
            reachable = seconds[0] > slow_phase  # were steady blocks timed at all?
            ok = abs(errors[0]) <= 0.03
            misses += reachable and not ok
            note = warm.describe() + (f", {warm.dropped_blocks} blocks dropped"
                                      if warm.dropped_blocks else "")
            if not reachable:
                note += (f"  [the 300 slow calls take {slow_phase:.2f} s, longer than the "
                         "measurement: the floor]")
            print(f"{steady * 1e6:>6.0f}us {method:<9} {errors[0]:>+10.1%} {errors[1]:>+10.1%} "
                  f"{seconds[0]:>6.2f}/{seconds[1]:<6.2f}  {note}"
                  + ("" if ok or not reachable else "  MISSED"))
    return misses


def overhead(cases: int, rounds: int) -> None:
    import torchmark
    from torchmark.suite.loading import load_cases

    chosen = [c for c in load_cases() if c.scripted is None and str(
        c.timer_args.language).lower().endswith("python")][:cases]  # no TorchScript model
    with_check, without, alarms = [], [], 0
    for _ in range(rounds):
        for case in chosen:
            args = case.timer_args
            for checked in (True, False):
                timer = torchmark.Timer(args.stmt, args.setup, num_threads=args.num_threads)
                started = time.perf_counter()
                if checked:
                    m = timer.blocked_autorange(min_run_time=0.05)
                    alarms += m.warm_up.dropped_blocks > 0
                    with_check.append(time.perf_counter() - started)
                else:
                    with mock.patch("torchmark.timing.timer_class.warm_up_end",
                                    lambda times: 0):
                        timer.blocked_autorange(min_run_time=0.05)
                    without.append(time.perf_counter() - started)
    ratios = [a / b for a, b in zip(with_check, without, strict=True)]
    print(f"\nstationary cost: {len(chosen)} standard Python cases x {rounds} rounds: "
          f"median seconds with the check {statistics.median(with_check):.3f}, without "
          f"{statistics.median(without):.3f}; median ratio {statistics.median(ratios):.3f}, "
          f"total ratio {sum(with_check) / sum(without):.3f}; blocks dropped in "
          f"{alarms} of {len(with_check)} measurements")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    misses = lazy_init()
    overhead(args.cases, args.rounds)
    return 1 if misses else 0


if __name__ == "__main__":
    raise SystemExit(main())
