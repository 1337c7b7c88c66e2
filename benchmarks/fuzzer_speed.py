"""Case generation speed: torchmark.Fuzzer against torch.utils.benchmark.Fuzzer.

Both generate the same 1000 cases (same seed, same parameters: the recipe's 2-D fuzzer,
and, to isolate the sampling itself, the same parameters with no tensors). Rounds
alternate between the two; the medians of the rounds and their ratio are printed.

Target (issue #3): torchmark no slower than torch (ratio <= 1.0, within noise).

    python benchmarks/fuzzer_speed.py [--cases 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from torch.utils import benchmark as torch_benchmark

import torchmark


def recipe_fuzzer(lib, seed, with_tensors=True):
    params = [lib.FuzzedParameter("k0", minval=1, maxval=10000, distribution="loguniform"),
              lib.FuzzedParameter("k1", minval=1, maxval=10000, distribution="loguniform"),
              # (no dict distribution: torch 2.13 rejects every normalized one)
              lib.FuzzedParameter("v", minval=0.0, maxval=1.0, distribution="uniform")]
    tensors = [lib.FuzzedTensor("x", size=("k0", "k1"), min_elements=128,
                                max_elements=10_000_000, probability_contiguous=0.6)]
    return lib.Fuzzer(parameters=params, tensors=tensors if with_tensors else [], seed=seed)


def time_generation(lib, cases, with_tensors):
    fuzzer = recipe_fuzzer(lib, seed=0, with_tensors=with_tensors)
    start = time.perf_counter()
    for _ in fuzzer.take(cases):
        pass
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.cases} cases, median of {args.rounds} alternating rounds\n")
    print(f"{'what':<26} {'torchmark':>11} {'torch':>11} {'ratio':>7}")
    for label, with_tensors in (("parameters + tensors", True), ("parameters only", False)):
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(time_generation(torchmark, args.cases, with_tensors))
            theirs.append(time_generation(torch_benchmark, args.cases, with_tensors))
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"{label:<26} {a:>9.3f} s {b:>9.3f} s {a / b:>7.3f}")
    print("\nratio = torchmark / torch (lower is faster)")


if __name__ == "__main__":
    main()
