"""How often does an A/B comparison call a difference where there is none (A/A), and
does it find one that exists, on a quiet machine and on one where another process keeps
a core busy? Three ways to decide, in one run:

- "eyeball (torch)": torch.utils.benchmark's workflow: blocked_autorange A, then B, and
  call the medians different when they differ by more than 1%;
- "sequential ab_test": two torchmark measurements taken one after the other, judged by
  `ab_test` (unpaired: bootstrap interval, and "unsure" for a change that drift between
  the two runs could explain);
- "interleaved measure_ab": blocks of A and B alternating, judged as pairs (the default
  of `torchmark timeit --vs` and `measure_ab`).

Cases: A/A is `x * y` on 128 floats, as two Timers (the issue's false alarm); A/B 5% is a
statement with a real 5% difference by construction (`sum(range(n))` against
`sum(range(1.05 n))`, whose cost is linear in n); A/B torch is `x * y` on 128 against
1024 floats (about 10% apart). The loaded regime starts `python -c "while True: pass"`
a second before the trials and keeps it running through them (one of the two cores
busy). Printed per regime and method: false alarms (A/A trials with a "faster" or
"slower" verdict; target <= 5%), detections (A/B trials called in the right direction;
target >= 95% for the interleaved default on the 5% case), and "unsure" calls.

    python benchmarks/ab_calibration.py [--trials 40] [--min-run-time 0.5] \
        [--regimes quiet,loaded]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import torch
from torch.utils import benchmark as torch_benchmark

import torchmark
from torchmark.compare.ab import ab_test

CASES = {  # name: (stmt A, setup A, stmt B, setup B, the true direction)
    "A/A x*y 128": ("x * y", "x = torch.ones(128); y = torch.ones(128)",
                    "x * y", "x = torch.ones(128); y = torch.ones(128)", None),
    "A/B 5% sum(range)": ("sum(range(n))", "n = 2000", "sum(range(n))", "n = 2100", "slower"),
    "A/B x*y 128 vs 1024": ("x * y", "x = torch.ones(128); y = torch.ones(128)",
                            "x * y", "x = torch.ones(1024); y = torch.ones(1024)", "slower"),
}
METHODS = ("eyeball (torch)", "sequential ab_test", "interleaved measure_ab")


def trial(case: tuple, min_run_time: float) -> dict[str, str]:
    """One trial of each method on `case`: the verdict each gives."""
    stmt_a, setup_a, stmt_b, setup_b, _ = case
    out = {}
    a = torch_benchmark.Timer(stmt_a, setup_a).blocked_autorange(min_run_time=min_run_time)
    b = torch_benchmark.Timer(stmt_b, setup_b).blocked_autorange(min_run_time=min_run_time)
    change = b.median / a.median - 1
    out[METHODS[0]] = ("slower" if change > 0 else "faster") if abs(change) > 0.01 else \
        "same"
    a = torchmark.Timer(stmt_a, setup_a).blocked_autorange(min_run_time=min_run_time)
    b = torchmark.Timer(stmt_b, setup_b).blocked_autorange(min_run_time=min_run_time)
    out[METHODS[1]] = ab_test(a, b).verdict
    r = torchmark.measure_ab(torchmark.Timer(stmt_a, setup_a), torchmark.Timer(stmt_b, setup_b),
                             min_run_time=min_run_time)
    out[METHODS[2]] = r.verdict
    return out


def run_regime(regime: str, trials: int, min_run_time: float) -> dict:
    load = None
    if regime == "loaded":
        load = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        time.sleep(1.0)
    try:
        return {name: [trial(case, min_run_time) for _ in range(trials)]
                for name, case in CASES.items()}
    finally:
        if load is not None:
            load.kill()
            load.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--min-run-time", type=float, default=0.5)
    parser.add_argument("--regimes", default="quiet,loaded")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}; {args.trials} trials a case; min_run_time "
          f"{args.min_run_time} s a side\n")
    for regime in args.regimes.split(","):
        started = time.perf_counter()
        results = run_regime(regime, args.trials, args.min_run_time)
        print(f"{regime} ({time.perf_counter() - started:.0f} s)")
        print(f"  {'method':<24} " + " ".join(f"{name:>26}" for name in CASES))
        for method in METHODS:
            cells = []
            for name, case in CASES.items():
                verdicts = [t[method] for t in results[name]]
                called = sum(v in ("faster", "slower") for v in verdicts)
                unsure = sum(v == "unsure" for v in verdicts)
                if case[4] is None:
                    text = f"false alarms {called / len(verdicts):.0%}"
                else:
                    right = sum(v == case[4] for v in verdicts)
                    text = f"found {right / len(verdicts):.0%}"
                cells.append(text + (f", unsure {unsure / len(verdicts):.0%}" if unsure else ""))
            print(f"  {method:<24} " + " ".join(f"{c:>26}" for c in cells))
        print()
    print("(A/A: false alarms, want <= 5%; A/B: found in the right direction, want >= 95% "
          "for the interleaved default)")


if __name__ == "__main__":
    main()
